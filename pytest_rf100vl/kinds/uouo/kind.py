"""UOUO grounding as a benchmark kind: the datasets ``uouo-random`` and ``uouo-mmd`` (one per
config of the ``uouo`` builder), pairs ``rf100vl::test_grounding[MODEL-uouo-mmd]``; the
mosaics are built on first use from the cut-out source, each mosaic asks its two stored
questions, and a pair is scored with quadrant accuracy, mIoU and acc50 (fractions, as in
UOUO's Table 1)."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from rf100vl_hf.results.schema import MosaicData, ResultRow
from rf100vl_hf.results.summary import uouo_sections
from rf100vl_hf.uouo.defaults import DEFAULT_NUM_MOSAICS, default_num_proc

from pytest_rf100vl.core.minimums import Metric, Rule
from pytest_rf100vl.kinds.base import BenchmarkKind, Report, Scored, Split
from pytest_rf100vl.kinds.uouo.options import GroundingOptions

if TYPE_CHECKING:
    from pytest_rf100vl.engine.runner import Answers

DATASETS = ("uouo-random", "uouo-mmd")
"""``uouo-<config>`` for each config of the ``uouo`` builder (:data:`rf100vl_hf.uouo.plan.MODES`)."""
TABLE_1 = "as in UOUO's Table 1"
METRICS = {
    "accuracy": Metric("accuracy", "quadrant accuracy", 4, kind="uouo", fraction=TABLE_1),
    "miou": Metric("miou", "mIoU", 4, kind="uouo", fraction=TABLE_1),
}


def uouo_fingerprint(metadata: dict[str, Any]) -> str:
    """What fixes a UOUO dataset's mosaics: its metadata (source fingerprint, CLIP weights,
    seed, number of mosaics, sigma, format version, ...), hashed."""
    return hashlib.sha1(json.dumps(metadata, sort_keys=True).encode("utf-8")).hexdigest()[:16]


class UouoKind(BenchmarkKind):
    name = "uouo"
    test_name = "test_grounding"
    test_doc = ("The pair answered every mosaic; its quadrant accuracy and mIoU meet their thresholds when it has "
                "them.")
    options_section = GroundingOptions
    metrics = tuple(METRICS.values())
    target_description = f"a UOUO dataset ({', '.join(DATASETS)})"
    options: GroundingOptions

    def datasets(self) -> list[str]:
        return list(DATASETS)

    def load(self, dataset: str, device: str) -> Split:
        """The mosaics of the dataset's config, built on first use from the source and CLIP, with
        their questions."""
        from datasets.exceptions import DatasetGenerationError

        from rf100vl_hf.metadata import read_metadata
        from rf100vl_hf.uouo.builder import load_uouo
        from rf100vl_hf.uouo.embeddings import ClipWeightsError

        from pytest_rf100vl.kinds.uouo.tasks import grounding_queries, oracle_task

        try:
            mosaics = load_uouo(dataset.removeprefix("uouo-"), split="test", device=device, progress=False,
                                num_proc=self.options.num_proc or default_num_proc(), **self.options.given())
        except ClipWeightsError as exc:  # no network: say which options build the mosaics without it
            remedies = exc.advice("--uouo-option clip-pretrained=none", "--uouo-option clip-pretrained=FILE")
            raise RuntimeError(f"building the {dataset} mosaics failed: {remedies}") from None
        except DatasetGenerationError as exc:  # datasets wraps what failed while the mosaics were made
            cause = exc.__cause__ or exc
            raise RuntimeError(f"building the {dataset} mosaics failed: {type(cause).__name__}: {cause}") from exc
        metadata = read_metadata(mosaics)
        return Split(
            images=mosaics, questions=grounding_queries(mosaics), name="test", metadata=metadata,
            identity={"dataset_fingerprint": uouo_fingerprint(metadata), "split_parameters": "{}"},
            extra=MosaicData(
                uouo_config=metadata["config"], uouo_source=metadata["source"]["name"],
                uouo_source_fingerprint=metadata["source"]["fingerprint"], num_mosaics=metadata["num_mosaics"],
                seed=metadata["seed"], clip_model=metadata["clip"]["model"], clip_weights=metadata["clip"]["weights"]),
            truth=lambda: oracle_task(mosaics, dataset), id_column="mosaic_id", name_column=None,
            smoke=metadata["clip"]["pretrained"] is None,  # hard neighbours ranked by a random CLIP mean nothing
        )

    def cost(self, dataset: str) -> float:
        """The number of mosaics asked."""
        return float(self.options.num_mosaics or DEFAULT_NUM_MOSAICS)

    def score(self, answers: "Answers", split: Split) -> Scored:
        from pytest_rf100vl.kinds.uouo.scores import grounding_scores

        return grounding_scores(answers, split)

    def report(self, rows: list[ResultRow], rules: list[Rule]) -> Report:
        return Report(uouo_sections(rows))
