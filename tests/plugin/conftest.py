"""Fixtures for black-box tests of the plugin: pytest runs started with ``pytester`` in a
temporary folder, over data folders made of the embedded sample and real exports.

``pytester`` is enabled by the top-level ``tests/conftest.py`` (pytest refuses
``pytest_plugins`` in a conftest below the top level).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rf100vl_hf.sample import write_sample_export

from tests.support.tiny_clip import tiny_clip  # noqa: F401  (a fixture)

FAKE_ADAPTERS = Path(__file__).with_name("fake_adapters.py")
SMALL_SAMPLE = {"test": 8}
"""The sample's test split only: every quirk of the full sample's test split, built fast."""
NUM_MOSAICS = 8
"""Mosaics per UOUO dataset in these tests, built from the embedded cut-outs."""


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


@pytest.fixture
def uouo(tiny_clip: str) -> list[str]:
    """Options that build small UOUO datasets from the embedded cut-outs with the tiny CLIP
    (no download); built once per test session, as every run shares the datasets cache."""
    return ["--uouo-option", f"clip-model={tiny_clip}", "--uouo-option", "clip-pretrained=none", f"--uouo-option=num-mosaics={NUM_MOSAICS}",
            "--rf100vl-device", "cpu"]


@pytest.fixture
def uouo_rows(tiny_clip: str):
    """A function: the test split of a UOUO config as the runs above build it, for reference values."""
    from rf100vl_hf.uouo.builder import load_uouo

    def rows(config: str):
        return load_uouo(config, clip_model=tiny_clip, clip_pretrained=None, num_mosaics=NUM_MOSAICS, progress=False)

    return rows
