"""Fixtures of the UOUO tests: a tiny random CLIP model (no download) and cut-out sources."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.tiny_clip import tiny_clip  # noqa: F401  (a fixture)


@pytest.fixture(scope="session")
def iotkits(shared_data: Path) -> Path:
    """The real IoTKITs cut-outs: 10 categories x 5 RGBA images, named by their manifest."""
    return shared_data / "iotkits-uouo"


@pytest.fixture
def cutouts_copy(iotkits: Path, tmp_path: Path) -> Path:
    """A writable copy of the real cut-outs as plain category folders (no manifest)."""
    return Path(shutil.copytree(iotkits / "cutouts", tmp_path / "cutouts"))
