"""A tiny random open_clip model for tests that build UOUO mosaics: no download.

Import the fixture into a ``conftest.py`` (``from tests.support.tiny_clip import tiny_clip``).
It registers the config in this process with ``open_clip.add_model_config``; builds then
pass ``clip_model=tiny_clip, clip_pretrained=None`` (seeded random weights). Because the
fixture imports open_clip (and torch) in the outer process, pytest runs started in-process
with ``pytester`` see the registration too.
"""

from __future__ import annotations

import json

import pytest

TINY_CLIP = "tiny-clip-uouo-test"
CONFIG = {
    "embed_dim": 64,
    "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "patch_size": 16, "head_width": 32},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 1},
}


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The name of a tiny open_clip config, registered with ``add_model_config``; built with ``pretrained=None``."""
    import open_clip

    folder = tmp_path_factory.mktemp("open-clip-configs")
    (folder / f"{TINY_CLIP}.json").write_text(json.dumps(CONFIG))
    open_clip.add_model_config(folder)
    return TINY_CLIP
