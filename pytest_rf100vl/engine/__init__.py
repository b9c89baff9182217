"""The engine below the benchmark kinds: the inference loop (:mod:`.runner`, with the pipelined
loop of :mod:`.pipeline` and ``auto`` batch sizes of :mod:`.batch_size`), the answer cache
(:mod:`.answer_cache`, :mod:`.answers`), adapters that fail or exit (:mod:`.guard`), the samples log
(:mod:`.sample_log`) and the measured sections of a row (:mod:`.columns`)."""
