"""A hostile model server: it speaks just enough of OpenAI's chat-completions API and of
Gemini's ``generateContent`` for the official clients, and then misbehaves as told, writing
the raw bytes itself (``http.server`` would not let it dribble):

- ``dribble_body``: a correct answer whose body comes a byte every :attr:`HostileServer.gap` seconds;
- ``stall_body``: a correct answer's body dribbled for :attr:`HostileServer.stall_after`
  seconds, then nothing more, the connection held open;
- ``dribble_headers``: headers a byte at a time, without end;
- ``endless_slow``: a chunked body of small chunks, one every ``gap``, without end;
- ``endless_fast``: a chunked body of 64 KiB chunks as fast as the socket takes them, without
  end as a client sees it (the server stops at :data:`ENDLESS_BYTES`, so a client that keeps
  reading costs memory that is bounded);
- ``huge``: a ``Content-Length`` of 64 MiB, sent as fast as the socket takes it;
- ``echo``: a correct answer whose boxes are labelled with the credential it was sent and
  every string of :attr:`HostileServer.echo`, in the answer text and the served model's name;
- ``echo_error``: a 400 whose message holds the credential, every header it was sent (the
  ``Authorization`` header among them) and every string of ``echo``;
- ``retry_after``: a 429 asking to wait :attr:`HostileServer.retry_after` seconds.

It binds 127.0.0.1 only. Every loop that writes is bounded: it stops when the client hangs
up, when the server stops, or after :data:`WRITE_LIMIT_S` seconds, whichever comes first, so
a test whose client did hold on ends anyway. ``serve_hostile(behaviour)`` runs it for a
``with`` block; :attr:`HostileServer.requests` counts what it was sent.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

WRITE_LIMIT_S = 20.0
"""The longest any response is written for, whatever the client does."""
BEHAVIOURS = ("dribble_body", "stall_body", "dribble_headers", "endless_slow", "endless_fast", "huge", "echo",
              "echo_error", "retry_after")
HUGE_BYTES = 64 * 2**20
ENDLESS_BYTES = 256 * 2**20


@dataclass
class Request:
    """What the server read of one request."""

    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def credential(self) -> str | None:
        """The key the client presented: a bearer token, ``x-goog-api-key`` or ``?key=``."""
        bearer = self.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            return bearer[7:].strip()
        query = parse_qs(urlsplit(self.path).query)
        return self.headers.get("x-goog-api-key") or (query.get("key") or [None])[0]

    @property
    def gemini(self) -> bool:
        return ":generateContent" in self.path


@dataclass
class HostileServer:
    behaviour: str
    echo: tuple[str, ...] = ()
    gap: float = 0.05
    stall_after: float = 0.8
    retry_after: str = "1000000000"
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {self.behaviour!r}")
        self.stopping = threading.Event()
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler, bind_and_activate=True)
        self._server.daemon_threads = True
        self._server.hostile = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @property
    def origin(self) -> str:
        return "http://{}:{}".format(*self._server.server_address[:2])

    @property
    def openai_url(self) -> str:
        return self.origin + "/v1"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    # ------------------------------------------------------------------ bodies

    def answer_text(self, request: Request) -> str:
        """The model's answer: boxes labelled with the credential and the echoed strings."""
        labels = [request.credential or "no credential", *self.echo]
        return json.dumps([{"bbox_2d": [0.1, 0.1, 0.5, 0.5], "box_2d": [100, 100, 500, 500], "label": label}
                           for label in labels])

    def answer(self, request: Request) -> bytes:
        text = self.answer_text(request)
        model = " / ".join([request.credential or "", *self.echo])
        if request.gemini:
            body = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                                    "index": 0}],
                    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
                    "modelVersion": model}
        else:
            body = {"id": "x", "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        return json.dumps(body).encode()

    def error(self, request: Request) -> bytes:
        told = "; ".join(f"{key}: {value}" for key, value in request.headers.items())
        message = f"invalid request with key {request.credential}; headers {told}; " + "; ".join(self.echo)
        return json.dumps({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}).encode()


class _Handler(socketserver.BaseRequestHandler):
    request: socket.socket

    @property
    def hostile(self) -> HostileServer:
        return self.server.hostile  # type: ignore[attr-defined]

    def handle(self) -> None:
        self.request.settimeout(5)
        try:
            request = self._read()
        except (OSError, ValueError):
            return
        hostile = self.hostile
        hostile.requests.append(request)
        self._ends = time.monotonic() + WRITE_LIMIT_S
        try:
            getattr(self, hostile.behaviour)(request)
        except OSError:  # the client hung up: what a bounded client does
            pass

    def _read(self) -> Request:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.request.recv(65536)
            if not chunk:
                raise ValueError("closed before the headers ended")
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {key.strip().lower(): value.strip() for key, _, value in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length") or 0)
        while len(body) < length:
            chunk = self.request.recv(65536)
            if not chunk:
                raise ValueError("closed before the body ended")
            body += chunk
        return Request(lines[0].split(" ")[1], headers, body)

    def _going(self) -> bool:
        return not self.hostile.stopping.is_set() and time.monotonic() < self._ends

    def _head(self, status: str, length: int | None, extra: str = "") -> bytes:
        framing = f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
        return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{framing}{extra}"
                "Connection: close\r\n\r\n").encode()

    def _send(self, status: str, body: bytes, extra: str = "") -> None:
        self.request.sendall(self._head(status, len(body), extra) + body)

    # ------------------------------------------------------------------ behaviours

    def dribble_body(self, request: Request) -> None:
        body = self.hostile.answer(request)
        self.request.sendall(self._head("200 OK", len(body)))
        for byte in body:
            if not self._going():
                return
            self.request.sendall(bytes([byte]))
            time.sleep(self.hostile.gap)

    def stall_body(self, request: Request) -> None:
        body = self.hostile.answer(request)
        self.request.sendall(self._head("200 OK", len(body)))
        stalls = time.monotonic() + self.hostile.stall_after
        for byte in body:
            if time.monotonic() >= stalls:
                break
            self.request.sendall(bytes([byte]))
            time.sleep(self.hostile.gap)
        while self._going():  # silent, the connection open: only the client can end it
            time.sleep(self.hostile.gap)

    def dribble_headers(self, request: Request) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n":
            self.request.sendall(bytes([byte]))
            time.sleep(self.hostile.gap)
        while self._going():  # a header line a byte at a time, then another, without end
            for byte in b"X-Padding: a\r\n":
                self.request.sendall(bytes([byte]))
                time.sleep(self.hostile.gap)

    def endless_slow(self, request: Request) -> None:
        self.request.sendall(self._head("200 OK", None) + b"1\r\n[\r\n")
        while self._going():
            self.request.sendall(b"1\r\n \r\n")
            time.sleep(self.hostile.gap)

    def endless_fast(self, request: Request) -> None:
        self.request.sendall(self._head("200 OK", None))
        chunk = b"10000\r\n" + b" " * 0x10000 + b"\r\n"
        for _ in range(ENDLESS_BYTES // 0x10000):
            if not self._going():
                return
            self.request.sendall(chunk)

    def huge(self, request: Request) -> None:
        self.request.sendall(self._head("200 OK", HUGE_BYTES))
        block = b" " * 0x10000
        for _ in range(HUGE_BYTES // len(block)):
            if not self._going():
                return
            self.request.sendall(block)

    def echo(self, request: Request) -> None:
        self._send("200 OK", self.hostile.answer(request))

    def echo_error(self, request: Request) -> None:
        self._send("400 Bad Request", self.hostile.error(request))

    def retry_after(self, request: Request) -> None:
        body = json.dumps({"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}).encode()
        self._send("429 Too Many Requests", body, f"Retry-After: {self.hostile.retry_after}\r\n")


@contextmanager
def serve_hostile(behaviour: str, **settings: object) -> Iterator[HostileServer]:
    """A started :class:`HostileServer` for a ``with`` block (``echo``, ``gap``, ``stall_after``,
    ``retry_after``)."""
    server = HostileServer(behaviour, **settings)  # type: ignore[arg-type]
    server.start()
    try:
        yield server
    finally:
        server.stop()
