"""Hub-ready repositories: parquet shards and a dataset card written locally, then pushed.

Generic over benchmarks: a prepared ``datasets`` builder goes in, a folder that
``load_dataset(folder, config)`` and, once pushed, ``load_dataset("org/name", config)``
read comes out. Each module is imported by name (:mod:`.export`, :mod:`.card`,
:mod:`.push`, :mod:`.auth`, the benchmarks' cards :mod:`.rf100vl_card` and :mod:`.uouo_card`,
the evaluation results...), so a light one loads without ``datasets``.
"""
