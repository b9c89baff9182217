"""The stand-in Hub points the libraries at itself only while it runs, then restores the session as it was."""

from __future__ import annotations

import os

import datasets.config
import huggingface_hub
import huggingface_hub.constants as hub_constants
import pytest
from huggingface_hub import HfApi, hf_api

from tests.support.hub_server import serve_hub

WATCHED = [
    (hub_constants, "ENDPOINT"), (hub_constants, "HF_HUB_OFFLINE"), (hub_constants, "HF_HUB_DISABLE_XET"),
    (hub_constants, "HF_HUB_CACHE"), (hub_constants, "HF_TOKEN_PATH"), (hub_constants, "HF_URL_HOSTS"),
    (hf_api.api, "endpoint"), (datasets.config, "HF_ENDPOINT"), (datasets.config, "HF_HUB_OFFLINE"), (datasets.config, "HUB_DATASETS_URL"),
]
ENVIRONMENT = ("HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_HUB_DISABLE_XET", "HF_TOKEN", "HF_HUB_CACHE")


def test_everything_is_restored_afterwards(tmp_path):
    before = [getattr(module, name) for module, name in WATCHED]
    environment = {name: os.environ.get(name) for name in ENVIRONMENT}
    with serve_hub(tmp_path) as hub:
        assert hub_constants.ENDPOINT == datasets.config.HF_ENDPOINT == hub.url
        assert not hub_constants.HF_HUB_OFFLINE and not datasets.config.HF_HUB_OFFLINE
        assert HfApi().whoami(token=hub.token)["name"] == hub.user
        assert huggingface_hub.whoami(token=hub.token)["name"] == hub.user
    assert [getattr(module, name) for module, name in WATCHED] == before
    assert {name: os.environ.get(name) for name in ENVIRONMENT} == environment
    assert hub_constants.HF_HUB_OFFLINE  # the test session's own setting is back
    with pytest.raises(Exception, match="offline"):
        HfApi().whoami(token=hub.token)
