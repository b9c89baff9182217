"""Hub-ready repositories: parquet shards and a dataset card written locally, then pushed.

Generic over benchmarks: a prepared ``datasets`` builder goes in, a folder that
``load_dataset(folder, config)`` and, once pushed, ``load_dataset("org/name", config)``
read comes out.
"""

from rf100vl_hf.hub.card import StaleConfigWarning, read_card, write_card
from rf100vl_hf.hub.export import ConfigExport, SplitExport, staged_repository, write_config
from rf100vl_hf.hub.auth import HubAuthError
from rf100vl_hf.hub.push import push_repository

__all__ = [
    "ConfigExport",
    "HubAuthError",
    "SplitExport",
    "StaleConfigWarning",
    "push_repository",
    "read_card",
    "staged_repository",
    "write_card",
    "write_config",
]
