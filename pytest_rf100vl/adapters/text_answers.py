"""The chat adapters: models that write their boxes as text, run here (transformers,
:mod:`~pytest_rf100vl.adapters.vlm`) or behind a server (:mod:`~pytest_rf100vl.adapters.served_chat`).
Torch-free, so a served model needs no torch.

A :class:`ChatAdapter` is three parts, each a small object of its own:

- a **prompter** (:class:`Prompter`, :mod:`.prompts`): the questions of a task and of a UOUO mosaic;
- a **transport** (:class:`Transport`): how an answer is fetched, from a model loaded here
  (:class:`~pytest_rf100vl.adapters.vlm.LocalTransport`, one per model family) or from a
  server (:class:`~pytest_rf100vl.adapters.served_chat.ServedTransport`, with the openai or
  gemini client);
- a **reader** (:class:`Reader`): the boxes of an answer (a parser of :mod:`.parsing`), in
  pixels of the image asked about (:class:`Coordinates`, :mod:`.coordinates`), each mapped
  back to a class (:class:`LabelMap`).

The adapter asks every question of the task about each image and hands each answer to the
reader; nothing of a model is an override of the loop. Such a model is asked for boxes in
words, as the RF100-VL paper ran MLLMs: every box it writes scores 1.0 (unless the adapter
option ``scores`` asks the model for a score, or re-scores each box: :data:`SCORE_SOURCES`), its label is mapped
back to a class (exactly, then ignoring case and punctuation; a label that matches no class is
dropped and counted), and all class names go in one prompt unless the adapter option
``per_class=True`` asks one prompt per class (then every box of a prompt takes that prompt's
class, whatever label it carries).

Each answer comes back as a :class:`Reply` that says which coordinate space its numbers are
in; the reader's :class:`Coordinates` is the one place where that space becomes pixels of the
image. Parse outcomes are counted (:class:`Tally`) and reported in ``describe()`` and
``answer_counts()``: answers, boxes read, boxes rejected (unreadable coordinates), boxes whose
label matched no class, UOUO answers without a box or a quadrant word, and the unmatched labels
themselves. The counts are guarded by a lock: a served model is called from several threads at
once (:attr:`~pytest_rf100vl.adapters.base.Adapter.concurrency`).

Every answer also carries its transcript (:attr:`Detections.transcript`,
:attr:`GroundingAnswer.transcript`), made in one place, :meth:`ChatAdapter.exchange`: per
question, the texts sent (a text over :data:`LONG_TEXT` characters as its sha256), the reply as
written (its first :data:`LONG_REPLY` characters, with ``reply_cut`` saying so: :func:`kept_reply`), its frame, and each box read from it (as written, in pixels, the class it went to, or
why it was dropped). The plugin writes them to the samples log (the report key ``log-samples``).
"""

from __future__ import annotations

import hashlib
import threading
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

import numpy as np

from rf100vl_hf.progress import progress_bar
from rf100vl_hf.redact import scrub

from pytest_rf100vl.adapters.base import (
    TINY,
    Adapter,
    Detections,
    DetectionTask,
    Entry,
    GroundingAnswer,
    GroundingQuery,
    ImageItem,
    Transcript,
)
from pytest_rf100vl.adapters.keyed import prompt_key
from pytest_rf100vl.adapters.parsing import BoxParse, parse_quadrant
from pytest_rf100vl.adapters.prompts import (
    VQA_QUESTION,
    prompt_file_digest,
    prompt_file_for,
    prompt_hash,
    read_prompt_file,
)

ImageT = TypeVar("ImageT")
"""What a transport shows the model per image: pixels (local) or the stored item and what is sent (served)."""

PromptT = TypeVar("PromptT")
"""What one question is: a string, or an object with ``texts()`` (a chat conversation)."""

Box = tuple[float, float, float, float]
LONG_TEXT = 2000
"""A text sent that is longer than this many characters (few-shot turns, long annotator
instructions) appears in a transcript as ``sha256:<hex digest of its UTF-8 bytes>``: every image
of a task is sent the same texts, and the samples log repeats them on each of its lines."""
LONG_REPLY = 65_536
"""Characters of a reply a transcript keeps: a reply of 500 boxes per class fits; a model that
runs on for megabytes would make the samples log and the answer cache as large."""
UNKNOWN_LABEL = "label matches no class"
"""Why a box read from a reply was dropped, in its transcript."""
SCORE_SOURCES = ("one", "ask", "vqa")
"""Adapter option ``scores`` (Qwen and the served models): ``one`` (the default, the papers'
protocol: every box 1.0), ``ask`` (the question asks for a score per box and the reply's is
read: ``docs/prompts.md``), ``vqa`` (each box re-scored by a yes/no question to the same model,
one more request per box). Part of the row's ``adapter_options``, so of its identity and of
the answer cache's key."""
UNSCORED = 0.0
"""The score of a box whose reply gave none under ``scores=ask`` (counted: ``unscored_boxes``)."""
UNREADABLE_VQA = 0.5
"""The score of a box whose yes/no answer is neither (counted: ``unreadable_vqa_answers``)."""


def yes_or_no(text: str) -> float | None:
    """1.0 for an answer that starts with yes, 0.0 for no, ``None`` for anything else."""
    words = "".join(char if char.isalpha() else " " for char in text.casefold()).split()
    return {"yes": 1.0, "no": 0.0}.get(words[0]) if words else None


def shown_text(text: str) -> str:
    """A text sent as a transcript gives it: as sent, or its sha256 when over :data:`LONG_TEXT`."""
    return text if len(text) <= LONG_TEXT else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def kept_reply(text: str) -> dict[str, Any]:
    """A reply as a transcript keeps it: ``reply``, its first :data:`LONG_REPLY` characters, and
    when it is longer ``reply_cut``, ``{"kept": LONG_REPLY, "of": its length}``. It is scrubbed
    before it is cut, so a cut never leaves part of a secret the scrubber would not know."""
    text = scrub(text)
    if len(text) <= LONG_REPLY:
        return {"reply": text}
    return {"reply": text[:LONG_REPLY], "reply_cut": {"kept": LONG_REPLY, "of": len(text)}}


class ReadBox(NamedTuple):
    """A box read from a reply: its label, its numbers as written, ``xyxy`` pixels, and the
    score the reply gave it (``None``: none)."""

    label: str | None
    written: Box
    pixels: tuple[float, ...]
    score: float | None = None


@dataclass(frozen=True)
class Reply:
    """A model's answer to one prompt about one image, and the ``(width, height)`` of the
    coordinate space its numbers are in (pixels of a resized input, 1000 bins...)."""

    text: str
    frame: tuple[float, float]


def label_key(name: str) -> str:
    """A label as compared when the exact spelling fails: case-folded, letters and digits only."""
    return "".join(char for char in name.casefold() if char.isalnum())


def question_texts(prompt: Any) -> tuple[str, ...]:
    """The texts of one question as the answer cache sees them (a string is its own text)."""
    return (prompt,) if isinstance(prompt, str) else tuple(prompt.texts())


class LabelMap:
    """Model label -> class index: exact, then by :func:`label_key`. Two classes that share a
    key (``B+`` and ``B-``) are then matched only exactly. Misses are counted per label."""

    def __init__(self, classes: list[str]):
        self.exact = {name: index for index, name in enumerate(classes)}
        keys = Counter(label_key(name) for name in classes)
        self.loose = {label_key(name): index for index, name in enumerate(classes) if keys[label_key(name)] == 1}
        self.unknown: Counter[str] = Counter()

    def index(self, label: str | None) -> int | None:
        if label is not None:
            found = self.exact.get(label.strip(), self.loose.get(label_key(label)))
            if found is not None:
                return found
        self.unknown[label or ""] += 1
        return None


class Prompter(Protocol[PromptT]):
    """The questions a chat model is asked (:mod:`.prompts`).

    Example: Florence-2's prompter asks a task of classes ``cat, dog`` one question,
    ``[("<CAPTION_TO_PHRASE_GROUNDING>cat. dog", None)]`` (``None``: the model labels each box),
    and for a mosaic ``"<OPEN_VOCABULARY_DETECTION>cat"`` and no quadrant question."""

    def task_prompts(self, task: DetectionTask) -> list[tuple[PromptT, int | None]]:
        """The questions of a task, each with the class index it asks for (``None``: all
        classes, each box labelled by the model)."""

    def box_prompt(self, query: GroundingQuery) -> PromptT:
        """The UOUO box question in this model's framing."""

    def quadrant_prompt(self, query: GroundingQuery) -> PromptT | None:
        """The UOUO quadrant question in this model's framing; ``None`` for a model that
        cannot answer questions (the scorer then reads the quadrant from the box centre)."""

    def question(self, text: str) -> PromptT:
        """A plain question about an image, with no system prompt (``scores=vqa``'s)."""


class Transport(Protocol[ImageT, PromptT]):
    """How a chat model's answers are fetched.

    Example: :class:`~pytest_rf100vl.adapters.vlm.LocalTransport` shows the model each image
    padded as for detection (:meth:`view`) and generates greedily; the served transport shows
    it the stored file and sends one request per image and question."""

    revision: str | None
    """The model's commit or content hash, when known (``None`` behind a server)."""

    def view(self, item: ImageItem) -> ImageT:
        """What the model is shown for an image of a batch."""

    def generate(self, images: list[ImageT], prompts: list[PromptT]) -> list[Reply]:
        """One greedy answer per (image, prompt) pair, in order."""

    def describe(self) -> dict[str, Any]:
        """What a results row records of how the model ran."""

    def close(self) -> None:
        """Release the model or the connection; called once when the session ends."""


class Coordinates(Protocol[ImageT]):
    """Where a reply's numbers live: the one place a box becomes ``xyxy`` pixels of the image asked about.

    Example: Florence-2's :class:`~pytest_rf100vl.adapters.vlm.ReplyFrame` reads bin ``b`` of
    a reply framed ``(1000, 1000)`` as the pixel ``(b + 0.5) * width / 1000``, clipped to the image."""

    def to_pixels(self, box: Box, reply: Reply, image: ImageT) -> tuple[float, ...]:
        """A box of ``reply`` as ``xyxy`` pixels of the image asked about."""


class Tally:
    """Counts of what a chat adapter met in its answers since it was built, thread-safe:
    ``answers``, ``boxes``, ``rejected_boxes``, ``unmatched_boxes``, ``no_box``, ``no_quadrant``,
    with ``scores=ask`` ``unscored_boxes``, with ``scores=vqa`` ``vqa_questions`` and
    ``unreadable_vqa_answers``, and, behind a server, ``reencoded_images``, ``downscaled_images``,
    ``truncated_answers``,
    ``empty_answers``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, count in counts.items():
                self.counts[name] += count


class Reader(Generic[ImageT]):
    """The boxes of a chat model's answers, in pixels, with their classes.

    Example: ``Reader("qwen3-vl", parse_json_boxes, ReplyFrame(), tally)`` reads
    ``[{"bbox_2d": [100, 100, 500, 500], "label": "Cat"}]`` in a reply framed ``(1000, 1000)``
    about a 300x200 image as the box ``(30, 20, 150, 100)`` labelled ``Cat``, and
    :meth:`class_of` maps ``Cat`` to the class ``cat``."""

    def __init__(self, name: str, parse: Callable[[str], BoxParse], coordinates: Coordinates[ImageT], tally: Tally):
        self.name = name
        self.parse = parse
        self.coordinates = coordinates
        self.tally = tally
        self.labels = LabelMap([])
        self.dataset = ""

    def start(self, task: DetectionTask) -> None:
        """Map labels to the classes of a new task; the last one's unknown labels stay counted."""
        with self.tally.lock:
            self.tally.counts["unknown_labels"] += sum(self.labels.unknown.values())
            self.labels = LabelMap(task.classes)
            self.dataset = task.dataset

    def read(self, reply: Reply, image: ImageT) -> tuple[list[ReadBox], int]:
        """The boxes of a reply in the order written (label, numbers as written, ``xyxy`` pixels
        of ``image``), and how many box-like entries could not be read; counted."""
        parsed = self.parse(reply.text)
        self.tally.add(answers=1, boxes=len(parsed.boxes), rejected_boxes=parsed.rejected)
        read = [ReadBox(box.label, box.box, self.coordinates.to_pixels(box.box, reply, image), box.score)
                for box in parsed.boxes]
        return read, parsed.rejected

    def class_of(self, label: str | None) -> int | None:
        """The class a box's label names; an unknown one is counted and warned about once."""
        with self.tally.lock:
            index = self.labels.index(label)
            first_miss = index is None and self.labels.unknown[label or ""] == 1
            self.tally.counts["unmatched_boxes"] += int(index is None)
        if first_miss:
            what = f"label {label!r}" if label else "a box without a label"
            warnings.warn(
                f"{self.name}: {what} is not a class of {self.dataset!r}; such boxes are dropped "
                "(counted in describe()['unknown_labels'])",
                stacklevel=3,  # the caller of predict
            )
        return index

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """The counts so far, and the current task's unknown labels."""
        with self.tally.lock:
            return dict(self.tally.counts), dict(self.labels.unknown)


class ChatAdapter(Adapter, Generic[ImageT, PromptT]):
    """A model that writes its boxes as text: a :attr:`prompter`, a :attr:`transport` and a
    :attr:`reader`, which a subclass builds in its ``__init__`` (see the module docstring).

    A model run here sets ``transformers_model`` (it is then given ``device_map`` and
    ``attention``, kept in :attr:`device_map` and :attr:`attention` for its transport; it runs
    uncompiled), ``model_class`` and ``build_tiny``."""

    option_defaults: ClassVar[dict[str, Any]] = {"per_class": False}
    prompter: Prompter[PromptT]
    transport: Transport[ImageT, PromptT]
    reader: Reader[ImageT]

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32",
                 device_map: str | None = None, attention: str | None = None, compile: bool = False, **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        self.device_map = device_map
        self.attention = attention
        self.per_class = bool(self.options["per_class"])
        self.scores = str(self.options.get("scores", SCORE_SOURCES[0]))
        if self.scores not in SCORE_SOURCES:
            raise ValueError(f"adapter {self.name!r}: option scores={self.scores!r} "
                             f"(use one of {', '.join(SCORE_SOURCES)})")
        self.prompt_file = Path(self.options["prompt_file"]) if self.options.get("prompt_file") else None
        self.prompt_file_used: Path | None = None
        self.tally = Tally()
        self.prompts: list[tuple[PromptT, int | None]] = []
        """The current task's questions, each with the class it asks for (``None``: every class)."""
        self._task_in_pair = False  # whether the current pair set a task (a UOUO pair does not)

    @classmethod
    def entry(cls) -> Entry:
        return replace(super().entry(), answers_in_text=True)

    @classmethod
    def stored_revision(cls, checkpoint: str | None) -> str | None:
        if not cls.transformers_model:
            return None
        from pytest_rf100vl.adapters.hf import stored_revision

        return stored_revision(cls.name, checkpoint)

    @property
    def revision(self) -> str | None:
        return self.transport.revision

    @property
    def is_smoke(self) -> bool:
        return self.transformers_model and self.checkpoint == TINY

    @classmethod
    def identity_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """As every adapter's, with a ``prompt_file`` given as its path and its content hash, so
        that rows of other instructions never pass for one another."""
        identity = super().identity_options(options)
        if identity.get("prompt_file"):
            identity["prompt_file"] = f"{identity['prompt_file']}#{prompt_file_digest(Path(identity['prompt_file']))}"
        return identity

    def with_prompt_file(self, task: DetectionTask) -> DetectionTask:
        """``task`` with its classes' instructions from option ``prompt_file`` (a class the file
        lacks keeps the dataset's, warned and counted: ``prompt_file_missing_classes``); the
        multi-class prompt then sends those per-class lines rather than the README."""
        if self.prompt_file is None:
            return task
        if "instructions" not in task.prompt:
            raise ValueError(f"adapter {self.name!r}: option prompt_file gives annotator instructions, which prompt "
                             f"mode {task.prompt!r} does not send (use instructions or instructions+fewshot)")
        self.prompt_file_used = prompt_file_for(self.prompt_file, task.dataset)
        given = read_prompt_file(self.prompt_file_used, task.classes)
        missing = [name for name in task.classes if name not in given]
        if missing:
            self.tally.add(prompt_file_missing_classes=len(missing))
            warnings.warn(f"{self.prompt_file_used}: no instructions for {', '.join(map(repr, missing))}; those "
                          "classes keep the dataset's (counted in prompt_file_missing_classes)", stacklevel=3)
        return replace(task, instructions={**task.instructions, **given}, readme="")

    def set_task(self, task: DetectionTask) -> None:
        """Build the questions once per dataset."""
        task = self.with_prompt_file(task)
        super().set_task(task)
        self.reader.start(task)
        self.prompts = self.prompter.task_prompts(task)
        self._task_in_pair = True

    def start_pair(self) -> None:
        super().start_pair()
        self._task_in_pair = False
        self.prompt_file_used = None

    def chat_columns(self) -> dict[str, Any]:
        """The row columns of how a pair was asked: the prompts' hash, the score source and the
        prompt file used with its hash (``None`` without one)."""
        used = self.prompt_file_used
        return {"prompt_hash": self.pair_prompt_hash(), "score_source": self.scores,
                "prompt_file": str(used) if used else None,
                "prompt_file_sha256": prompt_file_digest(used) if used else None}

    def pair_prompt_hash(self) -> str | None:
        """A hash of every text the pair's task sends (few-shot images by content hash), for
        its row; ``None`` for a pair that set no task (UOUO questions are the dataset's own)."""
        return prompt_hash(self.prompt_texts(None)) if self._task_in_pair else None

    def prompt_texts(self, query: GroundingQuery | None) -> tuple[str, ...]:
        """What the model is sent besides the image: for the current task (``query`` is
        ``None``) or for a UOUO question."""
        if query is not None:
            quadrant = self.prompter.quadrant_prompt(query)
            return (*question_texts(self.prompter.box_prompt(query)),
                    *(question_texts(quadrant) if quadrant else ("",)))
        return tuple(text for prompt, _ in self.prompts for text in question_texts(prompt))

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...]:
        return prompt_key(self, query, self.prompt_texts)

    def exchange(self, prompt: PromptT, reply: Reply, read: list[ReadBox], rejected: int,
                 classes: list[int | None] | None) -> dict[str, Any]:
        """The hook every transcript is made by: one question's record, with the texts sent, the
        reply as written and its frame, and each box read (as written and in pixels; with
        ``classes``, in the boxes' order, the class it went to, or why it was dropped);
        ``unreadable_boxes``: box-like entries whose coordinates could not be read."""
        boxes = []
        for position, box in enumerate(read):
            record: dict[str, Any] = {"label": box.label, "written": [float(v) for v in box.written],
                                      "pixels": [float(v) for v in box.pixels]}
            if classes is not None:
                index = classes[position]
                record["class"] = None if index is None or self.task is None else self.task.classes[index]
                if index is None:
                    record["dropped"] = UNKNOWN_LABEL
            boxes.append(record)
        return {"sent": [shown_text(text) for text in question_texts(prompt)], **kept_reply(reply.text),
                "frame": [float(v) for v in reply.frame], "boxes": boxes, "unreadable_boxes": rejected}

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        """Ask every question of the task about each image; boxes in pixels of each image,
        scored as option ``scores`` says, with each image's transcript."""
        if self.task is None:
            raise RuntimeError(f"adapter {self.name!r}: set_task must be called before predict")
        if not batch:
            return []
        images = [self.transport.view(item) for item in batch]
        kept: list[list[tuple[ReadBox, int]]] = [[] for _ in images]
        transcripts: list[Transcript] = [[] for _ in images]
        quiet = len(self.prompts) < 2 or self.concurrency > 1  # no bar per call from many threads
        for prompt, class_index in progress_bar(self.prompts, desc=f"{self.name} classes", disable=quiet, leave=False):
            replies = self.transport.generate(images, [prompt] * len(images))
            for boxes, transcript, image, reply in zip(kept, transcripts, images, replies):
                read, rejected = self.reader.read(reply, image)
                classes = [class_index if class_index is not None else self.reader.class_of(box.label) for box in read]
                transcript.append(self.exchange(prompt, reply, read, rejected, classes))
                boxes.extend((box, index) for box, index in zip(read, classes) if index is not None)
        scores = self.vqa_scores(images, kept, transcripts) if self.scores == "vqa" else \
            [[self.own_score(box) for box, _ in boxes] for boxes in kept]
        return [
            Detections(np.asarray([box.pixels for box, _ in boxes], dtype=np.float64).reshape(-1, 4),
                       np.asarray(image_scores, dtype=np.float64),
                       np.asarray([index for _, index in boxes], dtype=np.int64), transcript)
            for boxes, image_scores, transcript in zip(kept, scores, transcripts)
        ]

    def own_score(self, box: ReadBox) -> float:
        """A box's score: 1.0, or with ``scores=ask`` the one its reply gave (within 0..1;
        :data:`UNSCORED` where it gave none)."""
        if self.scores != "ask":
            return 1.0
        if box.score is None:
            self.tally.add(unscored_boxes=1)
            return UNSCORED
        return min(1.0, max(0.0, box.score))

    def vqa_scores(self, images: list[ImageT], kept: list[list[tuple[ReadBox, int]]],
                   transcripts: list[Transcript]) -> list[list[float]]:
        """Each kept box's ``scores=vqa`` score: the model asked, about the same image, whether
        the box's region (its numbers as written) shows its class; every question of the batch
        in one call to the transport, each counted as a request like any other."""
        assert self.task is not None
        asked = [(i, self.prompter.question(VQA_QUESTION.format(
                      box="[" + ", ".join(f"{value:g}" for value in box.written) + "]", name=self.task.classes[index])))
                 for i, boxes in enumerate(kept) for box, index in boxes]
        replies = self.transport.generate([images[i] for i, _ in asked], [q for _, q in asked]) if asked else []
        scores: list[list[float]] = [[] for _ in images]
        for (i, question), reply in zip(asked, replies):
            score = yes_or_no(reply.text)
            self.tally.add(vqa_questions=1, unreadable_vqa_answers=int(score is None))
            scores[i].append(UNREADABLE_VQA if score is None else score)
            transcripts[i].append({"question": "vqa", "sent": [shown_text(text) for text in question_texts(question)],
                                   "reply": reply.text, "score": scores[i][-1]})
        return scores

    def ground(self, batch: list[ImageItem], queries: list[GroundingQuery]) -> list[GroundingAnswer]:
        """Ask both UOUO questions of each mosaic; the box is the first one labelled with the
        target (else the first one), the quadrant the word the second answer names."""
        if len(batch) != len(queries):
            raise ValueError(f"{len(batch)} images but {len(queries)} queries")
        if not batch:
            return []
        images = [self.transport.view(item) for item in batch]
        quadrant_prompts = [self.prompter.quadrant_prompt(query) for query in queries]
        asked = [i for i, prompt in enumerate(quadrant_prompts) if prompt is not None]
        box_prompts = [self.prompter.box_prompt(query) for query in queries]
        box_replies = self.transport.generate(images, box_prompts)
        quadrant_questions: list[PromptT] = [quadrant_prompts[i] for i in asked]  # type: ignore[misc]
        quadrant_replies = (dict(zip(asked, self.transport.generate([images[i] for i in asked], quadrant_questions)))
                            if asked else {})
        answers = []
        for i, (image, query, box_reply) in enumerate(zip(images, queries, box_replies)):
            read, rejected = self.reader.read(box_reply, image)
            target = label_key(query.target)
            best = next((n for n, box in enumerate(read) if label_key(box.label or "") == target),
                        0 if read else None)
            raw = {"box": box_reply.text}
            transcript = [{"question": "box", **self.exchange(box_prompts[i], box_reply, read, rejected, None),
                           "chosen": best}]
            quadrant = None
            if i in quadrant_replies:
                raw["quadrant"] = quadrant_replies[i].text
                quadrant = parse_quadrant(raw["quadrant"], query.quadrant_prompt)
                transcript.append({"question": "quadrant",
                                   "sent": [shown_text(text) for text in question_texts(quadrant_prompts[i])],
                                   **kept_reply(raw["quadrant"]), "quadrant": quadrant})
            self.tally.add(no_box=int(best is None), **({"no_quadrant": int(quadrant is None)}
                                                        if i in quadrant_replies else {}))
            box = None if best is None else read[best].pixels
            answers.append(GroundingAnswer(box, quadrant, raw, transcript))  # type: ignore[arg-type]
        return answers

    def describe(self) -> dict[str, Any]:
        """What ran, how, and how well its answers could be read so far."""
        counts, unknown = self.reader.counts()
        return {**super().describe(), **self.transport.describe(), "per_class": self.per_class, "answers": counts,
                "unknown_labels": unknown}

    def answer_counts(self) -> dict[str, int]:
        counts, unknown = self.reader.counts()
        counts["unknown_labels"] = counts.get("unknown_labels", 0) + sum(unknown.values())
        return counts

    def close(self) -> None:
        self.transport.close()
