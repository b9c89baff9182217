"""The bottom layer of the plugin: the types every other layer shares (the typed run
configuration and its options, a pair, its training plan, minimums and checks, what the
stages see of the session, the lazy registries, the keys of pytest's stash). It imports none
of the plugin's other layers, so they read one way above it (``docs/architecture.md``)."""
