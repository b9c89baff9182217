"""Bounded, explained Hub calls: every request inside :func:`bounded` times out, and any
failure to talk to the Hub becomes one :class:`HubError` line (no traceback for the user).

``huggingface_hub`` shares one HTTP client whose timeout is None, so a server that accepts a
connection and never answers would block a push forever. Inside the block that client gets a
timeout (``timeout`` seconds, else ``$RF100VL_HUB_TIMEOUT``, else 60); it is restored when the
last block exits, so blocks may nest and run in several threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rf100vl_hf.errors import Rf100vlError

TIMEOUT_ENV = "RF100VL_HUB_TIMEOUT"
DEFAULT_TIMEOUT = 60.0

_LOCK = threading.Lock()
_ACTIVE: list[float] = []
_SAVED: list[object] = []


class HubError(Rf100vlError, ConnectionError):
    """The Hub could not be reached, did not answer in time, or refused a request."""


def timeout_seconds(timeout: float | None = None) -> float:
    """``timeout``, else ``$RF100VL_HUB_TIMEOUT``, else 60 seconds."""
    if timeout is not None:
        return float(timeout)
    value = os.environ.get(TIMEOUT_ENV)
    try:
        return float(value) if value else DEFAULT_TIMEOUT
    except ValueError:
        raise HubError(f"${TIMEOUT_ENV}={value!r} is not a number of seconds") from None


def _http() -> Any:
    """The HTTP library of the installed huggingface_hub (httpx2 from 2.0, httpx before)."""
    try:
        import httpx2
    except ImportError:
        import httpx as httpx2
    return httpx2


@contextmanager
def _client_timeout(seconds: float) -> Iterator[None]:
    from huggingface_hub.utils import get_session

    httpx2 = _http()

    with _LOCK:
        session = get_session()
        if not _ACTIVE:
            _SAVED.append(session.timeout)
        _ACTIVE.append(seconds)
        session.timeout = httpx2.Timeout(min(_ACTIVE))
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE.remove(seconds)
            session = get_session()
            session.timeout = httpx2.Timeout(min(_ACTIVE)) if _ACTIVE else _SAVED.pop()


def status_of(exc: Any) -> int | None:
    """The HTTP status of a huggingface_hub error (None when no response came)."""
    return exc.response.status_code if exc.response is not None else None


def _first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")[:300]


@contextmanager
def bounded(endpoint: str, what: str, timeout: float | None = None) -> Iterator[float]:
    """Run Hub calls with a timeout; a failure becomes ``HubError("<what>: <why>")``. Yields
    the timeout, for calls that take one explicitly."""
    from huggingface_hub.errors import HfHubHTTPError

    httpx2 = _http()
    seconds = timeout_seconds(timeout)
    try:
        with _client_timeout(seconds):
            yield seconds
    except Rf100vlError:
        raise
    except HfHubHTTPError as exc:
        reason = _first_line(exc.server_message or "") or _first_line(str(exc))
        raise HubError(f"{what}: {endpoint} answered {status_of(exc)}: {reason}") from None
    except httpx2.TimeoutException:
        raise HubError(
            f"{what}: {endpoint} did not answer within {seconds:g} s (set ${TIMEOUT_ENV} to wait longer)"
        ) from None
    except (httpx2.TransportError, OSError) as exc:
        raise HubError(f"{what}: cannot reach {endpoint} ({type(exc).__name__}: {_first_line(str(exc))})") from None
