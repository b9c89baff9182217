"""Sub-commands the plugin adds to ``rf100vl-hf`` through the ``rf100vl.commands`` entry-point
group (the library's command line knows no plugin module by name): ``models``."""
