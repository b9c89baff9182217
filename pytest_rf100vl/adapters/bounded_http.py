"""HTTP requests that end by their deadline whatever the server sends, for the served adapters'
clients (``openai`` and ``google-genai`` both take an httpx client: ``httpx``, or its fork
``httpx2``), bounded from outside through the clients' public settings.

httpx's time-outs bound each network operation, so a read time-out starts again with every
byte: a server that sends its body a byte at a time, its headers slowly, or a chunked body
without end holds a request for as long as it likes. :class:`Clients` bounds the whole
request instead:

- **one client per request in flight**: a request leases an SDK client on an httpx client of
  its own (:meth:`Clients.lease`), given back when it ends, so keep-alive still works and a
  request cut at its deadline takes no other request with it;
- **a watchdog**: ``deadline()`` says, when a request starts, the moment (``time.monotonic``)
  by which it must be answered, connection, headers and body together; the request's own
  time-out is the time left (a server that sends nothing ends by it), and a timer closes the
  httpx client at the deadline and shuts down the socket of the response being read (httpx's
  ``network_stream`` extension), which ends a read the server keeps alive byte by byte. The
  request then raises :class:`DeadlinePassed`, and its client is not used again;
- **a cap on the body**: a response hook (httpx's ``event_hooks``) counts the body as it is
  read and raises :class:`BodyTooLarge` past ``max_body`` bytes, before more of it is read.

Proxies are the httpx client's own (``HTTPS_PROXY``, ``NO_PROXY``...), and bounded the same way.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Generic, TypeVar

MAX_BODY_BYTES = 16 * 2**20
"""The most bytes a response body may have (an answer of 500 boxes is about 50 kB)."""

C = TypeVar("C")


class BodyTooLarge(Exception):
    """A response body longer than the cap."""


class DeadlinePassed(Exception):
    """A request that was not answered by its deadline (cut there, or never sent)."""


def httpx_module_of(client_class: type) -> ModuleType:
    """The httpx-like library (``httpx``, or its fork ``httpx2``) ``client_class`` derives from."""
    for cls in client_class.__mro__:
        module = importlib.import_module(cls.__module__.split(".")[0])
        if cls.__name__ == "Client" and hasattr(module, "SyncByteStream"):
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


class _Capped:
    """A response body that raises :class:`BodyTooLarge` once more than ``max_body`` bytes came."""

    def __init__(self, inner: Any, max_body: int):
        self._inner, self._max_body = inner, max_body

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        for chunk in self._inner:
            received += len(chunk)
            if received > self._max_body:
                raise BodyTooLarge(f"the response body is longer than {self._max_body} bytes: not read further")
            yield chunk

    def close(self) -> None:
        self._inner.close()


@functools.cache
def _capped_stream(httpx: ModuleType) -> type:
    """:class:`_Capped` as a byte stream of ``httpx`` (its responses read only those)."""
    return type("CappedStream", (_Capped, httpx.SyncByteStream), {})


@dataclass(eq=False)
class _Lane:
    """An SDK client and the httpx client under it, leased to one request at a time."""

    http: Any = None
    client: Any = None
    socket: Any = None  # the socket of the response being read
    busy: bool = False
    cut: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class Clients(Generic[C]):
    """SDK clients made by ``connect(http_client)`` on httpx clients made by ``http(**settings)``
    (``httpx.Client`` of ``httpx``, the default, or the SDK's own subclass), each request ending
    by ``deadline()`` with a body of at most ``max_body`` bytes (see the module docstring)."""

    def __init__(self, connect: Callable[[Any], C], httpx: ModuleType, deadline: Callable[[], float],
                 http: Callable[..., Any] | None = None, max_body: int = MAX_BODY_BYTES):
        self._connect, self._httpx, self._deadline = connect, httpx, deadline
        self._http = http or httpx.Client
        self._max_body = max_body
        self._verify = httpx.create_ssl_context()  # loaded once: a lane is cheap to make
        self._idle = [self._lane()]  # the first now: a client that cannot be made fails here, not per request
        self._lock = threading.Lock()
        self._closed = False

    @contextlib.contextmanager
    def lease(self) -> Iterator[tuple[C, float]]:
        """An SDK client for one request, and the seconds left to its deadline (its time-out);
        :class:`DeadlinePassed` when the watchdog cut it, or no time was left to send it."""
        left = self._deadline() - time.monotonic()
        if left <= 0:
            raise DeadlinePassed("no time was left for the request")
        lane = self._take()
        watchdog = threading.Timer(left, self._cut, (lane,))
        watchdog.daemon = True
        watchdog.start()
        try:
            yield lane.client, left
        except Exception:
            if lane.cut:
                raise DeadlinePassed("the request was cut at its deadline") from None
            raise
        finally:
            watchdog.cancel()
            with lane.lock:
                lane.busy = False
            with self._lock:
                kept = not lane.cut and not self._closed
                if kept:
                    self._idle.append(lane)
            if not kept:
                lane.http.close()

    def _take(self) -> _Lane:
        with self._lock:
            lane = self._idle.pop() if self._idle else None
        lane = lane or self._lane()
        lane.socket, lane.busy = None, True
        return lane

    def _lane(self) -> _Lane:
        lane = _Lane()
        lane.http = self._http(verify=self._verify, event_hooks={"response": [functools.partial(self._arrived, lane)]})
        lane.client = self._connect(lane.http)
        return lane

    def _arrived(self, lane: _Lane, response: Any) -> None:
        """httpx's response hook: note the response's socket for the watchdog, and cap its body."""
        stream = response.extensions.get("network_stream")
        lane.socket = stream.get_extra_info("socket") if stream is not None else None
        response.stream = _capped_stream(self._httpx)(response.stream, self._max_body)

    @staticmethod
    def _cut(lane: _Lane) -> None:
        """The watchdog, at the deadline: end the lane's request if it still runs (its client is
        then never leased again)."""
        with lane.lock:
            if not lane.busy:
                return
            lane.cut = True
            if lane.socket is not None:
                with contextlib.suppress(OSError):
                    lane.socket.shutdown(socket.SHUT_RDWR)
            lane.http.close()

    def close(self) -> None:
        """Close every client (one in use when its request ends)."""
        with self._lock:
            lanes, self._idle, self._closed = self._idle, [], True
        for lane in lanes:
            lane.http.close()
