"""Fixtures for black-box tests of the plugin: pytest runs started with ``pytester`` in a
temporary folder, over data folders made of the embedded sample and real exports.

``pytester`` is enabled by the top-level ``tests/conftest.py`` (pytest refuses
``pytest_plugins`` in a conftest below the top level).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rf100vl_hf.sample import write_sample_export

FAKE_ADAPTERS = Path(__file__).with_name("fake_adapters.py")
SMALL_SAMPLE = {"test": 8}
"""The sample's test split only: every quirk of the full sample's test split, built fast."""


@pytest.fixture(scope="session", autouse=True)
def _heavy_modules_loaded_once() -> None:
    """Import what pairs load before any in-process run: pytester removes the modules a run
    imported when its test ends, and datasets cannot be imported twice (pyarrow refuses to
    register its extension types again)."""
    import datasets  # noqa: F401

    import rf100vl_hf.metrics  # noqa: F401


@pytest.fixture(scope="session")
def small_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sample export with only its test split (read-only: link or copy it)."""
    return write_sample_export(tmp_path_factory.mktemp("small-sample") / "export", sizes=SMALL_SAMPLE)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """An empty data folder; ``helpers.link(data_dir, name, export)`` puts an export in it."""
    folder = tmp_path / "data"
    folder.mkdir()
    return folder


@pytest.fixture
def fakes(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester folder whose conftest registers the adapters of ``fake_adapters.py``."""
    pytester.makeconftest(FAKE_ADAPTERS.read_text(encoding="utf-8"))
    return pytester
