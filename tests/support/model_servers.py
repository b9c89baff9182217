"""Stand-in model servers: small local HTTP servers speaking OpenAI's chat-completions API
(``POST /v1/chat/completions``) and Gemini's (``POST /v1beta/models/{model}:generateContent``),
so the served adapters run their real clients (``openai``, ``google-genai``) in tests.

Each server:

- records every request it received (:attr:`StandInModelServer.received`), parsed into one
  shape for both APIs (:class:`Received`: system prompt, turns of text and image parts, the
  generation settings, the headers and the raw body), so a test can compare the prompts byte
  for byte;
- answers with a script: ``answer(received) -> text`` (default ``[]``), so a test can answer
  each image with its ground truth in any convention; usage is reported (``usage`` /
  ``usageMetadata``) by a fixed rule (:func:`token_counts`), and every answer is kept in
  :attr:`StandInModelServer.answered`;
- waits ``delay`` seconds before answering, and counts the requests in flight
  (``most_in_flight``);
- requires ``key`` when one is set (401 otherwise), and echoes the credential it was
  presented in every error message, as some servers do, so tests can prove that the
  adapters scrub it;
- takes faults: :meth:`StandInModelServer.inject` queues faults for the next requests, one
  each (:func:`rate_limited` with a ``Retry-After``, :func:`server_error`, :data:`HANG`,
  :data:`GARBAGE`, :data:`TRUNCATED`); :meth:`StandInModelServer.always` sets one for every
  request. A hanging request is held until the server stops (at most a minute). A box in
  the wrong convention is a scripted answer like any other.

``serve_openai()`` and ``serve_gemini()`` run one in a thread for a ``with`` block; the
fixtures of ``tests/adapters/conftest.py`` wrap them.
"""

from __future__ import annotations

import base64
import io
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from PIL import Image

HANG_LIMIT_S = 60.0


@dataclass(frozen=True)
class Part:
    """A text or an image of a turn."""

    text: str | None = None
    image: bytes | None = None
    mime: str | None = None


@dataclass(frozen=True)
class Turn:
    role: str  # user, assistant (OpenAI) / model (Gemini)
    parts: tuple[Part, ...]

    @property
    def texts(self) -> list[str]:
        return [part.text for part in self.parts if part.text is not None]

    @property
    def images(self) -> list[bytes]:
        return [part.image for part in self.parts if part.image is not None]

    @property
    def layout(self) -> list[str]:
        """``image``/``text`` per part, in order."""
        return ["image" if part.image is not None else "text" for part in self.parts]


@dataclass(frozen=True)
class Received:
    """One request as the server read it."""

    path: str
    headers: dict[str, str]
    body: bytes
    model: str
    system: str | None
    turns: tuple[Turn, ...]
    settings: dict[str, Any]

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def question(self) -> str:
        """The text of the last turn (the question about the image asked)."""
        return "".join(self.turns[-1].texts)

    @property
    def image(self) -> Image.Image:
        """The image asked about (the last turn's), decoded."""
        return Image.open(io.BytesIO(self.turns[-1].images[-1]))

    @property
    def image_bytes(self) -> bytes:
        return self.turns[-1].images[-1]


@dataclass(frozen=True)
class Fault:
    kind: str  # status, hang, garbage, truncated
    status: int = 0
    headers: tuple[tuple[str, str], ...] = ()


def rate_limited(retry_after: str | None = None) -> Fault:
    return Fault("status", 429, (("Retry-After", retry_after),) if retry_after is not None else ())


def server_error(status: int = 500) -> Fault:
    return Fault("status", status)


HANG = Fault("hang")
GARBAGE = Fault("garbage")  # 200, a JSON content type, and a body that is not JSON
TRUNCATED = Fault("truncated")  # 200 and the first half of a correct answer's JSON


def token_counts(received: Received, answer: str) -> tuple[int, int]:
    """The usage the servers report: a token per 4 characters of text, 100 per image; at least 1 out."""
    texts = sum(len(text) for turn in received.turns for text in turn.texts) + len(received.system or "")
    images = sum(len(turn.images) for turn in received.turns)
    return texts // 4 + 100 * images, len(answer) // 4 + 1


def decode_data_url(url: str) -> tuple[bytes, str]:
    match = re.fullmatch(r"data:([\w/+.-]+);base64,(.*)", url, re.S)
    if not match:
        raise ValueError(f"not a base64 data URL: {url[:40]!r}")
    return base64.b64decode(match.group(2)), match.group(1)


def any_base64(text: str) -> bytes:
    """Base64 in either alphabet, padded or not (the Gemini client sends the URL-safe one)."""
    text = text.replace("+", "-").replace("/", "_")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class StandInModelServer:
    """The server's state, script and faults. Subclasses speak one API."""

    route: re.Pattern[str]

    def __init__(self, answer: Callable[[Received], str] | None = None, delay: float = 0.0, key: str | None = None):
        self.answer = answer or (lambda received: "[]")
        self.delay = delay
        self.key = key
        self.received: list[Received] = []
        self.answered: list[dict[str, Any]] = []  # text, input_tokens, output_tokens of each answer
        self.statuses: list[int] = []  # of every request, in order (0: hung up without an answer)
        self.lock = threading.Lock()
        self.in_flight = self.most_in_flight = 0
        self._faults: deque[Fault] = deque()
        self._standing: Fault | None = None
        self._release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.stand_in = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    @property
    def origin(self) -> str:
        return "http://{}:{}".format(*self._server.server_address[:2])

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=type(self).__name__, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def inject(self, *faults: Fault) -> None:
        """The next requests meet these faults, one each, in order."""
        with self.lock:
            self._faults.extend(faults)

    def always(self, fault: Fault | None) -> None:
        """Every request meets ``fault`` (``None``: none) once the injected ones are spent."""
        with self.lock:
            self._standing = fault

    def next_fault(self) -> Fault | None:
        with self.lock:
            return self._faults.popleft() if self._faults else self._standing

    # the API ------------------------------------------------------------------------

    def read(self, path: str, body: dict[str, Any]) -> tuple[str, str | None, tuple[Turn, ...], dict[str, Any]]:
        """``(model, system, turns, settings)`` of a request body."""
        raise NotImplementedError

    def credential(self, headers: dict[str, str], query: dict[str, str]) -> str | None:
        raise NotImplementedError

    def reply(self, received: Received, text: str, usage: tuple[int, int]) -> dict[str, Any]:
        raise NotImplementedError

    def error(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError


class StandInOpenAI(StandInModelServer):
    route = re.compile(r"^/v1/chat/completions$")

    @property
    def url(self) -> str:
        """The ``base_url`` to give the adapter."""
        return self.origin + "/v1"

    def read(self, path: str, body: dict[str, Any]) -> tuple[str, str | None, tuple[Turn, ...], dict[str, Any]]:
        system, turns = None, []
        for message in body["messages"]:
            content = message["content"]
            if message["role"] == "system":
                system = content if isinstance(content, str) else "".join(part["text"] for part in content)
                continue
            if isinstance(content, str):
                turns.append(Turn(message["role"], (Part(text=content),)))
                continue
            parts = []
            for part in content:
                if part["type"] == "text":
                    parts.append(Part(text=part["text"]))
                else:
                    data, mime = decode_data_url(part["image_url"]["url"])
                    parts.append(Part(image=data, mime=mime))
            turns.append(Turn(message["role"], tuple(parts)))
        settings = {key: value for key, value in body.items() if key not in ("messages", "model")}
        return body["model"], system, tuple(turns), settings

    def credential(self, headers: dict[str, str], query: dict[str, str]) -> str | None:
        header = headers.get("authorization", "")
        return header.removeprefix("Bearer ").strip() or None

    def reply(self, received: Received, text: str, usage: tuple[int, int]) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{len(self.received)}",
            "object": "chat.completion",
            "created": 0,
            "model": received.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
        }

    def error(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "stand_in_error", "code": status}}


class StandInGemini(StandInModelServer):
    route = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):generateContent$")

    @property
    def url(self) -> str:
        return self.origin

    def read(self, path: str, body: dict[str, Any]) -> tuple[str, str | None, tuple[Turn, ...], dict[str, Any]]:
        def parts_of(content: dict[str, Any]) -> tuple[Part, ...]:
            parts = []
            for part in content.get("parts", []):
                inline = part.get("inlineData") or part.get("inline_data")
                if inline is not None:
                    parts.append(Part(image=any_base64(inline["data"]),
                                      mime=inline.get("mimeType") or inline.get("mime_type")))
                else:
                    parts.append(Part(text=part["text"]))
            return tuple(parts)

        instruction = body.get("systemInstruction") or body.get("system_instruction")
        system = "".join(part.text or "" for part in parts_of(instruction)) if instruction else None
        turns = tuple(Turn(content.get("role", "user"), parts_of(content)) for content in body["contents"])
        model = self.route.match(path).group("model")  # type: ignore[union-attr]
        return model, system, turns, dict(body.get("generationConfig") or {})

    def credential(self, headers: dict[str, str], query: dict[str, str]) -> str | None:
        return headers.get("x-goog-api-key") or query.get("key")

    def reply(self, received: Received, text: str, usage: tuple[int, int]) -> dict[str, Any]:
        return {
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                            "index": 0}],
            "usageMetadata": {"promptTokenCount": usage[0], "candidatesTokenCount": usage[1],
                              "totalTokenCount": sum(usage)},
            "modelVersion": received.model,
        }

    def error(self, status: int, message: str) -> dict[str, Any]:
        names = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                 503: "UNAVAILABLE"}
        return {"error": {"code": status, "message": message, "status": names.get(status, "UNKNOWN")}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    @property
    def stand_in(self) -> StandInModelServer:
        return self.server.stand_in  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # requests are kept in stand_in.received
        pass

    def _send(self, status: int, body: bytes, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)
        with self.stand_in.lock:
            self.stand_in.statuses.append(status)

    def _error(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self._send(status, json.dumps(self.stand_in.error(status, message)).encode(), headers)

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        server = self.stand_in
        url = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not server.route.match(url.path):
            self._error(404, f"the stand-in does not serve POST {url.path}")
            return
        headers = {key.lower(): value for key, value in self.headers.items()}
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        model, system, turns, settings = server.read(url.path, json.loads(body))
        received = Received(url.path, headers, body, model, system, turns, settings)
        presented = server.credential(headers, query)
        fault = server.next_fault()
        with server.lock:
            server.received.append(received)
            server.in_flight += 1
            server.most_in_flight = max(server.most_in_flight, server.in_flight)
        try:
            if server.delay:
                time.sleep(server.delay)
            self._answer(server, received, presented, fault)
        finally:
            with server.lock:
                server.in_flight -= 1

    def _answer(self, server: StandInModelServer, received: Received, presented: str | None,
                fault: Fault | None) -> None:
        if fault is not None and fault.kind == "hang":
            server._release.wait(HANG_LIMIT_S)
            self.close_connection = True
            with server.lock:
                server.statuses.append(0)
            return
        if fault is not None and fault.kind == "status":
            self._error(fault.status, f"injected fault {fault.status} (credential {presented})", fault.headers)
            return
        if server.key is not None and presented != server.key:
            self._error(401, f"Incorrect API key provided: {presented}")
            return
        text = server.answer(received)
        usage = token_counts(received, text)
        payload = json.dumps(server.reply(received, text, usage)).encode()
        if fault is not None and fault.kind == "garbage":
            payload = b"<html><body>502 Bad Gateway</body></html>\x00\xff"
        elif fault is not None and fault.kind == "truncated":
            payload = payload[: len(payload) // 2]
        else:
            with server.lock:
                server.answered.append({"text": text, "input_tokens": usage[0], "output_tokens": usage[1]})
        self._send(200, payload)


@contextmanager
def _serving(server: StandInModelServer) -> Iterator[Any]:
    server.start()
    try:
        yield server
    finally:
        server.stop()


def serve_openai(**settings: Any) -> Any:
    """A started :class:`StandInOpenAI` for a ``with`` block (``answer``, ``delay``, ``key``)."""
    return _serving(StandInOpenAI(**settings))


def serve_gemini(**settings: Any) -> Any:
    """A started :class:`StandInGemini` for a ``with`` block (``answer``, ``delay``, ``key``)."""
    return _serving(StandInGemini(**settings))
