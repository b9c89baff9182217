"""Running pairs: the session state (:mod:`.session`: models, datasets, finished pairs), the
inference loop (:mod:`.runner`), and what keeps long runs going: reuse of finished rows
(:mod:`.resume`), the answer cache (:mod:`.answer_cache`, :mod:`.answers`), pytest-xdist workers
(:mod:`.workers`), shards (:mod:`.shard`), adapters that fail or exit (:mod:`.guard`) and live
progress (:mod:`.live`)."""
