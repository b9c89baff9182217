"""RF100-VL detection as a benchmark kind: pairs ``rf100vl::test_detection[MODEL-DATASET]``
over the catalogue, the embedded ``sample`` and any other Roboflow export in the data
folder, scored with COCO AP50:95 at maxDets=500 (percent, as the paper reports it; another
``--rf100vl-protocol`` scores as it says), checked per dataset and per domain mean, and
compared with published tables."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rf100vl_hf import catalog, paths
from rf100vl_hf.errors import Rf100vlError, UnknownNameError
from rf100vl_hf.results.summary import rf100vl_sections
from rf100vl_hf.rf100vl.build_record import BuildRecord, unchanged_build
from rf100vl_hf.rf100vl.sources import SPLIT_FOLDERS, custom_exports, locate

from pytest_rf100vl.core.minimums import Metric, Rule
from pytest_rf100vl.kinds.base import BenchmarkKind, Report, Scored, Split, SplitIdentity
from pytest_rf100vl.kinds.rf100vl.identity import detection_identity, split_parameters
from pytest_rf100vl.kinds.rf100vl.options import DetectionOptions

if TYPE_CHECKING:
    from rf100vl_hf.results.schema import ResultRow

    from pytest_rf100vl.engine.runner import Answers
    from pytest_rf100vl.kinds.rf100vl.split import DetectionSplit

AP = Metric("ap", "AP50:95", 2, kind="rf100vl")


class Rf100vlKind(BenchmarkKind):
    name = "rf100vl"
    test_name = "test_detection"
    test_doc = "The pair ran over its split; its AP50:95 meets its threshold when it has one."
    options_section = DetectionOptions
    metrics = (AP,)
    trains = True
    fallback = True
    target_description = "an RF100-VL dataset, domain or All"
    means = {**catalog.domain_spellings(), catalog.ALL.lower(): catalog.ALL}
    options: DetectionOptions
    subset = "all"
    """The subset a dataset value asked for (``rf20vl``), whose published tables the reference reads."""

    @property
    def data_dir(self) -> Path:
        return self.options.data_dir or paths.default_data_dir()

    @cached_property
    def _custom(self) -> list[str]:
        return custom_exports(self.data_dir)

    @cached_property
    def _unchanged(self) -> dict[str, BuildRecord]:
        """The builds :meth:`identify` found unchanged, handed to :meth:`load` so that a
        dataset's exports are walked once."""
        return {}

    # -- the datasets -----------------------------------------------------------------
    def datasets(self) -> list[str]:
        return [e.basename for e in catalog.entries()] + self._custom + [catalog.SAMPLE_NAME]

    def claims(self, dataset: str) -> bool:
        return dataset == catalog.SAMPLE_NAME or catalog.contains(dataset) or dataset in self._custom

    def group(self, value: str) -> list[str] | None:
        """``all`` or ``rf20vl`` (every catalogue dataset of the subset, whose published tables the
        reference comparison then reads), ``[rf20vl:]domain:NAME`` (every catalogue dataset of a
        domain, in a subset; ``domain:custom``, the other exports of the data folder), in
        catalogue order (:func:`rf100vl_hf.catalog.selection`)."""
        chosen = catalog.selection(value)
        if chosen is None:
            return None
        subset, domain = chosen
        if domain is None or subset != "all":
            self.subset = subset
        if domain is None:
            return [e.basename for e in catalog.select(None, subset)]
        try:
            domain = catalog.normalize_domain(domain)
        except UnknownNameError as exc:
            raise pytest.UsageError(f"--rf100vl-dataset {value}: {exc}") from None
        return self._custom if domain == catalog.CUSTOM_DOMAIN else [e.basename for e in catalog.select(domain, subset)]

    def load(self, dataset: str, device: str) -> "DetectionSplit":
        """The evaluated split (``--rf100vl-split``), every split validated and prepared once."""
        from rf100vl_hf.rf100vl.builder import load_request

        from pytest_rf100vl.kinds.rf100vl.split import DetectionSplit

        splits = load_request(self.options.request, dataset, progress=False, record=self._unchanged.pop(dataset, None))
        return DetectionSplit.of(splits, self.options.split, self.options.prompt, self.options.scoring)

    def identify(self, dataset: str) -> SplitIdentity | None:
        """The evaluated split's identity from the build whose exports' files are unchanged
        (by ``stat``), read from the build's record: no export read, no Arrow file opened,
        datasets not imported."""
        options = self.options
        try:
            record = unchanged_build(options.request, dataset)
        except Rf100vlError:  # not on disk, say: loading it says so
            return None
        if record is None or options.split not in record.splits:
            return None
        self._unchanged[dataset] = record
        metadata = record.metadata
        identity = detection_identity(metadata, options.split, options.prompt, options.scoring)
        return SplitIdentity(options.split, identity, lambda split: split_parameters(metadata, split, "names"))

    def cost(self, dataset: str) -> float:
        """The number of files in the split's folder of the export (1 when it is not on disk)."""
        folder = SPLIT_FOLDERS.get(self.options.split, self.options.split)
        try:
            split_dir = locate(dataset, self.options.data_dir, self.options.fewshot_dir).root / folder
            return float(max(1, sum(1 for _ in split_dir.iterdir())))
        except (Rf100vlError, OSError):
            return 1.0

    # -- the score and the report -----------------------------------------------------
    def score(self, answers: "Answers", split: Split) -> Scored:
        from pytest_rf100vl.kinds.rf100vl.scores import detection_scores

        return detection_scores(answers, split)

    def report(self, rows: list[ResultRow], rules: list[Rule]) -> Report:
        from pytest_rf100vl.kinds.rf100vl.checks import reference_checks, threshold_checks

        checks = threshold_checks(rules, rows)
        if self.options.reference is not None:
            checks += reference_checks(self.subset, self.options.reference_methods,
                                       self.options.tolerance, rows, self.options.reference)
        return Report(rf100vl_sections(rows), checks)
