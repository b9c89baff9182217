"""Fixtures of the UOUO tests: a tiny random CLIP model (no download) and cut-out sources."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

TINY_CLIP = "tiny-clip-uouo-test"


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The name of a tiny open_clip config, registered with ``add_model_config``; built with ``pretrained=None``."""
    import open_clip

    folder = tmp_path_factory.mktemp("open-clip-configs")
    config = {
        "embed_dim": 64,
        "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "patch_size": 16, "head_width": 32},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 1},
    }
    (folder / f"{TINY_CLIP}.json").write_text(json.dumps(config))
    open_clip.add_model_config(folder)
    return TINY_CLIP


@pytest.fixture(scope="session")
def iotkits(shared_data: Path) -> Path:
    """The real IoTKITs cut-outs: 10 categories x 5 RGBA images, named by their manifest."""
    return shared_data / "iotkits-uouo"


@pytest.fixture
def cutouts_copy(iotkits: Path, tmp_path: Path) -> Path:
    """A writable copy of the real cut-outs as plain category folders (no manifest)."""
    return Path(shutil.copytree(iotkits / "cutouts", tmp_path / "cutouts"))
