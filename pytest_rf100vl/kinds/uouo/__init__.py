"""UOUO grounding: the kind (:mod:`.kind`), the questions (:mod:`.tasks`), a pair end to end
(:mod:`.evaluate`), its row (:mod:`.rows`) and summary tables (:mod:`.tables`)."""
