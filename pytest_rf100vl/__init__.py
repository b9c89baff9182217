"""rf100vl-hf's pytest plugin: benchmark (model, dataset) pairs of RF100-VL and UOUO as tests
(``docs/architecture.md``). :func:`load_config` reads a ``--rf100vl-config`` file from Python."""

from pytest_rf100vl.collect.config_reader import load_config

__all__ = ["load_config"]
