"""Model adapters: one contract (:mod:`.base`), a registry of names (:mod:`.registry`),
one module per model family. Importing this package loads no model code; a family's
module is imported when an adapter of it is created."""

from rf100vl_hf.constants import PROMPT_MODES

from pytest_rf100vl.adapters.base import (
    TINY,
    Adapter,
    Detections,
    DetectionTask,
    FewShotExample,
    GroundingAnswer,
    GroundingQuery,
    ImageItem,
    tiny_model_dir,
)
from pytest_rf100vl.adapters.registry import ENTRY_POINT_GROUP, adapter_class, available, create

__all__ = [
    "ENTRY_POINT_GROUP",
    "PROMPT_MODES",
    "TINY",
    "Adapter",
    "DetectionTask",
    "Detections",
    "FewShotExample",
    "GroundingAnswer",
    "GroundingQuery",
    "ImageItem",
    "adapter_class",
    "available",
    "create",
    "tiny_model_dir",
]
