"""What the adapters of chat models behind a server share (``openai``, ``gemini``): the
papers' prompts per model family, images as stored, boxes read in the family's coordinate
convention, and every request bounded, retried and counted by :mod:`.remote`.

A served adapter is a :class:`~pytest_rf100vl.adapters.text_answers.ChatAdapter` of three
parts: a :class:`ServedPrompter` (the family's conversations, each a :class:`Question`), a
:class:`ServedTransport` (one request per image and question through the call policy, made by
a :class:`ChatApi`: the openai or gemini client) and a reader of JSON boxes in the question's
convention (:class:`SentFrame`). An API is two hooks: send one request built from a question
and an image (:meth:`ChatApi.request`), and read the text and usage out of its response
(:meth:`ChatApi.answer`). A served request goes adapter -> transport -> API and back, once per
image and question.

- **Family** (option ``family``): ``qwen2.5``, ``qwen3``, ``gemini`` or ``generic``; ``auto``
  (the default) guesses it from the model name when exactly one family's name is in it
  (``Qwen/Qwen2.5-VL-72B-Instruct``: ``qwen2.5``), else ``generic``. It chooses the prompts
  (:mod:`.prompts`) and the default coordinates.
- **Coordinates** (option ``coordinates``, :mod:`.coordinates`): ``auto`` is the family's
  own (``qwen2.5``: pixels of the ``smart_resize``\\ d image, with ``qwen_min_pixels`` and
  ``qwen_max_pixels`` as the server's processor has them; ``qwen3``: 0..1000; ``gemini``:
  ``[ymin, xmin, ymax, xmax]`` over 0..1000; ``generic``: ``normalized``). Boxes are read
  against the size of the image that was sent and scaled back to the image's own pixels
  when ``max_pixels`` downscaled it; nothing is clipped here (the runner clips and counts).
  A UOUO box question asks for ``[x_min, y_min, x_max, y_max]``, so under the ``gemini``
  convention its answer is read x first on the same 0..1000 scale.
- **One request per image and question**: the runner calls ``predict``/``ground`` with one
  image from ``concurrency`` threads; ``per_class`` asks one question per class, UOUO two.
- **Cache**: :meth:`answer_key_parts` covers the model, family, conventions, ``max_pixels``,
  every prompt text and each few-shot image's content hash, so a rerun is answered from the
  answer cache without a request.

Secrets: the key is read from the environment variable named by ``api_key_env`` and is
held by the client only; options, ``describe()``, rows and messages name the variable. The
key (as the environment holds it), the base URL's credentials and an ``api_key_env`` that is
no variable's name (the key given in its place) are told to the session's scrubber
(:meth:`ServedChatAdapter.secrets`, which the plugin asks before anything is printed), so no
text the plugin writes shows them, whatever a server echoes back.

Clients: each request leases a client of the API's :class:`~.bounded_http.Clients`, so it ends
at its deadline (:meth:`~.remote.RemoteCalls.deadline`) and a body over the cap is not read.
"""

from __future__ import annotations

import os
import re
from abc import abstractmethod
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Protocol
from urllib.parse import urlsplit

from rf100vl_hf import redact
from rf100vl_hf.redact import public_url

from pytest_rf100vl.adapters.base import DetectionTask, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.coordinates import QWEN25_MAX_PIXELS, QWEN25_MIN_PIXELS, BoxConvention
from pytest_rf100vl.adapters.image_payload import SentImage, sent_example, sent_image, shown_example
from pytest_rf100vl.adapters.parsing import parse_json_boxes
from pytest_rf100vl.adapters.prompts import FAMILIES, IMAGE_FIRST, PROMPT_STYLES, Conversation, ConversationPrompter
from pytest_rf100vl.adapters.remote import Answer, CallPolicy, RemoteCalls
from pytest_rf100vl.adapters.text_answers import Box, ChatAdapter, Reader, Reply, Tally

FAMILY_CONVENTIONS = {"qwen2.5": "qwen2.5", "qwen3": "qwen3", "gemini": "gemini", "generic": "normalized"}
FAMILY_NAMES = {"qwen2.5": re.compile(r"qwen2\.5"), "qwen3": re.compile(r"qwen3"), "gemini": re.compile(r"gemini")}
ENVIRONMENT_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
SHORT_NAME = 16
"""A name of capitals and digits alone, longer than this and not set, is taken for a key."""
NO_KEY = "EMPTY"
"""What the client is given for a server without authentication (vLLM's convention)."""

SERVED_OPTIONS: dict[str, Any] = {
    "family": "auto",
    "coordinates": "auto",
    "qwen_min_pixels": QWEN25_MIN_PIXELS,
    "qwen_max_pixels": QWEN25_MAX_PIXELS,
    "prompt_style": "paper",
    "per_class": False,
    "scores": "one",
    "prompt_file": "",
    "fewshot_images": None,
    "max_pixels": None,
    "temperature": 0.0,
    **{field: getattr(CallPolicy, field) for field in CallPolicy.OPTIONS},
}
"""The options every served adapter takes (each adds its base URL, key variable and own settings)."""


def names_a_variable(name: str) -> bool:
    """Whether ``name`` can be an environment variable's name rather than a key given in its
    place: capitals, digits and underscores, and set, or with an underscore, or short."""
    return bool(ENVIRONMENT_NAME.fullmatch(name)) and (name in os.environ or "_" in name or len(name) <= SHORT_NAME)


def guess_family(model: str) -> str:
    """The family whose name is in ``model`` (``-`` and ``_`` read as ``.``), when exactly one is."""
    name = model.lower().replace("-", ".").replace("_", ".")
    found = [family for family, pattern in FAMILY_NAMES.items() if pattern.search(name)]
    return found[0] if len(found) == 1 else "generic"


@dataclass(frozen=True)
class Question:
    """One question as sent: the conversation, the convention its boxes are read in, whether
    it asks for boxes in the task's format (structured output applies to those), and its
    few-shot images as sent, in the order of its turns."""

    conversation: Conversation
    convention: BoxConvention
    detection: bool = True
    examples: tuple[SentImage, ...] = ()

    def texts(self) -> tuple[str, ...]:
        return self.conversation.texts()


@dataclass(frozen=True)
class Shown:
    """An image asked about: the item (its pixels are the ground truth's frame) and what was sent."""

    item: ImageItem
    sent: SentImage


@dataclass(frozen=True)
class ServedReply(Reply):
    """A reply with the convention its boxes are read in (``frame``: the size of the image sent)."""

    convention: BoxConvention


class ChatApi(Protocol):
    """One chat API behind a server, through its ``client`` library: the adapter's two hooks.

    Example: :class:`~pytest_rf100vl.adapters.openai_chat.OpenAIApi` sends a question as
    chat-completions messages (``request``) and reads ``choices[0].message.content`` and the
    usage of the completion (``answer``)."""

    def request(self, question: Question, image: SentImage) -> Any:
        """One request: the question's conversation with its few-shot images and the image
        asked about; the client's response. Raises :class:`~pytest_rf100vl.adapters.remote.Fault`
        (its message scrubbed) for a failed attempt."""

    def answer(self, response: Any) -> Answer:
        """The text, usage and stop reason of a response (:class:`~.remote.Fault` when it has none)."""

    client: Any
    """The client library's clients, each request on one of them (closed with the adapter)."""


class ServedTransport:
    """Answers from a server: each image shown as stored (re-encoded, or downscaled to
    ``max_pixels``, only where it must be; counted), one request per (image, question) made by
    ``api`` through ``calls`` (bounded, retried, capped and counted, :mod:`.remote`).

    Example: ``generate([shown], [question])`` is one ``calls.call`` of ``api.request`` then
    ``api.answer``, and returns the text framed by the size of the image sent, to be read in
    the question's convention."""

    revision = None

    def __init__(self, api: ChatApi, calls: RemoteCalls, accepted_formats: frozenset[str], max_pixels: int | None,
                 tally: Tally):
        self.api = api
        self.calls = calls
        self.accepted_formats = accepted_formats
        self.max_pixels = max_pixels
        self.tally = tally

    def view(self, item: ImageItem) -> Shown:
        sent = sent_image(item, self.accepted_formats, self.max_pixels)
        if sent.reencoded is not None:
            self.tally.add(reencoded_images=1, downscaled_images=int(sent.downscaled))
        return Shown(item, sent)

    def generate(self, images: list[Shown], prompts: list[Question]) -> list[Reply]:
        """One request per (image, question), in order, each through the call policy."""
        replies: list[Reply] = []
        for shown, question in zip(images, prompts):
            answer = self.calls.call(partial(self.ask, question, shown.sent))
            self.tally.add(truncated_answers=int(answer.truncated), empty_answers=int(not answer.text.strip()))
            replies.append(ServedReply(answer.text, shown.sent.size, question.convention))
        return replies

    def ask(self, question: Question, image: SentImage) -> Answer:
        """One attempt."""
        return self.api.answer(self.api.request(question, image))

    def describe(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        close = getattr(self.api.client, "close", None)
        if callable(close):
            close()


class SentFrame:
    """A box in the reply's convention over the image sent, as pixels of the item's image
    (scaled back where ``max_pixels`` downscaled it; not clipped: the runner clips and counts)."""

    def to_pixels(self, box: Box, reply: Reply, image: Shown) -> tuple[float, ...]:
        assert isinstance(reply, ServedReply)
        sent_w, sent_h = image.sent.size
        x1, y1, x2, y2 = reply.convention.to_pixels(box, sent_w, sent_h)
        scale_x, scale_y = image.item.image.width / sent_w, image.item.image.height / sent_h
        return (x1 * scale_x, y1 * scale_y, x2 * scale_x, y2 * scale_y)


class ServedPrompter:
    """The family's conversations (:class:`~pytest_rf100vl.adapters.prompts.ConversationPrompter`)
    as questions (:class:`Question`) read in ``convention``, each few-shot image encoded once; UOUO's
    questions as written, the box read in ``grounding_convention``.

    Example: family ``gemini``, a task of classes ``cat, dog``: one question with Gemini's
    system prompt and ``"Detect the 2d bounding boxes of the following objects: cat, dog."``,
    read as ``[ymin, xmin, ymax, xmax]`` over 0..1000."""

    def __init__(self, conversations: ConversationPrompter, convention: BoxConvention,
                 grounding_convention: BoxConvention):
        self.conversations = conversations
        self.convention = convention
        self.grounding_convention = grounding_convention

    def task_prompts(self, task: DetectionTask) -> list[tuple[Question, int | None]]:
        conversations = self.conversations.task_prompts(task)
        images = {id(shot.image): shot.image for conversation, _ in conversations for shot in conversation.examples}
        sent = {key: sent_example(image) for key, image in images.items()}
        return [(Question(conversation, self.convention,
                          examples=tuple(sent[id(shot.image)] for shot in conversation.examples)), index)
                for conversation, index in conversations]

    def box_prompt(self, query: GroundingQuery) -> Question:
        return self._asked(query.box_prompt, self.grounding_convention)

    def quadrant_prompt(self, query: GroundingQuery) -> Question:
        return self._asked(query.quadrant_prompt, self.convention)

    def question(self, text: str) -> Question:
        return self._asked(text, self.convention)

    def _asked(self, text: str, convention: BoxConvention) -> Question:
        image_first = IMAGE_FIRST[self.conversations.family]
        return Question(Conversation(None, (), text, image_first), convention, detection=False)


class ServedChatAdapter(ChatAdapter[Shown, Question]):
    """A chat model behind a server. Subclasses give the API (:meth:`connect`): its client,
    and its two hooks (:class:`ChatApi`)."""

    repeatable = False  # billed per request: never re-run for throughput
    transport_options = frozenset({*CallPolicy.OPTIONS, "api_key_env"})
    official_hosts: ClassVar[frozenset[str]]
    """Hosts that need a key (any other server may run without authentication)."""
    accepted_formats: ClassVar[frozenset[str]]
    """Image formats the API takes as they are (PIL's names); others are re-encoded."""
    also_keys: ClassVar[tuple[str, ...]] = ()
    """Variables read for the key after the default ``api_key_env``, when that is not set."""

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        where = f"adapter {self.name!r}"
        if not self.checkpoint:
            raise ValueError(f"{where} needs a model name: {self.name}:MODEL")
        family = str(self.options["family"])
        self.family = guess_family(self.checkpoint) if family == "auto" else family
        if self.family not in FAMILIES:
            raise ValueError(f"{where}: option family={family!r} (use auto or one of {', '.join(FAMILIES)})")
        coordinates = str(self.options["coordinates"])
        name = FAMILY_CONVENTIONS[self.family] if coordinates == "auto" else coordinates
        self.convention = BoxConvention(name, min_pixels=self._whole("qwen_min_pixels", 1),
                                        max_pixels=self._whole("qwen_max_pixels", 1))
        self.grounding_convention = BoxConvention("qwen3") if name == "gemini" else self.convention
        self.prompt_style = str(self.options["prompt_style"])
        if self.prompt_style not in PROMPT_STYLES:
            raise ValueError(f"{where}: option prompt_style={self.prompt_style!r} "
                             f"(use one of {', '.join(PROMPT_STYLES)})")
        self.fewshot_images = self._whole("fewshot_images", 1)
        self.max_pixels = self._whole("max_pixels", 1)
        self.temperature = float(self.options["temperature"])
        self.base_url = str(self.options["base_url"]).rstrip("/")
        if urlsplit(self.base_url).scheme not in ("http", "https") or not urlsplit(self.base_url).hostname:
            raise ValueError(f"{where}: option base_url={public_url(self.base_url)!r} is not an http(s) URL")
        redact.remember_all(type(self).secrets(self.options))
        key = self._key()
        policy = CallPolicy.from_options(self.options, where)
        self.calls = RemoteCalls(policy, f"{self.name}:{self.checkpoint}", [key or ""])
        self.concurrency = policy.concurrency
        self.api = self.connect(key)
        self.transport = ServedTransport(self.api, self.calls, self.accepted_formats, self.max_pixels, self.tally)
        shown = partial(shown_example, max_pixels=self.max_pixels)  # few-shot images as the image asked about
        conversations = ConversationPrompter(self.prompt_style, self.family, self.per_class, self.convention,
                                             self.fewshot_images, shown, ask_scores=self.scores == "ask")
        self.prompter = ServedPrompter(conversations, self.convention, self.grounding_convention)
        self.reader = Reader(self.name, parse_json_boxes, SentFrame(), self.tally)

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Unknown options (``TypeError``), and values the call policy refuses (``ValueError``
        naming the option and its range), before anything is built."""
        super().check_options(options)
        CallPolicy.from_options(cls.resolved_options(options), f"adapter {cls.name!r}")

    def _whole(self, key: str, minimum: int) -> int | None:
        """Option ``key`` as a whole number of at least ``minimum`` (``None`` stays ``None``)."""
        value = self.options[key]
        if value is None:
            return None
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not float(value).is_integer() or (
                value < minimum):
            raise ValueError(f"adapter {self.name!r}: option {key}={value!r} must be a whole number >= {minimum}")
        return int(value)

    @classmethod
    def key_variables(cls, variable: str) -> tuple[str, ...]:
        """The variables the key is read from, in order: ``variable``, then :attr:`also_keys`
        when ``variable`` is the default one."""
        default = cls.option_defaults["api_key_env"]  # type: ignore[index]
        return (variable, *(cls.also_keys if variable == default else ()))

    @classmethod
    def secrets(cls, options: dict[str, Any]) -> tuple[str, ...]:
        """What no text may show: the base URL's credentials, the key each variable the key is
        read from holds (as the environment holds it: a trailing newline and all), and the
        value of ``api_key_env`` when it names no variable (the key given in its place)."""
        resolved = cls.resolved_options(options)
        found = list(super().secrets(resolved))
        variable = str(resolved["api_key_env"])
        if not names_a_variable(variable):
            return (*found, variable)
        return (*found, *(os.environ[name] for name in cls.key_variables(variable) if os.environ.get(name)))

    def _key(self) -> str | None:
        """The key, from the environment (stripped); ``None`` for a server that may need none."""
        variable = str(self.options["api_key_env"])
        if not names_a_variable(variable):
            raise ValueError(f"adapter {self.name!r}: option api_key_env must name an environment variable "
                             "(capitals, digits and underscores, such as OPENAI_API_KEY), not hold the key itself")
        for name in self.key_variables(variable):
            if os.environ.get(name, "").strip():
                return os.environ[name].strip()
        if urlsplit(self.base_url).hostname in self.official_hosts:
            raise ValueError(f"adapter {self.name!r}: no API key for {public_url(self.base_url)}: set {variable} "
                             "(or name another variable with the adapter option api_key_env)")
        return None

    @abstractmethod
    def connect(self, key: str | None) -> ChatApi:
        """The API for this adapter's options: its client (its own retries off, its time-out the
        policy's; ``key`` ``None``: a server without authentication) and its two hooks."""

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...]:
        """The prompts and classes, with the model and how its boxes are read."""
        return (*super().answer_key_parts(query), f"model:{self.checkpoint}", f"family:{self.family}",
                f"coordinates:{self.convention!r}", f"grounding-coordinates:{self.grounding_convention!r}",
                f"max_pixels:{self.max_pixels}")

    # ------------------------------------------------------------------ reporting

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "family": self.family,
            "coordinates": self.convention.name,
            "prompt_style": self.prompt_style,
            "base_url": public_url(self.base_url),
            "api_key_env": str(self.options["api_key_env"]),
            "concurrency": self.concurrency,
        }

    def start_pair(self) -> None:
        super().start_pair()
        self.calls.start_pair()

    def pair_columns(self) -> dict[str, Any]:
        """Requests, retries, failures, tokens, latency and cost of the pair; how it was asked
        (prompt style, prompt hash, score source, prompt file); the server (without credentials)."""
        return {
            **self.calls.pair_columns(),
            "prompt_style": self.prompt_style,
            **self.chat_columns(),
            "api_base_url": public_url(self.base_url),
        }
