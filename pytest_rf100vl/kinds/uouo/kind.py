"""UOUO grounding as a benchmark kind: the datasets ``uouo-random`` and ``uouo-mmd`` (one per
config of the ``uouo`` builder), pairs ``rf100vl::test_grounding[MODEL-uouo-mmd]``; the
mosaics are built on first use from the cut-out source, each mosaic asks its two stored
questions, and a pair is scored with quadrant accuracy, mIoU and acc50 (fractions, as in
UOUO's Table 1)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_rf100vl.collect.options import existing_folder
from pytest_rf100vl.core.settings import Option
from pytest_rf100vl.kinds.base import BenchmarkKind, PairRun
from pytest_rf100vl.core.metrics import Metric

if TYPE_CHECKING:
    from pytest_rf100vl.adapters.base import Adapter
    from pytest_rf100vl.core.pairs import Pair
    from pytest_rf100vl.session.matrix import MatrixSession

DATASETS = ("uouo-random", "uouo-mmd")
"""``uouo-<config>`` for each config of the ``uouo`` builder (:data:`rf100vl_hf.uouo.plan.MODES`)."""
NO_WEIGHTS = "none"
"""``--uouo-clip-pretrained none``: CLIP with seeded random weights (for tests)."""
TABLE_1 = "as in UOUO's Table 1"
METRICS = {
    "accuracy": Metric("accuracy", "quadrant accuracy", 4, kind="uouo", fraction=TABLE_1),
    "miou": Metric("miou", "mIoU", 4, kind="uouo", fraction=TABLE_1),
}


def _fraction(value: float) -> float:
    if not 0 <= value <= 1:
        raise ValueError(f"expected a fraction in [0, 1] ({TABLE_1}), got {value:g}")
    return value


def _alpha(value: int) -> int:
    if value > 254:
        raise ValueError(f"expected an alpha value in 0..254, got {value}")
    return value


class UouoKind(BenchmarkKind):
    name = "uouo"
    test_name = "test_grounding"
    test_doc = ("The pair answered every mosaic; its quadrant accuracy and mIoU meet their thresholds when it has "
                "them.")
    options = (
        Option("source", "path", "folder of UOUO cut-outs (default: $UOUO_SOURCE_DIR, else <cache home>/uouo-source "
               "when it exists, else the embedded sample)", "DIR", prefix="uouo", check=existing_folder),
        Option("num-mosaics", "int", "mosaics per UOUO dataset (default: 200)", "N", prefix="uouo", minimum=1),
        Option("seed", "int", "seed of the UOUO mosaics (default: 0)", "N", prefix="uouo", minimum=0),
        Option("clip-model", "str", "open_clip model that ranks the hard mosaics' neighbours (default: ViT-B-32)",
               "NAME", prefix="uouo"),
        Option("clip-pretrained", "str", "its weights: an open_clip tag, a local weights file, or 'none' for seeded "
               "random weights (default: laion2b_s34b_b79k, downloaded once)", "TAG_OR_FILE", prefix="uouo"),
        Option("min-accuracy", "float", "minimum UOUO quadrant accuracy, a fraction in [0, 1], for every UOUO pair "
               "without a more specific threshold", "FRACTION", prefix="uouo", check=_fraction),
        Option("min-miou", "float", "minimum UOUO mIoU, a fraction in [0, 1], for every UOUO pair without a more "
               "specific threshold", "FRACTION", prefix="uouo", check=_fraction),
        Option("num-proc", "int", "processes composing the UOUO mosaics (default: the usable cores, at most 8; "
               "the mosaics do not depend on it)", "N", prefix="uouo", minimum=1),
        Option("alpha-threshold", "int", "cut-out alpha at or below this is background, the faint haze "
               "background removers leave (default: 8; see docs/uouo.md)", "N", prefix="uouo", minimum=0,
               check=_alpha),
    )
    metrics = tuple(METRICS.values())
    target_description = f"a UOUO dataset ({', '.join(DATASETS)})"

    def parameters(self) -> dict[str, Any]:
        """What ``load_uouo`` is given besides the config: only what the user set (the rest
        keeps ``load_uouo``'s defaults, so the bare ``load_dataset`` route finds the same build)."""
        value = self.settings.value
        given: dict[str, Path | int | str | None] = {
            "source_dir": value("uouo_source"),
            "num_mosaics": value("uouo_num_mosaics"),
            "seed": value("uouo_seed"),
            "clip_model": value("uouo_clip_model"),
            "clip_pretrained": value("uouo_clip_pretrained"),
            "alpha_threshold": value("uouo_alpha_threshold"),
        }
        parameters = {key: v for key, v in given.items() if v is not None}
        if value("uouo_clip_pretrained") == NO_WEIGHTS:
            parameters["clip_pretrained"] = None
        return parameters

    # -- collection -------------------------------------------------------------------
    def claims(self, dataset: str) -> bool:
        return dataset in DATASETS

    def known_datasets(self) -> list[str]:
        return list(DATASETS)

    def header_lines(self, pairs: list["Pair"]) -> list[str]:
        given = ", ".join(f"{key} {'none (random weights)' if value is None else value}"
                          for key, value in self.parameters().items())
        return [f"uouo: split test; {given or 'default source, mosaics and CLIP model'}"]

    # -- running ----------------------------------------------------------------------
    def load(self, dataset: str, session: "MatrixSession") -> Any:
        """The test split of the dataset's config, built on first use from the source and CLIP."""
        from datasets.exceptions import DatasetGenerationError

        from rf100vl_hf.uouo.builder import load_uouo
        from rf100vl_hf.uouo.defaults import default_num_proc
        from rf100vl_hf.uouo.embeddings import ClipWeightsError

        config = dataset.removeprefix("uouo-")
        try:
            return load_uouo(config, split="test", device=session.device, progress=False,
                             num_proc=self.settings.value("uouo_num_proc") or default_num_proc(), **self.parameters())
        except ClipWeightsError as exc:  # no network: say which options build the mosaics without it
            remedies = exc.advice("--uouo-clip-pretrained none", "--uouo-clip-pretrained FILE")
            raise RuntimeError(f"building the {dataset} mosaics failed: {remedies}") from None
        except DatasetGenerationError as exc:  # datasets wraps what failed while the mosaics were made
            cause = exc.__cause__ or exc
            raise RuntimeError(f"building the {dataset} mosaics failed: {type(cause).__name__}: {cause}") from exc

    def split(self, dataset: str, loaded: Any, split: str | None) -> Any:
        """The mosaics (UOUO has one split), cut to ``--rf100vl-limit``."""
        return self.first_images(loaded)

    def run(self, pair: "Pair", adapter: "Adapter", session: "MatrixSession", benchmark: Any) -> PairRun:
        from rf100vl_hf.metadata import read_metadata
        from rf100vl_hf.results.rows import LIMIT

        from pytest_rf100vl.kinds.uouo.evaluate import run_grounding_pair
        from pytest_rf100vl.kinds.uouo.rows import grounding_row

        dataset = session.dataset(pair)
        metadata = read_metadata(dataset)
        evaluation = run_grounding_pair(
            adapter, dataset, pair.dataset, metadata["canvas"], self.settings.batch_size, benchmark, session.loop
        )
        thresholds = self.thresholds(pair, session)
        output = self.output_name("test")
        path = session.writer.write_records(pair.model, pair.dataset, output, evaluation.records)
        row = grounding_row(
            pair, adapter.describe(), adapter.identity_options(adapter.options), metadata, self.settings.batch_size, evaluation,
            session.writer.run_id, thresholds, path,
        )
        row[LIMIT] = self.limit
        row.update(self.samples_column(pair, session, output, evaluation.inference.samples))
        return PairRun(pair, evaluation, row, thresholds, self.failure(pair, row, thresholds))

    def planned_identity(self, pair: "Pair", session: "MatrixSession") -> dict[str, Any] | None:
        from rf100vl_hf.metadata import read_metadata

        from pytest_rf100vl.kinds.uouo.rows import uouo_fingerprint

        metadata = read_metadata(session.dataset(pair))
        return {"dataset": pair.dataset, "dataset_fingerprint": uouo_fingerprint(metadata), "split": "test"}

    def cost(self, dataset: str) -> float:
        """The number of mosaics asked."""
        from rf100vl_hf.uouo.defaults import DEFAULT_NUM_MOSAICS

        return float(self.settings.value("uouo_num_mosaics") or DEFAULT_NUM_MOSAICS)

    def unscored(self, row: dict[str, Any]) -> str | None:
        """Nothing is scored when the model failed on every mosaic (each one's answer is missing)."""
        if row["n_images"] and row["failed_images"] >= row["n_images"]:
            from pytest_rf100vl.session.verdict import first_error_line

            first = f"; first error: {first_error_line(row['first_error'])}" if row.get("first_error") else ""
            return f"the model failed on every one of the {row['n_images']} mosaics{first}"
        return super().unscored(row)

    # -- reporting --------------------------------------------------------------------
    def summary_sections(self, rows: list[dict[str, Any]]) -> list[str]:
        from rf100vl_hf.results.summary import uouo_sections

        return uouo_sections(rows)
