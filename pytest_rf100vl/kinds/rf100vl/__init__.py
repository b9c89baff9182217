"""RF100-VL detection: the kind (:mod:`.kind`), what an adapter is told (:mod:`.tasks`), a pair
end to end (:mod:`.evaluate`), its row (:mod:`.rows`), summary tables (:mod:`.tables`), checks of
means (:mod:`.checks`) and the paper's tables (:mod:`.reference`)."""
