"""RF100-VL's checks of means, run when the session ends: domain and ``All`` rows of the
thresholds file, and the comparison with a published table (``--rf100vl-data-option=reference=paper``,
``leaderboard`` or ``detpo``, each optionally ``@VERSION``)."""

from __future__ import annotations

import json
import math
import statistics

from rf100vl_hf import catalog
from rf100vl_hf.catalog import CUSTOM_DOMAIN, DOMAINS
from rf100vl_hf.metrics import ALL
from rf100vl_hf.protocols import PAPER
from rf100vl_hf.results.schema import AnyRow, ResultRow, as_rows
from rf100vl_hf.results.tables import over_seeds
from rf100vl_hf.specs import ModelSpec

from pytest_rf100vl.core.checks import FAILED, NOT_CHECKED, PASSED, MeanCheck
from pytest_rf100vl.core.minimums import Rule, rule_targets, threshold_for
from pytest_rf100vl.kinds.rf100vl.reference import (
    REFERENCES,
    ReferenceChoice,
    paper_row,
    parse_reference,
    reference_source,
    reference_table,
    section_rows,
    table_of,
)


def is_mean_target(target: str) -> bool:
    """Whether a thresholds target is a mean (a domain, ``custom`` or ``All``) rather than a dataset."""

    return target == ALL or target in DOMAINS or target == CUSTOM_DOMAIN


def mean_targets(rules: list[Rule], spec: ModelSpec) -> list[str]:
    """The domains (and ``All``) that some rule for ``spec`` sets a minimum mean AP for, ``All`` last."""
    targets = {target for target in rule_targets(rules, spec, "ap") if is_mean_target(target)}
    return sorted(t for t in targets if t != ALL) + ([ALL] if ALL in targets else [])

def scored_rows(rows: list[ResultRow]) -> dict[str, dict[str, ResultRow]]:
    """Spec -> dataset -> row, for rows with a defined AP (a mean over an undefined one is
    undefined); a model fine-tuned with several seeds has their mean."""

    out: dict[str, dict[str, ResultRow]] = {}
    for row in over_seeds(rows):
        if row.scores.ap is not None and math.isfinite(row.scores.ap):
            out.setdefault(row.spec, {})[row.data.dataset] = row
    return out


def threshold_checks(rules: list[Rule], rows: list[AnyRow]) -> list[MeanCheck]:
    """Domain and ``All`` minimums of the thresholds file, on the means over the datasets run."""
    from rf100vl_hf.metrics import domain_means

    checks = []
    for spec, by_dataset in scored_rows(as_rows(rows)).items():
        means = domain_means((name, row.data_extra.domain, row.scores.ap) for name, row in by_dataset.items())
        model = ModelSpec.parse(spec)
        for target in mean_targets(rules, model):
            threshold = threshold_for(rules, model, target)
            assert threshold is not None  # mean_targets only lists targets with a rule
            if target not in means:
                checks.append(MeanCheck(spec, target, NOT_CHECKED, f"no dataset of {target} ran"))
                continue
            mean = means[target]
            ok = mean.mean >= threshold.minimum
            checks.append(
                MeanCheck(
                    spec,
                    target,
                    PASSED if ok else FAILED,
                    f"mean AP50:95 {mean.mean:.2f} over {mean.datasets} dataset(s) "
                    f"{'>=' if ok else 'is below'} the minimum {threshold.minimum:.2f} (from {threshold.source})",
                )
            )
    return checks


def _compare(
    spec: str, target: str, measured: list[float], expected: float, source: str, tolerance: float, note: str = ""
) -> MeanCheck:
    mean = statistics.fmean(measured)
    difference = mean - expected
    ok = abs(difference) <= tolerance
    return MeanCheck(
        spec,
        target,
        PASSED if ok else FAILED,
        f"mean AP50:95 {mean:.2f} over {len(measured)} datasets; {source}: {expected:.1f}; "
        f"difference {difference:+.2f} is {'within' if ok else 'beyond'} the tolerance {tolerance:g}{note}",
    )


def _row_of(row: ResultRow, subset: str, methods: dict[str, str], reference: ReferenceChoice | str
            ) -> tuple[str | None, str | None]:
    """The table of ``reference`` for the run of ``row`` and the method row it reproduces there."""
    regime = row.regime
    source = reference.source if isinstance(reference, ReferenceChoice) else reference
    table = table_of(subset, regime, source)
    if table is None:
        return None, None
    options = json.loads(row.model.adapter_options or "{}")
    training = row.training
    trained = json.loads(training.hyperparameters or "{}") if training is not None else {}
    return table, paper_row(ModelSpec.parse(row.spec), row.model.checkpoint, row.data.prompt, methods, regime,
                            training.recipe if training is not None else None, bool(trained.get("federated")),
                            source, str(options.get("scores", "one")), bool(options.get("prompt_file")))


def other_rows(row: ResultRow, subset: str, chosen: ReferenceChoice, compared: str) -> list[str]:
    """The published rows, besides ``compared`` of ``chosen``, that the run of ``row`` also
    reproduces, each with its ``All``: in the other references, in the chosen one's other
    versions, and the same setting as another of the paper's tables gives it (a row named
    ``"<row>, Table 2"``). A model published twice is never compared with one number without
    the other being named."""
    regime = row.regime
    found = []
    for choice in (ReferenceChoice(source) for source in REFERENCES):
        table, method = _row_of(row, subset, {}, choice)
        if table is None or method is None:
            continue
        for name, published in section_rows(choice, table, regime).items():
            same = name == method or name.startswith(f"{method}, ")
            shown = choice.source == chosen.source and chosen.takes(published) and name == compared
            if same and not shown and ALL in published.values:
                found.append(f"{published.describe()}: {published.values[ALL]:.1f}")
    return found


def reference_checks(
    subset: str, methods: dict[str, str], tolerance: float, rows: list[AnyRow],
    reference: ReferenceChoice | str = "paper"
) -> list[MeanCheck]:
    """Each complete domain's mean (and ``All`` when every domain is complete) against the
    section of the ``reference`` table for ``subset`` that holds the rows' data regime;
    ``methods`` maps other models to rows of that section. A table without a domain's column
    (the leaderboard has ``All`` only) checks ``All`` alone. Rows scored under another
    protocol than the paper's are reported not checked: the tables hold that protocol's numbers.
    Each message names the row compared with (source, version, table) and the other published
    rows of the same model."""

    reference = parse_reference(reference) if isinstance(reference, str) else reference
    rows = as_rows(rows)
    checks = [MeanCheck(spec, ALL, NOT_CHECKED, f"scored under the {name} protocol; the {reference} table holds "
                                                 "results of the paper's protocol")
              for spec, name in dict.fromkeys((row.spec, row.protocol) for row in rows if row.protocol != PAPER)]
    for spec, by_dataset in scored_rows([row for row in rows if row.protocol == PAPER]).items():
        any_row = next(iter(by_dataset.values()))
        regime = any_row.regime
        table_name, method = _row_of(any_row, subset, methods, reference)
        if table_name is None:
            checks.append(MeanCheck(spec, ALL, NOT_CHECKED, f"the {reference} table has no {regime} results for "
                                                             f"{subset}"))
            continue
        table = reference_table(reference, table_name, regime)
        if method is None or method not in table:
            why = (f"no row {method!r} in the {regime} section of {table_name}" if method
                   else f"no {regime} {reference} row for this model")
            checks.append(MeanCheck(spec, ALL, NOT_CHECKED, f"{why} (map one with --rf100vl-data-option reference-method=SPEC=ROW)"))
            continue
        others = other_rows(any_row, subset, reference, method)
        source = reference_source(reference, table_name, regime, method)
        note = f"; also published, not compared: {'; '.join(others)}" if others else ""
        complete: list[float] = []
        ran_in_all = required_in_all = 0
        for domain in catalog.DOMAINS:
            required = [e.basename for e in catalog.select(domain, subset)]
            ran = [name for name in required if name in by_dataset]
            ran_in_all, required_in_all = ran_in_all + len(ran), required_in_all + len(required)
            if len(ran) < len(required):
                if ran and domain in table[method]:
                    checks.append(
                        MeanCheck(spec, domain, NOT_CHECKED, f"{len(ran)} of {len(required)} datasets ran")
                    )
                continue
            values = [by_dataset[name].scores.ap for name in required]
            complete.extend(values)
            if domain in table[method]:
                checks.append(_compare(spec, domain, values, table[method][domain], source, tolerance, note))
        if ALL not in table[method]:
            continue
        if ran_in_all == required_in_all and complete:
            checks.append(_compare(spec, ALL, complete, table[method][ALL], source, tolerance, note))
        elif ran_in_all and not any(domain in table[method] for domain in catalog.DOMAINS):
            checks.append(MeanCheck(spec, ALL, NOT_CHECKED, f"{ran_in_all} of {required_in_all} datasets ran "
                                    f"(the {reference} table gives All only)"))
    return checks
