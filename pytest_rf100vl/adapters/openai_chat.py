"""``openai:MODEL``: any model behind an OpenAI-compatible chat-completions API, through the
official ``openai`` client: OpenAI itself, vLLM, SGLang, TGI, Ollama, LM Studio, LMDeploy,
DashScope's compatible mode... (``docs/served-models.md``).

Each question is one ``POST {base_url}/chat/completions``: the system prompt, each few-shot
turn (the example image and its question, then the ground truth as the assistant's answer),
and the image asked about with its question; images as base64 ``data:`` URLs of the stored
file (:mod:`.image_payload`). Options beside the shared ones (:mod:`.served_chat`):
``base_url`` (OpenAI's API), ``api_key_env`` (``OPENAI_API_KEY``; a server without
authentication needs none), ``max_tokens`` (4096; sent as ``max_completion_tokens`` to
OpenAI's own API, whose reasoning models refuse ``max_tokens``, else as ``max_tokens``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

from rf100vl_hf.redact import scrub

from pytest_rf100vl.adapters.bounded_http import BodyTooLarge, Clients, DeadlinePassed
from pytest_rf100vl.adapters.image_payload import SentImage
from pytest_rf100vl.adapters.prompts import Conversation
from pytest_rf100vl.adapters.registry import listed
from pytest_rf100vl.adapters.remote import Answer, Fault, status_fault
from pytest_rf100vl.adapters.served_chat import NO_KEY, SERVED_OPTIONS, Question, ServedChatAdapter

OPENAI_URL = "https://api.openai.com/v1"


def chat_messages(conversation: Conversation, examples: list[SentImage], image: SentImage) -> list[dict[str, Any]]:
    """A conversation as chat-completions messages (``examples``: each few-shot turn's image as sent)."""

    def user(text: str, picture: SentImage) -> dict[str, Any]:
        parts = [{"type": "image_url", "image_url": {"url": picture.data_url()}}, {"type": "text", "text": text}]
        return {"role": "user", "content": parts if conversation.image_first else parts[::-1]}

    messages: list[dict[str, Any]] = []
    if conversation.system is not None:
        messages.append({"role": "system", "content": conversation.system})
    for example, picture in zip(conversation.examples, examples):
        messages += [user(example.text, picture), {"role": "assistant", "content": example.answer}]
    return [*messages, user(conversation.text, image)]


@dataclass(frozen=True)
class OpenAIApi:
    """Chat completions through the ``openai`` client: a question is its messages
    (:func:`chat_messages`), sent with the adapter's temperature and token limit (``limit_key``:
    ``max_completion_tokens`` for OpenAI's own API, whose reasoning models refuse ``max_tokens``),
    each request on a client leased from ``client`` (:class:`~.bounded_http.Clients`)."""

    client: Clients[Any]
    model: str
    temperature: float
    max_tokens: int
    limit_key: str
    timeout: float

    def request(self, question: Question, image: SentImage) -> Any:
        import openai

        try:
            with self.client.lease() as (client, seconds):
                return client.chat.completions.create(
                    model=self.model,
                    messages=chat_messages(question.conversation, list(question.examples), image),
                    temperature=self.temperature,
                    timeout=seconds,
                    **{self.limit_key: self.max_tokens},
                )
        except openai.APIStatusError as error:
            raise status_fault(error.status_code, scrub(error.message), error.response.headers) from None
        except (openai.APITimeoutError, DeadlinePassed):
            raise Fault(f"no answer within timeout={self.timeout:g} s", retry=True) from None
        except openai.APIConnectionError as error:
            cause = error.__cause__ or error
            if isinstance(cause, BodyTooLarge):
                raise Fault(f"unreadable response: {cause}", retry=True, unreadable=True) from None
            raise Fault(f"connection failed: {type(cause).__name__}: {scrub(str(cause))}", retry=True) from None
        except (openai.APIResponseValidationError, ValueError) as error:
            raise Fault(f"unreadable response ({type(error).__name__})", retry=True, unreadable=True) from None

    def answer(self, response: Any) -> Answer:
        return answer_of(response)


class OpenAIChatAdapter(ServedChatAdapter):
    name = "openai"
    default_checkpoint, prompt_modes, tasks = listed(name)
    official_hosts = frozenset({"api.openai.com"})
    accepted_formats = frozenset({"JPEG", "PNG", "WEBP", "GIF"})
    option_defaults: ClassVar[dict[str, Any]] = {
        **SERVED_OPTIONS,
        "base_url": OPENAI_URL,
        "api_key_env": "OPENAI_API_KEY",
        "max_tokens": 4096,
    }

    def connect(self, key: str | None) -> OpenAIApi:
        import openai

        from pytest_rf100vl.adapters.bounded_http import httpx_module_of

        max_tokens = int(self.options["max_tokens"])
        if max_tokens < 1:
            raise ValueError(f"adapter {self.name!r}: option max_tokens={max_tokens} (at least 1)")
        official = urlsplit(self.base_url).hostname in self.official_hosts
        def client(http: Any) -> openai.OpenAI:  # its own retries off: remote.RemoteCalls retries
            return openai.OpenAI(api_key=key or NO_KEY, base_url=self.base_url, max_retries=0,
                                 timeout=self.calls.policy.timeout, http_client=http)

        clients = Clients(client, httpx_module_of(openai.DefaultHttpxClient), self.calls.deadline,
                          http=openai.DefaultHttpxClient)
        return OpenAIApi(clients, str(self.checkpoint), self.temperature, max_tokens,
                         "max_completion_tokens" if official else "max_tokens", self.calls.policy.timeout)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "max_tokens": self.api.max_tokens}


def answer_of(completion: Any) -> Answer:
    """The text, usage and stop reason of a chat completion; a body without a choice is unreadable."""
    choices = getattr(completion, "choices", None)
    if not choices or getattr(choices[0], "message", None) is None:
        raise Fault("unreadable response (no choices)", retry=True, unreadable=True)
    choice = choices[0]
    usage = getattr(completion, "usage", None)
    return Answer(
        text=choice.message.content or "",
        input_tokens=getattr(usage, "prompt_tokens", None),
        output_tokens=getattr(usage, "completion_tokens", None),
        truncated=choice.finish_reason == "length",
        model=getattr(completion, "model", None),
    )
