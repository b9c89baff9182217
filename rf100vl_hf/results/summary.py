"""A run's summary (``summary.md``) and its table (``results.parquet``), from results rows.

The summary opens with what the rows ran on and how (splits, prompt modes, dates, run ids,
checkpoints and revisions, command lines, smoke rows, limited rows), then the tables of
:mod:`.tables`, then what went wrong. The pytest plugin adds its own sections (checks of
means, pairs that could not run...) through ``extra_sections``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

from rf100vl_hf import markdown
from rf100vl_hf.protocols import PAPER
from rf100vl_hf.results.folder import PARQUET, SUMMARY, write_parquet
from rf100vl_hf.results.names import display_names
from rf100vl_hf.results.schema import ResultRow, as_rows
from rf100vl_hf.results.tables import (
    MISSING,
    ap_table,
    by_protocol,
    column_labels,
    decimal,
    error_tables,
    plain,
    protocol_note,
    to_markdown,
    uouo_table,
)

SMOKE_BANNER = "SMOKE RUN (random weights: scores are meaningless)"
LIMITED_BANNER = "LIMITED RUN (only the first images of each split were scored: not comparable with full runs)"

Section = tuple[str, Sequence[str]]
"""A summary section: its title and its lines."""


def _namer(rows: Sequence[ResultRow]) -> Callable[[ResultRow], str]:
    """A row's model by its display name among ``rows`` (:mod:`.names`)."""
    names = display_names(row.spec for row in rows)
    return lambda row: names[row.spec]


def environment(rows: Sequence[ResultRow]) -> str:
    """One line saying what the run ran on: devices with the dtype, batch size, attention and
    compilation of the models run there, and the versions of what scores depend on."""
    devices = ", ".join(dict.fromkeys(f"{row.model.device} ({_loop(row)})" for row in rows))
    versions = {package.replace("_", "-"): value for row in rows[:1]
                for package, value in {**row.provenance.versions, "python": row.provenance.python_version}.items()
                if value}
    hardware = "; ".join(dict.fromkeys(
        ", ".join(part for part in (
            f"CPU {p.cpu_model}" if p.cpu_model else "",
            f"{p.gpu_count} x {p.gpu_name}" if p.gpu_name else "",
        ) if part)
        for p in (row.provenance for row in rows) if p.cpu_model or p.gpu_name
    ))
    commits = _listed([row.provenance.package_commit for row in rows])
    return (f"Ran on {devices}" + (f" [{hardware}]" if hardware else "") + "; "
            + ", ".join(f"{name} {value}" for name, value in versions.items())
            + (f" (commit {commits})" if commits != MISSING else ""))


def _loop(row: ResultRow) -> str:
    """How a row's model was run: dtype, batch size (and ``auto`` when it was found), attention, compilation."""
    model = row.model
    parts = [str(model.dtype)]
    if model.batch_size is not None:
        found = " (auto)" if model.batch_size_requested == "auto" else ""
        parts.append(f"batch {model.batch_size}{found}")
    if model.attention:
        parts.append(f"{model.attention} attention")
    if model.compiled:
        parts.append("compiled")
    return ", ".join(parts)


def _listed(values: Sequence[Any]) -> str:
    return ", ".join(str(v) for v in dict.fromkeys(v for v in values if v not in (None, ""))) or MISSING


def provenance(rows: Sequence[ResultRow]) -> list[str]:
    """What the rows are: splits, prompt modes, dates, runs, the models' full specs behind their
    display names, checkpoints, commands, smoke rows."""
    name = _namer(rows)
    detection = [row for row in rows if row.data.benchmark == "rf100vl"]
    dates = sorted(str(row.run.timestamp) for row in rows if row.run.timestamp)
    lines = [
        f"- splits: {_listed([row.data.split for row in rows])}",
        *([f"- prompt modes: {_listed([row.data.prompt for row in detection])}"] if detection else []),
        *([f"- protocols: {'; '.join(protocol_note(name) for name in by_protocol(detection))}"]
          if any(row.protocol != PAPER for row in detection) else []),
        f"- date: {dates[0][:10] if dates else MISSING}"
        + (f" to {dates[-1][:10]}" if dates and dates[-1][:10] != dates[0][:10] else ""),
        f"- runs: {_listed([row.run.run_id for row in rows])}",
    ]
    renamed = dict.fromkeys(f"{name(row)} is `{row.spec}`" for row in rows if name(row) != row.spec)
    if renamed:
        lines.append("- models: " + "; ".join(renamed))
    checkpoints = dict.fromkeys(
        f"{name(row)}: {row.model.checkpoint or MISSING}"
        + (f" @ {row.model.model_revision}" if row.model.model_revision else "")
        for row in rows
    )
    lines.append("- checkpoints: " + "; ".join(checkpoints))
    for params in dict.fromkeys(row.data.split_parameters for row in rows if row.data.split_parameters):
        lines.append(f"- split parameters: `{params}`")
    for command in dict.fromkeys(row.run.command for row in rows if row.run.command):
        lines.append(f"- command: `{command}`")
    smoke = [f"{name(row)} on {row.data.dataset}" for row in rows if row.model.smoke]
    if smoke:
        lines.append(f"- smoke rows (random weights or a replay of them): {', '.join(smoke)}")
    reused = [f"{name(row)} on {row.data.dataset} (from {row.run.reused_from})" for row in rows if row.run.reused_from]
    if reused:
        lines.append(f"- reused from earlier runs: {', '.join(reused)}")
    limited = [f"{name(row)} on {row.data.dataset} (first {row.data.limit})" for row in rows if row.data.limit]
    if limited:
        lines.append(f"- limited rows (--rf100vl-limit: the first N images of the split): {', '.join(limited)}")
    return lines


def runs_table(rows: Sequence[ResultRow]) -> list[str]:
    """Per RF100-VL pair: throughput, what was done to the model's output, and the threshold check."""
    ignored = any("ignored_records" in row.extra for row in rows)  # rows written before answer_counts
    body = []
    for label, row in zip(column_labels(rows), rows):
        out = row.output
        check = _check(row, (("", "ap"),))
        counts = [row.data.n_images, row.scores.n_predictions, out.dropped, out.clipped, out.truncated, out.swapped,
                  *([row.extra.get("ignored_records")] if ignored else []), out.failed_images]
        body.append([label, row.data.dataset, decimal(row.throughput.images_per_s, 2),
                     *(plain(count) for count in counts), check])
    header = ["Model", "Dataset", "images/s", "images", "predictions", "dropped", "clipped", "truncated", "swapped",
              *(["ignored"] if ignored else []), "failed", "threshold"]
    return markdown.table(header, body, numeric=range(2, len(header) - 1))


def uouo_runs_table(rows: Sequence[ResultRow]) -> list[str]:
    """Per UOUO pair: throughput, acc50, unreadable answers, failed mosaics, and the threshold checks."""
    body = []
    for label, row in zip(column_labels(rows), rows):
        counts = [row.scores.box_parse_failures, row.scores.quadrant_parse_failures, row.output.failed_images]
        body.append([label, row.data.dataset, decimal(row.throughput.images_per_s, 2), plain(row.data.n_images),
                     decimal(row.scores.acc50, 4), *(plain(count) for count in counts),
                     _check(row, (("accuracy ", "accuracy"), ("mIoU ", "miou")))])
    header = ["Model", "Dataset", "images/s", "mosaics", "acc50", "no box", "no quadrant", "failed", "threshold"]
    return markdown.table(header, body, numeric=range(2, len(header) - 1))


def _check(row: ResultRow, minimums: tuple[tuple[str, str], ...]) -> str:
    """The row's check, with each of its ``(label, metric)`` minimums that is set and where they came from."""
    check = row.check
    shown = [f"{label}>= {check.minimums[metric]:g}" for label, metric in minimums
             if check.minimums.get(metric) is not None]
    before_source = ", " if len(minimums) == 1 else "; "
    return str(check.check or MISSING) + (f" ({', '.join(shown)}{before_source}{check.threshold_source})"
                                          if shown else "")


def answer_counts(rows: Sequence[ResultRow]) -> list[str]:
    """One line per pair whose adapter counted its answers (unknown labels, unparseable text...)."""
    lines, name = [], _namer(rows)
    for row in rows:
        counts = row.output.answer_counts or {}
        if counts:
            listed = ", ".join(f"{name} {count}" for name, count in counts.items())
            lines.append(f"- {name(row)} on {row.data.dataset}: {listed}")
    return lines


def header(rows: Sequence[ResultRow], title: str = "rf100vl results") -> list[str]:
    """The title, the smoke banner, and what the rows ran on and how."""
    lines = [f"# {title}", ""]
    if any(row.model.smoke for row in rows):
        lines += [f"**{SMOKE_BANNER}**", ""]
    if any(row.data.limit for row in rows):
        lines += [f"**{LIMITED_BANNER}**", ""]
    if rows:
        lines += [environment(rows), "", *provenance(rows), ""]
    return lines


REGIME_ORDER = ("zero-shot", "few-shot", "semi-supervised", "fully-supervised")
"""Table 2's sections, in its order (Table 7 holds the last two)."""


def regime(row: ResultRow) -> str:
    """A row's data regime (rows written before fine-tuning existed are zero-shot)."""
    return row.regime or REGIME_ORDER[0]


def _regime_title(name: str, rows: Sequence[ResultRow]) -> str:
    splits = _listed([row.training.train_split for row in rows if row.training is not None])
    return {"zero-shot": "zero-shot", "fully-supervised": f"fully supervised ({splits})"}.get(
        name, f"{name} ({splits})")


def training_table(rows: Sequence[ResultRow]) -> list[str]:
    """Per fine-tuned pair: how it was trained, how long it took, and its losses."""
    body = []
    for label, row in zip(column_labels(rows), rows):
        t = row.training
        how = "reused" if t.weights_reused else (
            f"resumed after epoch {t.train_resumed_after_epoch}" if t.train_resumed_after_epoch else "fitted")
        body.append([label, row.data.dataset, plain(t.seed), plain(t.recipe), plain(t.train_epochs),
                     plain(t.train_steps), decimal(t.train_s, 1), decimal(t.train_images_per_s, 2),
                     decimal(t.train_loss_first, 3), decimal(t.train_loss_final, 3),
                     decimal(t.train_peak_gpu_memory_mb, 0), how])
    header = ["Model", "Dataset", "seed", "recipe", "epochs", "steps", "train s", "train images/s", "first loss",
              "final loss", "peak GPU MB", "weights"]
    return markdown.table(header, body, numeric=[2, *range(4, 11)])


def seed_sections(rows: Sequence[ResultRow]) -> list[str]:
    """Per model fine-tuned with several seeds: each domain's mean ± the two spreads the paper
    reports (Table 8: the std over seeds of the domain mean; Table 9: the mean over datasets of
    each dataset's std over seeds)."""
    seeded = [row for row in rows if row.training is not None and row.training.seed is not None]
    labels = column_labels(seeded)
    lines: list[str] = []
    for label in dict.fromkeys(labels):
        own = [row for lab, row in zip(labels, seeded) if lab == label]
        if len({row.training.seed for row in own}) < 2:
            continue
        from rf100vl_hf.metrics.seeds import seed_variance

        try:
            spread = seed_variance([row.to_dict() for row in own])
        except ValueError as exc:
            lines += [f"- {label}: {exc}", ""]
            continue
        body = [[target, plain(s.seeds), plain(s.datasets), decimal(s.mean, 1), decimal(s.std_of_mean, 2),
                 decimal(s.mean_of_std, 2)] for target, s in spread.items()]
        lines += [f"**{label}**", "", *markdown.table(
            ["Domain", "seeds", "datasets", "mean AP50:95", "std of the mean (Table 8)", "mean of the std (Table 9)"],
            body, numeric=range(1, 6)), ""]
    return lines


def _ap_sections(rows: Sequence[ResultRow], suffix: str) -> list[str]:
    """AP50:95 laid out like the paper's Table 2, one section per data regime when models were
    fine-tuned, with the spread over seeds; ``suffix`` ends each title (the protocol's note)."""
    regimes = {name: [row for row in rows if regime(row) == name] for name in REGIME_ORDER}
    regimes.update({name: [row for row in rows if regime(row) == name]
                    for name in dict.fromkeys(regime(row) for row in rows) if name not in REGIME_ORDER})
    present = {name: own for name, own in regimes.items() if own}
    if list(present) == ["zero-shot"]:
        return [f"## AP50:95 (%){suffix}", "", *to_markdown(ap_table(rows)), "", *_error_sections(rows, suffix)]
    lines: list[str] = []
    for name, own in present.items():
        lines += [f"## AP50:95 (%), {_regime_title(name, own)}{suffix}", "", *to_markdown(ap_table(own)), "",
                  *_error_sections(own, f", {_regime_title(name, own)}{suffix}")]
        spread = seed_sections(own)
        if spread:
            lines += [f"### Spread over seeds, {_regime_title(name, own)}{suffix}", "", *spread]
    return lines


def _error_sections(rows: Sequence[ResultRow], suffix: str) -> list[str]:
    """The "Errors by type" tables of the rows that have them: one per model (``docs/errors.md``)."""
    lines: list[str] = []
    for table in error_tables(rows).values():
        lines += [f"### {table.title}{suffix}", "", *to_markdown(table), ""]
    return lines


def rf100vl_sections(rows: Sequence[ResultRow]) -> list[str]:
    """RF100-VL's tables: AP50:95 laid out like the paper's Table 2, one section per data regime
    when models were fine-tuned (zero-shot, few-shot, semi-supervised, fully supervised), with
    the spread over seeds, and apart per protocol when rows of several are present (a row of
    another protocol than ``paper`` says so in every title); then the runs and how each model
    was fine-tuned."""
    groups = by_protocol(rows)
    lines: list[str] = []
    for name, own in groups.items():
        lines += _ap_sections(own, "" if list(groups) == [PAPER] else f", {protocol_note(name)}")
    lines += ["## Runs", "", *runs_table(rows), ""]
    if any(regime(row) != REGIME_ORDER[0] for row in rows):
        lines += ["## Fine-tuning", "", *training_table([row for row in rows if row.training.train_split]), ""]
    return lines


def uouo_sections(rows: Sequence[ResultRow]) -> list[str]:
    """UOUO's tables: mIoU and quadrant accuracy laid out like its Table 1, then the runs."""
    table = uouo_table(rows)
    return [f"## {table.title}", "", *to_markdown(table), "", "## UOUO runs", "", *uouo_runs_table(rows), ""]


BENCHMARK_SECTIONS = {"rf100vl": rf100vl_sections, "uouo": uouo_sections}
"""The sections of each benchmark's rows (a row's ``benchmark``)."""


def tail(
    rows: Sequence[ResultRow], extra_sections: Sequence[Section] = (), figures: Sequence[str] = ()
) -> list[str]:
    """What follows the tables: answer counts, model errors, figures, then ``extra_sections``."""
    lines = []
    if not rows:
        lines += ["No pair ran.", ""]
    counted = answer_counts(rows)
    if counted:
        lines += ["## Answers counted by the adapters", "", *counted, ""]
    failed_images = [row for row in rows if row.output.first_error]
    if failed_images:
        lines += ["## Model errors (first of each pair; the full traceback is in results.jsonl)", ""]
        name = _namer(rows)
        lines += [f"- {name(row)} on {row.data.dataset}: {row.output.failed_images} image(s) failed; "
                  f"{str(row.output.first_error).strip().splitlines()[-1]}" for row in failed_images]
        lines += [""]
    if figures:
        lines += ["## Figures", "", *(f"![{Path(f).stem}]({f})" for f in figures), ""]
    for section_title, section in extra_sections:
        lines += [f"## {section_title}", "", *section, ""]
    return lines


def summary(
    rows: Sequence[ResultRow | Mapping[str, Any]],
    extra_sections: Sequence[Section] = (),
    figures: Sequence[str] = (),
    title: str = "rf100vl results",
) -> str:
    """The whole summary as markdown; ``figures`` are image paths relative to where the summary
    is written, ``extra_sections`` come last, each as ``## title`` and its lines."""
    rows = as_rows(rows)
    lines = header(rows, title)
    for benchmark, sections in BENCHMARK_SECTIONS.items():
        own = [row for row in rows if row.data.benchmark == benchmark]
        if own:
            lines += sections(own)
    return markdown.document(lines + tail(rows, extra_sections, figures))


# ---------------------------------------------------------------- parquet


def write_summary(
    folder: Path,
    rows: Sequence[ResultRow | Mapping[str, Any]],
    extra_sections: Sequence[Section] = (),
    figures: Sequence[str] = (),
) -> Path:
    """Write ``summary.md`` and (when there are rows) ``results.parquet`` into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if rows:
        write_parquet([row.to_dict() if isinstance(row, ResultRow) else row for row in rows], folder / PARQUET)
    path = folder / SUMMARY
    path.write_text(summary(rows, extra_sections, figures), encoding="utf-8")
    return path
