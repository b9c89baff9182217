"""``rf100vl-hf results``: rebuild, print, plot and publish results from results folders.

Each command reads one or more results folders (their ``results.jsonl``), keeps the latest
row per identity, and works on those rows. Heavy libraries are imported inside the
commands, so ``rf100vl-hf --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rf100vl_hf.arguments import Setting, add_settings, boolean
from rf100vl_hf.results.schema import ResultRow

DESCRIPTION = """\
Work with the results of benchmark runs. Every command reads the results.jsonl of one or
more results folders (pytest writes them under .rf100vl/results), from several sessions,
shards or machines, and keeps the latest row of each (model, checkpoint, revision, adapter
options, dataset, fingerprint, split, prompt, split parameters): one table, as if one session
had run it all. Choose rows with --run RUN_ID or --run latest (the latest run only); default:
--run all. A command's less used settings are --option KEY=VALUE (its --help lists them).
"""

SUMMARY_HELP = """\
Rebuild summary.md and results.parquet (and the figures under plots/, linked from the
summary) from the folders' results.jsonl. With one folder they are written into it; with
several, give --out.
"""

TABLE_HELP = """\
Print the tables a paper needs: RF100-VL in Table 2's layout (datasets grouped by domain,
then the domain means and All; one column per model) and UOUO in Table 1's layout (one row
per model: mIoU and quadrant accuracy on mmd and random mosaics). --option per-class=true adds, per
dataset, each class's AP with its number of instances. Models are shown by short names
(replay(NAME) for predictions:PATH); a model with smoke rows (random weights) is marked
"(smoke)", and --option no-smoke=true leaves those rows out. csv is one table, of one benchmark (choose
with --option benchmark=NAME when the rows hold both); with per-class, the RF100-VL csv is the
per-class table in long form (Dataset, Class, Instances, Model, value).
"""

PLOT_HELP = """\
Draw PNG figures with matplotlib: domain_means.png (grouped bars of the domain means and
All per model), heatmap.png (datasets x models), errors_by_type.png (per model and domain,
bars stacked by TIDE's ΔAP50 of each error type), per_class_<dataset>.png (each class's AP
on one dataset: --option dataset=NAME, default the first with per-class results; a heat-map past six
models) and confusion_<model>_<dataset>.png (each pair's confusion matrix, from the
<split>.confusion.csv beside its predictions).
"""

PUSH_HELP = """\
Append-and-merge the rows into a results dataset repository on the Hub (created if needed):
configs rf100vl and uouo as parquet (load_dataset("ORG/NAME", "rf100vl", split="train")),
a card with the leaderboard (models x seven domains + All; UOUO's Table 1), the figures and
the provenance of each row. Rows already on the Hub are kept; a row with the same identity is
replaced by the latest; nothing else is deleted. A push that races another re-reads, merges
and retries. Local files are never changed. Needs a token with write access (hf auth login
or HF_TOKEN); every request times out after --option timeout=SECONDS ($RF100VL_HUB_TIMEOUT, 60).
"""

EVAL_HELP = """\
Write the Hub's evaluation results of one model: .eval_results/*.yaml entries (value, task id
of the benchmark's eval.yaml, benchmark revision, date, source, notes naming a prompt mode,
split or fine-tuning that is not the default) built with huggingface_hub's EvalResultEntry and
checked against the Hub's specification, and push them to the model repository, as a pull
request with --option create-pr=true (an open pull request of yours that carries them is updated instead
of a second one being opened), or only write them with --out.

The Hub ranks these values on the benchmark's leaderboard, so only results are written:
smoke rows (random weights), rows of a limited run (--rf100vl-limit) and partial means are
refused unless --option allow-unofficial=true, which writes them with notes saying what they are; and
the rows' checkpoint must be the --model-repo, unless --option model-repo-mismatch-ok=true. A mean
task is reported only when the rows cover all its datasets, unless --option partial=true. When pushing, the
entries get the benchmark's current commit (or --option benchmark-revision=SHA) and, with
--option source=ORG/NAME, the
attribution of the token's user or organisation; tasks the benchmark's eval.yaml does not
declare are left out.
"""

HUB_STATUS_HELP = """\
Read back what the Hub made of evaluation results: the entries it lists for the model (each
with its file, and its pull request when it comes from one) and the files it refused with
why, the open pull requests that carry .eval_results files and their tasks, and the
leaderboard of each benchmark the entries name (or of --option dataset=ORG/NAME): its rows, or why there is
none (a benchmark whose evaluation_framework the Hub does not list has no leaderboard).
"""


COMPARE_HELP = """\
Compare two results folders, A and B, on the RF100-VL datasets both scored: per dataset the AP
of each and B - A (AP points) with a paired percentile bootstrap interval over its images
(the same resampled images scored for both, exactly as pycocotools scores them), then per
domain and All the mean difference with an interval over the datasets. The datasets are read
from --option data-dir=DIR (the exports the rows were scored on: their fingerprints must match) and each
row's predictions file must still give its AP. Seeded; --option resamples=N draws (default 1000).
Datasets only one folder holds, or scored on other images (split, limit, export), are listed
as not compared. Below it (markdown and json), the change in each TIDE error type's ΔAP50
per domain and All, with the same interval over the datasets.
"""

class _Run(argparse.Action):
    """``--run RUN_ID|latest|all``: the commands read ``args.run`` (a run id, else ``None``) and
    ``args.latest``."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any,
                 option_string: str | None = None) -> None:
        namespace.run = None if value in ("latest", "all") else value
        namespace.latest = value == "latest"


def _folders(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folders", nargs="+", type=Path, metavar="DIR", help="results folders (or results.jsonl files)")
    parser.add_argument("--run", action=_Run, metavar="RUN_ID|latest|all",
                        help="only the rows of this run, or of the latest run, or of every run (the default)")
    parser.set_defaults(run=None, latest=False)


TOKEN = "a token with write access (default: the logged-in one or $HF_TOKEN)"


def _hub_settings(token: str = TOKEN) -> tuple[Setting, ...]:
    return (Setting("token", str, None, token),
            Setting("timeout", float, None, "seconds before a Hub request gives up (default 60)"))


def _rows(args: argparse.Namespace) -> list[ResultRow]:
    from rf100vl_hf.results.rows import read_results, select

    rows = select(read_results(args.folders), run=args.run, latest_run=args.latest)
    if not rows:
        from rf100vl_hf.errors import DataError

        raise DataError(", ".join(map(str, args.folders)), "results.jsonl", "no results rows")
    return rows


def _out_folder(args: argparse.Namespace) -> Path:
    if args.out is not None:
        return args.out
    if len(args.folders) == 1 and not args.folders[0].is_file():
        return args.folders[0]
    from rf100vl_hf.errors import DataError

    raise DataError(", ".join(map(str, args.folders)), "--out", "several folders given: say where to write with --out")


def cmd_summary(args: argparse.Namespace) -> int:
    from rf100vl_hf.results.plots import write_plots
    from rf100vl_hf.results.summary import PARQUET, write_summary

    rows = _rows(args)
    out = _out_folder(args)
    figures = [] if args.no_plots else [f"plots/{p.name}" for p in write_plots(rows, out / "plots")]
    path = write_summary(out, rows, figures=figures)
    print(f"wrote {path} and {out / PARQUET} ({len(rows)} rows)" + (f" and {len(figures)} figures" if figures else ""))
    return 0


def _long_per_class(tables: list[Any]) -> Any:
    """The per-class tables as one long table (Dataset, Class, Instances, Model, value), which a
    spreadsheet can pivot."""
    from rf100vl_hf.results.tables import Table

    return Table(["Dataset", "Class", "Instances", "Model", tables[0].title.split(": ")[1]],
                 [[t.title.split(":")[0], row[0], row[1], model, value]
                  for t in tables for row in t.rows for model, value in zip(t.header[2:], row[2:])],
                 range(4, 5))


def tables_text(rows: list[ResultRow], fmt: str, metric: str, per_class: bool, benchmark: str | None = None
                ) -> str:
    """The text ``results table`` prints: Table 2, per-class tables, Table 1 (``benchmark``: one
    benchmark's only). csv holds one table, so the rows must be of one benchmark; with
    ``per_class`` its RF100-VL table is the per-class table in long form."""
    from rf100vl_hf.errors import DataError
    from rf100vl_hf.results.tables import SMOKE_NOTE, Table, ap_table, per_class_tables, render, uouo_table

    detection = [row for row in rows if row.data.benchmark == "rf100vl" and benchmark in (None, "rf100vl")]
    grounding = [row for row in rows if row.data.benchmark == "uouo" and benchmark in (None, "uouo")]
    tables: list[Table] = []
    if detection and not (fmt == "csv" and per_class):
        tables.append(ap_table(detection, metric))
    if detection and per_class:
        classes = per_class_tables(detection, "ap50" if metric == "ap50" else "ap")
        tables += [_long_per_class(classes)] if fmt == "csv" and classes else classes
    if grounding:
        tables.append(uouo_table(grounding))
    if not tables:
        raise DataError("results table", "rows", f"no {benchmark or 'RF100-VL or UOUO'} rows to tabulate")
    if fmt == "csv" and len(tables) > 1:
        raise DataError("results table", "--format csv", "csv holds one table and the rows hold RF100-VL and UOUO "
                        "results: choose one with --benchmark rf100vl or --benchmark uouo")
    parts = []
    for table in tables:
        text = render(table, fmt)
        if fmt == "md":
            text = f"## {table.title}\n\n{text}" if table.title else text
        elif fmt == "latex":
            text = f"% {table.title}\n{text}" if table.title else text
        parts.append(text)
    if fmt != "csv" and any(row.model.smoke for row in detection + grounding):
        parts.append(f"*{SMOKE_NOTE}*\n" if fmt == "md" else f"% {SMOKE_NOTE}\n")
    return "\n".join(parts)


def cmd_table(args: argparse.Namespace) -> int:
    rows = _rows(args)
    if args.no_smoke:
        rows = [row for row in rows if not row.model.smoke]
        if not rows:
            from rf100vl_hf.errors import DataError

            raise DataError(", ".join(map(str, args.folders)), "--option no-smoke",
                            "every row is a smoke row (random weights)")
    text = tables_text(rows, args.format, args.metric, args.per_class, args.benchmark)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from rf100vl_hf.results.plots import write_plots

    rows = _rows(args)
    if args.dataset is not None and not any(row.data.dataset == args.dataset for row in rows):
        from rf100vl_hf.errors import DataError

        raise DataError(", ".join(map(str, args.folders)), "--dataset", f"no rows of dataset {args.dataset!r}")
    try:
        paths = write_plots(rows, args.out, args.metric, args.dataset)
    except ValueError as exc:  # e.g. a dataset without per-class results
        from rf100vl_hf.errors import DataError

        raise DataError(", ".join(map(str, args.folders)), "--dataset", str(exc)) from None
    if not paths:
        print("no RF100-VL rows: nothing to plot")
    for path in paths:
        print(f"wrote {path}")
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    from rf100vl_hf.hub.results_repo import push_results

    pushed = push_results(args.folders, args.repo_id, token=args.token, private=args.private,
                          with_predictions=args.with_predictions, timeout=args.timeout, run=args.run,
                          latest_run=args.latest)
    print(f"pushed: {pushed.commit_url} ({pushed.rows} rows in the repository"
          + (f", {pushed.predictions} prediction files" if pushed.predictions else "") + ")")
    return 0


def cmd_eval_results(args: argparse.Namespace) -> int:
    from rf100vl_hf.hub.eval_publish import publish_eval_results
    from rf100vl_hf.hub.eval_results import check_model_repo, eval_files, write_eval_files

    source = args.source or None
    source_url = None
    if source:
        from huggingface_hub import constants

        source_url = source if "://" in source else f"{constants.ENDPOINT}/datasets/{source}"
    files = eval_files(_rows(args), args.benchmark, model=args.model, benchmark_revision=args.benchmark_revision,
                       source_url=source_url, partial=args.partial, allow_unofficial=args.allow_unofficial)
    for file in files:
        for task, why in file.skipped.items():
            print(f"{file.name}: task {task} left out ({why})")
    if args.model_repo:
        check_model_repo(files, args.model_repo, args.model_repo_mismatch_ok)
    if args.out is not None:
        for path in write_eval_files(files, args.out):
            print(f"wrote {path}")
        return 0
    if not args.model_repo:
        from rf100vl_hf.errors import DataError

        raise DataError("eval-results", "--model-repo", "give the model repository to push to (or --out to only write)")
    pushed = publish_eval_results(files, args.model_repo, args.benchmark, token=args.token, create_pr=args.create_pr,
                                  benchmark_revision=args.benchmark_revision, timeout=args.timeout,
                                  mismatch_ok=args.model_repo_mismatch_ok)
    for task, why in pushed.left_out.items():
        print(f"task {task} left out ({why})")
    where = f"pull request #{pushed.pull_request}" if pushed.pull_request else "main"
    if not pushed.changed:
        print(f"unchanged: {where} already holds these evaluation results ({pushed.url})")
    elif pushed.updated:
        print(f"updated {where}, which carried earlier scores: {pushed.url}")
    else:
        print(f"pushed to {where}: {pushed.url}")
    return 0


def cmd_hub_status(args: argparse.Namespace) -> int:
    from rf100vl_hf.hub.eval_status import hub_status, status_lines

    status = hub_status(args.model_repo, args.datasets or (), token=args.token, timeout=args.timeout)
    print("\n".join(status_lines(status)))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from rf100vl_hf.results.compare import compare, comparison_table, errors_table, notes
    from rf100vl_hf.results.tables import render

    comparison = compare(args.a, args.b, args.model_a, args.model_b, args.data_dir, args.fewshot_dir,
                         args.resamples, args.confidence, args.seed)
    if not comparison.datasets:
        from rf100vl_hf.controls import one_line
        from rf100vl_hf.errors import DataError

        why = "; ".join(f"{name}: {reason}" for name, reason in comparison.skipped.items()) or "neither holds one"
        raise DataError(f"{args.a} and {args.b}", "datasets", one_line(f"no dataset was compared ({why})"))
    if args.format == "json":
        import dataclasses
        import json

        print(json.dumps(dataclasses.asdict(comparison), indent=2))
        return 0
    table, errors = comparison_table(comparison), errors_table(comparison)
    if args.format == "md":
        print("\n".join([f"## {table.title}", "", *(f"- {line}" for line in notes(comparison)), ""]))
        sys.stdout.write(render(table, "md"))
        if errors.rows:
            sys.stdout.write(f"\n## {errors.title}\n\n" + render(errors, "md"))
        return 0
    sys.stdout.write(render(table, args.format))
    for line in notes(comparison):  # kept off stdout, which holds the table alone
        print(line, file=sys.stderr)
    return 0


def cmd_draw(args: argparse.Namespace) -> int:
    from rf100vl_hf.results.draw import draw, pair_of

    pair = pair_of(args.source, args.dataset, args.model, args.split, args.data_dir, args.fewshot_dir)
    for path in draw(pair, args.out, args.images, args.image_ids or (), args.min_score, replies=args.replies,
                     label_errors=args.label_errors):
        print(f"wrote {path}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``results`` and its sub-commands on the ``rf100vl-hf`` parser."""
    from rf100vl_hf.arguments import REPO_ID
    from rf100vl_hf.results.tables import FORMATS, METRICS

    metric = Setting("metric", str, "ap", "RF100-VL metric (ap = AP50:95)", tuple(METRICS))

    formatter = argparse.RawDescriptionHelpFormatter
    results = subparsers.add_parser("results", help="rebuild, print, plot and publish results tables",
                                    description=DESCRIPTION, formatter_class=formatter)
    commands = results.add_subparsers(dest="results_command", required=True, metavar="COMMAND")

    p = commands.add_parser("summary", help="rebuild summary.md and results.parquet", description=SUMMARY_HELP,
                            formatter_class=formatter)
    _folders(p)
    p.add_argument("--out", type=Path, help="folder to write into (default: the one folder given)")
    add_settings(p, Setting("no-plots", boolean, False, "do not draw the figures"))
    p.set_defaults(func=cmd_summary)

    p = commands.add_parser("table", help="print Table 2 (RF100-VL) and Table 1 (UOUO) as md, csv or LaTeX",
                            description=TABLE_HELP, formatter_class=formatter)
    _folders(p)
    p.add_argument("--format", choices=FORMATS, default="md", help="default: md")
    p.add_argument("--out", type=Path, help="write to this file instead of printing")
    add_settings(p, metric,
                 Setting("per-class", boolean, False, "add per-class tables (ap or ap50)"),
                 Setting("benchmark", str, None, "only this benchmark's table (default: both)", ("rf100vl", "uouo")),
                 Setting("no-smoke", boolean, False, "leave out smoke rows (random weights)"))
    p.set_defaults(func=cmd_table)

    p = commands.add_parser("plot", help="draw PNG figures", description=PLOT_HELP, formatter_class=formatter)
    _folders(p)
    p.add_argument("--out", type=Path, required=True, help="folder for the PNG files")
    add_settings(p, metric, Setting("dataset", str, None, "the dataset of the per-class figure"))
    p.set_defaults(func=cmd_plot)

    p = commands.add_parser("push", help="append-and-merge the rows into a results dataset on the Hub",
                            description=PUSH_HELP, formatter_class=formatter)
    _folders(p)
    p.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="the results dataset repository")
    add_settings(p, Setting("with-predictions", boolean, False, "also upload the prediction files"),
                 Setting("private", boolean, False, "create the repository as private"), *_hub_settings())
    p.set_defaults(func=cmd_push)

    p = commands.add_parser("eval-results", help="write and push .eval_results/*.yaml of one model",
                            description=EVAL_HELP, formatter_class=formatter)
    _folders(p)
    p.add_argument("--model-repo", type=REPO_ID, metavar="ORG/MODEL", help="the model repository to push to")
    p.add_argument("--benchmark", required=True, type=REPO_ID, metavar="ORG/DATASET",
                   help="the benchmark dataset (with eval.yaml)")
    p.add_argument("--out", type=Path, help="only write .eval_results/ into this folder, push nothing")
    add_settings(
        p,
        Setting("benchmark-revision", str, None, "the benchmark dataset's commit (SHA) the scores are for"),
        Setting("source", str, None, "the results dataset repository ORG/NAME (or a URL) the scores come from"),
        Setting("model", str, None, "the model (SPEC) of the rows to report (needed when they hold several)"),
        Setting("partial", boolean, False, "report means over partly covered tasks (unofficial: needs "
                "allow-unofficial)"),
        Setting("allow-unofficial", boolean, False, "write smoke, limited and partial results too, with notes "
                "saying what they are"),
        Setting("model-repo-mismatch-ok", boolean, False, "push rows whose checkpoint is not --model-repo (a local "
                "or fine-tuned copy of it)"),
        Setting("create-pr", boolean, False, "open a pull request (or update yours that carries these files) "
                "instead of committing to main"),
        *_hub_settings(),
    )
    p.set_defaults(func=cmd_eval_results)

    p = commands.add_parser("hub-status", help="what the Hub lists for a model, its pull requests with scores, "
                            "and the benchmark's leaderboard", description=HUB_STATUS_HELP, formatter_class=formatter)
    p.add_argument("--model-repo", required=True, type=REPO_ID, metavar="ORG/MODEL", help="the model repository")
    add_settings(p, Setting("dataset", REPO_ID, None, "a benchmark ORG/DATASET whose leaderboard to show "
                            "(repeatable; default: those the entries name)", repeated=True, attribute="datasets"),
                 *_hub_settings("a token (default: the logged-in one or $HF_TOKEN; none is needed for public "
                                "repositories)"))
    p.set_defaults(func=cmd_hub_status)

    _add_compare_parser(commands)


def _add_compare_parser(commands: argparse._SubParsersAction) -> None:
    from rf100vl_hf.arguments import DIRECTORY, FRACTION, INTEGER, POSITIVE_INTEGER
    from rf100vl_hf.results.defaults import CONFIDENCE, RESAMPLES
    from rf100vl_hf.results.tables import FORMATS

    p = commands.add_parser("compare", help="per-dataset and per-domain AP differences of two results folders, "
                            "with bootstrap intervals", description=COMPARE_HELP,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", type=Path, metavar="DIR_A", help="results folder A (or its results.jsonl)")
    p.add_argument("b", type=Path, metavar="DIR_B", help="results folder B; differences are B - A")
    p.add_argument("--format", choices=[*FORMATS, "json"], default="md", help="default: md")
    add_settings(
        p,
        Setting("model-a", str, None, "the model (SPEC) of A's rows (needed when A holds several)"),
        Setting("model-b", str, None, "the model (SPEC) of B's rows (needed when B holds several)"),
        Setting("data-dir", DIRECTORY, None, "folder of the full exports the rows were scored on"),
        Setting("fewshot-dir", DIRECTORY, None, "folder of the official few-shot exports"),
        Setting("resamples", POSITIVE_INTEGER, RESAMPLES, "bootstrap draws"),
        Setting("confidence", FRACTION, CONFIDENCE, "interval level"),
        Setting("seed", INTEGER, 0, "seed of the draws"),
    )
    p.set_defaults(func=cmd_compare)


DRAW_HELP = """\
Draw a pair's predictions against the ground truth on a few images of its split, as PNG: green
ground-truth boxes, and predictions in blue when pycocotools matches them to a box at IoU 0.5,
orange when they match none (class and score on each). SOURCE is a results folder (its row of
--dataset: the split, limit and predictions file it records, checked against the export) or
a COCO results file (scored against the split setting of --dataset). With --option
replies=true, a pair run with the report key log-samples (rf100vl_log_samples) shows its model's raw
replies too (its samples log: the row's samples_file, or <split>.samples.jsonl beside a results file).
"""


def add_draw_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``draw`` on the ``rf100vl-hf`` parser."""
    import math

    from rf100vl_hf.arguments import DIRECTORY, FOLDER, INTEGER, POSITIVE_INTEGER, checked
    from rf100vl_hf.results.defaults import MIN_SCORE

    p = subparsers.add_parser("draw", help="draw predictions against ground truth on a few images, as PNG",
                              description=DRAW_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", type=Path, metavar="SOURCE", help="a results folder, or a COCO results (.json) file")
    p.add_argument("--dataset", required=True, metavar="NAME", help="the dataset (as --rf100vl-dataset names it)")
    p.add_argument("--out", type=FOLDER, required=True, help="folder for the PNG files")
    add_settings(
        p,
        Setting("model", str, None, "the model (SPEC) of the row to draw (when the folder holds several)"),
        Setting("split", str, "test", "split of a results file (a folder's row says)"),
        Setting("images", POSITIVE_INTEGER, 8, "the first N images"),
        Setting("image-id", INTEGER, None, "draw this image instead (repeatable)", repeated=True,
                attribute="image_ids"),
        Setting("label-errors", boolean, False, "draw the images of the row's label-error candidates instead "
                "(docs/errors.md)"),
        Setting("min-score", checked(float, math.isfinite, "a number"), MIN_SCORE,
                "draw predictions scoring at least this"),
        Setting("replies", boolean, False, "also show what a model that answers in text wrote (a pair run with "
                "log-samples): each caption quotes its replies, and <dataset>-<image id>.reply.txt beside each "
                "PNG holds the texts sent, the replies and the boxes read"),
        Setting("data-dir", DIRECTORY, None, "folder of the full exports"),
        Setting("fewshot-dir", DIRECTORY, None, "folder of the official few-shot exports"),
    )
    p.set_defaults(func=cmd_draw)
