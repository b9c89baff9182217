"""Where data lives by default, and the environment variables that move it."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "RF100VL_DATA_DIR"
FEWSHOT_DIR_ENV = "RF100VL_FEWSHOT_DIR"
UOUO_SOURCE_ENV = "UOUO_SOURCE_DIR"
CACHE_HOME_ENV = "RF100VL_HF_HOME"


def cache_home() -> Path:
    """``$RF100VL_HF_HOME``, else ``$XDG_CACHE_HOME/rf100vl-hf``, else ``~/.cache/rf100vl-hf``."""
    if os.environ.get(CACHE_HOME_ENV):
        return Path(os.environ[CACHE_HOME_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "rf100vl-hf"


def default_data_dir() -> Path:
    """Root of the full RF100-VL exports: ``$RF100VL_DATA_DIR`` or ``<cache home>/rf100-vl``."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else cache_home() / "rf100-vl"


def default_fewshot_dir() -> Path:
    """Root of the official few-shot exports: ``$RF100VL_FEWSHOT_DIR`` or ``<cache home>/rf100-vl-fsod``."""
    env = os.environ.get(FEWSHOT_DIR_ENV)
    return Path(env).expanduser() if env else cache_home() / "rf100-vl-fsod"


def default_uouo_source_dir() -> Path:
    """Folder of UOUO object cut-outs: ``$UOUO_SOURCE_DIR`` or ``<cache home>/uouo-source``."""
    env = os.environ.get(UOUO_SOURCE_ENV)
    return Path(env).expanduser() if env else cache_home() / "uouo-source"
