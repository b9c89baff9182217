"""Collection, the plugin's edge: the run's configuration read from pytest (:mod:`.config_reader`),
the matrix node and its order (:mod:`.collection`), and the tests it holds (:mod:`.matrix_tests`).
Which pairs run is the session's (:mod:`pytest_rf100vl.session.selection`)."""
