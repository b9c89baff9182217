"""What a URL may show in a results row, a log line or an error: no credentials, no query.

A served model's ``base_url`` is recorded with every row so results say where they came from;
a URL can carry a password (``https://user:secret@host/v1``) or a key (``?key=...``), which
must never reach a file, the terminal or the Hub."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit


def public_url(url: str) -> str:
    """``url`` without user name, password, query and fragment; other text unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not (parts.scheme and parts.netloc):
        return url
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address goes back in brackets
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def public_value(value: Any) -> Any:
    """A recorded option value: URLs made public (:func:`public_url`), anything else as given."""
    return public_url(value) if isinstance(value, str) and "://" in value else value


def public_argument(token: str) -> str:
    """A command-line word as it may be recorded: a URL, or ``KEY=URL``, made public."""
    key, equals, rest = token.partition("=")
    if equals and "://" in rest and "://" not in key:
        return f"{key}={public_url(rest)}"
    return public_value(token)
