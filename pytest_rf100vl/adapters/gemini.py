"""``gemini:MODEL``: Google's Gemini models through the official ``google-genai`` client.

Each question is one ``generateContent`` request: the family's system prompt as the system
instruction, each few-shot turn (its question, then its image, as the RF100-VL authors sent
them, and the ground truth as the model's answer), then the question and the image asked
about (as stored, :mod:`.image_payload`). Boxes are read as Google documents ``box_2d``:
``[ymin, xmin, ymax, xmax]`` over 0..1000 (:mod:`.coordinates`).

Options beside the shared ones (:mod:`.served_chat`): ``base_url`` (Google's API; any
server speaking it), ``api_key_env`` (``GEMINI_API_KEY``, then ``GOOGLE_API_KEY``),
``max_output_tokens`` (8192, as the paper), ``thinking_budget`` (tokens; ``none``: the
model's default), ``json_output`` (false: when true, detection answers are asked as JSON,
``response_mime_type=application/json``) and ``response_schema`` (with ``json_output``:
``boxes``, a list of ``{label, box_2d}``; ``none``: JSON without a schema; or a schema as
JSON text).
"""

from __future__ import annotations

import importlib
import json
import math
import os
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from rf100vl_hf.redact import scrub

from pytest_rf100vl.adapters.bounded_http import BodyTooLarge, Clients, DeadlinePassed
from pytest_rf100vl.adapters.image_payload import SentImage
from pytest_rf100vl.adapters.prompts import Conversation
from pytest_rf100vl.adapters.registry import listed
from pytest_rf100vl.adapters.remote import Answer, Fault, status_fault
from pytest_rf100vl.adapters.served_chat import NO_KEY, SERVED_OPTIONS, Question, ServedChatAdapter

GEMINI_URL = "https://generativelanguage.googleapis.com"
BOXES_SCHEMA: dict[str, Any] = {
    "type": "ARRAY",
    "items": {
        "type": "OBJECT",
        "properties": {"label": {"type": "STRING"}, "box_2d": {"type": "ARRAY", "items": {"type": "INTEGER"}}},
        "required": ["label", "box_2d"],
    },
}
"""``response_schema=boxes``: Google's documented detection answer."""


def transport_errors() -> tuple[type[BaseException], tuple[type[BaseException], ...]]:
    """``(time-out, every transport error)`` classes of the HTTP libraries the client may use."""
    timeouts, transports = [], []
    for name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        timeouts.append(module.TimeoutException)
        transports.append(module.TransportError)
    return tuple(timeouts), tuple(transports)  # type: ignore[return-value]


def contents(conversation: Conversation, examples: list[SentImage], image: SentImage) -> list[Any]:
    """A conversation as ``generateContent`` contents (the system prompt goes in the config)."""
    from google.genai import types

    def user(text: str, picture: SentImage) -> Any:
        parts = [types.Part(inline_data=types.Blob(mime_type=picture.mime, data=picture.data)), types.Part(text=text)]
        return types.Content(role="user", parts=parts if conversation.image_first else parts[::-1])

    turns = []
    for example, picture in zip(conversation.examples, examples):
        turns += [user(example.text, picture), types.Content(role="model", parts=[types.Part(text=example.answer)])]
    return [*turns, user(conversation.text, image)]


@dataclass(frozen=True)
class GeminiApi:
    """``generateContent`` through the ``google-genai`` client: a question is its contents
    (:func:`contents`) and a generation config of the adapter's settings, with structured
    output (``schema``, when ``json_output``) for detection questions only; each request on a
    client leased from ``client`` (:class:`~.bounded_http.Clients`)."""

    client: Clients[Any]
    model: str
    temperature: float
    max_output_tokens: int
    thinking_budget: int | None
    json_output: bool
    schema: dict[str, Any] | None
    timeout: float

    def config(self, question: Question, seconds: float) -> Any:
        """The generation settings of one question, sent within ``seconds``."""
        from google.genai import types

        structured = self.json_output and question.detection
        return types.GenerateContentConfig(
            http_options=types.HttpOptions(timeout=math.ceil(seconds * 1000)),
            system_instruction=question.conversation.system,
            temperature=self.temperature,
            max_output_tokens=self.max_output_tokens,
            thinking_config=None if self.thinking_budget is None else types.ThinkingConfig(
                thinking_budget=self.thinking_budget),
            response_mime_type="application/json" if structured else None,
            response_schema=self.schema if structured else None,
        )

    def request(self, question: Question, image: SentImage) -> Any:
        from google.genai import errors

        timeouts, transports = transport_errors()
        try:
            with self.client.lease() as (client, seconds):
                return client.models.generate_content(
                    model=self.model, contents=contents(question.conversation, list(question.examples), image),
                    config=self.config(question, seconds),
                )
        except errors.APIError as error:
            headers = error.response.headers if getattr(error, "response", None) is not None else {}
            raise status_fault(int(error.code or 0), scrub(str(error.message or error)), headers) from None
        except (DeadlinePassed, *timeouts):
            raise Fault(f"no answer within timeout={self.timeout:g} s", retry=True) from None
        except BodyTooLarge as error:
            raise Fault(f"unreadable response: {error}", retry=True, unreadable=True) from None
        except transports as error:
            raise Fault(f"connection failed: {type(error).__name__}: {scrub(str(error))}", retry=True) from None
        except ValueError as error:  # JSON that does not parse, or not as a response
            raise Fault(f"unreadable response ({type(error).__name__})", retry=True, unreadable=True) from None

    def answer(self, response: Any) -> Answer:
        return answer_of(response)


class GeminiAdapter(ServedChatAdapter):
    name = "gemini"
    default_checkpoint, prompt_modes, tasks = listed(name)
    official_hosts = frozenset({"generativelanguage.googleapis.com"})
    accepted_formats = frozenset({"JPEG", "PNG", "WEBP"})
    also_keys = ("GOOGLE_API_KEY",)
    option_defaults: ClassVar[dict[str, Any]] = {
        **SERVED_OPTIONS,
        "base_url": GEMINI_URL,
        "api_key_env": "GEMINI_API_KEY",
        "max_output_tokens": 8192,
        "thinking_budget": None,
        "json_output": False,
        "response_schema": "boxes",
    }

    def connect(self, key: str | None) -> GeminiApi:
        from google import genai
        from google.genai import types

        from pytest_rf100vl.adapters.bounded_http import installed_httpx

        max_output_tokens = int(self.options["max_output_tokens"])
        if max_output_tokens < 1:
            raise ValueError(f"adapter {self.name!r}: option max_output_tokens={max_output_tokens} (at least 1)")
        budget = self.options["thinking_budget"]
        if budget is not None and not float(budget).is_integer():
            raise ValueError(f"adapter {self.name!r}: option thinking_budget={budget!r} must be a whole number")
        json_output = bool(self.options["json_output"])
        schema = self._schema(str(self.options["response_schema"])) if json_output else None
        chosen = os.environ.get("GOOGLE_GENAI_HTTP_CLIENT", "").strip().lower()  # google-genai's own setting
        httpx = installed_httpx(*([chosen] if chosen in ("httpx", "httpx2") else []), "httpx2", "httpx")
        retry = {"retry_options": types.HttpRetryOptions(attempts=1)} if hasattr(types, "HttpRetryOptions") else {}

        def client(http: Any) -> genai.Client:  # its own retries off: remote.RemoteCalls retries
            options = types.HttpOptions(base_url=self.base_url, api_version="v1beta",
                                        timeout=int(self.calls.policy.timeout * 1000), httpx_client=http, **retry)
            return genai.Client(api_key=key or NO_KEY, http_options=options)

        clients = Clients(client, httpx, self.calls.deadline, http=partial(httpx.Client, follow_redirects=True))
        return GeminiApi(clients, str(self.checkpoint), self.temperature, max_output_tokens,
                         None if budget is None else int(budget), json_output, schema, self.calls.policy.timeout)

    def _schema(self, value: str) -> dict[str, Any] | None:
        """The ``response_schema`` option as a schema (``None``: JSON without one)."""
        from google.genai import types
        from pydantic import ValidationError

        if value == "boxes":
            return BOXES_SCHEMA
        if value == "none":
            return None
        try:
            schema = json.loads(value)
            types.Schema.model_validate(schema)
        except (ValueError, ValidationError) as error:
            first = str(error).splitlines()[0]
            raise ValueError(f"adapter {self.name!r}: option response_schema is not boxes, none or a JSON schema "
                             f"({first})") from None
        return schema

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "max_output_tokens": self.api.max_output_tokens,
                "thinking_budget": self.api.thinking_budget, "json_output": self.api.json_output}


def answer_of(response: Any) -> Answer:
    """The text of the first candidate (thoughts left out), its usage (thinking tokens are
    billed as output) and whether it stopped at the token limit. No candidate (a blocked
    prompt) is an empty answer."""
    candidates = getattr(response, "candidates", None) or []
    first = candidates[0] if candidates else None
    parts = (first.content.parts or []) if first is not None and first.content is not None else []
    usage = getattr(response, "usage_metadata", None)
    output = None
    if usage is not None and (usage.candidates_token_count is not None or usage.thoughts_token_count is not None):
        output = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    return Answer(
        text="".join(part.text for part in parts if part.text and not part.thought),
        input_tokens=getattr(usage, "prompt_token_count", None),
        output_tokens=output,
        truncated=first is not None and str(getattr(first.finish_reason, "value", first.finish_reason)) == "MAX_TOKENS",
        model=getattr(response, "model_version", None),
    )
