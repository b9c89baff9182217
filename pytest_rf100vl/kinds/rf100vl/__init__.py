"""RF100-VL detection: the kind (:mod:`.kind`), its options (:mod:`.options`, with each
protocol's adapter options in :mod:`.adapter_defaults`), the split a pair runs on
(:mod:`.split`), what an adapter is told (:mod:`.tasks`), the score (:mod:`.scores`), checks of
means (:mod:`.checks`) and the published tables (:mod:`.reference`). Its summary tables are the
results library's."""
