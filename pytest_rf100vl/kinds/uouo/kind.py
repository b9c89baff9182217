"""UOUO grounding as a benchmark kind: the datasets ``uouo-random`` and ``uouo-mmd`` (one per
config of the ``uouo`` builder), pairs ``rf100vl::test_grounding[MODEL-uouo-mmd]``; the
mosaics are built on first use from the cut-out source, each mosaic asks its two stored
questions, and a pair is scored with quadrant accuracy, mIoU and acc50 (fractions, as in
UOUO's Table 1)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_rf100vl.kinds.base import BenchmarkKind, PairRun
from pytest_rf100vl.kinds.uouo.options import GroundingOptions
from pytest_rf100vl.core.metrics import Metric

if TYPE_CHECKING:
    from pytest_rf100vl.adapters.base import Adapter
    from pytest_rf100vl.core.pairs import Pair
    from pytest_rf100vl.session.matrix import MatrixSession

DATASETS = ("uouo-random", "uouo-mmd")
"""``uouo-<config>`` for each config of the ``uouo`` builder (:data:`rf100vl_hf.uouo.plan.MODES`)."""
TABLE_1 = "as in UOUO's Table 1"
METRICS = {
    "accuracy": Metric("accuracy", "quadrant accuracy", 4, kind="uouo", fraction=TABLE_1),
    "miou": Metric("miou", "mIoU", 4, kind="uouo", fraction=TABLE_1),
}


class UouoKind(BenchmarkKind):
    name = "uouo"
    test_name = "test_grounding"
    test_doc = ("The pair answered every mosaic; its quadrant accuracy and mIoU meet their thresholds when it has "
                "them.")
    options_section = GroundingOptions
    metrics = tuple(METRICS.values())
    target_description = f"a UOUO dataset ({', '.join(DATASETS)})"

    options: GroundingOptions

    # -- collection -------------------------------------------------------------------
    def claims(self, dataset: str) -> bool:
        return dataset in DATASETS

    def known_datasets(self) -> list[str]:
        return list(DATASETS)

    def header_lines(self, pairs: list["Pair"]) -> list[str]:
        given = ", ".join(f"{key} {'none (random weights)' if value is None else value}"
                          for key, value in self.options.given().items())
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
                             num_proc=self.options.num_proc or default_num_proc(), **self.options.given())
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
            adapter, dataset, pair.dataset, metadata["canvas"], self.config.loop.batch_size, benchmark, session.loop
        )
        thresholds = self.thresholds(pair, session)
        output = self.output_name("test")
        path = session.writer.write_records(pair.model, pair.dataset, output, evaluation.records)
        row = grounding_row(
            pair, adapter.describe(), adapter.identity_options(adapter.options), metadata, self.config.loop.batch_size, evaluation,
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

        return float(self.options.num_mosaics or DEFAULT_NUM_MOSAICS)

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
