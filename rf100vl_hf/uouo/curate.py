"""The UOUO paper's curation, from a raw image collection to cut-outs ``uouo prepare`` reads.

Stages (``docs/uouo.md``, "Curation"; each module documents its own):

1. read and check every file (:mod:`.rawimages`); a category with fewer than ``min_images``
   readable images is dropped;
2. CLIP features of §3 (:mod:`.features`), embedded in batches through the embedding cache;
3. good or bad: the XGBoost classifier trained from labels, or a saved one (:mod:`.classifier`);
   the percentile rule, marked as not the paper's method; with neither, the feature table and
   the labelling sheet (:mod:`.labelling`) are written and the run stops
   (:class:`CurationResult` ``stopped``);
4. categories left with fewer than ``min_images`` kept images are dropped;
5. background removal of the kept images (:mod:`.remover`), in ``num_proc`` processes, each
   result journalled as it arrives, so an interrupted run redoes nothing; then the category
   filter again;
6. the output: ``cutouts/<category>/<name>.png``, ``manifest.json`` (the cut-outs as
   ``items``, read by :func:`rf100vl_hf.uouo.sources.read_source`), and under ``curation/``
   ``manifest.jsonl`` (one line per source image), ``features.csv``, the classifier, and
   ``report.md`` (:mod:`.curation_report`); the cut-outs' embeddings are put in the cache
   a mosaic build with the same CLIP model reads.
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from PIL import Image

from rf100vl_hf.errors import DataError
from rf100vl_hf.progress import progress_bar
from rf100vl_hf.uouo import classifier
from rf100vl_hf.uouo.curation_report import Statistics, write_report
from rf100vl_hf.uouo.defaults import (
    CURATE_CLIP_MODEL,
    CURATE_CLIP_PRETRAINED,
    CURATE_MIN_IMAGES,
    DEFAULT_ALPHA_THRESHOLD,
    DEFAULT_MAX_SIDE,
    DEFAULT_REMOVER,
)
from rf100vl_hf.uouo.embeddings import ClipEmbedder, EmbeddingCache, embed_cutouts
from rf100vl_hf.uouo.features import FEATURES, collection_features
from rf100vl_hf.uouo.labelling import write_labelling
from rf100vl_hf.uouo.rawimages import Drop, RawImage, decode_rgb, read_raw
from rf100vl_hf.uouo.remover import Remover, cut_out, new_session, predict_mask, resolve_remover
from rf100vl_hf.uouo.sources import MANIFEST, MOSAIC_CATEGORIES, read_source

WORK = "curation"
CUTOUTS = "cutouts"
JOURNAL = "removal.jsonl"
CHUNK = 8
"""Images a worker removes per task: large enough to amortise the hand-over, small enough to journal often."""


class LicenceWarning(UserWarning):
    """The remover's licence restricts use (BRIA's models: non-commercial)."""


@dataclass(frozen=True)
class CurateOptions:
    """What a curation is asked to do; ``clip_pretrained=None`` is a seeded random CLIP (offline)."""

    labels: Path | None = None
    classifier_file: Path | None = None
    percentile_rule: float | None = None
    clip_model: str = CURATE_CLIP_MODEL
    clip_pretrained: str | None = CURATE_CLIP_PRETRAINED
    device: str | None = None
    batch_size: int = 64
    remover: str = DEFAULT_REMOVER
    num_proc: int = 1
    min_images: int = CURATE_MIN_IMAGES
    alpha_threshold: int = DEFAULT_ALPHA_THRESHOLD
    max_side: int = DEFAULT_MAX_SIDE
    seed: int = 0
    grid: dict[str, list[Any]] | None = None
    license: str | None = None
    embedding_cache: Path | None = None
    progress: bool = True


@dataclass
class CurationResult:
    """What a curation did: ``stopped`` when it wrote the labelling sheet and stopped."""

    out: Path
    statistics: Statistics | None = None
    scores: classifier.Scores | None = None
    labelling: Path | None = None
    remover: Remover | None = None
    drops: dict[str, int] = field(default_factory=dict)

    @property
    def stopped(self) -> bool:
        return self.labelling is not None


def _work(out: Path) -> Path:
    return out / WORK


def write_features(path: Path, categories: dict[str, list[RawImage]], features: dict[str, np.ndarray]) -> None:
    """The feature table: one row per image (``path``, ``category``, the five features)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["path", "category", *FEATURES])
        for name in sorted(categories):
            for image, row in zip(categories[name], features[name]):
                writer.writerow([image.source_id, name, *(f"{value:.6g}" for value in row)])


@dataclass
class Verdict:
    """One readable image's way through the stages."""

    image: RawImage
    features: np.ndarray
    p_good: float | None = None
    label: bool | None = None
    stage: str = ""
    reason: str = ""
    cutout: str | None = None
    box: tuple[int, int, int, int] | None = None
    removed: bool = False  # the remover was run on it

    @property
    def kept(self) -> bool:
        return not self.reason


@dataclass(frozen=True)
class Decision:
    """How good and bad are told apart, checked before anything long runs: the labels read, a saved
    model loaded, or the percentile rule."""

    labels: dict[str, bool]
    model: Any = None
    percentile_rule: float | None = None


def _decision(options: CurateOptions, known: set[str], dropped: set[str]) -> Decision | None:
    """The run's :class:`Decision`, or ``None`` when it has neither labels, nor a model, nor the rule."""
    if options.percentile_rule is not None:
        if options.labels or options.classifier_file:
            raise ValueError("the percentile rule replaces the classifier: give it without labels or a classifier")
        return Decision({}, percentile_rule=options.percentile_rule)
    if options.labels is None and options.classifier_file is None:
        return None
    if options.labels is not None and not options.labels.is_file():
        raise DataError(options.labels, "labels", "no such file")
    labels = classifier.read_labels(options.labels, known, dropped) if options.labels else {}
    return Decision(labels, classifier.load(options.classifier_file) if options.classifier_file else None)


def _decide(verdicts: list[Verdict], decision: Decision, options: CurateOptions,
            work: Path) -> classifier.Scores | None:
    """Good or bad for every verdict, by labels and the classifier, or by the percentile rule."""
    table = np.stack([v.features for v in verdicts]) if verdicts else np.zeros((0, len(FEATURES)))
    if decision.percentile_rule is not None:
        keep = classifier.percentile_rule(table, decision.percentile_rule)
        for verdict, good in zip(verdicts, keep):
            if not good:
                verdict.stage, verdict.reason = "rule", (
                    f"percentile {verdict.features[FEATURES.index('percentile')]:.1f} < {decision.percentile_rule:g} "
                    f"(percentile rule, {classifier.PERCENTILE_RULE})")
        return None
    scores, model, labels = None, decision.model, decision.labels
    if model is None:
        labelled = [v for v in verdicts if v.image.source_id in labels]
        truth = np.array([labels[v.image.source_id] for v in labelled], dtype=int)
        features = np.stack([v.features for v in labelled]) if labelled else np.zeros((0, len(FEATURES)))
        assert options.labels is not None
        model, scores = classifier.train(features, truth, options.labels, options.grid, options.seed, options.num_proc)
        classifier.save(model, scores, work)
    for verdict, p_good in zip(verdicts, classifier.probability_good(model, table)):
        verdict.p_good = float(p_good)
        verdict.label = labels.get(verdict.image.source_id)
        if verdict.label is False:
            verdict.stage, verdict.reason = "classifier", "labelled bad"
        elif verdict.label is None and p_good < classifier.THRESHOLD:
            verdict.stage, verdict.reason = "classifier", f"p_good {p_good:.3f} < {classifier.THRESHOLD}"
    return scores


def _category_filter(verdicts: list[Verdict], minimum: int, after: str) -> None:
    """Drop the kept images of each category that keeps fewer than ``minimum``."""
    kept: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        if verdict.kept:
            kept.setdefault(verdict.image.category, []).append(verdict)
    for name, members in kept.items():
        if len(members) < minimum:
            for verdict in members:
                verdict.stage = "category"
                verdict.reason = f"category {name!r} kept {len(members)} images {after}; at least {minimum} are needed"


def _cutout_names(verdicts: list[Verdict]) -> dict[str, str]:
    """Each image's cut-out path under the output (its stem, with its hash where stems repeat)."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for verdict in verdicts:
        image = verdict.image
        name = f"{CUTOUTS}/{image.category}/{Path(image.source_id).stem}.png"
        if name in taken:
            name = f"{CUTOUTS}/{image.category}/{Path(image.source_id).stem}-{image.digest[:8]}.png"
        taken.add(name)
        names[image.digest] = name
    return names


_SESSION: Any = None


def _start_worker(remover: Remover) -> None:
    global _SESSION
    _SESSION = new_session(remover, threads=1)


def _remove_chunk(chunk: list[tuple[RawImage, str]], out: Path, alpha_threshold: int, max_side: int,
                  key: str, session: Any = None) -> list[dict[str, Any]]:
    """Cut out each image of ``chunk`` (written atomically under ``out``), its journal records."""
    records = []
    for image, name in chunk:
        try:
            rgb = decode_rgb(image, max_side)
        except (OSError, ValueError, Image.DecompressionBombError) as exc:  # changed on disk since it was read
            rgb, mask, reason = None, None, f"cannot be read any more: {exc}"
        else:
            mask, reason = predict_mask(session or _SESSION, rgb)
        result = cut_out(rgb, mask, alpha_threshold) if rgb is not None and mask is not None else None
        record = {"key": key, "digest": image.digest, "cutout": None, "box": None,
                  "reason": reason or (result.reason if result else "")}
        if result is not None and result.cutout is not None:
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            result.cutout.save(staging, format="PNG")
            os.replace(staging, target)
            record["cutout"] = name
        if result is not None and result.box is not None:
            record["box"] = list(result.box)
        records.append(record)
    return records


def _journal(path: Path, key: str) -> dict[str, dict[str, Any]]:
    """The removals of earlier runs with the same remover and settings, by image hash."""
    done: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:  # the last line of an interrupted write
                continue
            if isinstance(record, dict) and record.get("key") == key:
                done[record["digest"]] = record
    return done


def _removals(todo: list[tuple[RawImage, str]], out: Path, remover: Remover, options: CurateOptions,
              key: str, session: Any = None) -> Iterator[list[dict[str, Any]]]:
    """Journal records chunk by chunk, in order: inline for one process (onnxruntime using every core),
    else in ``num_proc`` processes of one thread each."""
    chunks = [todo[start : start + CHUNK] for start in range(0, len(todo), CHUNK)]
    settings = (out, options.alpha_threshold, options.max_side, key)
    if options.num_proc <= 1 or len(chunks) <= 1:
        session = session or (new_session(remover) if chunks else None)
        for chunk in chunks:
            yield _remove_chunk(chunk, *settings, session=session)
        return
    # Not a fork of this process (its torch and onnxruntime threads would not survive it): a fork server,
    # started once per process with rembg imported, forks each pool's workers in milliseconds.
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(["rf100vl_hf.uouo.curate", "rembg", "onnxruntime"])
    with ProcessPoolExecutor(min(options.num_proc, len(chunks)), context, _start_worker, (remover,)) as pool:
        yield from pool.map(_remove_chunk, chunks, *([value] * len(chunks) for value in settings))


def remove_backgrounds(verdicts: list[Verdict], out: Path, remover: Remover, options: CurateOptions,
                       session: Any = None) -> None:
    """Cut out every kept image, reusing the journal of an interrupted run (``session``: the remover's,
    when already loaded)."""
    key = json.dumps([remover.as_dict(), str(remover.model_file or ""), options.alpha_threshold, options.max_side])
    journal = _work(out) / JOURNAL
    done = {digest: record for digest, record in _journal(journal, key).items()
            if record["cutout"] is None or (out / record["cutout"]).is_file()}
    names = _cutout_names([v for v in verdicts if v.kept])
    todo = [(v.image, names[v.image.digest]) for v in verdicts if v.kept and v.image.digest not in done]
    journal.parent.mkdir(parents=True, exist_ok=True)
    if journal.is_file() and not journal.read_bytes().endswith(b"\n"):
        with journal.open("a", encoding="utf-8") as handle:  # a line torn by an interruption ends here
            handle.write("\n")
    with journal.open("a", encoding="utf-8") as handle, \
            progress_bar(total=len(todo), desc=f"removing backgrounds with {remover.name}",
                         disable=not options.progress) as bar:
        for records in _removals(todo, out, remover, options, key, session):
            for record in records:
                handle.write(json.dumps(record) + "\n")
                done[record["digest"]] = record
            handle.flush()
            bar.update(len(records))
    for verdict in verdicts:
        if verdict.kept:
            record = done[verdict.image.digest]
            verdict.removed = True
            verdict.box = tuple(record["box"]) if record["box"] else None
            if record["cutout"] is None:
                verdict.stage, verdict.reason = "remover", record["reason"]
            else:
                verdict.cutout = record["cutout"]


def _dropped_line(drop: Drop) -> dict[str, Any]:
    """The manifest line of a file dropped before its features (unreadable, duplicate, small category)."""
    return {"path": drop.source_id, "category": drop.category, "hash": drop.digest, "features": None,
            "p_good": None, "label": None, "decision": "dropped", "stage": drop.stage, "reason": drop.reason,
            "cutout": None, "box": None, "remover": None, "licence": None}


def _verdict_line(verdict: Verdict, remover: Remover) -> dict[str, Any]:
    """The manifest line of an image with features: its decision, and its cut-out when kept."""
    removed = verdict.removed
    return {
        "path": verdict.image.source_id, "category": verdict.image.category, "hash": verdict.image.digest,
        "features": {name: float(value) for name, value in zip(FEATURES, verdict.features)},
        "p_good": verdict.p_good, "label": None if verdict.label is None else ("good" if verdict.label else "bad"),
        "decision": "kept" if verdict.kept else "dropped", "stage": verdict.stage, "reason": verdict.reason,
        "cutout": verdict.cutout, "box": list(verdict.box) if verdict.box else None,
        "remover": remover.name if removed else None,
        "licence": {"id": remover.licence, "note": remover.licence_note} if removed else None,
    }


def write_outputs(out: Path, verdicts: list[Verdict], drops: list[Drop], remover: Remover,
                  options: CurateOptions) -> None:
    """``manifest.json`` (the cut-outs ``uouo prepare`` reads) and ``curation/manifest.jsonl``."""
    items = [{"cutout": v.cutout, "category": v.image.category} for v in verdicts if v.kept]
    source: dict[str, Any] = {"items": items}
    if options.license:
        source["license"] = options.license
    source["curation"] = {"clip_model": options.clip_model, "clip_pretrained": options.clip_pretrained or "none",
                          "remover": remover.as_dict(), "min_images": options.min_images,
                          "percentile_rule": options.percentile_rule}
    if remover.licence_note:
        source["license_note"] = f"cut-outs made with {remover.name}: {remover.licence_note}"
    (out / MANIFEST).write_text(json.dumps(source, indent=1) + "\n", encoding="utf-8")
    with (_work(out) / "manifest.jsonl").open("w", encoding="utf-8") as handle:
        for drop in drops:
            handle.write(json.dumps(_dropped_line(drop)) + "\n")
        for verdict in verdicts:
            handle.write(json.dumps(_verdict_line(verdict, remover)) + "\n")


def _prefill_cache(out: Path, embedder: ClipEmbedder, options: CurateOptions) -> None:
    """Embed the cut-outs into the cache a mosaic build with the same CLIP model reads (and so check
    that ``uouo prepare`` reads the output)."""
    source = read_source(out, min_images=options.min_images, progress=options.progress,
                         alpha_threshold=options.alpha_threshold)
    embed_cutouts(source.cutouts(), embedder, EmbeddingCache(options.embedding_cache), options.progress)


def curate(raw_dir: str | Path, out: str | Path, options: CurateOptions = CurateOptions()) -> CurationResult:
    """Curate ``raw_dir`` into ``out`` (see the module docstring)."""
    raw_dir, out = Path(raw_dir), Path(out)
    if out.resolve().is_relative_to(raw_dir.resolve()):
        raise DataError(out, "out", f"is inside the raw folder {raw_dir}, where it would be read as a category")
    work = _work(out)
    collection = read_raw(raw_dir, options.progress)
    known = {image.source_id for images in collection.images.values() for image in images}
    decision = _decision(options, known, {drop.source_id for drop in collection.dropped})
    remover = session = None
    if decision is not None:  # the remover is loaded (downloaded) before the long work, so it fails first
        remover = resolve_remover(options.remover, work, options.seed)
        if remover.non_commercial:
            warnings.warn(f"remover {remover.name}: {remover.licence_note}", LicenceWarning, stacklevel=2)
        session = new_session(remover)
    drops = list(collection.dropped)
    usable: dict[str, list[RawImage]] = {}
    for name, images in collection.images.items():
        if len(images) < options.min_images:
            reason = f"category {name!r} has {len(images)} readable images; at least {options.min_images} are needed"
            drops += [Drop(image.source_id, name, image.digest, "category", reason) for image in images]
        else:
            usable[name] = images
    embedder = ClipEmbedder(options.clip_model, options.clip_pretrained, options.device, options.batch_size)
    features = collection_features(usable, embedder, EmbeddingCache(options.embedding_cache), options.progress)
    write_features(work / "features.csv", usable, features)
    verdicts = [Verdict(image, row) for name in sorted(usable) for image, row in zip(usable[name], features[name])]
    if decision is None or remover is None:
        sheet = write_labelling(work / "labelling", usable, features)
        return CurationResult(out, labelling=sheet, drops=_count(drops, verdicts))
    scores = _decide(verdicts, decision, options, work)
    _category_filter(verdicts, options.min_images, "after the classifier")
    remove_backgrounds(verdicts, out, remover, options, session)
    _category_filter(verdicts, options.min_images, "after background removal")
    write_outputs(out, verdicts, drops, remover, options)
    statistics = Statistics.of(collection, _kept_per_category(verdicts), len(drops) + len(verdicts))
    if statistics.kept_categories >= MOSAIC_CATEGORIES:
        _prefill_cache(out, embedder, options)
    result = CurationResult(out, statistics, scores, remover=remover, drops=_count(drops, verdicts))
    write_report(work / "report.md", result.statistics, scores, remover, result.drops, options.percentile_rule,
                 options.clip_model, options.clip_pretrained)
    return result


def _kept_per_category(verdicts: list[Verdict]) -> dict[str, int]:
    """Kept cut-outs per category."""
    kept: dict[str, int] = {}
    for verdict in verdicts:
        if verdict.kept:
            kept[verdict.image.category] = kept.get(verdict.image.category, 0) + 1
    return kept


def _count(drops: list[Drop], verdicts: list[Verdict]) -> dict[str, int]:
    """Dropped images by stage."""
    counts: dict[str, int] = {}
    for stage in [d.stage for d in drops] + [v.stage for v in verdicts if not v.kept]:
        counts[stage] = counts.get(stage, 0) + 1
    return counts

