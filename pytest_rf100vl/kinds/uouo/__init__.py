"""UOUO grounding: the kind (:mod:`.kind`), the questions (:mod:`.tasks`), a pair end to end
(:mod:`.evaluate`) and its row (:mod:`.rows`). Its summary tables are the results library's."""
