"""Running pairs: the session state (:mod:`.session`: models, datasets, finished runs) and the
inference loop (:mod:`.runner`)."""
