"""An RF100-VL dataset as the split a pair runs on: the evaluated split's images, the task a
detector is told (classes, prompt, few-shot examples, ground truth for the oracle only), what
identifies it, and the dataset's other splits for fine-tuning."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rf100vl_hf.metadata import read_metadata
from rf100vl_hf.protocols import PAPER, PROTOCOLS, Protocol
from rf100vl_hf.results.schema import DetectionData
from rf100vl_hf.training.samples import Samples, unlabelled

from pytest_rf100vl.adapters.base import DetectionTask, TrainingData
from pytest_rf100vl.kinds.base import Split
from pytest_rf100vl.kinds.rf100vl.identity import detection_identity, split_parameters
from pytest_rf100vl.kinds.rf100vl.tasks import detection_task, ground_truth, prompted_classes

if TYPE_CHECKING:
    import datasets

    from pytest_rf100vl.core.training_plan import TrainingPlan


@dataclass
class DetectionSplit(Split):
    """A split of an RF100-VL dataset, scored under ``protocol``; ``splits`` holds every split of
    the dataset (opened when asked for: ``rf100vl_hf.rf100vl.builder.Splits``)."""

    splits: "Mapping[str, datasets.Dataset]" = field(default=None)  # type: ignore[assignment]
    protocol: Protocol = PROTOCOLS[PAPER]

    @classmethod
    def of(cls, splits: "Mapping[str, datasets.Dataset]", name: str, prompt: str,
           protocol: Protocol = PROTOCOLS[PAPER]) -> "DetectionSplit":
        """The split ``name`` of a loaded dataset, for pairs prompted in mode ``prompt``."""
        if name not in splits:
            metadata = read_metadata(next(iter(splits.values())))
            raise ValueError(f"dataset {metadata['name']!r} has no split {name!r} (it has: {', '.join(splits)})")
        images = splits[name]
        metadata = read_metadata(images)
        task = detection_task(images, metadata, name, prompt, splits.__getitem__)
        return cls(
            images=images, task=task, name=name, metadata=metadata, splits=splits, protocol=protocol,
            identity=detection_identity(metadata, name, prompt, protocol),
            extra=DetectionData(domain=metadata["domain"]),
            truth=lambda: replace(task, ground_truth=ground_truth(images)),
        )

    def task_for(self, adapter: Any, trained: bool = False) -> DetectionTask | None:
        """Under a protocol that prompts category 0, a model that was not fine-tuned is asked
        about it first, in ``names`` mode (:func:`.tasks.prompted_classes`); the oracle is given
        the ground truth with its labels moved past it."""
        task = super().task_for(adapter, trained)
        if task is None or trained or not self.protocol.category_zero:
            return task
        classes, category_ids = prompted_classes(self.metadata, task.prompt, True)
        if len(classes) == len(task.classes):
            return task
        truth = ground_truth(self.images, offset=1) if task.ground_truth is not None else None
        return replace(task, classes=classes, category_ids=category_ids, ground_truth=truth)

    def training_data(self, plan: "TrainingPlan") -> TrainingData:
        """The plan's split as samples, validation's, and for a semi-supervised split the rest of
        train (its labels unused); classes in label order."""
        train = self.splits[plan.split]
        rest = unlabelled(self.splits["train"], train) if plan.regime == "semi-supervised" else None
        task = detection_task(train, self.metadata, plan.split, "names", self.splits.__getitem__)
        return TrainingData(split=plan.split, train=Samples(train), validation=Samples(self.splits["validation"]),
                            task=task, unlabelled=Samples(rest) if rest is not None else ())

    def split_parameters(self, split: str) -> str:
        return split_parameters(self.metadata, split, "names")
