"""UOUO grounding: the kind (:mod:`.kind`), its options (:mod:`.options`), the questions
(:mod:`.tasks`) and the score (:mod:`.scores`). Its summary tables are the results library's."""
