"""What every adapter of a transformers model run here shares, and the transformers detectors.

:class:`TransformersModel` is a checkpoint loaded for an adapter: device and dtype resolution,
loading with ``from_pretrained``, the model's revision, and the tiny random models that let a
fresh machine check the whole path offline. The detectors (:class:`HFDetector`) and the chat
models run here (:class:`~pytest_rf100vl.adapters.vlm.LocalTransport`) each hold one.

A checkpoint is a Hub id, a local folder, or :data:`~pytest_rf100vl.adapters.base.TINY`;
the tiny model is built once into :func:`~pytest_rf100vl.adapters.base.tiny_model_dir`
(under a file lock, renamed into place when complete) and then loaded through the very
same ``from_pretrained(path)`` route as a real checkpoint.

:class:`HFDetector` runs its model as the three stages of the
:class:`~pytest_rf100vl.adapters.base.Pipelined` protocol, so that the runner can overlap
consecutive batches and the GPU never waits for the host (``docs/scale.md``, "Feeding the
GPU"). A subclass implements the three, each on a whole batch:

- :meth:`HFDetector.inputs`: the model's inputs on its device, the processor's work done there
  (pixels copied once per image size, pinned and asynchronous on CUDA);
- :meth:`HFDetector.outputs`: the forward, queued on the device: nothing in it waits for the
  GPU (no ``.item()``, ``.cpu()`` or boolean mask);
- :meth:`HFDetector.detections`: thresholds, NMS and boxes in pixels, read back to the host in
  one copy (:func:`read_back`).

Example: OWLv2 (``owl.py``) returns the preprocessed pixels, then the class logits and boxes of
every patch, then per image the boxes above its threshold after class-wise NMS.

``predict`` runs the three in a row, so a batch gets the same detections whether or not the
runner overlaps it with others. ``compile=True`` runs :meth:`~HFDetector.outputs` through
``torch.compile``.
"""

from __future__ import annotations

import gc
import math
import os
import re
import shutil
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
import xxhash
from filelock import FileLock
from PIL import Image

from rf100vl_hf.devices import resolve_device

from pytest_rf100vl.adapters.base import TINY, Adapter, Detections, GroundingQuery, ImageItem, tiny_model_dir
from pytest_rf100vl.adapters.keyed import prompt_key

if TYPE_CHECKING:
    from rf100vl_hf.training.store import TrainedStore

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

MAX_ASPECT = 16.0
"""Images more elongated than this are padded (bottom or right) before preprocessing: a
processor that resizes the short side to a few pixels would otherwise round it to zero."""

TINY_RECIPE = 2
"""Bumped whenever a tiny model's recipe changes, so a cache built by an older version is not reused."""

_MARKUP = re.compile(r"[*_`#>]+|^\s*[-+]\s+", re.MULTILINE)
_COMMIT = re.compile(r"snapshots/([0-9a-f]{40})(?:/|$)")


def torch_device(device: str) -> torch.device:
    """The torch device of a concrete device name, checked by :func:`rf100vl_hf.devices.resolve_device`."""

    return torch.device(resolve_device(device))


def resolve_dtype(dtype: str) -> torch.dtype:
    """The torch dtype of a name in :data:`DTYPES`."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r} (use one of {', '.join(DTYPES)})")
    return DTYPES[dtype]


def content_hash(folder: str | Path) -> str:
    """A hash of every file in a local checkpoint folder (names and bytes), for results
    that must say exactly which weights ran when there is no Hub commit to cite."""
    folder = Path(folder)
    hasher = xxhash.xxh3_128()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        hasher.update(path.relative_to(folder).as_posix().encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 24), b""):
                hasher.update(block)
    return f"xxh3:{hasher.hexdigest()}"


def checkpoint_revision(source: str | Path) -> str | None:
    """The Hub commit a checkpoint was loaded from, or a content hash for a local folder;
    ``None`` when neither can be known (a Hub id not in the local cache)."""
    if Path(source).is_dir():
        return content_hash(source)
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(str(source), "config.json")
    match = _COMMIT.search(Path(cached).as_posix()) if isinstance(cached, str) else None
    return match.group(1) if match else None


def build_once(folder: Path, build: Callable[[Path], None]) -> Path:
    """Run ``build(tmp)`` once per ``folder``: under a file lock, into a temporary sibling
    renamed into place when complete, so concurrent test workers never see half a model.
    Torch's random generator is seeded inside (and restored after), so a build is
    reproducible and leaves the caller's random state alone."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        if folder.is_dir():
            return folder
        tmp = folder.parent / f".{folder.name}.building-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                build(tmp)
            os.rename(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def tiny_clip_tokenizer(max_length: int) -> Any:
    """A CLIP tokenizer from an in-memory byte-level vocabulary (no merges, no download).

    CLIP-style text models pool at ``input_ids.argmax()`` and OWL treats a query whose
    first id is 0 as padding, so ``<|startoftext|>`` and ``<|endoftext|>`` take the two
    largest ids."""
    from tokenizers import pre_tokenizers
    from transformers import CLIPTokenizer

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokens = alphabet + [c + "</w>" for c in alphabet] + ["<|startoftext|>", "<|endoftext|>"]
    return CLIPTokenizer(vocab={t: i for i, t in enumerate(tokens)}, merges=[], model_max_length=max_length)


def plain_text(markdown: str) -> str:
    """Annotator instructions without markdown emphasis, headings or list bullets, on one line."""
    return " ".join(_MARKUP.sub("", markdown).split())


def pad_elongated(image: Image.Image, max_aspect: float = MAX_ASPECT) -> Image.Image:
    """Pad an image at the bottom or right (black) so neither side is under ``1/max_aspect``
    of the other. Pixel coordinates are unchanged, so boxes need no correction; the runner
    clips them to the original image."""
    width, height = image.size
    new_w = max(width, math.ceil(height / max_aspect), 1)
    new_h = max(height, math.ceil(width / max_aspect), 1)
    if (new_w, new_h) == (width, height):
        return image
    canvas = Image.new("RGB", (new_w, new_h))
    canvas.paste(image, (0, 0))
    return canvas


def image_tensors(images: list[Image.Image], device: torch.device) -> list[torch.Tensor]:
    """Each RGB image as a ``(3, H, W)`` uint8 tensor on ``device``, so that the image
    processor's resizing and normalising run there rather than on the CPU. Images of one size
    travel together: one host array and one copy (pinned and asynchronous on CUDA) per size,
    not one per image."""
    tensors: list[torch.Tensor] = [torch.empty(0)] * len(images)
    by_size: dict[tuple[int, int], list[int]] = {}
    for index, image in enumerate(images):
        by_size.setdefault(image.size, []).append(index)
    for indices in by_size.values():
        pixels = torch.from_numpy(np.stack([np.asarray(_rgb(images[i])) for i in indices]))  # (n, H, W, 3)
        if device.type == "cuda":
            pixels = pixels.pin_memory().to(device, non_blocking=True)
        for index, tensor in zip(indices, pixels.to(device).permute(0, 3, 1, 2)):
            tensors[index] = tensor
    return tensors


def _rgb(image: Image.Image) -> Image.Image:
    return image if image.mode == "RGB" else image.convert("RGB")


def read_back(parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> list[Detections]:
    """Each image's ``(boxes, scores, labels)`` tensors (any device, any dtype) as
    :class:`Detections`, read back to the host in one copy: the batch waits for the device
    once, not three times per image. Labels travel as float32, exact for any class index."""
    if not parts:
        return []
    packed = torch.cat([
        torch.cat([boxes.float().reshape(-1, 4), scores.float().reshape(-1, 1), labels.float().reshape(-1, 1)], dim=1)
        for boxes, scores, labels in parts
    ])
    host = packed.cpu().numpy().astype(np.float64)
    ends = np.cumsum([len(scores) for _, scores, _ in parts])[:-1]
    return [Detections(chunk[:, :4], chunk[:, 4], chunk[:, 5].astype(np.int64)) for chunk in np.split(host, ends)]


def tiny_folder(name: str) -> Path:
    """Where the tiny model of adapter ``name`` is built (the recipe version is part of the name)."""
    return tiny_model_dir(f"{name}-r{TINY_RECIPE}")


def stored_revision(name: str, checkpoint: str | None) -> str | None:
    """The revision a :class:`TransformersModel` of adapter ``name`` will read, without loading:
    the Hub commit in the local cache, a local folder's content hash, or the tiny model's once
    it is built."""
    if checkpoint is None:
        return None
    if checkpoint == TINY:
        return content_hash(tiny_folder(name)) if tiny_folder(name).is_dir() else None
    return checkpoint_revision(checkpoint)


def transformers_class(adapter: str, name: str, since: str) -> Any:
    """``transformers.<name>``; when the installed transformers has no such class, an
    ``ImportError`` naming the version that added it (so an adapter of a recent model fails to
    build with what to install, not with an ``AttributeError`` from inside the library)."""
    import transformers

    try:
        return getattr(transformers, name)
    except AttributeError:
        installed = getattr(transformers, "__version__", "of unknown version")
        raise ImportError(f"adapter {adapter!r} needs transformers.{name}, which transformers {installed} lacks: "
                          f"it needs transformers {since} or later (pip install -U 'transformers>={since}')") from None


def attention_implementation(model: Any) -> str | None:
    """The attention implementation a loaded transformers model runs (``sdpa``, ``eager``...),
    as transformers' attention documentation reads it, from the model's config."""
    value = getattr(model.config, "_attn_implementation", None)
    return value if isinstance(value, str) else None


class TransformersModel:
    """A transformers checkpoint loaded for an adapter: where it comes from (a Hub id, a folder,
    or the adapter's tiny random model, built once), its processor, and its model on its
    device(s) in eval mode, with the attention implementation asked for.

    Example: ``TransformersModel("owlv2", Owlv2ForObjectDetection, Owlv2Adapter.build_tiny, "tiny",
    "cpu", "float32")`` builds the tiny OWLv2 once under the cache home, loads its processor and
    model from that folder, and its :attr:`revision` is the folder's content hash."""

    def __init__(self, name: str, model_class: Any, build_tiny: Callable[[Path], None], checkpoint: str | None,
                 device: str, dtype: str, device_map: str | None = None, attention: str | None = None):
        self.name = name
        self.model_class = model_class
        self.device_map = device_map
        self.attention = attention
        self.torch_device = torch_device(device)
        self.torch_dtype = resolve_dtype(dtype)
        self.source: Any = str(build_once(tiny_folder(name), build_tiny)) if checkpoint == TINY else checkpoint
        self._revision: str | None = None
        from transformers import AutoProcessor

        self.processor = AutoProcessor.from_pretrained(self.source)
        self.model: Any = self.load()

    def load(self, **overrides: Any) -> Any:
        """The checkpoint's model on its device(s), in eval mode, with the requested attention
        implementation; ``overrides`` go to ``from_pretrained`` (a new classification head, say)."""
        arguments: dict[str, Any] = {"dtype": self.torch_dtype, **overrides}
        if self.attention is not None:
            arguments["attn_implementation"] = self.attention
        if self.device_map is not None:  # accelerate places the layers; inputs go where the first ones are
            arguments["device_map"] = self.device_map
        try:
            model = self.model_class.from_pretrained(self.source, **arguments)
        except (ValueError, ImportError) as exc:
            if self.attention is None:
                raise
            raise ValueError(f"adapter {self.name!r}: {self.model_class.__name__} could not be loaded with "
                             f"attention {self.attention!r}: {exc}") from None
        if self.device_map is None:
            model.to(self.torch_device)
        else:
            self.torch_device = model.device
        return model.eval()

    def to_model(self, tensor: torch.Tensor) -> torch.Tensor:
        """An input tensor on the model's device; floating point ones in the model's dtype."""
        tensor = tensor.to(self.torch_device)
        return tensor.to(self.torch_dtype) if tensor.is_floating_point() else tensor

    @property
    def revision(self) -> str | None:
        if self._revision is None:
            self._revision = checkpoint_revision(self.source)
        return self._revision

    def describe(self) -> dict[str, Any]:
        """Where the model runs: its device map, its attention implementation, and under a device
        map the devices it was spread over (``device``)."""
        described: dict[str, Any] = {"device_map": self.device_map, "attention": attention_implementation(self.model)}
        if self.device_map is not None:
            placed = getattr(self.model, "hf_device_map", None) or {"": self.model.device}  # one device: no map
            described["device"] = ", ".join(sorted({str(d) for d in placed.values()}))
        return described

    def close(self) -> None:
        """Release the model's memory."""
        self.model = None
        gc.collect()
        if self.torch_device.type == "cuda":
            torch.cuda.empty_cache()


@dataclass(frozen=True)
class Staged:
    """A batch between two stages: its images as the model sees them (padded if elongated,
    whose sizes the boxes are scaled to) and what the last stage made of them."""

    images: list[Image.Image]
    value: Any


class HFDetector(Adapter):
    """A ``transformers`` detection model and its processor, run as :meth:`inputs`,
    :meth:`outputs`, :meth:`detections` (see the module docstring).

    Subclasses set ``model_class``, the options they accept with their defaults
    (``option_defaults``; an unknown option is an error, not silently ignored), how to build
    their tiny model (:meth:`build_tiny`), the three stages, and what they send besides the
    image (:meth:`prompt_texts`). The loaded checkpoint is :attr:`weights`; :attr:`model`,
    :attr:`processor` and :attr:`torch_device` are its.
    """

    model_class: ClassVar[Any]
    option_defaults: ClassVar[dict[str, Any]] = {}
    transformers_model = True

    def __init__(
        self,
        checkpoint: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        device_map: str | None = None,
        attention: str | None = None,
        compile: bool = False,
        **options: Any,
    ):
        super().__init__(checkpoint, device, dtype, **options)
        self.device_map = device_map
        self.attention = attention
        self.compile = compile
        self.weights = TransformersModel(self.name, self.model_class, self.build_tiny, self.checkpoint, device, dtype,
                                         device_map, attention)
        self.forward: Callable[[Any], Any] = torch.compile(self.outputs) if compile else self.outputs

    @property
    def model(self) -> Any:
        return self.weights.model

    @model.setter
    def model(self, model: Any) -> None:
        self.weights.model = model

    @property
    def processor(self) -> Any:
        return self.weights.processor

    @processor.setter
    def processor(self, processor: Any) -> None:
        self.weights.processor = processor

    @property
    def torch_device(self) -> torch.device:
        return self.weights.torch_device

    @property
    def torch_dtype(self) -> torch.dtype:
        return self.weights.torch_dtype

    @property
    def source(self) -> Any:
        """Where the weights were loaded from: the checkpoint, or the tiny model's folder."""
        return self.weights.source

    def restore_pretrained(self) -> None:
        """Load the checkpoint's own weights (a fit starts from them, whatever ran before)."""
        self.model = self.load_model()
        self.trained_weights = None

    def load_model(self, **overrides: Any) -> Any:
        """The checkpoint's model (:meth:`TransformersModel.load`)."""
        return self.weights.load(**overrides)

    def load_trained(self, store: "TrainedStore") -> None:
        from rf100vl_hf.training.loop import load_weights

        load_weights(self.model, store, str(self.torch_device))
        record = store.record()
        self.trained_weights = record.weights_sha256 if record else None

    @classmethod
    @abstractmethod
    def build_tiny(cls, folder: Path) -> None:
        """Save a tiny random model of the real architecture, with its processor, to ``folder``."""

    @abstractmethod
    def prompt_texts(self, query: GroundingQuery | None) -> tuple[str, ...]:
        """What the model is sent besides the image: for the current task (``query`` is
        ``None``) or for a UOUO question. Read by :meth:`answer_key_parts`."""

    @abstractmethod
    def inputs(self, images: list[Image.Image]) -> Any:
        """The model's inputs for these images (already padded if elongated), on its device."""

    @abstractmethod
    def outputs(self, inputs: Any) -> Any:
        """The model's raw outputs for :meth:`inputs`, queued on the device."""

    @abstractmethod
    def detections(self, outputs: Any, images: list[Image.Image]) -> list[Detections]:
        """Detections in pixels of each image, from :meth:`outputs`."""

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...]:
        return prompt_key(self, query, self.prompt_texts)

    @property
    def revision(self) -> str | None:
        return self.weights.revision

    @classmethod
    def tiny_dir(cls) -> Path:
        """Where this adapter's tiny model is built."""
        return tiny_folder(cls.name)

    @classmethod
    def stored_revision(cls, checkpoint: str | None) -> str | None:
        return stored_revision(cls.name, checkpoint)

    @property
    def is_smoke(self) -> bool:
        return self.checkpoint == TINY

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), **self.weights.describe(), "compiled": self.compile}

    def to_model(self, tensor: torch.Tensor) -> torch.Tensor:
        """An input tensor on the model's device; floating point ones in the model's dtype."""
        return self.weights.to_model(tensor)

    def pixel_inputs(self, images: list[Image.Image]) -> dict[str, torch.Tensor]:
        """The image processor's outputs (``pixel_values``, and ``pixel_mask`` where it pads
        a batch) computed on the model's device: transformers' torchvision processors take
        a ``device``, and the same operations give the same pixels there."""
        return self.processor.image_processor(
            images=image_tensors(images, self.torch_device), return_tensors="pt", device=self.torch_device
        )

    def detect(self, images: list[Image.Image]) -> list[Detections]:
        """Detections for RGB images (already padded if elongated), in their pixels."""
        return self.detections(self.forward(self.inputs(images)), images)

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        if self.task is None:
            raise RuntimeError(f"adapter {self.name!r}: set_task must be called before predict")
        if not batch:
            return []
        if not self.task.classes:
            return [Detections.empty() for _ in batch]
        with torch.inference_mode():
            return self.detect([pad_elongated(item.image) for item in batch])

    def prepare(self, batch: list[ImageItem]) -> Staged:
        if self.task is None:
            raise RuntimeError(f"adapter {self.name!r}: set_task must be called before prepare")
        images = [pad_elongated(item.image) for item in batch]
        with torch.inference_mode():
            return Staged(images, self.inputs(images))

    def launch(self, prepared: Staged) -> Staged:
        with torch.inference_mode():
            return Staged(prepared.images, self.forward(prepared.value))

    def collect(self, launched: Staged) -> list[Detections]:
        with torch.inference_mode():
            return self.detections(launched.value, launched.images)

    def close(self) -> None:
        self.weights.close()
