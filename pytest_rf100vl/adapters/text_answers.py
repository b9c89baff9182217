"""What every model that answers in text shares, whether it runs here (transformers,
:mod:`~pytest_rf100vl.adapters.vlm`) or behind a server (:mod:`~pytest_rf100vl.adapters.served_chat`).
Torch-free, so a served model needs no torch.

Such a model is asked for boxes in words, as the RF100-VL paper ran MLLMs: every box it
writes scores 1.0, its label is mapped back to a class (exactly, then ignoring case and
punctuation; a label that matches no class is dropped and counted), and all class names
go in one prompt unless the adapter option ``per_class=True`` asks one prompt per class
(then every box of a prompt takes that prompt's class, whatever label it carries).

Each answer comes back as a :class:`Reply` that says which coordinate space its numbers are
in; the adapter's ``to_pixels`` is the one place where that space becomes pixels of the
image. Parse outcomes are counted and reported in ``describe()`` and ``answer_counts()``:
answers, boxes read, boxes rejected (unreadable coordinates), boxes whose label matched no
class, UOUO answers without a box or a quadrant word, and the unmatched labels themselves.

Every answer also carries its transcript (:attr:`Detections.transcript`,
:attr:`GroundingAnswer.transcript`), made in one place, :meth:`TextAnswerBase.exchange`: per
question, the texts sent (a text over :data:`LONG_TEXT` characters as its sha256), the reply as
written, its frame, and each box read from it (as written, in pixels, the class it went to, or
why it was dropped). The plugin writes them to the samples log (``--rf100vl-log-samples``).

The counters are guarded by a lock: a served model is called from several threads at once
(:attr:`~pytest_rf100vl.adapters.base.Adapter.concurrency`).
"""

from __future__ import annotations

import hashlib
import threading
import warnings
from abc import abstractmethod
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from rf100vl_hf.progress import progress_bar

from pytest_rf100vl.adapters.base import DetectionTask, Detections, GroundingAnswer, GroundingQuery, Transcript
from pytest_rf100vl.adapters.keyed import PromptKeyedAdapter
from pytest_rf100vl.adapters.parsing import BoxParse, parse_quadrant
from pytest_rf100vl.adapters.prompts import prompt_hash

ImageT = TypeVar("ImageT")
"""What :meth:`TextAnswerBase.generate` is given per image: pixels (local) or the stored item (served)."""


PromptT = TypeVar("PromptT")
"""What one question is: a string, or an object with ``texts()`` (a chat conversation)."""

LONG_TEXT = 2000
"""A text sent that is longer than this many characters (few-shot turns, long annotator
instructions) appears in a transcript as ``sha256:<hex digest of its UTF-8 bytes>``: every image
of a task is sent the same texts, and the samples log repeats them on each of its lines."""
UNKNOWN_LABEL = "label matches no class"
"""Why a box read from a reply was dropped, in its transcript."""


def shown_text(text: str) -> str:
    """A text sent as a transcript gives it: as sent, or its sha256 when over :data:`LONG_TEXT`."""
    return text if len(text) <= LONG_TEXT else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Reply:
    """A model's answer to one prompt about one image, and the ``(width, height)`` of the
    coordinate space its numbers are in (pixels of a resized input, 1000 bins...)."""

    text: str
    frame: tuple[float, float]


def label_key(name: str) -> str:
    """A label as compared when the exact spelling fails: case-folded, letters and digits only."""
    return "".join(char for char in name.casefold() if char.isalnum())


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


def only_instructions(instructions: dict[str, str], names: list[str]) -> dict[str, str]:
    """The non-empty instructions of ``names``, in their order."""
    return {name: instructions[name] for name in names if instructions.get(name)}


class TextAnswerBase(PromptKeyedAdapter, Generic[ImageT, PromptT]):
    """A model that writes its boxes as text. Subclasses say how to ask (:meth:`task_prompts`,
    :meth:`box_prompt`, :meth:`quadrant_prompt`), how to run the model (:meth:`generate`), how
    to read its answer (:meth:`parse`) and where its numbers live (:meth:`to_pixels`); they
    call :meth:`detect` from ``predict`` and :meth:`answer_grounding` from ``ground``."""

    option_defaults: ClassVar[dict[str, Any]] = {"per_class": False}

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        self.per_class = bool(self.options["per_class"])
        self.stats: Counter[str] = Counter()  # answers, boxes, rejected_boxes, unmatched_boxes, no_box, no_quadrant
        self.labels = LabelMap([])
        self.prompts: list[tuple[PromptT, int | None]] = []
        """The current task's questions, each with the class it asks for (``None``: every class)."""
        self._lock = threading.Lock()
        self._task_in_pair = False  # whether the current pair set a task (a UOUO pair does not)

    # ------------------------------------------------------------------ model-specific

    @abstractmethod
    def task_prompts(self, task: DetectionTask) -> list[tuple[PromptT, int | None]]:
        """The questions of a task, each with the class index it asks for (``None``: all
        classes, each box labelled by the model)."""

    @abstractmethod
    def box_prompt(self, query: GroundingQuery) -> PromptT:
        """The UOUO box question in this model's framing."""

    @abstractmethod
    def quadrant_prompt(self, query: GroundingQuery) -> PromptT | None:
        """The UOUO quadrant question in this model's framing; ``None`` for a model that
        cannot answer questions (the scorer then reads the quadrant from the box centre)."""

    @abstractmethod
    def generate(self, images: list[ImageT], prompts: list[PromptT]) -> list[Reply]:
        """One greedy answer per (image, prompt) pair."""

    @abstractmethod
    def parse(self, text: str) -> BoxParse:
        """The boxes of an answer, in the model's coordinate space."""

    @abstractmethod
    def to_pixels(self, box: tuple[float, float, float, float], reply: Reply, image: ImageT) -> tuple[float, ...]:
        """A box of ``reply`` as ``xyxy`` pixels of the image asked about."""

    # ------------------------------------------------------------------ shared

    def describe(self) -> dict[str, Any]:
        """What ran, plus how well its answers could be read so far."""
        described = super().describe()
        with self._lock:
            return {
                **described,
                "per_class": self.per_class,
                "answers": dict(self.stats),
                "unknown_labels": dict(self.labels.unknown),
            }

    def answer_counts(self) -> dict[str, int]:
        with self._lock:
            counts = dict(self.stats)
            counts["unknown_labels"] = counts.get("unknown_labels", 0) + sum(self.labels.unknown.values())
        return counts

    def set_task(self, task: DetectionTask) -> None:
        """Build the questions once per dataset."""
        super().set_task(task)
        with self._lock:
            self.stats["unknown_labels"] += sum(self.labels.unknown.values())  # kept past the dataset
            self.labels = LabelMap(task.classes)
        self.prompts = self.task_prompts(task)
        self._task_in_pair = True

    def start_pair(self) -> None:
        super().start_pair()
        self._task_in_pair = False

    def pair_prompt_hash(self) -> str | None:
        """A hash of every text the pair's task sends (few-shot images by content hash), for
        its row; ``None`` for a pair that set no task (UOUO questions are the dataset's own)."""
        return prompt_hash(self.prompt_texts(None)) if self._task_in_pair else None

    def prompt_key(self, prompt: PromptT) -> tuple[str, ...]:
        """The texts of one question as the answer cache sees them (a string is its own text)."""
        return (prompt,) if isinstance(prompt, str) else tuple(prompt.texts())  # type: ignore[attr-defined]

    def prompt_texts(self, query: GroundingQuery | None) -> tuple[str, ...]:
        if query is not None:
            quadrant = self.quadrant_prompt(query)
            return (*self.prompt_key(self.box_prompt(query)), *(self.prompt_key(quadrant) if quadrant else ("",)))
        return tuple(text for prompt, _ in self.prompts for text in self.prompt_key(prompt))

    def read(self, reply: Reply) -> BoxParse:
        """The boxes of a reply, counted into :attr:`stats`."""
        parsed = self.parse(reply.text)
        with self._lock:
            self.stats["answers"] += 1
            self.stats["boxes"] += len(parsed.boxes)
            self.stats["rejected_boxes"] += parsed.rejected
        return parsed

    def sent(self, prompt: PromptT) -> list[str]:
        """The texts of a question as a transcript gives them (:func:`shown_text`)."""
        return [shown_text(text) for text in self.prompt_key(prompt)]

    def exchange(self, prompt: PromptT, reply: Reply, parsed: BoxParse, image: ImageT,
                 classes: list[int | None] | None) -> dict[str, Any]:
        """The hook every transcript is made by: one question's record, with the texts sent, the
        reply as written and its frame, and each box read (as written and in pixels; with
        ``classes``, in the boxes' order, the class it went to, or why it was dropped);
        ``unreadable_boxes``: box-like entries whose coordinates could not be read."""
        boxes = []
        for position, box in enumerate(parsed.boxes):
            record: dict[str, Any] = {"label": box.label, "written": [float(v) for v in box.box],
                                      "pixels": [float(v) for v in self.to_pixels(box.box, reply, image)]}
            if classes is not None:
                index = classes[position]
                record["class"] = None if index is None or self.task is None else self.task.classes[index]
                if index is None:
                    record["dropped"] = UNKNOWN_LABEL
            boxes.append(record)
        return {"sent": self.sent(prompt), "reply": reply.text, "frame": [float(v) for v in reply.frame],
                "boxes": boxes, "unreadable_boxes": parsed.rejected}

    def detect(self, images: list[ImageT]) -> list[Detections]:
        """Ask every question of the task about each image; boxes in pixels of each image, with
        each image's transcript."""
        assert self.task is not None  # predict checked it
        found: list[tuple[list[tuple[float, ...]], list[int]]] = [([], []) for _ in images]
        transcripts: list[Transcript] = [[] for _ in images]
        quiet = len(self.prompts) < 2 or self.concurrency > 1  # no bar per call from many threads
        prompts = progress_bar(self.prompts, desc=f"{self.name} classes", disable=quiet, leave=False)
        for prompt, class_index in prompts:
            replies = self.generate(images, [prompt] * len(images))
            for (boxes, labels), transcript, image, reply in zip(found, transcripts, images, replies):
                parsed = self.read(reply)
                classes = [class_index if class_index is not None else self._class_of(box.label)
                           for box in parsed.boxes]
                transcript.append(self.exchange(prompt, reply, parsed, image, classes))
                for record, index in zip(transcript[-1]["boxes"], classes):
                    if index is not None:
                        boxes.append(tuple(record["pixels"]))
                        labels.append(index)
        return [
            Detections(
                np.asarray(boxes, dtype=np.float64).reshape(-1, 4),
                np.ones(len(labels)),
                np.asarray(labels, dtype=np.int64),
                transcript,
            )
            for (boxes, labels), transcript in zip(found, transcripts)
        ]

    def _class_of(self, label: str | None) -> int | None:
        """The class a box's label names; an unknown one is counted and warned about once."""
        with self._lock:
            index = self.labels.index(label)
            first_miss = index is None and self.labels.unknown[label or ""] == 1
            self.stats["unmatched_boxes"] += int(index is None)
        if first_miss:
            assert self.task is not None
            what = f"label {label!r}" if label else "a box without a label"
            warnings.warn(
                f"{self.name}: {what} is not a class of {self.task.dataset!r}; such boxes are dropped "
                "(counted in describe()['unknown_labels'])",
                stacklevel=4,  # the caller of predict
            )
        return index

    def answer_grounding(self, images: list[ImageT], queries: list[GroundingQuery]) -> list[GroundingAnswer]:
        """Ask both UOUO questions of each mosaic; the box is the first one labelled with the
        target (else the first one), the quadrant the word the second answer names."""
        if len(images) != len(queries):
            raise ValueError(f"{len(images)} images but {len(queries)} queries")
        if not images:
            return []
        quadrant_prompts = [self.quadrant_prompt(query) for query in queries]
        asked = [i for i, prompt in enumerate(quadrant_prompts) if prompt is not None]
        box_prompts = [self.box_prompt(query) for query in queries]
        box_replies = self.generate(images, box_prompts)
        quadrant_questions: list[PromptT] = [quadrant_prompts[i] for i in asked]  # type: ignore[misc]
        quadrant_replies = dict(zip(asked, self.generate([images[i] for i in asked], quadrant_questions))) if asked else {}
        answers = []
        for i, (image, query, box_reply) in enumerate(zip(images, queries, box_replies)):
            parsed = self.read(box_reply)
            target = label_key(query.target)
            labelled = (n for n, box in enumerate(parsed.boxes) if label_key(box.label or "") == target)
            best = next(labelled, 0 if parsed.boxes else None)
            raw = {"box": box_reply.text}
            transcript = [{"question": "box", **self.exchange(box_prompts[i], box_reply, parsed, image, None),
                           "chosen": best}]
            quadrant = None
            if i in quadrant_replies:
                raw["quadrant"] = quadrant_replies[i].text
                quadrant = parse_quadrant(raw["quadrant"], query.quadrant_prompt)
                transcript.append({"question": "quadrant", "sent": self.sent(quadrant_prompts[i]),
                                   "reply": raw["quadrant"], "quadrant": quadrant})
            with self._lock:
                self.stats["no_box"] += int(best is None)
                if i in quadrant_replies:
                    self.stats["no_quadrant"] += int(quadrant is None)
            box = None if best is None else tuple(transcript[0]["boxes"][best]["pixels"])
            answers.append(GroundingAnswer(box, quadrant, raw, transcript))
        return answers
