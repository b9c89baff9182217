"""The session above the benchmark kinds: the matrix and its pairs (:mod:`.matrix`,
:mod:`.selection`, :mod:`.shard`), reuse of finished rows (:mod:`.resume`), thresholds and
verdicts (:mod:`.thresholds`, :mod:`.verdict`), pytest-xdist workers (:mod:`.workers`), live
progress (:mod:`.live`), the summary (:mod:`.report`), scrubbed reports (:mod:`.scrubbing`)
and Hub publishing (:mod:`.publish`)."""
