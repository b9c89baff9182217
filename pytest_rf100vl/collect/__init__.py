"""Collection: the options (:mod:`.options`), which pairs run (:mod:`.selection`), the matrix
node and its order (:mod:`.collection`), and the tests it holds (:mod:`.matrix_tests`)."""
