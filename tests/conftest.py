"""Fixtures shared by the whole suite.

Every session of the project's tests writes its caches (datasets' Arrow cache, the
package's cache home) under a temporary folder, works offline and ignores the user's data
folders, so the suite never touches a user's caches and never reuses a stale build. The
variables are set in ``pytest_configure``, before any test module imports ``datasets``;
conftest files are imported earlier than that, so they import ``datasets`` and
``huggingface_hub`` inside fixtures only (both read these variables once, when imported).

A benchmark run of the plugin started in the repository root (``pytest --rf100vl-model ...``
with no test paths: only the matrix runs) loads this file too, as ``tests`` is the
``testpaths``; it is the user's real run, so it keeps the user's environment untouched.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import shutil
import tempfile
from functools import cache
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]  # the plugin's black-box tests (tests/plugin) run pytest in pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RF100VL_SHARED_DATA", REPO.parent / "shared" / "data"))
USER_DATA_VARIABLES = ("RF100VL_DATA_DIR", "RF100VL_FEWSHOT_DIR", "UOUO_SOURCE_DIR")
_SESSION_CACHE = pytest.StashKey[Path]()


def plugin_only_run(config: pytest.Config) -> bool:
    """A benchmark run of the plugin (a model is given, and no test paths): the user's own run."""
    model_given = config.getoption("rf100vl_model", None) or config.getini("rf100vl_model")
    return bool(model_given) and config.args_source != pytest.Config.ArgsSource.ARGS


def pytest_configure(config: pytest.Config) -> None:
    """Isolate the project's tests from the user's caches, data folders and the Hub."""
    if plugin_only_run(config):
        return
    cache = config.stash[_SESSION_CACHE] = Path(tempfile.mkdtemp(prefix="rf100vl-hf-tests-"))
    os.environ["HF_DATASETS_CACHE"] = str(cache / "hf-datasets")
    os.environ["RF100VL_HF_HOME"] = str(cache / "home")
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing here may reach the real Hub
    os.environ["YOLO_CONFIG_DIR"] = str(cache / "ultralytics")  # ultralytics writes its settings there
    os.environ["YOLO_OFFLINE"] = "1"
    os.environ["U2NET_HOME"] = str(cache / "rembg")  # rembg's models folder: the tiny removers are written there
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    for name in USER_DATA_VARIABLES:
        os.environ.pop(name, None)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_CACHE in config.stash:
        shutil.rmtree(config.stash[_SESSION_CACHE], ignore_errors=True)


@pytest.fixture(autouse=True)
def _inner_runs_prepared(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run inside a test finds the model libraries already imported (see
    :func:`_model_libraries_loaded_once`), and is a plain pytest run even when this suite runs
    under ``pytest -n``: xdist's worker variables would tell pytest-benchmark and the plugin otherwise."""
    if "pytester" in request.fixturenames:
        _model_libraries_loaded_once()
        for name in [name for name in os.environ if name.startswith("PYTEST_XDIST_")]:
            monkeypatch.delenv(name)


@cache
def _model_libraries_loaded_once() -> None:
    """Import every built-in adapter, and with them the transformers classes and machinery they
    use, before the first in-process run (this fixture is set up before ``pytester`` takes its
    snapshot of ``sys.modules``). Otherwise the first run to build a model imports them, pytester
    removes them when that test ends, and a later run imports a second copy while transformers'
    lazy top-level module still hands out the first: "Received a Owlv2ImageProcessor ... but a
    ImageProcessingMixin was expected", "'in' not supported between instances of 'Mode' and
    'Mode'" (the kernels library that model loading imports)."""
    import transformers.integrations.hub_kernels  # noqa: F401  (imports kernels)
    import transformers.modeling_utils  # noqa: F401
    import transformers.processing_utils  # noqa: F401

    import pytest_rf100vl.adapters as adapters

    for module in pkgutil.iter_modules(adapters.__path__):
        importlib.import_module(f"{adapters.__name__}.{module.name}")


@pytest.fixture(scope="session", autouse=True)
def _heavy_modules_loaded_once() -> None:
    """Import, once and before any in-process pytest run, what such runs load and what cannot
    be imported twice: pytester removes the modules a run imported when its test ends, and
    datasets refuses a second import (pyarrow registers its extension types once), as do
    matplotlib, numpy's extension modules, and torch with torchvision (its ops register
    operators once). Imported here, after ``pytest_configure`` set the cache variables."""
    import datasets  # noqa: F401
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.figure  # noqa: F401
    import numpy.fft  # noqa: F401
    import torch  # noqa: F401
    import torchvision  # noqa: F401

    import rf100vl_hf.metrics  # noqa: F401


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real exports and cut-outs beside the repository (CI has them; a user's clone may not)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real test data not found at {SHARED_DATA} (set RF100VL_SHARED_DATA to its folder)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def sample_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder holding the generated sample export as ``sample`` (read-only: copy to change)."""
    from rf100vl_hf.sample import write_sample_export

    root = tmp_path_factory.mktemp("sample-data")
    write_sample_export(root / "sample")
    return root


from collections.abc import Iterator  # noqa: E402  (imports of the hub_server fixture)

from tests.support.hub_server import StandInHub, serve_hub  # noqa: E402  (imports neither HF library)


@pytest.fixture(scope="module")
def hub_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandInHub]:
    """A stand-in Hugging Face Hub for the tests of one module (see ``tests/support/hub_server.py``).

    While it lives, ``huggingface_hub`` and ``datasets`` talk to it instead of the real Hub
    (offline mode is lifted for them); everything is restored when the module's tests end.
    It yields the ``StandInHub``: ``.url``, ``.token`` (may write under ``tester`` and
    ``org``), ``.files(repo_id)`` and ``.requests``.
    """
    with serve_hub(tmp_path_factory.mktemp("stand-in-hub")) as hub:
        yield hub
