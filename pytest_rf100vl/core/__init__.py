"""The room at the bottom of the plugin: the types every other room shares (a pair, the
user's settings, what a benchmark kind sees of the session, the keys of pytest's stash).
It imports none of the plugin's other rooms, so they read one way above it
(``docs/architecture.md``)."""
