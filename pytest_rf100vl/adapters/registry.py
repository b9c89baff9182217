"""Adapters by name: a table of built-ins with lazy ``"module:Class"`` entries, plus the
``rf100vl.adapters`` entry-point group for third-party models (a name that collides with a
built-in is an error naming both)."""

from __future__ import annotations

from typing import Any

from pytest_rf100vl.adapters.base import Adapter
from pytest_rf100vl.registry import Registry

ENTRY_POINT_GROUP = "rf100vl.adapters"

BUILTIN: dict[str, str] = {
    "owlv2": "pytest_rf100vl.adapters.owl:Owlv2Adapter",
    "owlvit": "pytest_rf100vl.adapters.owl:OwlVitAdapter",
    "grounding-dino": "pytest_rf100vl.adapters.grounding_dino:GroundingDinoAdapter",
    "rt-detrv2": "pytest_rf100vl.adapters.rt_detr:RTDetrV2Adapter",
    "mm-grounding-dino": "pytest_rf100vl.adapters.grounding_dino:MMGroundingDinoAdapter",
    "omdet-turbo": "pytest_rf100vl.adapters.omdet:OmDetTurboAdapter",
    "yolo": "pytest_rf100vl.adapters.yolo:YoloAdapter",
    "rfdetr": "pytest_rf100vl.adapters.rfdetr_extra:RfDetrAdapter",
    "florence-2": "pytest_rf100vl.adapters.florence2:Florence2Adapter",
    "qwen2.5-vl": "pytest_rf100vl.adapters.qwen_vl:Qwen25VLAdapter",
    "qwen3-vl": "pytest_rf100vl.adapters.qwen_vl:Qwen3VLAdapter",
    "paligemma": "pytest_rf100vl.adapters.paligemma:PaliGemmaAdapter",
    "llava": "pytest_rf100vl.adapters.llava:LlavaAdapter",
    "llava-next": "pytest_rf100vl.adapters.llava:LlavaNextAdapter",
    "llava-onevision": "pytest_rf100vl.adapters.llava:LlavaOnevisionAdapter",
    "openai": "pytest_rf100vl.adapters.openai_chat:OpenAIChatAdapter",
    "gemini": "pytest_rf100vl.adapters.gemini:GeminiAdapter",
    "clip-quadrant": "pytest_rf100vl.adapters.clip_quadrant:ClipQuadrantAdapter",
    "oracle": "pytest_rf100vl.adapters.oracle:OracleAdapter",
    "predictions": "pytest_rf100vl.adapters.replay:ReplayAdapter",
}

ADAPTERS: Registry[Adapter] = Registry("model adapter", ENTRY_POINT_GROUP, Adapter, BUILTIN)


def available() -> dict[str, str]:
    """Name -> ``module:Class`` of every adapter, built-in and installed."""
    return ADAPTERS.table()


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``NAME[:CHECKPOINT_OR_PATH]``; only the first colon separates, so paths and hub ids pass."""
    name, _, checkpoint = spec.partition(":")
    return name.strip(), (checkpoint.strip() or None)


def adapter_class(name: str) -> type[Adapter]:
    """The class registered under ``name``, imported on first use."""
    return ADAPTERS.load(name)


def create(
    spec: str,
    device: str = "cpu",
    dtype: str = "float32",
    device_map: str | None = None,
    attention: str | None = None,
    compile: bool = False,
    **options: Any,
) -> Adapter:
    """Build the adapter a spec names, e.g. ``owlv2``, ``owlv2:google/owlv2-large-patch14-ensemble``.
    For a transformers model: ``device_map="auto"`` spreads it over every visible device,
    ``attention`` names its attention implementation (``None``: transformers' choice, SDPA
    where the model has it) and ``compile`` runs its forward through ``torch.compile``; other
    adapters refuse a device map and run as they are (their rows record no attention and no
    compilation)."""
    name, checkpoint = parse_spec(spec)
    cls = adapter_class(name)
    if not cls.transformers_model:
        if device_map is not None:
            raise ValueError(f"adapter {name!r} runs no transformers model, so it cannot take a device map")
        return cls(checkpoint, device=device, dtype=dtype, **options)
    return cls(checkpoint, device=device, dtype=dtype, device_map=device_map, attention=attention, compile=compile,
               **options)
