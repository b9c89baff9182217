"""Who may write: the token checked before anything is uploaded, and a refusal for lack of
rights as one line (shared by the dataset push, the results repository and evaluation
results)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import get_token

from rf100vl_hf.errors import Rf100vlError
from rf100vl_hf.network import status_of
from rf100vl_hf.redact import remember

_LOGIN_HINT = "log in with `hf auth login`, set HF_TOKEN, or pass a token with write access"


class HubAuthError(Rf100vlError, PermissionError):
    """No token, a token the Hub rejects, or one that may not write to the repository."""


def known_token(token: str | None = None) -> str | None:
    """The token a Hub call sends: ``token``, else ``HF_TOKEN`` or the logged-in one; told to
    the process's scrubber first (:mod:`rf100vl_hf.redact`), so that an error that repeats it,
    in any form, shows ``***``."""
    token = token or get_token()
    remember(token)
    return token


def check_token(api: HfApi, token: str | None) -> str:
    """The token to push with, checked against the Hub before anything is uploaded."""
    token = known_token(token)
    if not token:
        raise HubAuthError(f"not logged in to {api.endpoint}: {_LOGIN_HINT}")
    try:
        api.whoami(token=token)
    except HfHubHTTPError as exc:
        if status_of(exc) == 401:
            raise HubAuthError(f"{api.endpoint} rejected the token (401 Unauthorized): {_LOGIN_HINT}") from None
        raise
    return token


@contextmanager
def refused_as_auth_error(api: HfApi, repo_id: str, repo_type: str) -> Iterator[None]:
    """Writes to ``repo_id``: a refusal for lack of rights (401, 403) becomes a one-line
    :class:`HubAuthError`; any other error passes through unchanged."""
    try:
        yield
    except HfHubHTTPError as exc:
        if status_of(exc) in (401, 403):
            reason = (exc.server_message or str(exc)).strip().splitlines()[0]
            raise HubAuthError(f"the token may not write to {repo_type} {repo_id!r} on {api.endpoint}: {reason}") from None
        raise
