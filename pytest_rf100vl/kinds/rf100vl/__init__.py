"""RF100-VL detection: the kind (:mod:`.kind`), what an adapter is told (:mod:`.tasks`), a pair
end to end (:mod:`.evaluate`), its row (:mod:`.rows`), checks of means (:mod:`.checks`) and the
paper's tables (:mod:`.reference`). Its summary tables are the results library's."""
