"""RF100-VL detection as a benchmark kind: pairs ``rf100vl::test_detection[MODEL-DATASET]``
over the catalogue, the embedded ``sample`` and any other Roboflow export in the data
folder, scored with COCO AP50:95 at maxDets=500 (percent, as the paper reports it; another
``--rf100vl-protocol`` scores as it says), checked per dataset and per domain mean, and
compared with published tables."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rf100vl_hf.constants import PROMPT_MODES
from rf100vl_hf.protocols import PAPER, PROTOCOLS, Protocol
from rf100vl_hf.rf100vl.catalog import SUBSETS
from rf100vl_hf.rf100vl.splits import FEWSHOT_CLASS_MATCHES, TEST_SOURCES

from pytest_rf100vl.core.settings import Option
from pytest_rf100vl.kinds.base import BenchmarkKind, PairRun
from pytest_rf100vl.kinds.rf100vl.reference import REFERENCES
from pytest_rf100vl.kinds.rf100vl.training import TrainingPlan, parse_seeds, train_options
from rf100vl_hf.metrics import ALL

from pytest_rf100vl.core.metrics import Metric, Rule

if TYPE_CHECKING:
    from pytest_rf100vl.adapters.base import Adapter
    from pytest_rf100vl.core.pairs import Pair
    from pytest_rf100vl.core.checks import MeanCheck
    from pytest_rf100vl.session.matrix import MatrixSession

TRAIN_SPLITS = ("fewshot_10", "semisup_10", "train")
AP = Metric("ap", "AP50:95", 2, kind="rf100vl")


def _methods(values: tuple[str, ...]) -> dict[str, str]:
    """``SPEC=ROW`` items of ``--rf100vl-reference-method``."""
    methods = {}
    for value in values:
        spec, sep, row = value.partition("=")
        if not sep or not spec.strip() or not row.strip():
            raise ValueError(f"expected SPEC=ROW, got {value!r}")
        methods[spec.strip()] = row.strip()
    return methods


def _train_split(value: str) -> str:
    from rf100vl_hf.training.recipe import regime_of

    regime_of(value)  # a ValueError names the known splits
    return value


class Rf100vlKind(BenchmarkKind):
    name = "rf100vl"
    test_name = "test_detection"
    test_doc = "The pair ran over its split; its AP50:95 meets its threshold when it has one."
    options = (
        Option("domain", "list", "every catalogue dataset of these domains ('custom': the other exports of the data "
               "dir)", "DOMAINS", split=True),
        Option("subset", "str", "every catalogue dataset of a subset: all or rf20vl", "SUBSET", choices=SUBSETS),
        Option("split", "str", "split to evaluate (default: test; UOUO datasets have only test)", "SPLIT",
               default="test"),
        Option("data-dir", "path", "root of the full exports (default: $RF100VL_DATA_DIR or the cache home)", "DIR"),
        Option("fewshot-dir", "path", "root of the official few-shot exports (default: $RF100VL_FEWSHOT_DIR)", "DIR"),
        Option("prompt", "str", "names, instructions or fewshot (default: names)", "MODE", default="names",
               choices=PROMPT_MODES),
        Option("min-ap", "float", "minimum AP50:95, in percent, for every RF100-VL pair without a more specific "
               "threshold", "AP"),
        Option("reference", "str", "compare each complete domain's mean with a published table: paper (the RF100-VL "
               "paper's Tables 2, 3 and 7, arXiv 2505.20612v1) or leaderboard (newer published RF100-VL All means: "
               "the rf-detr README, the SAM 3 paper)", "TABLE", choices=REFERENCES),
        Option("tolerance", "float", "allowed distance, in AP points, from the reference table (default: 1.0)", "AP",
               default=1.0),
        Option("reference-method", "list", "map a model to a row of the reference table: SPEC=ROW (repeatable)",
               "SPEC=ROW", check=_methods),
        Option("train", "str", "fine-tune each model on this split first, then score it on --rf100vl-split: "
               "fewshot_10 (few-shot), semisup_10 (semi-supervised) or train (fully supervised); weights are kept "
               "in <results>/trained and reused (default: none, the model as it comes)", "SPLIT",
               check=_train_split),
        Option("recipe", "str", "the recipe to fine-tune by (default: the model's recipe for the regime; "
               "the README's 'Data regimes' lists each model's recipes)", "NAME"),
        Option("train-option", "list", "override a hyper-parameter of the recipe, KEY=VALUE (repeatable): epochs, "
               "batch_size, learning_rate, weight_decay, max_grad_norm, federated, mixed_precision (no, fp16, "
               "bf16), grad_accumulation, or the recipe's own", "KEY=VALUE", check=train_options),
        Option("seeds", "str", "fit each trained pair once per seed, one test each: 0-9 or 0,3,7 (default: 0); "
               "the summary gives the spread over seeds", "SEEDS", check=parse_seeds),
        Option("test-source", "str", "whose test split 'test' is: full (default: the full export's) or fewshot "
               "(the few-shot export's, which can differ: RF100-VL issue #31); recorded in split_parameters", "SOURCE",
               default="full", choices=TEST_SOURCES),
        Option("fewshot-class-match", "str", "match the few-shot export's classes to the full export's by name "
               "(default: a name the full export lacks stops with an error naming both names) or by id (category "
               "id: the names that differ are mapped, with a warning listing the pairs)", "name|id", default="name",
               choices=FEWSHOT_CLASS_MATCHES),
        Option("protocol", "str", "scoring protocol: paper (default: maxDets 500, category 0 never prompted) or "
               "rf-scripts (Roboflow's public scripts: maxDets 100, category 0 prompted in zero-shot names pairs, "
               "no class-wise NMS, SAM 3 at score 0.5); recorded in each row, whose rows never merge or rank with "
               "another protocol's", "NAME", default=PAPER, choices=tuple(PROTOCOLS)),
    )
    selectors = ("rf100vl_domain", "rf100vl_subset")
    metrics = (AP,)
    fallback = True
    target_description = "an RF100-VL dataset, domain or All"

    @classmethod
    def adapter_defaults(cls, values: Mapping[str, Any]) -> dict[str, dict[str, str]]:
        """The adapter options of ``--rf100vl-protocol`` (``kinds/rf100vl/protocols.py``)."""
        from pytest_rf100vl.kinds.rf100vl.protocols import adapter_defaults

        return adapter_defaults(values.get("rf100vl_protocol") or PAPER)

    @property
    def protocol(self) -> Protocol:
        return PROTOCOLS[self.settings.values.get("rf100vl_protocol") or PAPER]

    @property
    def split_name(self) -> str:
        return self.settings.value("rf100vl_split")

    @property
    def prompt(self) -> str:
        return self.settings.value("rf100vl_prompt")

    @property
    def data_dir(self) -> Path:
        from rf100vl_hf import paths

        return self.settings.value("rf100vl_data_dir") or paths.default_data_dir()

    @property
    def train_split(self) -> str | None:
        return self.settings.values.get("rf100vl_train")

    def seeds(self) -> tuple[int | None, ...]:
        """One pair per ``--rf100vl-seeds`` seed when models are fine-tuned (seed 0 by default)."""
        import pytest

        seeds = self.settings.values.get("rf100vl_seeds")
        if self.train_split is None:
            if seeds:
                raise pytest.UsageError("--rf100vl-seeds: seeds are for fine-tuning; add --rf100vl-train SPLIT")
            return (None,)
        return seeds or (0,)

    def training(self, adapter: type["Adapter"], seed: int | None) -> TrainingPlan | None:
        """The pair's training plan (``None`` zero-shot); ``ValueError`` naming what is wrong."""
        from pytest_rf100vl.kinds.rf100vl.training import plan

        return plan(adapter, self.train_split, self.settings.values.get("rf100vl_recipe"),
                    self.settings.values.get("rf100vl_train_option") or {}, seed)

    def left_out(self, pair: "Pair", adapter: "Adapter") -> str | None:
        """Beside a model that does not answer RF100-VL, one that cannot be fine-tuned under ``--rf100vl-train``."""
        if self.train_split is not None and not adapter.recipes:
            return f"{adapter.name} cannot be fine-tuned (it has no recipe), and --rf100vl-train asks for it"
        return super().left_out(pair, adapter)

    # -- collection -------------------------------------------------------------------
    def claims(self, dataset: str) -> bool:
        from rf100vl_hf.rf100vl import catalog, sources

        return (dataset == sources.SAMPLE_NAME or catalog.contains(dataset)
                or dataset in sources.custom_exports(self.data_dir))

    def known_datasets(self) -> list[str]:
        from rf100vl_hf.rf100vl import catalog, sources

        return [e.basename for e in catalog.entries()] + sources.custom_exports(self.data_dir) + [sources.SAMPLE_NAME]

    def selected(self) -> list[str]:
        """Every dataset of the domains and subset asked for, in catalogue order; with no
        dataset named at all, every RF100-VL dataset."""
        import pytest

        from rf100vl_hf.errors import UnknownNameError
        from rf100vl_hf.rf100vl import catalog, sources

        domains_given = self.settings.value("rf100vl_domain")
        subset = self.settings.value("rf100vl_subset")
        if not (domains_given or subset or not self.settings.datasets):
            return []
        try:
            domains = [catalog.normalize_domain(d) for d in domains_given] or [None]
        except UnknownNameError as exc:
            raise pytest.UsageError(f"--rf100vl-domain: {exc}") from None
        names: list[str] = []
        for domain in domains:
            if domain == catalog.CUSTOM_DOMAIN:
                names.extend(sources.custom_exports(self.data_dir))
            else:
                names.extend(e.basename for e in catalog.select(domain, subset or "all"))
        return names

    def header_lines(self, pairs: list["Pair"]) -> list[str]:
        trained = ""
        if self.train_split is not None:
            seeds = sorted({pair.seed for pair in pairs if pair.seed is not None})
            trained = f", fine-tuned on {self.train_split} first (seeds {', '.join(map(str, seeds))})"
        protocol = "" if self.protocol.name == PAPER else f", protocol {self.protocol.name}"
        return [f"rf100vl: split {self.split_name}, prompt {self.prompt}{trained}{protocol}"]

    # -- running ----------------------------------------------------------------------
    def load(self, dataset: str, session: "MatrixSession") -> Any:
        """Every split of the dataset, validated and prepared once per session."""
        from rf100vl_hf.rf100vl.builder import load_rf100vl

        return load_rf100vl(
            dataset, data_dir=self.settings.value("rf100vl_data_dir"),
            fewshot_dir=self.settings.value("rf100vl_fewshot_dir"), progress=False, **self.split_config,
        )

    @property
    def split_config(self) -> dict[str, str]:
        """The builder's parameters that ``--rf100vl-test-source`` and
        ``--rf100vl-fewshot-class-match`` set (none at their defaults: the bare build)."""
        defaults = {"test_source": TEST_SOURCES[0], "fewshot_class_match": FEWSHOT_CLASS_MATCHES[0]}
        given = {key: self.settings.values.get(f"rf100vl_{key}") or default for key, default in defaults.items()}
        return {key: value for key, value in given.items() if value != defaults[key]}

    def split(self, dataset: str, loaded: Any, split: str | None) -> Any:
        """A split by name, whole; the pair's own split (``None``) cut to ``--rf100vl-limit``."""
        name = split or self.split_name
        if name not in loaded:
            raise ValueError(f"dataset {dataset!r} has no split {name!r} (it has: {', '.join(loaded)})")
        return loaded[name] if split else self.first_images(loaded[name])

    def run(self, pair: "Pair", adapter: "Adapter", session: "MatrixSession", benchmark: Any) -> PairRun:
        from rf100vl_hf.metadata import read_metadata
        from rf100vl_hf.protocols import PROTOCOL
        from rf100vl_hf.results.rows import LIMIT

        from pytest_rf100vl.kinds.rf100vl.evaluate import run_pair
        from pytest_rf100vl.kinds.rf100vl.rows import detection_row

        from rf100vl_hf.training.recipe import regime_of

        from pytest_rf100vl.kinds.rf100vl.training import fit_columns, identity_columns

        settings = self.settings
        dataset = session.dataset(pair)
        metadata = read_metadata(dataset)
        training = self.training(type(adapter), pair.seed)
        fit, fitted, output = None, False, self.output_name(self.split_name)
        if training is not None:
            fit, fitted, store = self._trained(pair, adapter, training, metadata, session)
            output += f".trained-{store.folder.name[:12]}"
        evaluation = run_pair(
            adapter, dataset, metadata, self.split_name, self.prompt, settings.batch_size,
            lambda split: session.dataset(pair, split), benchmark, session.loop, self.protocol, training is not None,
        )
        thresholds = self.thresholds(pair, session)
        described = adapter.describe()
        path = session.writer.write_predictions(pair.model, pair.dataset, output, evaluation.predictions, described)
        row = detection_row(
            pair, described, adapter.identity_options(adapter.options), metadata, self.split_name, self.prompt,
            settings.batch_size, evaluation, session.writer.run_id, thresholds.get(AP.name), path,
        )
        row[LIMIT] = self.limit
        row[PROTOCOL] = self.protocol.name
        row.update(identity_columns(training, metadata))
        row["regime"] = regime_of(training.split if training else None)
        row.update(fit_columns(fit, fitted))
        return PairRun(pair, evaluation, row, thresholds, self.failure(pair, row, thresholds))

    def _trained(self, pair: "Pair", adapter: "Adapter", training: TrainingPlan, metadata: dict[str, Any],
                 session: "MatrixSession") -> tuple[Any, bool, Any]:
        """Fit ``adapter`` for the pair, or load the weights an earlier fit left in the results folder."""
        from pytest_rf100vl.kinds.rf100vl.training import fit_or_load, store_for, training_key
        from pytest_rf100vl.engine.columns import options_column

        described = adapter.describe()
        model = {"model": described["model"], "checkpoint": described["checkpoint"],
                 "model_revision": described["revision"],
                 "adapter_options": options_column(adapter.identity_options(adapter.options))}
        store = store_for(self.settings.results, pair.model, pair.dataset, training_key(model, metadata, training,
                                                                                    adapter.training_libraries))
        record, fitted = fit_or_load(adapter, training, store, metadata, lambda split: session.dataset(pair, split))
        adapter.trained_weights = record.weights_sha256
        return record, fitted, store

    def planned_identity(self, pair: "Pair", session: "MatrixSession") -> dict[str, Any] | None:
        from rf100vl_hf.metadata import read_metadata

        from pytest_rf100vl.adapters import registry
        from pytest_rf100vl.kinds.rf100vl.rows import split_parameters
        from pytest_rf100vl.kinds.rf100vl.training import identity_columns

        metadata = read_metadata(session.dataset(pair))
        training = None
        if self.train_split is not None:
            try:
                training = self.training(registry.adapter_class(registry.parse_spec(pair.model)[0]), pair.seed)
            except Exception:  # unknown to the registry, or no recipe: such pairs always run (and say why)
                return None
        return {"dataset": pair.dataset, "dataset_fingerprint": metadata.get("fingerprint"),
                "split": self.split_name, "prompt": self.prompt, "protocol": self.protocol.name,
                "split_parameters": split_parameters(metadata, self.split_name, self.prompt),
                **identity_columns(training, metadata)}

    def cost(self, dataset: str) -> float:
        """The number of files in the split's folder of the export (1 when it is not on disk)."""
        from rf100vl_hf.errors import Rf100vlError
        from rf100vl_hf.rf100vl.sources import locate

        folder = {"validation": "valid"}.get(self.split_name, self.split_name)
        try:
            source = locate(dataset, self.settings.value("rf100vl_data_dir"), self.settings.value("rf100vl_fewshot_dir"))
            fewshot = folder == "test" and "test_source" in self.split_config and source.fewshot_root is not None
            split_dir = (source.fewshot_root if fewshot else source.root) / folder
            return float(max(1, sum(1 for _ in split_dir.iterdir())))
        except (Rf100vlError, OSError):
            return 1.0

    def unscored(self, row: dict[str, Any]) -> str | None:
        """AP is undefined when the split has no ground-truth box (e.g. an unannotated test split)."""
        if row["ap"] is None:
            return (f"AP50:95 is undefined: the {row['split']} split of {row['dataset']} has no ground-truth box "
                    f"(is it annotated?)")
        return super().unscored(row)

    # -- reporting --------------------------------------------------------------------
    def summary_sections(self, rows: list[dict[str, Any]]) -> list[str]:
        from rf100vl_hf.results.summary import rf100vl_sections

        return rf100vl_sections(rows)

    def mean_checks(self, rows: list[dict[str, Any]], rules: list[Rule]) -> list["MeanCheck"]:
        from pytest_rf100vl.kinds.rf100vl.checks import reference_checks, threshold_checks

        checks = threshold_checks(rules, rows)
        if self.settings.value("rf100vl_reference"):  # rows of another protocol are reported not checked
            checks += reference_checks(
                self.settings.value("rf100vl_subset") or "all", self.settings.value("rf100vl_reference_method"),
                self.settings.value("rf100vl_tolerance"), rows, self.settings.value("rf100vl_reference"),
            )
        return checks

    def accepts_threshold_target(self, target: str) -> bool:
        return True  # a dataset, a domain or All; another kind's datasets are refused by the caller

    def spell_target(self, target: str) -> str:
        """Domains in the paper's spelling; ``All`` in any case; anything else is a dataset name."""
        from rf100vl_hf.errors import UnknownNameError
        from rf100vl_hf.rf100vl.catalog import normalize_domain

        if target.lower() == ALL.lower():
            return ALL
        try:
            return normalize_domain(target)
        except UnknownNameError:
            return target
