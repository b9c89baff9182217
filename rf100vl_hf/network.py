"""Bounded, explained Hub calls: every request inside :func:`bounded` times out, and any
failure to talk to the Hub becomes one :class:`HubError` line (no traceback for the user)
that says what happened: no connection, no answer in time, offline mode, or the server's
status with what it means (a 404 is a missing repository or file, not an unreachable Hub).

``huggingface_hub`` shares one HTTP client whose timeout is None, so a server that accepts a
connection and never answers would block a push forever. Inside the block that client gets a
timeout (``timeout`` seconds, else ``$RF100VL_HUB_TIMEOUT``, else 60); it is restored when the
last block exits, so blocks may nest and run in several threads.

Uploads go through :func:`xet_or_lfs`: huggingface_hub uploads through Xet whenever
``hf_xet`` is installed and fails when the server has no Xet endpoint, so the block asks
for a Xet write token first and uploads through LFS when the server answers 404.
"""

from __future__ import annotations

import importlib.util
import os
import re
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
_LFS_BLOCKS: list[object] = []
"""One entry per open block uploading without Xet, the first holding the setting to restore."""

_MEANINGS = {
    400: "refused the request as malformed",
    401: "refused the token",
    403: "refused access",
    404: "has no such repository, revision or file",
    409: "refused a conflicting change",
    412: "refused the commit: the branch moved on",
    413: "refused the upload as too large",
    422: "refused the request's content",
    429: "is limiting the request rate: wait a minute and retry",
}
_STATUS_IN_TEXT = re.compile(r"HTTP status (?:client|server) error \((\d{3})")
"""How ``hf_xet`` reports a status it got (it raises a plain ConnectionError)."""


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


def meaning(status: int | None) -> str:
    """What an HTTP status of the Hub means, in words."""
    if status in _MEANINGS:
        return _MEANINGS[status]
    if status is not None and status >= 500:
        return "failed on its side: retry later"
    return "refused the request"


def answered(endpoint: str, status: int | None, reason: str) -> str:
    """``<endpoint> answered <status> (<meaning>): <reason>``."""
    return f"{endpoint} answered {status} ({meaning(status)}): {reason}"


def _first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")[:300]


@contextmanager
def bounded(endpoint: str, what: str, timeout: float | None = None) -> Iterator[float]:
    """Run Hub calls with a timeout; a failure becomes ``HubError("<what>: <why>")``. Yields
    the timeout, for calls that take one explicitly."""
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    httpx2 = _http()
    seconds = timeout_seconds(timeout)
    try:
        with _client_timeout(seconds):
            yield seconds
    except Rf100vlError:
        raise
    except HfHubHTTPError as exc:
        reason = _first_line(exc.server_message or "") or _first_line(str(exc))
        raise HubError(f"{what}: {answered(endpoint, status_of(exc), reason)}") from None
    except httpx2.TimeoutException:
        raise HubError(
            f"{what}: {endpoint} did not answer within {seconds:g} s (set ${TIMEOUT_ENV} to wait longer)"
        ) from None
    except OfflineModeIsEnabled:
        raise HubError(f"{what}: HF_HUB_OFFLINE is set, so nothing is sent to {endpoint} (unset it to go online)"
                       ) from None
    except (httpx2.TransportError, ConnectionError, TimeoutError, LocalEntryNotFoundError) as exc:  # not local OSErrors
        text = _first_line(str(exc))
        status = _STATUS_IN_TEXT.search(text)
        if status:
            raise HubError(f"{what}: {answered(endpoint, int(status.group(1)), text)}") from None
        raise HubError(f"{what}: cannot reach {endpoint} ({type(exc).__name__}: {text})") from None


@contextmanager
def xet_or_lfs(endpoint: str, repo_id: str, repo_type: str, token: str, revision: str | None = None) -> Iterator[bool]:
    """Uploads inside the block go through Xet when the server has it, else through LFS;
    yields whether Xet is used. Call it inside :func:`bounded`, after the repository (and
    branch) exist: the server is asked for a Xet write token, and a 404 means it has no Xet."""
    from huggingface_hub import constants
    from huggingface_hub.utils import build_hf_headers, get_session

    if constants.HF_HUB_DISABLE_XET or importlib.util.find_spec("hf_xet") is None:
        yield False
        return
    url = f"{endpoint}/api/{repo_type}s/{repo_id}/xet-write-token/{revision or constants.DEFAULT_REVISION}"
    if get_session().get(url, headers=build_hf_headers(token=token)).status_code != 404:
        yield True
        return
    with _LOCK:
        _LFS_BLOCKS.append(constants.HF_HUB_DISABLE_XET)
        constants.HF_HUB_DISABLE_XET = True  # read by huggingface_hub at each upload
    try:
        yield False
    finally:
        with _LOCK:
            saved = _LFS_BLOCKS.pop()
            if not _LFS_BLOCKS:
                constants.HF_HUB_DISABLE_XET = saved
