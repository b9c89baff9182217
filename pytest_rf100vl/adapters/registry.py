"""Adapters by name: a table of built-ins, plus the ``rf100vl.adapters`` entry-point group for
third-party models (a name that collides with a built-in is an error naming both).

Each built-in is one :class:`Listing`: where its class is (``"module:Class"``, imported on
first use) and what ``rf100vl-hf models`` lists of it, its default checkpoint, prompt modes
and tasks. The table is where those three are written: the class reads them from its entry
(:func:`listed`), so the listing needs no import of a model library and cannot disagree with
the class. A new built-in is one entry and one line in its class::

    # registry.py
    "owlv2": Listing("pytest_rf100vl.adapters.owl:Owlv2Adapter", "google/owlv2-base-patch16-ensemble",
                     prompt_modes=("names", "instructions", "fewshot")),

    # owl.py
    class Owlv2Adapter(OwlAdapter):
        name = "owlv2"
        default_checkpoint, prompt_modes, tasks = listed(name)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rf100vl_hf.constants import PROMPT_MODES
from rf100vl_hf.specs import ModelSpec
from rf100vl_hf.uouo.defaults import DEFAULT_CLIP_MODEL, DEFAULT_CLIP_PRETRAINED

from pytest_rf100vl.adapters.base import TINY, Adapter, Entry
from pytest_rf100vl.adapters.model import Model
from pytest_rf100vl.core.registry import Registry

ENTRY_POINT_GROUP = "rf100vl.adapters"

BOTH = ("rf100vl", "uouo")
"""The benchmarks an adapter answers unless its entry says otherwise."""


@dataclass(frozen=True)
class Listing:
    """A built-in adapter: its class (``"module:Class"``) and the class attributes of the same
    names (``None``: no default checkpoint, ``NAME:CHECKPOINT`` must name one); what
    ``rf100vl-hf models`` shows besides: the checkpoint words that build a random-weight model
    offline (``offline``: ``NAME:tiny``) and other checkpoints worth knowing by name
    (``examples``), so that a spelling such as ``yolo:yolo26n.pt`` is found there."""

    target: str
    default_checkpoint: str | None = None
    prompt_modes: tuple[str, ...] = ("names",)
    tasks: tuple[str, ...] = BOTH
    offline: tuple[str, ...] = (TINY,)
    examples: tuple[str, ...] = ()

    def spellings(self, name: str) -> tuple[str, ...]:
        """Every ``NAME:CHECKPOINT`` listed: the offline variants, then the examples."""
        return tuple(f"{name}:{checkpoint}" for checkpoint in (*self.offline, *self.examples))


OWL_MODES = ("names", "instructions", "fewshot")
NAMES_AND_INSTRUCTIONS = ("names", "instructions")

BUILTIN: dict[str, Listing] = {
    "owlv2": Listing("pytest_rf100vl.adapters.owl:Owlv2Adapter", "google/owlv2-base-patch16-ensemble",
                     prompt_modes=OWL_MODES),
    "owlvit": Listing("pytest_rf100vl.adapters.owl:OwlVitAdapter", "google/owlvit-base-patch32",
                      prompt_modes=OWL_MODES),
    "grounding-dino": Listing("pytest_rf100vl.adapters.grounding_dino:GroundingDinoAdapter",
                              "IDEA-Research/grounding-dino-tiny", prompt_modes=NAMES_AND_INSTRUCTIONS),
    "rt-detrv2": Listing("pytest_rf100vl.adapters.rt_detr:RTDetrV2Adapter", "PekingU/rtdetr_v2_r18vd",
                         tasks=("rf100vl",)),
    "d-fine": Listing("pytest_rf100vl.adapters.d_fine:DFineAdapter", "ustc-community/dfine-xlarge-coco",
                      tasks=("rf100vl",)),
    "deimv2": Listing("pytest_rf100vl.adapters.deimv2:Deimv2Adapter",
                      "harshaljanjani/DEIMv2_HGNetv2_N_COCO_Transformers", tasks=("rf100vl",)),
    "lw-detr": Listing("pytest_rf100vl.adapters.lw_detr:LwDetrAdapter", "AnnaZhang/lwdetr_small_60e_coco",
                       tasks=("rf100vl",)),
    "rf-detr": Listing("pytest_rf100vl.adapters.rf_detr:RfDetrAdapter", "Roboflow/rf-detr-base", tasks=("rf100vl",)),
    "mm-grounding-dino": Listing("pytest_rf100vl.adapters.grounding_dino:MMGroundingDinoAdapter",
                                 "openmmlab-community/mm_grounding_dino_tiny_o365v1_goldg_v3det",
                                 prompt_modes=NAMES_AND_INSTRUCTIONS),
    "llmdet": Listing("pytest_rf100vl.adapters.grounding_dino:LlmDetAdapter", "iSEE-Laboratory/llmdet_tiny",
                      prompt_modes=NAMES_AND_INSTRUCTIONS,
                      examples=("iSEE-Laboratory/llmdet_base", "iSEE-Laboratory/llmdet_large")),
    "omdet-turbo": Listing("pytest_rf100vl.adapters.omdet:OmDetTurboAdapter", "omlab/omdet-turbo-swin-tiny-hf"),
    "sam3": Listing("pytest_rf100vl.adapters.sam3:Sam3Adapter", "facebook/sam3", prompt_modes=("names", "fewshot")),
    "yolo": Listing("pytest_rf100vl.adapters.yolo:YoloAdapter", "yolov8n.pt", tasks=("rf100vl",),
                    offline=(TINY, "tiny26"), examples=("yolo11n.pt", "yolo26n.pt")),
    "yoloe": Listing("pytest_rf100vl.adapters.yolo_prompted:YoloEAdapter", "yoloe-11s-seg.pt",
                     prompt_modes=("names", "fewshot"), tasks=("rf100vl",),
                     examples=("yoloe-11l-seg.pt", "yoloe-v8l-seg.pt", "yoloe-26s-seg.pt")),
    "yolo-world": Listing("pytest_rf100vl.adapters.yolo_prompted:YoloWorldAdapter", "yolov8s-worldv2.pt",
                          tasks=("rf100vl",), examples=("yolov8l-worldv2.pt",)),
    "rfdetr": Listing("pytest_rf100vl.adapters.rfdetr_extra:RfDetrPackageAdapter", "nano", tasks=("rf100vl",)),
    "florence-2": Listing("pytest_rf100vl.adapters.florence2:Florence2Adapter", "florence-community/Florence-2-base"),
    "qwen2.5-vl": Listing("pytest_rf100vl.adapters.qwen_vl:Qwen25VLAdapter", "Qwen/Qwen2.5-VL-3B-Instruct",
                          prompt_modes=PROMPT_MODES),
    "qwen3-vl": Listing("pytest_rf100vl.adapters.qwen_vl:Qwen3VLAdapter", "Qwen/Qwen3-VL-2B-Instruct",
                        prompt_modes=PROMPT_MODES),
    "paligemma": Listing("pytest_rf100vl.adapters.paligemma:PaliGemmaAdapter", "google/paligemma2-3b-mix-448"),
    "llava": Listing("pytest_rf100vl.adapters.llava:LlavaAdapter", "llava-hf/llava-1.5-7b-hf",
                     prompt_modes=NAMES_AND_INSTRUCTIONS),
    "llava-next": Listing("pytest_rf100vl.adapters.llava:LlavaNextAdapter", "llava-hf/llava-v1.6-vicuna-7b-hf",
                          prompt_modes=NAMES_AND_INSTRUCTIONS),
    "llava-onevision": Listing("pytest_rf100vl.adapters.llava:LlavaOnevisionAdapter",
                               "llava-hf/llava-onevision-qwen2-7b-ov-hf", prompt_modes=NAMES_AND_INSTRUCTIONS),
    "openai": Listing("pytest_rf100vl.adapters.openai_chat:OpenAIChatAdapter", prompt_modes=PROMPT_MODES, offline=()),
    "gemini": Listing("pytest_rf100vl.adapters.gemini:GeminiAdapter", prompt_modes=PROMPT_MODES, offline=()),
    "clip-quadrant": Listing("pytest_rf100vl.adapters.clip_quadrant:ClipQuadrantAdapter",
                             f"{DEFAULT_CLIP_MODEL}@{DEFAULT_CLIP_PRETRAINED}", tasks=("uouo",)),
    "oracle": Listing("pytest_rf100vl.adapters.oracle:OracleAdapter", prompt_modes=PROMPT_MODES, offline=()),
    "predictions": Listing("pytest_rf100vl.adapters.replay:ReplayAdapter", prompt_modes=PROMPT_MODES,
                           tasks=("rf100vl",), offline=()),
}

ADAPTERS: Registry[Adapter] = Registry("model adapter", ENTRY_POINT_GROUP, Adapter,
                                       {name: listing.target for name, listing in BUILTIN.items()})


def listed(name: str) -> tuple[str | None, tuple[str, ...], tuple[str, ...]]:
    """The ``default_checkpoint``, ``prompt_modes`` and ``tasks`` of built-in ``name``, as its
    class sets them: ``default_checkpoint, prompt_modes, tasks = listed(name)``."""
    listing = BUILTIN[name]
    return listing.default_checkpoint, listing.prompt_modes, listing.tasks


def available() -> dict[str, str]:
    """Name -> ``module:Class`` of every adapter, built-in and installed."""
    return ADAPTERS.table()


def adapter_class(name: str) -> type[Adapter]:
    """The class registered under ``name``, imported on first use."""
    return ADAPTERS.load(name)


def entry(name: str) -> Entry:
    """The registry entry of ``name``: what the session knows of the model before building it."""
    return adapter_class(name).entry()


def load(spec: ModelSpec, device: str, dtype: str, device_map: str | None = None, attention: str | None = None,
         compile: bool = False) -> Model:
    """The model ``spec`` names, built as :func:`build` builds it, as the session runs it."""
    cls = adapter_class(spec.name)
    built = build(cls, spec.checkpoint, device, dtype, device_map, attention, compile, **spec.option_values)
    return Model(cls.entry(), built, device, dtype, device_map)


def create(spec: ModelSpec | str, device: str = "cpu", dtype: str = "float32", **options: Any) -> Adapter:
    """Build the adapter a spec names, e.g. ``owlv2``, ``owlv2:google/owlv2-large-patch14-ensemble``
    (a string is parsed here, the Python API's edge), with the spec's adapter options and then
    ``options`` as :func:`build` takes them."""
    model = ModelSpec.parse(spec) if isinstance(spec, str) else spec
    return build(adapter_class(model.name), model.checkpoint, device, dtype, **{**model.option_values, **options})


def build(
    cls: type[Adapter],
    checkpoint: str | None,
    device: str = "cpu",
    dtype: str = "float32",
    device_map: str | None = None,
    attention: str | None = None,
    compile: bool = False,
    **options: Any,
) -> Adapter:
    """An adapter of a class already resolved (the session resolves each model's once). For a
    transformers model: ``device_map="auto"`` spreads it over every visible device,
    ``attention`` names its attention implementation (``None``: transformers' choice, SDPA
    where the model has it) and ``compile`` runs its forward through ``torch.compile``; other
    adapters refuse a device map and run as they are (their rows record no attention and no
    compilation); other ``options`` are the adapter's own."""
    entry = cls.entry()
    if not entry.transformers_model:
        if device_map is not None:
            raise ValueError(f"adapter {entry.name!r} runs no transformers model, so it cannot take a device map")
        return cls(checkpoint, device=device, dtype=dtype, **options)
    return cls(checkpoint, device=device, dtype=dtype, device_map=device_map, attention=attention, compile=compile,
               **options)
