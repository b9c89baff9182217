"""HTTP requests that end by their deadline whatever the server sends, for the served adapters'
clients (``openai`` and ``google-genai`` both take an httpx transport).

httpx's time-outs bound each network operation, so a read time-out starts again with every
byte: a server that sends its body a byte at a time, its headers slowly, or a chunked body
without end holds a request for as long as it likes. A :func:`bounded_transport` bounds the
whole request instead:

- **a deadline**: ``deadline()`` says, when a request starts, the moment (``time.monotonic``)
  by which it must be answered, connection, headers and body together. Every time-out of the
  request is cut to what is left of it, each chunk of the body is checked against it, and
  when it passes the connection's socket is shut down, which ends a read the server keeps
  alive byte by byte. The request then raises the library's ``ReadTimeout``.
- **a cap on the body**: a body longer than ``max_body`` bytes raises a ``TransportError`` of
  the library that is also a :class:`BodyTooLarge`, before more of it is read.

To know the socket of each request, the transport keeps lanes: connection pools of one
connection, each serving one request at a time (so keep-alive still works), whose socket
httpcore's documented ``trace`` extension reports when it connects. Proxies are taken from
the environment as urllib reads them (``HTTPS_PROXY``, ``NO_PROXY``...), so a request through
a proxy is bounded too: give the client ``trust_env=False``, or it would mount transports of
its own for them.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

MAX_BODY_BYTES = 16 * 2**20
"""The most bytes a response body may have (an answer of 500 boxes is about 50 kB)."""
CONNECTED = (".connect_tcp.complete", ".connect_unix_socket.complete", ".start_tls.complete")
"""httpcore trace events whose ``return_value`` is the stream a request goes on."""


class BodyTooLarge(Exception):
    """A response body longer than the transport's cap (raised as a ``TransportError`` of the
    library too, so clients report it as they report a broken connection)."""


def httpx_module_of(client_class: type) -> ModuleType:
    """The httpx-like library (``httpx``, or its fork ``httpx2``) ``client_class`` derives from."""
    for cls in client_class.__mro__:
        module = importlib.import_module(cls.__module__.split(".")[0])
        if cls.__name__ == "Client" and hasattr(module, "BaseTransport"):
            return module
    raise TypeError(f"{client_class.__name__} is not an httpx client")


def installed_httpx(*names: str) -> ModuleType:
    """The first of ``names`` (``httpx2``, ``httpx``) that is installed."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(f"none of {', '.join(names)} is installed")


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``None``: none, or ``NO_PROXY`` says so)."""
    parts = urlsplit(url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


class _Lane:
    """A pool of one connection, held by one request at a time, and the stream it is on."""

    def __init__(self, transport: Any):
        self.transport = transport
        self.stream: Any = None
        self.holder: object | None = None
        self.lock = threading.Lock()

    def traced(self, chained: Callable[[str, dict[str, Any]], Any] | None) -> Callable[[str, dict[str, Any]], Any]:
        def trace(name: str, info: dict[str, Any]) -> Any:
            if name.endswith(CONNECTED) and info.get("return_value") is not None:
                self.stream = info["return_value"]
            return chained(name, info) if chained is not None else None

        return trace

    def cut(self, holder: object) -> None:
        """Shut the connection down, if ``holder``'s request still holds it (its deadline passed)."""
        with self.lock:
            if self.holder is not holder or self.stream is None:
                return
            sock = self.stream.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _clipped(timeouts: dict[str, float | None] | None, left: float) -> dict[str, float]:
    """The request's time-outs, none longer than ``left`` seconds."""
    given = timeouts or {}
    return {name: min(left, given.get(name) or left) for name in ("connect", "read", "write", "pool")}


@functools.cache
def _transport_class(httpx: ModuleType) -> type:
    """The bounded transport and its body stream, as classes of ``httpx`` (clients check them)."""

    class TooLarge(httpx.TransportError, BodyTooLarge):
        """A response body longer than the transport's cap."""

    class BoundedStream(httpx.SyncByteStream):
        def __init__(self, inner: Any, ends: float, max_body: int, request: Any, release: Callable[[], None]):
            self._inner, self._ends, self._max_body = inner, ends, max_body
            self._request, self._release = request, release

        def __iter__(self) -> Iterator[bytes]:
            received = 0
            try:
                for chunk in self._inner:
                    received += len(chunk)
                    if received > self._max_body:
                        raise TooLarge(f"the response body is longer than {self._max_body} bytes: not read further",
                                           request=self._request)
                    if time.monotonic() > self._ends:
                        raise httpx.ReadTimeout("the response was not complete by its deadline",
                                                request=self._request)
                    yield chunk
            except httpx.TransportError as error:
                if time.monotonic() >= self._ends and not isinstance(error, (httpx.TimeoutException, TooLarge)):
                    raise httpx.ReadTimeout("the response was not complete by its deadline",
                                            request=self._request) from None
                raise

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._release()

    class BoundedTransport(httpx.BaseTransport):
        def __init__(self, deadline: Callable[[], float], max_body: int, proxy: str | None, **options: Any):
            self._deadline, self._max_body = deadline, max_body
            self._make = lambda: httpx.HTTPTransport(
                proxy=proxy, limits=httpx.Limits(max_connections=1, max_keepalive_connections=1), **options)
            self._idle: list[_Lane] = []
            self._lanes: list[_Lane] = []
            self._lock = threading.Lock()

        def _take(self, holder: object) -> _Lane:
            with self._lock:
                lane = self._idle.pop() if self._idle else None
                if lane is None:
                    lane = _Lane(self._make())
                    self._lanes.append(lane)
            with lane.lock:
                lane.holder = holder
            return lane

        def _give(self, lane: _Lane, holder: object) -> None:
            with lane.lock:
                if lane.holder is not holder:
                    return
                lane.holder = None
            with self._lock:
                self._idle.append(lane)

        def handle_request(self, request: Any) -> Any:
            ends = self._deadline()
            left = ends - time.monotonic()
            if left <= 0:
                raise httpx.ConnectTimeout("no time was left for the request", request=request)
            holder = object()
            lane = self._take(holder)
            watch = threading.Timer(left, lane.cut, (holder,))
            watch.daemon = True
            watch.start()

            def release() -> None:
                watch.cancel()
                self._give(lane, holder)

            request.extensions["trace"] = lane.traced(request.extensions.get("trace"))
            request.extensions["timeout"] = _clipped(request.extensions.get("timeout"), left)
            try:
                response = lane.transport.handle_request(request)
            except httpx.TransportError as error:
                release()
                if time.monotonic() >= ends and not isinstance(error, httpx.TimeoutException):
                    raise httpx.ReadTimeout("no answer by the deadline", request=request) from None
                raise
            except BaseException:
                release()
                raise
            return httpx.Response(status_code=response.status_code, headers=response.headers,
                                  stream=BoundedStream(response.stream, ends, self._max_body, request, release),
                                  extensions=response.extensions)

        def close(self) -> None:
            with self._lock:
                lanes, self._lanes, self._idle = self._lanes, [], []
            for lane in lanes:
                lane.transport.close()

    return BoundedTransport


def bounded_transport(httpx: ModuleType, url: str, deadline: Callable[[], float],
                      max_body: int = MAX_BODY_BYTES) -> Any:
    """An ``httpx.BaseTransport`` of the library ``httpx`` for requests to ``url`` (its proxy
    taken from the environment), each ending by ``deadline()`` with a body of at most
    ``max_body`` bytes (see the module docstring)."""
    return _transport_class(httpx)(deadline, max_body, proxy_for(url))
