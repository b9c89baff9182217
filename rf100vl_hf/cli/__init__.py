"""``rf100vl-hf``: browse the catalogue, prepare datasets, export and push Hub repositories.

Every command is a thin call into the package; ``rf100vl-hf COMMAND --help`` explains each
(docs/cli.md lists them all). Start-up stays light: ``--help`` and ``prepare`` import
neither torch nor a model library; each command imports what it needs when it runs (the
UOUO options are declared in the light :mod:`rf100vl_hf.uouo.defaults`). Every bad argument
and every error of the data, the paths or the Hub ends in one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import warnings
from dataclasses import fields
from pathlib import Path
from typing import Any, Iterator, NoReturn, Sequence

from rf100vl_hf import catalog, paths
from rf100vl_hf.arguments import (
    DIRECTORY,
    FOLDER,
    INTEGER,
    POSITIVE_INTEGER,
    POSITIVE_NUMBER,
    REPO_ID,
    Setting,
    add_settings,
    boolean,
    checked,
    setting_keys,
    whole_words,
)
from rf100vl_hf.controls import one_line, visible
from rf100vl_hf.errors import DatasetNotFoundError, MissingExtraError, Rf100vlError, needs_extra, os_error_line
from rf100vl_hf.redact import scrub
from rf100vl_hf.rf100vl.build_record import BuildRecord, unchanged_build
from rf100vl_hf.rf100vl.request import (
    SPLIT_PARAMETERS,
    VERIFY_IMAGES,
    DatasetRequest,
    SplitParameters,
    check_split_parameter,
)
from rf100vl_hf.uouo.defaults import (
    BUILD_SETTINGS,
    CURATE_CLIP_MODEL,
    CURATE_CLIP_PRETRAINED,
    CURATE_MIN_IMAGES,
    DEFAULT_ALPHA_THRESHOLD,
    DEFAULT_MAX_SIDE,
    DEFAULT_REMOVER,
    DEFAULT_ROUTE,
    DEFAULT_SEED,
    DEFAULT_SIGMA,
    MODES,
    RANDOM_INIT,
    ROUTES,
    TINY_REMOVER,
    BuildSetting,
)

USAGE_ERROR = 2
"""Exit status of a bad argument, bad data, a bad path or a failed Hub call (argparse's own)."""


class CommandError(Rf100vlError):
    """A command could not do its work for a reason outside the package (the Hub, a file system)."""


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line that says where to read more (and, for a flag
    that became a setting, how to give it now); help never breaks a setting's key at its hyphen."""

    def __init__(self, *args: Any, formatter_class: type[argparse.HelpFormatter] = argparse.HelpFormatter,
                 **kwargs: Any) -> None:
        super().__init__(*args, formatter_class=whole_words(formatter_class), **kwargs)

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            moved = setting_keys(self)
            hints = [f"{flag} is now --option {flag[2:]}=VALUE" for word in message.split()
                     if (flag := word.partition("=")[0]).startswith("--") and flag[2:] in moved]
            hints += [f"{word} is now --run {word[2:]}" for word in message.split() if word in ("--latest", "--all")]
            message += "".join(f"; {hint}" for hint in dict.fromkeys(hints))
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


EPILOG = f"""\
data folders:
  full exports       --data-dir, else ${paths.DATA_DIR_ENV}, else <cache home>/rf100-vl
  few-shot exports   --fewshot-dir, else ${paths.FEWSHOT_DIR_ENV}, else <cache home>/rf100-vl-fsod
  cache home         ${paths.CACHE_HOME_ENV}, else $XDG_CACHE_HOME/rf100vl-hf, else ~/.cache/rf100vl-hf
  Arrow cache        $HF_DATASETS_CACHE (datasets' own setting)

examples:
  rf100vl-hf list --subset rf20vl
  rf100vl-hf prepare sample && python -c "from datasets import load_dataset; print(load_dataset('rf100vl', 'sample', split='fewshot_10'))"
  rf100vl-hf export --out ./rf100vl-hub --dataset bees --dataset actions
  rf100vl-hf push ./rf100vl-hub --repo-id my-org/rf100vl
"""


EXPORT_DESCRIPTION = """\
Write the Hugging Face Hub repository of RF100-VL datasets: one config per dataset, each
split as parquet shards (images embedded as their original bytes), and a README.md whose
YAML lists every config, its splits and features, and whose text has the domain table, the
annotator instructions and the protocol notes. Check the result locally with
  load_dataset("OUT", "<dataset>", split="test")
Re-running into the same --out rebuilds the named datasets and keeps the others; the
folder is replaced only when the whole export succeeded.
"""

PUSH_NOTE = """\
pushing needs a token with write access: `hf auth login`, or HF_TOKEN in the environment.
The pushed repository holds exactly the folder: remote files it lacks are deleted in the
same commit (the Hub's history keeps them), so push a folder that holds every config.
"""


TOKEN = Setting("token", str, None, "a token with write access (default: the logged-in one or $HF_TOKEN)")
PRIVATE = Setting("private", boolean, False, "create the pushed repository as private")


def _add_export_options(parser: argparse.ArgumentParser, *settings: Setting) -> None:
    """``--out``, ``--push``, and ``--option`` for ``private`` and ``settings``."""
    parser.add_argument("--out", type=FOLDER, required=True, help="the repository folder to write (created or updated)")
    parser.add_argument(
        "--push", metavar="ORG/NAME", type=REPO_ID, help="then push the folder to this Hub dataset repository"
    )
    add_settings(parser, PRIVATE, *settings)


def _add_data_dirs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=DIRECTORY, help="folder of full exports, one sub-folder per dataset")
    parser.add_argument("--fewshot-dir", type=DIRECTORY, help="folder of the official few-shot exports")


def split_settings() -> tuple[Setting, ...]:
    """``prepare``'s split parameters, made from :class:`SplitParameters`' fields (key, help,
    default) and checked by its own check; ``None`` until given, so only what is given is passed."""
    kinds = {"int": (int, "an integer"), "float": (float, "a number"), "str": (str, "text")}

    def converter(name: str, kind: str) -> Any:
        def convert(text: str) -> Any:
            make, expected = kinds[kind]
            try:
                value = make(text.strip())
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected {expected}, not {text!r}") from None
            return check_split_parameter(name, value)

        return convert

    return tuple(Setting(item.name.replace("_", "-"), converter(item.name, str(item.type)), None,
                         f"{item.metadata['help']} (default {item.default})") for item in fields(SplitParameters))


class _Which(argparse.Action):
    """``list``'s selection, ``all``, ``rf20vl`` or ``[rf20vl:]domain:NAME``: sets ``args.subset``
    and ``args.domain`` (``None``: every domain)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any,
                 option_string: str | None = None) -> None:
        chosen = catalog.selection(str(value))
        if chosen is None:
            raise argparse.ArgumentError(self, f"expected all, rf20vl or [rf20vl:]domain:NAME, not {value!r}")
        namespace.subset, namespace.domain = chosen


def cmd_list(args: argparse.Namespace) -> int:
    from rf100vl_hf.rf100vl.sources import custom_exports

    data_dir = args.data_dir or paths.default_data_dir()
    rows = catalog.select(args.domain, args.subset)
    print(f"{'dataset':34} {'domain':14} {'RF20-VL':8} on disk")
    for entry in rows:
        here = "yes" if (data_dir / entry.basename).is_dir() else "-"
        print(f"{entry.basename:34} {entry.domain:14} {'yes' if entry.in_rf20vl else '-':8} {here}")
    if args.domain is None and args.subset == "all":
        for name in custom_exports(data_dir):
            print(f"{name:34} {catalog.CUSTOM_DOMAIN:14} {'-':8} yes")
    print(f"\n{len(rows)} datasets; data folder: {data_dir}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from rf100vl_hf.rf100vl.builder import rf100vl_builder

    if catalog.contains(args.name):
        entry = catalog.get(args.name)
        print(f"{entry.basename}: {entry.domain}{', in RF20-VL' if entry.in_rf20vl else ''}")
        print(f"  full export      {entry.full_project}  {entry.full_url}")
        print(f"  few-shot export  {entry.fewshot_project}  {entry.fewshot_url}")
    try:
        builder = rf100vl_builder(args.name, args.data_dir, args.fewshot_dir, progress=False)
    except DatasetNotFoundError as exc:
        print(f"\n{exc}")
        return 0
    source, meta = builder.source, builder.metadata
    print(f"\non disk: {source.root}" + (f" (few-shot: {source.fewshot_root})" if source.fewshot_root else ""))
    print(f"  layout {meta['layout']}, fingerprint {meta['fingerprint']}, licence {meta['license'] or 'unknown'}")
    print(f"  classes ({len(meta['classes'])}): {', '.join(meta['classes'])}")
    for split, exported in builder.export.splits.items():
        boxes = sum(len(image.annotations) for image in exported.images)
        print(f"  {split:11} {len(exported.images):6} images {boxes:7} boxes")
    instances = meta["fewshot"].get("instances") or {}
    counts = ", ".join(f"{name} {count}" for name, count in instances.items())
    print(f"  few-shot split: {meta['fewshot']['source']}" + (f" ({counts})" if counts else ""))
    described = meta["instructions"]["classes"]
    print(f"  annotator instructions: {len(described)} of {len(meta['classes'])} classes")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    params = {key: getattr(args, key) for key in SPLIT_PARAMETERS if getattr(args, key) is not None}
    request = DatasetRequest(args.data_dir, args.fewshot_dir, args.cache_dir, args.verify_images,
                             SplitParameters(**params))
    for name in args.names:
        # a build whose files are unchanged is found by stat, before datasets is imported
        record = None if args.verify else unchanged_build(request, name)
        reused = record is not None
        if record is None:
            record, reused = _prepared(request, name, args.verify)
        splits = ", ".join(f"{split} ({examples})" for split, examples in record.splits.items())
        how = "reused (no file changed since its build; --verify re-reads them)" if reused else "prepared"
        print(f"{name}: {how} {splits}\n  in {record.path}")
        if record.config_id == name:
            print(f"  load it anywhere with: load_dataset('rf100vl', '{name}', split='test')")
        else:
            print(
                f"  custom parameters make the config id {record.config_id!r}: load it with "
                f"rf100vl_hf.rf100vl.builder.load_rf100vl('{name}', **params)"
            )
    return 0


def _prepared(request: DatasetRequest, name: str, verify: bool) -> tuple[BuildRecord, bool]:
    """The build of ``name`` made or found by the builder, and whether it was found by stat."""
    from rf100vl_hf.rf100vl.builder import builder_of

    builder = builder_of(request, name, verify=verify)
    builder.download_and_prepare()
    return builder.record, builder.reused_unread


def cmd_export(args: argparse.Namespace) -> int:
    from rf100vl_hf.hub.rf100vl_card import datasets_on_disk, export_rf100vl

    names = args.datasets or datasets_on_disk(args.data_dir)
    if not names:
        where = args.data_dir or paths.default_data_dir()
        raise DatasetNotFoundError(f"no dataset found in {where}; see 'rf100vl-hf export --help'")
    out = export_rf100vl(names, args.out, args.data_dir, args.fewshot_dir, repo_id=args.push)
    print(f"wrote {out}\n  check it with: load_dataset('{out}', '{names[0]}', split='test')")
    if args.push:
        _push(out, args.push, private=args.private)
    return 0


def _hub_errors() -> tuple[type[BaseException], ...]:
    """What a Hub call raises when the Hub is unreachable, refuses or fails: the Hub client's
    HTTP errors, its transport's errors (whichever HTTP library it uses), and what it raises
    as plain errors (RuntimeError, ValueError for a refused repository id)."""
    from huggingface_hub.errors import HfHubHTTPError

    errors: list[type[BaseException]] = [HfHubHTTPError, OSError, RuntimeError, ValueError]
    for transport, base in (("httpx", "HTTPError"), ("httpx2", "HTTPError"), ("requests", "RequestException")):
        with contextlib.suppress(ImportError, AttributeError):
            errors.append(getattr(importlib.import_module(transport), base))
    return tuple(errors)


@contextlib.contextmanager
def _hub_call(repo_id: str) -> Iterator[None]:
    """Turn a failed Hub call into a one-line :class:`CommandError` naming the repository."""
    try:
        yield
    except Rf100vlError:
        raise
    except _hub_errors() as exc:
        raise CommandError(f"pushing to {repo_id!r} failed: {type(exc).__name__}: {_one_line(exc)}") from exc


def _push(path: Path, repo_id: str, **options: Any) -> None:
    from rf100vl_hf.hub.push import push_repository

    with _hub_call(repo_id):
        url = push_repository(path, repo_id, **options)
    print(f"pushed: {url}")


def cmd_push(args: argparse.Namespace) -> int:
    _push(args.path, args.repo_id, token=args.token, private=args.private, revision=args.revision)
    return 0


UOUO_DESCRIPTION = """\
UOUO mosaics of four uncommon objects, each asked "where is the <category>" (a box) and
"which quadrant" (one of four words). Config `random` draws four categories at random;
config `mmd` puts an anchor beside its three nearest categories by MMD over CLIP image
embeddings (the hard mosaics). Cut-out embeddings are cached, so a rebuild does not embed
again.
"""

UOUO_SOURCES = f"""\
the cut-outs:
  --source-dir, else ${paths.UOUO_SOURCE_ENV}, else <cache home>/uouo-source, else the
  package's embedded sample (8 drawn categories x 4 images). One folder per category of
  RGBA images, or of image + <stem>.mask.png pairs; a manifest.json may rename folders
  ({{"categories": {{"folder": "Name"}}}}) or list the cut-outs ({{"items": [...]}}).
  The default CLIP weights are downloaded by open_clip the first time; offline, pass a
  local weights file with --option clip-pretrained=FILE, or --option clip-pretrained=none
  for seeded random weights (a smoke run: the mmd neighbours mean nothing).
"""


def _build_setting(setting: BuildSetting, default: Any = None) -> Setting:
    """A setting of the UOUO build (:data:`rf100vl_hf.uouo.defaults.BUILD_SETTINGS`, where the
    plugin's ``--uouo-option`` reads it too) as an ``--option`` key; ``default``: another default."""
    convert = checked(int if setting.kind == "int" else str, setting.allows, setting.expected)
    typed = (lambda text: None if text.lower() == RANDOM_INIT else convert(text)) if setting.none else convert
    return Setting(setting.key, typed, setting.default if default is None else default, setting.help)


def _clip_settings(work: str, model: str | None = None, pretrained: str | None = None) -> tuple[Setting, ...]:
    """The open_clip model and weights that embed images (``None``: the UOUO build's defaults), and where."""
    return (
        _build_setting(BUILD_SETTINGS["clip-model"], model),
        _build_setting(BUILD_SETTINGS["clip-pretrained"], pretrained),
        Setting("device", str, None, f"where to {work} (default: auto, i.e. cuda, then mps, then cpu)"),
    )


UOUO_SETTINGS = (
    _build_setting(BUILD_SETTINGS["num-mosaics"]),
    _build_setting(BUILD_SETTINGS["seed"]),
    Setting("sigma", POSITIVE_NUMBER, DEFAULT_SIGMA, "RBF kernel width of the MMD"),
    Setting("route", str, DEFAULT_ROUTE, "nearest categories: exact MMD, mean embeddings, or auto by category count",
            ROUTES),
    *_clip_settings("embed and compute MMD"),
    _build_setting(BUILD_SETTINGS["alpha-threshold"]),
)
"""The UOUO builder's settings, with the builder's defaults (``uouo prepare`` and ``uouo export``)."""


def _add_uouo_options(parser: argparse.ArgumentParser) -> None:
    """Where the cut-outs are and which configs to build."""
    parser.add_argument("--source-dir", type=DIRECTORY, help="folder of cut-outs, one sub-folder per category")
    parser.add_argument(
        "--config", action="append", dest="configs", choices=MODES,
        help="a config to build (repeatable); default: all of them",
    )


def _uouo_kwargs(args: argparse.Namespace) -> dict:
    """The builder's parameters: every :data:`UOUO_SETTINGS` value."""
    return {setting.dest: getattr(args, setting.dest) for setting in UOUO_SETTINGS}


@contextlib.contextmanager
def _clip_remedies() -> Iterator[None]:
    """CLIP weights that cannot be downloaded: the error names this command's options."""
    from rf100vl_hf.uouo.embeddings import ClipWeightsError

    try:
        yield
    except ClipWeightsError as exc:
        raise CommandError(exc.advice("--option clip-pretrained=none", "--option clip-pretrained=FILE")) from None


def cmd_uouo_prepare(args: argparse.Namespace) -> int:
    from rf100vl_hf.uouo.builder import uouo_builder

    for config in args.configs or MODES:
        builder = uouo_builder(config, args.source_dir, args.cache_dir, **_uouo_kwargs(args))
        with _clip_remedies():
            builder.download_and_prepare()
        print(f"uouo/{config}: prepared {builder.info.splits['test'].num_examples} mosaics\n  in {builder.cache_dir}")
        if builder.config_id == config:
            print(f"  load it anywhere with: load_dataset('uouo', '{config}', split='test')")
    return 0


def cmd_uouo_export(args: argparse.Namespace) -> int:
    from rf100vl_hf.hub.uouo_card import export_uouo

    with _clip_remedies():
        out = export_uouo(
            args.out, args.source_dir, tuple(args.configs or MODES), repo_id=args.push, license=args.license,
            **_uouo_kwargs(args),
        )
    print(f"wrote {out}\n  check it with: load_dataset('{out}', 'mmd', split='test')")
    if args.push:
        _push(out, args.push, private=args.private)
    return 0


CURATE_DESCRIPTION = """\
The UOUO paper's curation, from a raw image collection (one sub-folder of images per
category) to a folder of cut-outs that 'rf100vl-hf uouo prepare --source-dir OUT' reads:
read and check every file, the paper's CLIP features (§3), an XGBoost classifier trained
from --labels (stratified 5-fold cross-validation and a grid search), the category filter,
background removal (rembg), the manifest and the report (Appendix A's statistics and the
classifier's scores beside the paper's). Without --labels, --classifier or
--option percentile-rule=P it writes the feature table and a labelling sheet (a CSV and a contact
sheet per category) and stops. An interrupted run resumes: embeddings are cached and each
removal is journalled. See docs/uouo.md, "Curation".
"""

CURATE_EPILOG = f"""\
removers:
  isnet-general-use (default, Apache-2.0), u2net, birefnet-general (rembg downloads them at
  first use); bria-rmbg (BRIA RMBG-2.0) and bria-rmbg-1.4 (the paper's) are non-commercial;
  FILE.onnx (rembg's u2net_custom layout); {TINY_REMOVER} (seeded random, offline: a smoke run).
"""


def _percentile(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 100:
        raise ValueError(text)
    return value


def cmd_uouo_curate(args: argparse.Namespace) -> int:
    from rf100vl_hf.uouo.curate import CurateOptions, curate

    if args.percentile_rule is not None and (args.labels or args.classifier):
        raise CommandError("percentile-rule (not the paper's method) replaces the classifier: give it without "
                           "--labels and --classifier")
    options = CurateOptions(
        labels=args.labels, classifier_file=args.classifier, percentile_rule=args.percentile_rule,
        clip_model=args.clip_model, clip_pretrained=args.clip_pretrained, device=args.device,
        batch_size=args.batch_size, remover=args.remover, num_proc=args.num_proc, min_images=args.min_images,
        alpha_threshold=args.alpha_threshold, max_side=args.max_side, seed=args.seed, license=args.license,
    )
    with _clip_remedies(), needs_extra("rf100vl-hf uouo curate", "curate"):
        result = curate(args.raw_dir, args.out, options)
    if result.stopped:
        print(f"no labels: wrote the feature table and the labelling sheet {result.labelling} (with a contact sheet "
              f"per category); fill in its label column (good or bad) and rerun with --labels {result.labelling}")
        return 0
    stats = result.statistics
    assert stats is not None and result.remover is not None
    print(f"kept {stats.kept_categories} of {stats.categories_in} categories and {stats.kept_images} of "
          f"{stats.images_in} images in {args.out}; report: {args.out / 'curation' / 'report.md'}")
    pretrained = args.clip_pretrained or "none"
    print(f"  build mosaics with: rf100vl-hf uouo prepare --source-dir {args.out} "
          f"--option clip-model={args.clip_model} --option clip-pretrained={pretrained}  (the cut-outs' embeddings "
          "are cached)")
    return 0


def _add_curate_command(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "curate", help="curate a raw image collection into cut-outs (the paper's cleaning and background removal)",
        description=CURATE_DESCRIPTION, epilog=CURATE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("raw_dir", type=DIRECTORY, metavar="RAW_DIR", help="one sub-folder of images per category")
    p.add_argument("--out", type=FOLDER, required=True, help="the cut-out folder to write (resumed when it exists)")
    p.add_argument("--labels", type=Path, help="CSV of path,label (good or bad), paths relative to RAW_DIR")
    p.add_argument("--classifier", type=Path, help="apply a classifier.json saved by an earlier curation")
    add_settings(
        p,
        Setting("percentile-rule", checked(_percentile, lambda v: True, "a percentile in 0..100"), None,
                "NOT the paper's method: drop images below the P-th percentile of average similarity in their "
                "category"),
        *_clip_settings("embed", CURATE_CLIP_MODEL, CURATE_CLIP_PRETRAINED),
        Setting("batch-size", POSITIVE_INTEGER, 64, "images per CLIP batch"),
        Setting("remover", str, DEFAULT_REMOVER, "background remover (see below)"),
        Setting("num-proc", POSITIVE_INTEGER, 1, "processes removing backgrounds"),
        Setting("min-images", POSITIVE_INTEGER, CURATE_MIN_IMAGES, "drop a category left with fewer images (the "
                "paper's minimum)"),
        Setting("alpha-threshold", INTEGER, DEFAULT_ALPHA_THRESHOLD, "mask values at or below this are background"),
        Setting("max-side", POSITIVE_INTEGER, DEFAULT_MAX_SIDE, "longest side a cut-out is made at"),
        Setting("seed", INTEGER, DEFAULT_SEED, "cross-validation folds, tiny remover"),
        Setting("license", str, None, "the raw images' licence as a Hub licence id, recorded for the dataset card"),
    )
    p.set_defaults(func=cmd_uouo_curate)


def _add_uouo_commands(sub: argparse._SubParsersAction) -> None:
    """The ``uouo`` command and its sub-commands."""
    uouo = sub.add_parser("uouo", help="build, export and push UOUO mosaics", description=UOUO_DESCRIPTION)
    commands = uouo.add_subparsers(dest="uouo_command", required=True, metavar="COMMAND")
    p = commands.add_parser(
        "prepare",
        help="build the Arrow cache that load_dataset('uouo', CONFIG, split='test') reads",
        description=UOUO_DESCRIPTION,
        epilog=UOUO_SOURCES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_uouo_options(p)
    p.add_argument("--cache-dir", type=FOLDER, help="datasets cache (default: $HF_DATASETS_CACHE)")
    add_settings(p, *UOUO_SETTINGS)
    p.set_defaults(func=cmd_uouo_prepare)

    p = commands.add_parser(
        "export",
        help="write a Hub-ready repository (parquet shards + dataset card), optionally push it",
        description=UOUO_DESCRIPTION
        + '\nCheck the result locally with load_dataset("OUT", "mmd", split="test"). Re-running into\n'
        + "the same --out rebuilds the named configs and keeps the others.",
        epilog=UOUO_SOURCES + "\n" + PUSH_NOTE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_uouo_options(p)
    _add_export_options(p, *UOUO_SETTINGS, Setting(
        "license", str, None, "the source images' licence as a Hub licence id (default: what the source's manifest, "
        "LICENSE file or README says, else unknown)"))
    p.set_defaults(func=cmd_uouo_export)
    _add_curate_command(commands)


def cmd_sample(args: argparse.Namespace) -> int:
    from rf100vl_hf.sample import write_sample_export

    root = write_sample_export(args.out)
    print(f"wrote the sample export to {root}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    parser = Parser(
        prog="rf100vl-hf",
        description="RF100-VL and UOUO as Hugging Face datasets.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="list the catalogue's datasets (and custom exports on disk)")
    p.add_argument("which", nargs="?", default="all", action=_Which, metavar="all|rf20vl|[rf20vl:]domain:NAME",
                   help="the datasets to list, as --rf100vl-dataset names them: a subset, or a domain of the paper's "
                   "seven (e.g. 'domain:Flora & Fauna'), in a subset (default: all)")
    p.set_defaults(domain=None, subset="all")
    p.add_argument("--data-dir", type=Path, help="folder of full exports (to show what is on disk)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("info", help="show a dataset: catalogue entry, and classes and splits if on disk")
    p.add_argument("name", help="dataset basename, e.g. bees, or 'sample'")
    _add_data_dirs(p)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser(
        "prepare",
        help="validate exports and build the Arrow cache that load_dataset('rf100vl', NAME) reads",
        description=(
            "Read and validate every file of each export, then write datasets' Arrow cache, unless a "
            "build of the same contents exists (then it is reused). An export none of whose files changed "
            "(size and modification time) since its build is reused after a stat of each file, reading "
            "none; --verify reads and checks every file anyway. Afterwards "
            "load_dataset('rf100vl', NAME, split=...) works from any directory, offline "
            "(set HF_HUB_OFFLINE=1 on a machine without network to skip the Hub lookup), and "
            "load_rf100vl and the pytest plugin reuse the build after a stat of each file, as long "
            "as no file of the export changed."
        ),
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="dataset basenames, custom export folders, or 'sample'")
    _add_data_dirs(p)
    p.add_argument("--cache-dir", type=FOLDER, help="datasets cache (default: $HF_DATASETS_CACHE)")
    p.add_argument(
        "--verify", action="store_true",
        help="read, check and fingerprint every file even when none changed since the build (default: a build "
        "of unchanged files is reused after a stat of each file)",
    )
    add_settings(p, *split_settings(), Setting(
        "verify-images", str, "header", "header: parse headers and check JPEG/PNG end markers (fast); full: decode "
        "every image", VERIFY_IMAGES))
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser(
        "export",
        help="write a Hub-ready repository (parquet shards + dataset card), optionally push it",
        description=EXPORT_DESCRIPTION,
        epilog=PUSH_NOTE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_data_dirs(p)
    p.add_argument(
        "--dataset", action="append", dest="datasets", metavar="NAME",
        help="a dataset to export (repeatable); default: every dataset found in the data folder",
    )
    _add_export_options(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "push",
        help="push a repository folder written by 'export' to the Hub",
        epilog=PUSH_NOTE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", type=DIRECTORY, help="the folder written by 'rf100vl-hf export'")
    p.add_argument("--repo-id", required=True, metavar="ORG/NAME", type=REPO_ID, help="the Hub dataset repository")
    add_settings(p, TOKEN, PRIVATE,
                 Setting("revision", str, None, "push to this branch (created if needed) instead of main"))
    p.set_defaults(func=cmd_push)

    p = sub.add_parser("sample", help="write the embedded sample export (drawn by the package) to a folder")
    p.add_argument("--out", type=FOLDER, default=Path("sample"), help="target folder (default: ./sample)")
    p.set_defaults(func=cmd_sample)

    _add_uouo_commands(sub)

    from rf100vl_hf.cli.results import add_draw_parser
    from rf100vl_hf.cli.results import add_parser as add_results_parser

    add_results_parser(sub)
    add_draw_parser(sub)
    _add_installed_commands(sub)
    return parser


COMMANDS_GROUP = "rf100vl.commands"
"""Entry points ``NAME = "module:add_parser"``: other packages' sub-commands (the pytest plugin's
``models``), so this command line needs no import of theirs by name."""


def _add_installed_commands(sub: argparse._SubParsersAction) -> None:
    """Each installed command's ``add_parser(subparsers)``; one that clashes with a command or
    fails to load is left out with a warning, so the other commands keep working, and one whose
    extra is not installed (the plugin's ``models`` on a base install) says which to install."""
    from importlib.metadata import entry_points

    for point in entry_points(group=COMMANDS_GROUP):
        package = f" (package {point.dist.name})" if point.dist is not None else ""
        if point.name in sub.choices:
            print(f"rf100vl-hf: warning: command {point.name!r} of entry point {point.value}{package} is already a "
                  "command; left out", file=sys.stderr)
            continue
        try:
            with needs_extra(f"the {point.name!r} command"):
                point.load()(sub)
        except MissingExtraError as missing:  # listed, and running it says what to install
            sub.add_parser(point.name, help=f"(not installed) {missing}").set_defaults(func=_unavailable(missing))
        except Exception as exc:  # another package's bug must not break every command
            print(f"rf100vl-hf: warning: command {point.name!r} of entry point {point.value}{package} could not be "
                  f"added ({type(exc).__name__}: {_one_line(exc)}); left out", file=sys.stderr)


def _unavailable(missing: MissingExtraError) -> Any:
    """The function of a command whose extra is not installed: it stops with what to install."""

    def run(args: argparse.Namespace) -> int:
        raise missing

    return run


def _one_line(exc: BaseException) -> str:
    """An error's message on one line (Hub errors carry several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """A warning as one line on stderr, ``rf100vl-hf: warning: ...``, without Python's source
    path and code line; another library's warning says its kind."""
    kind = "" if category.__module__.startswith("rf100vl_hf") else f"{category.__name__}: "
    print(f"rf100vl-hf: warning: {kind}{one_line(scrub(str(message)))}", file=file or sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; 0 when it worked, 2 with one line on stderr when it could not (and a
    warning is one line too)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return args.func(args)
    except Rf100vlError as exc:
        message = str(exc)
    except OSError as exc:
        message = os_error_line(exc)
    print(f"rf100vl-hf: error: {visible(scrub(message), multiline=True)}", file=sys.stderr)  # a path may hold an escape
    return USAGE_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
