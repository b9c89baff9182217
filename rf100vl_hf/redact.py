"""The one scrubber: what a results row, a summary, a log line, the terminal or an error may
show of the session's secrets is ``***``.

A served model's key, a password or a key in its ``base_url`` must never reach a file, the
terminal or the Hub, whatever route it takes: an option recorded in a row, the command line,
an error a client raised, or a server that echoes the key back in an error body or as a box
label. So every text the plugin writes passes :func:`scrub`, and the process's one
:class:`Scrubber` knows every secret the session has read:

- a secret is masked in every form it may be written in: as given, stripped of white space
  and quotes (``$(cat keyfile)`` may keep a trailing newline), percent-encoded and decoded
  (a URL carries it either way: any of its characters encoded, ``%2D`` for ``-`` too, as a
  server echoes the form it was sent), in base64 (standard and URL-safe, padded or not), as
  JSON and ``repr`` escape it; forms shorter than :data:`MIN_SECRET_LENGTH` characters are
  not matched as bare text (they would mask ordinary words);
- a URL's credentials (:meth:`Scrubber.remember_url`): its password (its user name when it
  has no password: a token in the user's place), ``user:password`` and its base64 (the
  ``Authorization: Basic`` header a client sends for them), and the value of every query
  parameter whose name looks like a key (:data:`KEY_PARAMETER`: ``key``, ``api-key``,
  ``api_key``, ``token``, ``access_token``, ``sig``...);
- whatever the scrubber was told, any URL in a text has its user and password masked, and
  the values of its key-like query parameters, and so has a bearer token or an
  ``Authorization`` header's value.

Recorded values go further (:func:`public_url`, :func:`public_value`,
:func:`public_argument`): a URL in an option or on the command line is recorded without
user, password, query and fragment.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit, urlunsplit

MASK = "***"
MIN_SECRET_LENGTH = 4
"""Secrets (and forms of them) shorter than this are masked only where a URL holds them."""
KEY_PARAMETER = re.compile(
    r"(?i)(?:[a-z0-9]+[-_.])*(?:key|apikey|token|secret|password|passwd|pwd|sig|signature|auth|"
    r"authorization|credential|credentials|session)"
)
"""Names of query parameters whose values are credentials (``key``, ``api-key``, ``x-goog-api-key``,
``access_token``, ``sig``...)."""

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/?#@:'\"]*)(?P<password>:[^\s/?#@'\"]*)?@")
_QUERY_VALUE = re.compile(r"(?P<lead>[?&;](?P<name>[A-Za-z0-9_.-]+)=)(?P<value>[^&#;\s'\"<>\\]*)")
_AUTHORIZATION = re.compile(r"(?i)(?P<lead>\bbearer\s+|\bauthorization[\"']?\s*[:=]\s*[\"']?(?:basic\s+)?)"
                            r"[A-Za-z0-9._~+/=-]{8,}")


def forms(secret: str) -> set[str]:
    """Every way ``secret`` may be written where it leaks as a fixed text (see the module
    docstring; :func:`percent_encoded` matches the rest)."""
    given = {secret, secret.strip(), secret.strip().strip("'\"").strip()}
    found: set[str] = set()
    for text in given:
        coded = [encode(text.encode()).decode() for encode in (base64.b64encode, base64.urlsafe_b64encode)
                 if len(text) >= MIN_SECRET_LENGTH]  # a short secret's base64 is no less common a word
        for form in (text, unquote(text), quote(text, safe=""), quote(text), quote_plus(text),
                     json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1], repr(text)[1:-1],
                     *coded, *(code.rstrip("=") for code in coded)):
            if len(form) >= MIN_SECRET_LENGTH:
                found.add(form)
    return found


def percent_encoded(secret: str) -> re.Pattern[str]:
    """``secret`` with any of its characters percent-encoded or not (hex digits in either
    case, ``+`` for a space): a client may encode more than it must, and a server echoes it."""
    def either(char: str) -> str:
        hexes = "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))
        encoded = "".join(f"[{c}{c.lower()}]" if c.isalpha() else re.escape(c) for c in hexes)
        return f"(?:{re.escape(char)}|{encoded}{'|[+]' if char == ' ' else ''})"

    return re.compile("".join(either(char) for char in secret))


def url_secrets(url: str) -> list[str]:
    """The credentials ``url`` carries: its password (or a user name alone), ``user:password``
    with its base64, and the values of its key-like query parameters."""
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:  # not a URL urllib can take apart: the patterns of scrub still apply
        return []
    found = []
    if password:
        found.append(password)
        for pair in {f"{user or ''}:{password}", f"{unquote(user or '')}:{unquote(password)}"}:
            found += [pair, base64.b64encode(pair.encode()).decode()]
    elif user:
        found.append(user)
    found += [value for name, value in parse_qsl(parts.query) if KEY_PARAMETER.fullmatch(name) and value]
    return found


def _mask_userinfo(match: re.Match[str]) -> str:
    return f"{match['scheme']}{MASK}{':' + MASK if match['password'] is not None else ''}@"


def _mask_query_value(match: re.Match[str]) -> str:
    return f"{match['lead']}{MASK}" if KEY_PARAMETER.fullmatch(match["name"]) and match["value"] else match.group()


class Scrubber:
    """The secrets of a session, and texts with each of them masked (thread-safe)."""

    def __init__(self) -> None:
        self._forms: tuple[str, ...] = ()
        self._encoded: dict[str, re.Pattern[str]] = {}
        self._lock = threading.Lock()
        self._sources: list[Callable[[], Iterable[str | None]]] = []
        self._asking = threading.RLock()
        self._asker: int | None = None

    def remember_from(self, source: Callable[[], Iterable[str | None]]) -> None:
        """Mask the secrets ``source`` finds, asked once, when a text is first scrubbed or at
        :meth:`ask_sources`, whichever comes first: for a secret that is slow to find (the Hub
        token: huggingface_hub takes a while to import), so that a process that prints nothing
        before it has started its workers does not wait for it."""
        with self._asking:
            self._sources.append(source)

    def ask_sources(self) -> None:
        """Ask every source of :meth:`remember_from` not asked yet; a text scrubbed meanwhile in
        another thread waits for the answers."""
        with self._asking:
            if self._asker == threading.get_ident():  # a source that scrubs a text: not asked again
                return
            self._asker = threading.get_ident()
            try:
                while self._sources:
                    self.remember(*self._sources.pop(0)())  # asked once, even when it fails
            finally:
                self._asker = None

    def remember(self, *secrets: str | None) -> None:
        """Mask these secrets, in every form (:func:`forms`, :func:`percent_encoded`), from now
        on (``None`` and empty: nothing)."""
        new = {form for secret in secrets if secret for form in forms(secret)}
        plain = {unquote(text) for secret in secrets if secret
                 for text in (secret.strip(), secret.strip().strip("'\"").strip())
                 if len(text) >= MIN_SECRET_LENGTH} - set(self._encoded)
        if not new - set(self._forms) and not plain:
            return
        with self._lock:
            self._forms = tuple(sorted(set(self._forms) | new, key=len, reverse=True))  # longest first
            self._encoded = {**self._encoded, **{text: percent_encoded(text) for text in plain}}

    def remember_url(self, url: str) -> None:
        """Mask the credentials ``url`` carries (:func:`url_secrets`)."""
        self.remember(*url_secrets(url))

    def scrub(self, text: str) -> str:
        """``text`` with every secret, URL credential and authorization header masked."""
        if self._sources or self._asker is not None:
            self.ask_sources()
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        if "%" in text:
            for pattern in self._encoded.values():
                text = pattern.sub(MASK, text)
        if "://" in text:
            text = _USERINFO.sub(_mask_userinfo, text)
        if "=" in text:
            text = _QUERY_VALUE.sub(_mask_query_value, text)
        return _AUTHORIZATION.sub(lambda match: f"{match['lead']}{MASK}", text)

    def scrubbed(self, value: Any) -> Any:
        """``value`` with every string in it scrubbed, mappings and sequences walked (keys too)."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {self.scrubbed(key): self.scrubbed(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.scrubbed(item) for item in value)
        return value


SCRUBBER = Scrubber()
"""The process's scrubber: adapters and the plugin tell it the secrets they read."""


def remember(*secrets: str | None) -> None:
    SCRUBBER.remember(*secrets)


def remember_url(url: str) -> None:
    SCRUBBER.remember_url(url)


def remember_all(secrets: Iterable[str]) -> None:
    SCRUBBER.remember(*secrets)


def remember_from(source: Callable[[], Iterable[str | None]]) -> None:
    SCRUBBER.remember_from(source)


def ask_sources() -> None:
    SCRUBBER.ask_sources()


def scrub(text: str) -> str:
    """``text`` as it may be written anywhere (:meth:`Scrubber.scrub` of the process's scrubber)."""
    return SCRUBBER.scrub(text)


def scrubbed(value: Any) -> Any:
    """``value`` with every string in it scrubbed (:meth:`Scrubber.scrubbed`)."""
    return SCRUBBER.scrubbed(value)


def public_url(url: str) -> str:
    """``url`` without user name, password, query and fragment; other text unchanged. A text
    urllib cannot take apart keeps nothing after ``?`` and no user information."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        cut = _USERINFO.sub(lambda m: m["scheme"], url.split("?", 1)[0].split("#", 1)[0])
        return cut
    if not (parts.scheme and parts.netloc):
        return url
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address goes back in brackets
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def public_value(value: Any) -> Any:
    """A recorded option value: each URL in it made public (:func:`public_url`), then scrubbed;
    a value that is not text as given."""
    if not isinstance(value, str):
        return value
    return scrub(_URL.sub(lambda match: public_url(match.group()), value) if "://" in value else value)


def public_argument(token: str) -> str:
    """A command-line word as it may be recorded: every URL in it made public, however the
    word holds it (``--option=name.key=URL``, ``-oini=name.key=URL``, ``KEY=URL``, the URL
    alone), and every secret scrubbed."""
    return public_value(token)
