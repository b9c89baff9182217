"""Fixtures of the adapter tests: the stand-in model servers (``tests/support/model_servers.py``)
and an API key that exists only in the test's environment."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.served import KEY_VARIABLE, TEST_KEY
from tests.support.model_servers import StandInGemini, StandInOpenAI, serve_gemini, serve_openai


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """A key in ``RF100VL_TEST_API_KEY`` (give the adapters ``api_key_env=RF100VL_TEST_API_KEY``)."""
    monkeypatch.setenv(KEY_VARIABLE, TEST_KEY)
    return TEST_KEY


@pytest.fixture
def openai_server() -> Iterator[StandInOpenAI]:
    """A stand-in OpenAI-compatible server; set ``.answer``, ``.delay``, ``.key`` and faults per test."""
    with serve_openai() as server:
        yield server


@pytest.fixture
def gemini_server() -> Iterator[StandInGemini]:
    """A stand-in Gemini API server, as :func:`openai_server`."""
    with serve_gemini() as server:
        yield server
