"""What chat models are asked, defined once for every chat adapter (local or served): the
texts, and the prompters that ask them (the prompter part of a
:class:`~pytest_rf100vl.adapters.text_answers.ChatAdapter`):

- :class:`NamesPrompter`: one question naming the classes, worded by the model (Florence-2,
  PaliGemma, LLaVA; :class:`CookbookPrompter` for Qwen's ``cookbook`` style);
- :class:`ConversationPrompter`: the papers' conversations of a model family (Qwen run here;
  the served models wrap it).

Four styles (adapter option ``prompt_style``):

- ``paper`` (the default): the RF100-VL authors' prompts, as their published evaluation
  scripts send them (the code behind the paper's Tables 2 and 3), per model family;
- ``appendix``: the wording the paper itself prints in its Appendix A, where it differs from
  the scripts (:func:`detection_text`); the rest is the ``paper`` style's (see
  :data:`APPENDIX_FALLBACK`). Few-shot images shown to Qwen are kept within Appendix A's
  :data:`APPENDIX_QWEN_FEWSHOT_PIXELS`;
- ``detpo-appendix-d``: the newer Appendix wording DetPO's Appendix D reuses (Qwen's
  multi-class and few-shot questions end with the JSON format), otherwise ``appendix``;
- ``cookbook``: the prompt the Qwen adapters used before (the Qwen cookbook's wording with the
  answer format spelled out), kept so older rows can be reproduced.

Per family (``qwen2.5``, ``qwen3``, ``gemini``, ``generic``), ``paper`` style:

- a system prompt;
- the detection prompt with every class (multi-class, the default) or one prompt per class
  (``per_class=true``);
- in ``instructions`` mode, :data:`INSTRUCTIONS_SUFFIX` and the dataset's README as written
  (multi-class, as the paper and the scripts append it) or the class's own instructions line
  (single-class); a ``prompt_file`` gives every class's line instead of the README;
- in ``fewshot`` mode, few-shot examples one image per turn, each answered by its ground-truth
  boxes in the family's own format and coordinates; Gemini gets every few-shot image, Qwen
  three, as the authors ran them; in ``instructions+fewshot`` mode the instructions go with the
  first example's question (Qwen's wording there is the authors' shorter one,
  :data:`QWEN_COMBINED_SUFFIX`).

``generic`` is ours (the paper ran no other family): the Qwen wording with the coordinate
convention spelled out, since a model of unknown training cannot be assumed to know one.
``docs/prompts.md`` prints every prompt. UOUO questions are sent as the benchmark writes them.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from PIL import Image

from rf100vl_hf.errors import DataError

from pytest_rf100vl.adapters.base import DetectionTask, FewShotExample, GroundingQuery
from pytest_rf100vl.adapters.coordinates import BoxConvention, qwen25_resized

FAMILIES: tuple[str, ...] = ("qwen2.5", "qwen3", "gemini", "generic")
DETPO_STYLE = "detpo-appendix-d"
"""The newer wording of the paper's Appendix A, as DetPO's Appendix D reuses it."""
APPENDIX_STYLES: tuple[str, ...] = ("appendix", DETPO_STYLE)
PROMPT_STYLES: tuple[str, ...] = ("paper", *APPENDIX_STYLES, "cookbook")
QWEN_FAMILIES: tuple[str, ...] = ("qwen2.5", "qwen3")

APPENDIX_QWEN_SINGLE = "Locate every {name} in the image and output the coordinates in JSON format."
APPENDIX_GEMINI_SINGLE = "Detect all 2d bounding boxes of {name}."
APPENDIX_GEMINI_MULTI = "Detect the 2d bounding boxes of the following objects: {names}"
"""Appendix A's questions, word for word (the multi-class Gemini one has no final full stop)."""
APPENDIX_QWEN_FEWSHOT_PIXELS = (4 * 28 * 28, 12800 * 28 * 28)
"""Appendix A's bounds on the pixels of a few-shot image shown to Qwen (its ``min_pixels`` and
``max_pixels``): an image outside them is resized into them as Qwen2.5-VL's ``smart_resize``
would, its boxes with it; one inside is left to the model's processor."""
APPENDIX_GEMINI_MAX_OUTPUT_TOKENS = 8192
"""Appendix A's cap on Gemini's answer: the Gemini adapter's ``max_output_tokens`` default."""
DETPO_QWEN_MULTI = ('Locate all of the following objects: {names} in the image and output the coordinates in JSON '
                    'format like {{"bbox_2d": [x1,y1,x2,y2], "label":"class_name"}}.')
DETPO_QWEN_FEWSHOT = ('Locate all of the following objects: {names} (each of those is a separate class) in the image '
                      'and output the coordinates in JSON format like {{"bbox_2d": [x1,y1,x2,y2], '
                      '"label":"class_name"}}.')
"""The newer Appendix wording's Qwen multi-class and few-shot questions (``detpo-appendix-d``)."""
APPENDIX_FALLBACK = (
    "Appendix A words Qwen's single- and multi-class questions, Gemini's two, both system prompts "
    "and the instructions block; where its text is the scripts' (Qwen's multi-class question, the "
    "system prompts, the instructions block) both styles send the same. The few-shot turns' "
    "multi-class question, Qwen's shorter instructions block of instructions+fewshot, the number "
    "of few-shot images and the generic family (ours) are the paper style's, the authors' scripts "
    "being the only other source of the paper's prompts."
)
"""What the appendix styles take from the ``paper`` style, and why."""

QWEN_SYSTEM = "You are a helpful assistant capable of object detection."
GEMINI_SYSTEM = "Return bounding boxes as a JSON array with labels. Never return masks or code fencing."
SYSTEM_PROMPTS = {"qwen2.5": QWEN_SYSTEM, "qwen3": QWEN_SYSTEM, "gemini": GEMINI_SYSTEM, "generic": QWEN_SYSTEM}

INSTRUCTIONS_SUFFIX = "\n\nUse the following annotator instructions to improve detection accuracy:\n{instructions}\n"
QWEN_COMBINED_SUFFIX = "\n\nUse the following annotator instructions:\n{instructions}\n"
"""What the authors' Qwen script appends to the first few-shot question in instructions + images mode."""

ASK_SCORES = ' Give each object a "score" too: your confidence, from 0 to 1, that it is there and correctly boxed.'
"""Ours (adapter option ``scores=ask``): appended to the question about the image asked about,
so that the answer's boxes carry the model's own confidence (the few-shot turns are unchanged)."""
VQA_QUESTION = 'Does the region {box} of this image show a {name}? Answer "yes" or "no".'
"""Ours (adapter option ``scores=vqa``): the question that re-scores each box, its numbers as the
model wrote them."""

FEWSHOT_IMAGES = {"qwen2.5": 3, "qwen3": 3, "gemini": None, "generic": 3}
"""Few-shot images sent per family by default (``None``: all of the few-shot split)."""

IMAGE_FIRST = {"qwen2.5": True, "qwen3": True, "gemini": False, "generic": True}
"""Whether a user turn sends its image before its text (Qwen's scripts) or after (Gemini's)."""

GENERIC_FRAMES = {
    "qwen2.5": "pixels of the image",
    "qwen3": "integers from 0 to 1000, relative to the image width and height",
    "gemini": "integers from 0 to 1000, relative to the image height and width, as [ymin, xmin, ymax, xmax]",
    "normalized": "fractions from 0 to 1 of the image width and height",
    "pixels": "pixels of the image",
    "square": "fractions from 0 to 1 of the image padded to a square",
}


@dataclass(frozen=True)
class Example:
    """One few-shot turn: an annotated image, the question asked of it, the answer given."""

    image: Image.Image
    text: str
    answer: str


@dataclass(frozen=True)
class Conversation:
    """Everything a chat model is sent about one image besides that image: an optional system
    prompt, few-shot turns, and the final question (sent with the image)."""

    system: str | None
    examples: tuple[Example, ...]
    text: str
    image_first: bool = True

    def texts(self) -> tuple[str, ...]:
        """Every text sent, in order, with a content hash of each example image: what an answer
        depends on besides the image asked about (cache keys, the row's prompt hash)."""
        parts = [f"system:{self.system}" if self.system is not None else "system:none"]
        for example in self.examples:
            parts += [f"example-image:{image_hash(example.image)}", example.text, example.answer]
        return (*parts, self.text)


def image_hash(image: Image.Image) -> str:
    return hashlib.sha256(f"{image.mode}{image.size}".encode() + image.tobytes()).hexdigest()[:16]


def prompt_hash(texts: Iterable[str]) -> str:
    """A short hash of the exact prompts of a task, given as every text sent in order
    (:meth:`Conversation.texts` of each question): recorded in the row beside the style."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode() + b"\0")
    return f"sha256:{digest.hexdigest()[:16]}"


def prompt_file_for(path: Path, dataset: str) -> Path:
    """The prompt file of ``dataset`` (adapter option ``prompt_file``): ``path`` itself, or in a
    folder its ``{dataset}.json``, else the one JSON file named ``..._{dataset}.json`` (DetPO
    publishes ``all_refined_class_instructions_{dataset}.json`` per model)."""
    if not path.is_dir():
        return path
    found = [path / f"{dataset}.json"] if (path / f"{dataset}.json").is_file() else \
        sorted(path.glob(f"*_{dataset}.json"))
    if len(found) != 1:
        raise DataError(path, "prompt_file", f"holds {len(found)} files for dataset {dataset!r} "
                                             f"({dataset}.json or *_{dataset}.json): expected one")
    return found[0]


def read_prompt_file(path: Path, classes: Sequence[str]) -> dict[str, str]:
    """Class -> instructions, from a JSON object of class names and texts; a key that names no
    class, or a text that is not a string, is an error naming the file and the key."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(path, "prompt_file", f"is not a readable JSON file ({error})") from None
    if not isinstance(data, dict):
        raise DataError(path, "prompt_file", f"holds a JSON {type(data).__name__}, not an object of class -> text")
    for key, text in data.items():
        if key not in classes:
            raise DataError(path, key, f"is not a class of the dataset ({', '.join(classes)})")
        if not isinstance(text, str):
            raise DataError(path, key, f"is {type(text).__name__}, not a text")
    return data


def prompt_file_digest(path: Path) -> str:
    """What a ``prompt_file`` holds, as ``sha256:...`` of the file (of a folder: of its JSON
    files' names and bytes, in name order), for the row's identity."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not path.exists() or not files:
        raise DataError(path, "prompt_file", "no such file, or a folder without JSON files")
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
    return f"sha256:{digest.hexdigest()}"


def instructions_text(instructions: dict[str, str], names: Sequence[str]) -> str:
    """The annotator instructions of ``names``, one ``name: text`` line each (classes without any are left out)."""
    return "\n".join(f"{name}: {instructions[name]}" for name in names if instructions.get(name))


def appendix_text(family: str, names: Sequence[str], single: bool, style: str = "appendix") -> str | None:
    """Appendix A's question for ``names`` (one class when ``single``) in ``style``, or ``None``
    where its words are the scripts' (:data:`APPENDIX_FALLBACK`)."""
    if family == "gemini":
        return APPENDIX_GEMINI_SINGLE.format(name=names[0]) if single else \
            APPENDIX_GEMINI_MULTI.format(names=", ".join(names))
    if family in QWEN_FAMILIES and single:
        return APPENDIX_QWEN_SINGLE.format(name=names[0])
    if family in QWEN_FAMILIES and style == DETPO_STYLE:
        return DETPO_QWEN_MULTI.format(names=", ".join(names))
    return None


def detection_text(family: str, names: Sequence[str], convention: BoxConvention, single: bool,
                   style: str = "paper") -> str:
    """The detection question for ``names`` (one class when ``single``): Appendix A's in an
    appendix style where it has one of its own, else the authors' scripts'."""
    if style in APPENDIX_STYLES:
        worded = appendix_text(family, names, single, style)
        if worded is not None:
            return worded
    listed = ", ".join(names)
    if family == "gemini":
        return f"Detect the 2d bounding boxes of the following objects: {listed}."
    if family == "generic":
        return (f"Locate all of the following objects: {listed} in the image and output the coordinates in JSON "
                f'format like {{"bbox_2d":[x1,y1,x2,y2],"label":"class_name"}}, with coordinates in '
                f"{GENERIC_FRAMES[convention.name]}.")
    if single:
        return (f"Locate all of the following objects: {listed} in the image and output the coordinates in JSON "
                f'format like {{"bbox_2d":[x1,y1,x2,y2],"label":"class_name"}}.')
    return f"Locate all of the following objects: {listed} in the image and output the coordinates in JSON format."


def example_text(family: str, names: Sequence[str], convention: BoxConvention, single: bool,
                 style: str = "paper") -> str:
    """The question of a few-shot turn (Qwen's scripts add that each name is a separate class)."""
    if family in QWEN_FAMILIES and not single and style == DETPO_STYLE:
        return DETPO_QWEN_FEWSHOT.format(names=", ".join(names))
    if family in QWEN_FAMILIES and not single:
        return (f"Locate all of the following objects: {', '.join(names)} (each of those is a separate class) "
                "in the image and output the coordinates in JSON format.")
    return detection_text(family, names, convention, single, style)


def within_pixels(example: FewShotExample, bounds: tuple[int, int]) -> FewShotExample:
    """``example`` with its image inside ``bounds`` (min and max pixels): an image outside them
    resized as Qwen2.5-VL's ``smart_resize`` does (sides multiples of 28), its boxes scaled with
    it; an image inside them unchanged (the model's processor resizes it as it always does)."""
    width, height = example.image.size
    if bounds[0] <= width * height <= bounds[1]:
        return example
    new_width, new_height = qwen25_resized(width, height, *bounds)
    scale = np.array([new_width / width, new_height / height] * 2)
    boxes = np.asarray(example.boxes, dtype=np.float64).reshape(-1, 4) * scale
    return FewShotExample(example.image.resize((new_width, new_height), Image.Resampling.BICUBIC), boxes,
                          example.labels)


def example_answer(
    family: str, example: FewShotExample, classes: Sequence[str], keep: Sequence[int], convention: BoxConvention
) -> str:
    """The ground truth of a few-shot image as the family answers: Gemini's fenced
    ``box_2d`` list, or a ``bbox_2d`` list, in ``convention``'s numbers; only the classes ``keep``."""
    width, height = example.image.size
    key = "box_2d" if family == "gemini" else "bbox_2d"
    boxes = [
        {"label": classes[int(label)], key: convention.from_pixels(tuple(box), width, height)}
        for box, label in zip(np.asarray(example.boxes, dtype=np.float64).reshape(-1, 4).tolist(),
                              np.asarray(example.labels).reshape(-1).tolist())
        if int(label) in keep
    ]
    text = json.dumps(boxes, indent=2)
    return f"```json\n{text}\n```" if family == "gemini" else text


def detection_conversation(
    family: str,
    task: DetectionTask,
    names: Sequence[str],
    convention: BoxConvention,
    single: bool = False,
    fewshot_images: int | None = None,
    style: str = "paper",
) -> Conversation:
    """The ``paper`` or ``appendix`` style conversation asking for ``names`` (all the task's
    classes, or the one class of a ``single``-class prompt) in the task's prompt mode;
    ``fewshot_images`` overrides the family's number of examples."""
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r} (use one of {', '.join(FAMILIES)})")
    mode = task.prompt
    instructions = ""
    if "instructions" in mode:  # the multi-class prompt appends the file as written, as the paper and scripts do
        instructions = task.readme if task.readme and not single else instructions_text(task.instructions, names)
    text = detection_text(family, names, convention, single, style)
    examples: tuple[Example, ...] = ()
    if "fewshot" in mode:
        if not task.fewshot:
            raise ValueError(f"prompt mode {mode!r} on {task.dataset!r}: the task has no few-shot examples")
        keep = [task.classes.index(name) for name in names]
        limit = FEWSHOT_IMAGES[family] if fewshot_images is None else fewshot_images
        chosen = task.fewshot if limit is None else task.fewshot[:limit]
        if style in APPENDIX_STYLES and family in QWEN_FAMILIES:
            chosen = tuple(within_pixels(example, APPENDIX_QWEN_FEWSHOT_PIXELS) for example in chosen)
        question = example_text(family, names, convention, single, style)
        examples = tuple(
            Example(example.image, question, example_answer(family, example, task.classes, keep, convention))
            for example in chosen
        )
        if instructions and examples:
            suffix = QWEN_COMBINED_SUFFIX if family in QWEN_FAMILIES else INSTRUCTIONS_SUFFIX
            first = examples[0]
            examples = (Example(first.image, first.text + suffix.format(instructions=instructions), first.answer),
                        *examples[1:])
            instructions = ""
    if instructions:
        text += INSTRUCTIONS_SUFFIX.format(instructions=instructions)
    return Conversation(SYSTEM_PROMPTS[family], examples, text, IMAGE_FIRST[family])


def only_instructions(instructions: dict[str, str], names: Sequence[str]) -> dict[str, str]:
    """The non-empty instructions of ``names``, in their order."""
    return {name: instructions[name] for name in names if instructions.get(name)}


def instructions_block(instructions: dict[str, str]) -> str:
    """Annotator instructions appended to a prompt, one paragraph per class; empty when none."""
    if not instructions:
        return ""
    lines = [f"- {name}: {text}" for name, text in instructions.items()]
    return "\n\nThe annotators labelled these objects following these instructions:\n" + "\n".join(lines)


def cookbook_text(names: Sequence[str], instructions: dict[str, str]) -> str:
    """The ``cookbook`` style question (one user turn, no system prompt)."""
    categories = ", ".join(f'"{name}"' for name in names)
    return (
        f"Locate every instance that belongs to the following categories: {categories}. "
        "Report bbox coordinates in JSON format, as a list of "
        '{"bbox_2d": [x1, y1, x2, y2], "label": "<category>"}, using the category names exactly as given.'
        + instructions_block(only_instructions(instructions, names))
    )


def task_conversations(
    style: str,
    family: str,
    task: DetectionTask,
    per_class: bool,
    convention: BoxConvention,
    fewshot_images: int | None = None,
) -> list[tuple[Conversation, int | None]]:
    """Every conversation of a task with the class index it asks for (``None``: all classes,
    each box labelled by the model): one with every class, or one per class."""
    if style not in PROMPT_STYLES:
        raise ValueError(f"unknown prompt style {style!r} (use one of {', '.join(PROMPT_STYLES)})")
    if style == "cookbook" and "fewshot" in task.prompt:
        raise ValueError("prompt_style=cookbook has no few-shot prompt; use prompt_style=paper")
    groups: list[tuple[list[str], int | None]] = (
        [([name], index) for index, name in enumerate(task.classes)] if per_class else [(list(task.classes), None)]
    )
    if style == "cookbook":
        instructions = task.instructions if "instructions" in task.prompt else {}
        return [(Conversation(None, (), cookbook_text(names, instructions)), index) for names, index in groups]
    return [(detection_conversation(family, task, names, convention, per_class, fewshot_images, style), index)
            for names, index in groups]


class NamesPrompter(ABC):
    """Questions that name the classes: one with every class, or one per class (``per_class``),
    with the classes' annotator instructions in ``instructions`` mode; UOUO's questions as the
    benchmark writes them. A subclass words the detection question (:meth:`detection`).

    Example: PaliGemma's words ``"detect cat ; dog"``; with ``per_class`` a task of classes
    ``cat, dog`` is asked ``[("detect cat", 0), ("detect dog", 1)]``."""

    def __init__(self, per_class: bool):
        self.per_class = per_class

    @abstractmethod
    def detection(self, names: list[str], instructions: dict[str, str]) -> str:
        """The question asking for every object of these classes (with their instructions, if any)."""

    def task_prompts(self, task: DetectionTask) -> list[tuple[str, int | None]]:
        instructions = task.instructions if task.prompt == "instructions" else {}
        if self.per_class:
            return [(self.detection([name], only_instructions(instructions, [name])), index)
                    for index, name in enumerate(task.classes)]
        return [(self.detection(task.classes, only_instructions(instructions, task.classes)), None)]

    def box_prompt(self, query: GroundingQuery) -> str:
        return query.box_prompt

    def quadrant_prompt(self, query: GroundingQuery) -> str | None:
        return query.quadrant_prompt

    def question(self, text: str) -> str:
        return text


class CookbookPrompter(NamesPrompter):
    """The ``cookbook`` style (:func:`cookbook_text`) as one string per question, which has no
    few-shot prompt (``where`` names the adapter in the error)."""

    def __init__(self, per_class: bool, where: str):
        super().__init__(per_class)
        self.where = where

    def detection(self, names: list[str], instructions: dict[str, str]) -> str:
        return cookbook_text(names, instructions)

    def task_prompts(self, task: DetectionTask) -> list[tuple[str, int | None]]:
        if "fewshot" in task.prompt:
            raise ValueError(f"{self.where}: prompt_style=cookbook has no few-shot prompt "
                             f"(prompt mode {task.prompt!r}); use prompt_style=paper")
        return super().task_prompts(task)


class ConversationPrompter:
    """A task's conversations in ``style`` for a model ``family`` (:func:`task_conversations`),
    each few-shot example first made as the model is ``shown`` it (padded, downscaled); UOUO's
    questions as the benchmark writes them.

    Example: family ``qwen3``, ``fewshot`` mode, classes ``cat, dog``: one conversation of the
    system prompt, three example turns answered in 0..1000, then the question naming both."""

    def __init__(self, style: str, family: str, per_class: bool, convention: BoxConvention,
                 fewshot_images: int | None = None,
                 shown: Callable[[FewShotExample], FewShotExample] = lambda example: example,
                 ask_scores: bool = False):
        self.style = style
        self.family = family
        self.per_class = per_class
        self.convention = convention
        self.fewshot_images = fewshot_images
        self.shown = shown
        self.ask_scores = ask_scores

    def task_prompts(self, task: DetectionTask) -> list[tuple[Conversation, int | None]]:
        shown = replace(task, fewshot=tuple(self.shown(example) for example in task.fewshot))
        conversations = task_conversations(self.style, self.family, shown, self.per_class, self.convention,
                                           self.fewshot_images)
        if self.ask_scores:
            return [(replace(conversation, text=conversation.text + ASK_SCORES), index)
                    for conversation, index in conversations]
        return conversations

    def question(self, text: str) -> Conversation:
        return Conversation(None, (), text, IMAGE_FIRST[self.family])

    def box_prompt(self, query: GroundingQuery) -> str:
        return query.box_prompt

    def quadrant_prompt(self, query: GroundingQuery) -> str:
        return query.quadrant_prompt
