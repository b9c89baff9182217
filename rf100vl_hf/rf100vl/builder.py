"""The ``rf100vl`` datasets builder: one config per export, five splits.

The builder is made from config parameters alone (the config name, ``data_dir``,
``fewshot_dir``, the split parameters, ``verify_images``), like any datasets builder, so
``Rf100vl(config_name="bees", data_dir=...)``, pickling and every datasets API that makes
a builder from its class work. It writes the Arrow cache under
``<HF_DATASETS_CACHE>/rf100vl/<config id>/<version>/<hash>``, where the hash is the
content fingerprint of the export (and of its official few-shot export).

Because the config id is the bare config name (split parameters other than the defaults
make another id), the cache is what ``load_dataset("rf100vl", "<config>")`` falls back to
when no Hub repository of that name answers: preparing once makes the bare call work
anywhere, offline (with ``HF_HUB_OFFLINE=1``, or it first waits for the Hub to answer),
from any working directory that has no ``rf100vl`` folder of its own. When exports of
different contents were prepared under one name, the bare call takes the latest.

Repeat cost: each build stores a record (:mod:`.build_record`: the digest of the relative path,
size and mtime of every file of the exports, the metadata, each split's examples). A builder whose exports'
files all match a build's record reuses that build after one ``stat`` per file, reading
nothing; otherwise it reads and fingerprints the exports, and reuses a build of the same
contents or makes a new one. ``verify=True`` (``rf100vl-hf prepare --verify``) always reads
and checks the contents. The same check, in light code, lets ``rf100vl-hf prepare`` of
unchanged exports finish without importing datasets.

Crash safety: a build is written into a hidden staging folder beside its final place and
renamed into place when complete, so a killed build never leaves a folder the bare call
would trip over; the next build of that config removes what a killed one left (see the
README, "Loading datasets").
"""

from __future__ import annotations

import os
import re
import shutil
import time
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

import datasets
import pyarrow as pa
import xxhash
from datasets.exceptions import DatasetGenerationError
from filelock import FileLock, Timeout

from rf100vl_hf.errors import DataError, Rf100vlError, os_error_line
from rf100vl_hf.metadata import read_metadata, to_description
from rf100vl_hf.progress import logger, progress_bar
from rf100vl_hf.rf100vl import build_record
from rf100vl_hf.rf100vl import splits as split_makers
from rf100vl_hf.rf100vl.build_record import (
    BUILDER_NAME,
    FORMAT_VERSION,
    BuildRecord,
    build_matching,
    file_manifest,
    is_complete,
    manifest_digest,
    read_record,
    write_record,
)
from rf100vl_hf.rf100vl.instructions import Instructions, match_classes, parse_instructions
from rf100vl_hf.rf100vl.reader import Export, ImageRecord, present_splits, read_export
from rf100vl_hf.rf100vl.request import (
    SPLIT_PARAMETERS,
    VERIFY_IMAGES,
    DatasetRequest,
    ParameterError,
    SplitParameters,
    VerifyImages,
)
from rf100vl_hf.rf100vl.sources import DatasetSource, locate

VERSION = datasets.Version(build_record.VERSION)
STAGING_SUFFIX = ".staging"
"""A build is written into ``.<hash>.staging`` (hidden: datasets' cache lookup skips it) and renamed."""
BATCH_BYTES = 64 * 2**20
"""Image bytes gathered into one Arrow table before it is written (bounds memory per batch)."""

CITATION = """@article{robicheaux2025roboflow100vl,
  title={Roboflow100-VL: A Multi-Domain Object Detection Benchmark for Vision-Language Models},
  author={Robicheaux, Peter and Popov, Matvei and Madan, Anish and Robinson, Isaac and Nelson, Joseph and Ramanan, Deva and Peri, Neehar},
  journal={arXiv preprint arXiv:2505.20612},
  year={2025}
}"""


class FewShotClassWarning(UserWarning):
    """The few-shot export's classes were matched to the full export's by category id and some
    names differ: the warning lists every pair (the full export's names are kept)."""


@dataclass
class Rf100vlConfig(datasets.BuilderConfig):
    """Where the exports are and the parameters of the derived splits (defaults: the benchmark's).

    ``data_dir`` and ``fewshot_dir`` are looked up as :func:`.sources.locate` says;
    ``verify_images`` is ``header`` or ``full`` (decode every image). ``fewshot_strategy``
    (``random`` or ``best``) and ``fewshot_candidates`` (for ``best`` only) say how a
    generated few-shot split is drawn. ``test_source="fewshot"`` makes ``test`` the few-shot
    export's test split; ``fewshot_class_match="id"`` matches the few-shot export's classes
    to the full export's by category id instead of by name. Only split parameters that
    differ from the defaults enter the config id (see :meth:`create_config_id`).
    """

    fewshot_dir: str | None = None
    verify_images: VerifyImages = "header"
    fewshot_k: int = 10
    fewshot_seed: int = 0
    fewshot_strategy: str = "random"
    fewshot_candidates: int = 10
    semisup_fraction: float = 0.1
    semisup_seed: int = 0
    test_source: str = "full"
    fewshot_class_match: str = "name"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.split_parameters()  # checks each, names the bad one
        if self.verify_images not in VERIFY_IMAGES:
            raise ParameterError(f"verify_images must be 'header' or 'full', not {self.verify_images!r}")

    def split_parameters(self) -> SplitParameters:
        """This config's split parameters, checked."""
        return SplitParameters(**{name: getattr(self, name) for name in SPLIT_PARAMETERS})

    @property
    def fewshot_split(self) -> str:
        return self.split_parameters().fewshot_split

    @property
    def semisup_split(self) -> str:
        return self.split_parameters().semisup_split

    def create_config_id(self, config_kwargs: dict, custom_features: datasets.Features | None = None) -> str:
        """The config name, suffixed with the split parameters that are not the defaults.

        Where the exports are and how images are checked do not change the rows, and the
        cache folder's hash is the exports' content fingerprint, so they are left out: a
        build of the default parameters is what the bare ``load_dataset`` call finds.
        """
        return super().create_config_id(self.split_parameters().changed(), custom_features)


def features(classes: list[str]) -> datasets.Features:
    """The columns of every split; boxes are COCO ``[x, y, w, h]`` in pixels of the displayed image."""
    label = datasets.ClassLabel(names=classes)
    return datasets.Features(
        {
            "image": datasets.Image(),
            "image_id": datasets.Value("int64"),
            "file_name": datasets.Value("string"),
            "width": datasets.Value("int32"),
            "height": datasets.Value("int32"),
            "objects": {
                "id": datasets.List(datasets.Value("int64")),
                "bbox": datasets.List(datasets.List(datasets.Value("float64"), length=4)),
                "category": datasets.List(label),
                "area": datasets.List(datasets.Value("float64")),
                "iscrowd": datasets.List(datasets.Value("int8")),
            },
        }
    )


def _readme_field(text: str | None, key: str) -> str | None:
    match = re.search(rf"^{key}:\s*(.+?)\s*$", text or "", flags=re.MULTILINE)
    return match.group(1) if match else None


def _homepage(text: str | None) -> str | None:
    match = re.search(r"^(https?://\S+)\s*$", text or "", flags=re.MULTILINE)
    return match.group(1) if match else None


# ------------------------------------------------------------------------- leftovers


def remove_leftovers(version_dir: Path) -> list[Path]:
    """Remove what killed builds left in ``version_dir``; return what was removed.

    A leftover is a staging folder (``.<hash>.staging``, ours) or an ``<hash>.incomplete``
    folder (datasets' own, from a build that did not stage) whose build lock no living
    process holds: a killed process's lock is released by the system, so taking the lock
    without waiting proves the build is dead.
    """
    removed: list[Path] = []
    if not version_dir.is_dir():
        return removed
    for entry in sorted(version_dir.iterdir()):
        if not entry.is_dir():
            continue
        if entry.name.startswith(".") and STAGING_SUFFIX in entry.name:
            lock = version_dir / (entry.name.split(STAGING_SUFFIX)[0] + ".lock")
        elif entry.name.endswith(".incomplete"):
            lock = version_dir / (entry.name[: -len(".incomplete")] + "_builder.lock")
        else:
            continue
        try:
            with FileLock(str(lock), timeout=0):
                shutil.rmtree(entry, ignore_errors=True)
        except Timeout:
            continue  # a living build owns it
        logger.warning("removed %s, left by a build that was killed", entry)
        removed.append(entry)
    return removed


# ---------------------------------------------------------------------------- builder


class Rf100vl(datasets.ArrowBasedBuilder):
    """One export (plus its official few-shot export, if any) as a datasets builder.

    Made from config parameters alone: ``Rf100vl(config_name=NAME, data_dir=..., fewshot_dir=...,
    fewshot_k=..., ...)``. ``progress`` draws progress bars; ``verify`` reads and checks the
    exports even when their files match a prepared build's manifest. ``record``: the build the
    caller found unchanged (:func:`.build_record.unchanged_build`), taken as it is so the
    exports' folders are walked once (ignored under ``verify`` or for another config).
    """

    BUILDER_CONFIG_CLASS = Rf100vlConfig
    VERSION = VERSION

    def __init__(
        self,
        config_name: str | None = None,
        data_dir: str | Path | None = None,
        *,
        fewshot_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        progress: bool = True,
        verify: bool = False,
        record: BuildRecord | None = None,
        hash: str | None = None,  # noqa: A002  (datasets passes its module hash; the content fingerprint is used)
        info: datasets.DatasetInfo | None = None,  # likewise: the info is the export's own
        **kwargs: Any,
    ):
        if not config_name:
            raise ParameterError("an rf100vl builder needs a config name: a dataset name, e.g. 'bees' or 'sample'")
        for unused in ("data_files", "features", "dataset_name"):  # what datasets' generic loaders also pass
            kwargs.pop(unused, None)
        data_dir = str(data_dir) if data_dir is not None else None
        fewshot_dir = str(fewshot_dir) if fewshot_dir is not None else None
        # Located first: a folder name that cannot be a config name gets the locator's error, which names it.
        self.source: DatasetSource = locate(config_name, data_dir, fewshot_dir)
        fields = set(Rf100vlConfig.__dataclass_fields__)
        config_kwargs = {k: v for k, v in kwargs.items() if k in fields}
        self._params = Rf100vlConfig(name=config_name, data_dir=data_dir, fewshot_dir=fewshot_dir, **config_kwargs)
        self.progress = progress
        cache_root = os.path.expanduser(str(cache_dir or datasets.config.HF_DATASETS_CACHE))
        version_dir = Path(cache_root, BUILDER_NAME, self._params.create_config_id({}), str(VERSION))
        verify = verify or self._params.verify_images == "full"
        if not verify and record is not None and record.path.parent == version_dir:  # the caller walked: trust it
            self.digest, matched = record.digest, record.path
        else:
            self.digest = manifest_digest(self.manifest)
            matched = None if verify else build_matching(version_dir, self.digest)
        self.reused_unread = matched is not None
        """Whether a build of the same files (by ``stat``) was found, so no file was read."""
        if matched is not None:  # no file changed since this build: read nothing
            content_hash, info = matched.name, datasets.DatasetInfo.from_directory(str(matched))
        else:
            fewshot = self.fewshot_export.fingerprint if self.fewshot_export else ""
            content_hash = xxhash.xxh3_64_hexdigest(f"{FORMAT_VERSION}:{self.export.fingerprint}:{fewshot}".encode())
            info = None
        super().__init__(
            cache_dir=str(cache_dir) if cache_dir else None,
            dataset_name=BUILDER_NAME,
            config_name=config_name,
            data_dir=data_dir,
            fewshot_dir=fewshot_dir,
            hash=content_hash,
            info=info,
            **kwargs,
        )
        # datasets names a builder after its module; this one's module is not its name.
        self.name = self.info.builder_name = BUILDER_NAME

    @cached_property
    def manifest(self) -> list[list[Any]]:
        """The exports' files as :func:`.build_record.file_manifest` lists them (one ``stat`` each);
        walked when the builder is made, unless it was given the record of an unchanged build."""
        return file_manifest({"full": self.source.root, "fewshot": self.source.fewshot_root})

    @cached_property
    def export(self) -> Export:
        """The full export, read and validated (only when a build needs it or it is asked for)."""
        return read_export(self.source.root, self._params.verify_images, self.progress)

    @cached_property
    def fewshot_export(self) -> Export | None:
        """The official few-shot export's train split (and its test split under
        ``test_source="fewshot"``), when the few-shot export is on disk."""
        root = self.source.fewshot_root
        if self._params.test_source == "fewshot":
            where = "test_source='fewshot' (--option test-source=fewshot, --rf100vl-data-option=test-source=fewshot)"
            if root is None:
                raise DataError(self.source.name, "few-shot export", f"{where} scores on the few-shot export's test "
                                "split, and no few-shot export of it was found: set fewshot_dir (--fewshot-dir)")
            if "test" not in present_splits(root):
                raise DataError(root, "test", f"{where} scores on the few-shot export's test split, and it has none "
                                "(no test/_annotations.coco.json)")
        if root is None:
            return None
        wanted = ["train", "test"] if self._params.test_source == "fewshot" else ["train"]
        return read_export(root, self._params.verify_images, self.progress, splits=wanted)

    def _mapped(self, split: str) -> list[ImageRecord]:
        """A split of the few-shot export with its boxes in the full export's classes."""
        assert self.fewshot_export is not None
        mapping = self.fewshot_classes[0]
        return [replace(image, annotations=[replace(a, category=mapping[a.category]) for a in image.annotations])
                for image in self.fewshot_export.splits[split].images]

    @cached_property
    def fewshot_images(self) -> list[ImageRecord] | None:
        """The few-shot split: the official export's train split, else drawn from train."""
        config = self._params
        if self.fewshot_export is not None:
            return self._mapped("train")
        if "train" not in self.export.splits:
            return None
        return split_makers.fewshot(
            self.export.splits["train"].images,
            len(self.export.classes),
            config.fewshot_k,
            config.fewshot_seed,
            class_names=self.export.classes,
            strategy=config.fewshot_strategy,
            candidates=config.fewshot_candidates,
        )

    @cached_property
    def fewshot_classes(self) -> tuple[dict[int, int], dict[str, str]]:
        """Few-shot class index -> full export class index, and the few-shot names mapped to
        other names of the full export (few-shot name -> full name; empty when matched by name).

        By name (``fewshot_class_match="name"``, the default) a few-shot class the full export
        has no class of that name stops the build, with an error naming both names (the full
        export's class with its category id) and the option. By category id (``"id"``) every
        few-shot category must be a class of the full export, the two exports must number
        their categories the same way (one layout), and names that differ are kept as the
        full export has them, with a :class:`FewShotClassWarning` listing every pair: never a
        silent rename."""
        fewshot = self.fewshot_export
        assert fewshot is not None
        where = fewshot.splits["train"].annotation_file
        full_index = {cid: i for i, cid in enumerate(self.export.category_ids)}
        if self._params.fewshot_class_match == "id":
            if fewshot.layout != self.export.layout:
                raise DataError(where, "categories", f"fewshot_class_match='id': the few-shot export is laid out "
                                f"{fewshot.layout!r} and the full export {self.export.layout!r}, so their category "
                                "ids do not name the same classes; match by name")
            missing = [f"{name!r} (id {cid})" for name, cid in zip(fewshot.classes, fewshot.category_ids)
                       if cid not in full_index]
            if missing:
                raise DataError(where, "categories", f"fewshot_class_match='id': {', '.join(missing)} "
                                f"{'is' if len(missing) == 1 else 'are'} no category of {self.export.root}")
            mapping = {i: full_index[cid] for i, cid in enumerate(fewshot.category_ids)}
            renamed = {name: self.export.classes[mapping[i]] for i, name in enumerate(fewshot.classes)
                       if name != self.export.classes[mapping[i]]}
            if renamed:
                warnings.warn(
                    f"{self.source.name}: the few-shot export's classes are matched to {self.export.root}'s by "
                    f"category id; {len(renamed)} name(s) differ and the full export's are kept: "
                    + "; ".join(f"{old!r} -> {new!r}" for old, new in renamed.items()),
                    FewShotClassWarning, stacklevel=2)
            return mapping, renamed
        full = {name: i for i, name in enumerate(self.export.classes)}
        unmatched = [(name, cid) for name, cid in zip(fewshot.classes, fewshot.category_ids) if name not in full]
        if unmatched:
            pairs = "; ".join(
                f"{name!r} (id {cid})" + (f", where the full export's category {cid} is "
                                          f"{self.export.classes[full_index[cid]]!r}" if cid in full_index else "")
                for name, cid in unmatched)
            raise DataError(where, "categories", f"few-shot classes not in {self.export.root}: {pairs}. Fix the names, "
                            "or match the classes by category id with fewshot_class_match='id' (rf100vl-hf prepare "
                            "--option fewshot-class-match=id, pytest --rf100vl-data-option=fewshot-class-match=id)")
        return {i: full[name] for i, name in enumerate(fewshot.classes)}, {}

    @property
    def instructions(self) -> Instructions | None:
        """Annotator instructions: the few-shot export's README, else the full export's if it has them."""
        for export in (self.fewshot_export, self.export):
            if export is not None and export.readme_dataset and "# object classes" in export.readme_dataset.lower():
                return parse_instructions(export.readme_dataset)
        return None

    @property
    def metadata(self) -> dict[str, Any]:
        """Everything a user of the dataset needs to know beyond its rows (see :mod:`rf100vl_hf.metadata`)."""
        config = self._params
        export = self.export
        instructions = self.instructions
        per_class = match_classes(instructions, export.classes) if instructions else {}
        readmes = (
            self.fewshot_export.readme_dataset if self.fewshot_export else None,
            export.readme_dataset,
            export.readme_roboflow,
        )
        fewshot = self.fewshot_images
        instances = Counter(export.classes[a.category] for image in fewshot or [] for a in image.annotations)
        # seed, strategy and candidates made a generated split; an official one is taken as it is
        strategy = None if self.fewshot_export else config.fewshot_strategy
        renamed = self.fewshot_classes[1] if self.fewshot_export else {}
        return {
            "benchmark": "rf100vl",
            "name": self.source.name,
            "domain": self.source.domain,
            "rf20vl": self.source.in_rf20vl,
            "classes": export.classes,
            "category_ids": export.category_ids,
            "layout": export.layout,
            "supercategory": export.supercategory,
            "fingerprint": export.fingerprint,
            "fewshot": {
                "split": config.fewshot_split if fewshot else None,
                "source": "official" if self.fewshot_export else "generated",
                "k": config.fewshot_k,
                "seed": None if self.fewshot_export else config.fewshot_seed,
                "strategy": strategy,
                "candidates": config.fewshot_candidates if strategy == "best" else None,
                "fingerprint": self.fewshot_export.fingerprint if self.fewshot_export else None,
                "federated": not self.fewshot_export,
                "instances": {name: instances[name] for name in export.classes},
                "class_match": config.fewshot_class_match if self.fewshot_export else None,
                "renamed": renamed,
            },
            "test": {
                "source": config.test_source,
                "fingerprint": self.fewshot_export.fingerprint if config.test_source == "fewshot" else None,
            },
            "semisup": {
                "split": config.semisup_split,
                "fraction": config.semisup_fraction,
                "seed": config.semisup_seed,
            },
            "instructions": {
                "raw": instructions.raw if instructions else None,
                "introduction": instructions.introduction if instructions else "",
                "classes": {
                    name: {"heading": c.name, "description": c.description, "instructions": c.instructions}
                    for name, c in per_class.items()
                },
            },
            "license": next((v for v in (_readme_field(t, "License") for t in readmes) if v), None)
            or "; ".join(dict.fromkeys(name for source in (self.fewshot_export, export) if source
                                       for name in source.licenses)) or None,
            "homepage": next((v for v in (_homepage(t) for t in readmes) if v), None),
            "repairs": {split: dict(s.repairs) for split, s in export.splits.items()},
            "zero_area_boxes": {split: s.zero_area_boxes for split, s in export.splits.items()},
        }

    def _info(self) -> datasets.DatasetInfo:
        metadata = self.metadata
        return datasets.DatasetInfo(
            description=to_description(metadata),
            features=features(self.export.classes),
            homepage=metadata["homepage"] or "",
            license=metadata["license"] or "",
            citation=CITATION,
        )

    def download_and_prepare(self, output_dir: str | None = None, *args: Any, **kwargs: Any) -> None:
        """Build the cache unless these contents are built, crash-safe: written into a hidden
        staging folder, renamed into place when complete (see the module docstring)."""
        if output_dir is not None and os.path.normpath(str(output_dir)) != os.path.normpath(self._cache_dir):
            return super().download_and_prepare(output_dir, *args, **kwargs)
        if self.reused_unread and not args and not kwargs:  # found by stat, its info loaded: nothing to build
            self._keep_record()
            return None
        final = Path(self._cache_dir)
        staging = final.with_name(f".{final.name}{STAGING_SUFFIX}")
        final.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(final.with_name(f".{final.name}.lock"))):
            remove_leftovers(final.parent)
            if not is_complete(final):
                for leftover in (staging, Path(f"{staging}.incomplete"), final):
                    shutil.rmtree(leftover, ignore_errors=True)
                logger.info("preparing %s: reading the export and writing the Arrow cache", self.source.name)
                started = time.perf_counter()
                try:
                    try:
                        super().download_and_prepare(str(staging), *args, **kwargs)
                    except DatasetGenerationError as exc:  # datasets wraps what failed while writing
                        if isinstance(exc.__cause__, (Rf100vlError, OSError)):
                            raise exc.__cause__ from None  # e.g. a file removed since it was checked
                        raise
                except OSError as exc:
                    if exc.filename is not None:
                        raise
                    # Arrow names no file (a full disk): the folder being written is the one to free
                    raise OSError(exc.errno, exc.strerror or str(exc), str(staging)) from exc
                self._write_record(staging)
                os.rename(staging, final)
                logger.info("prepared %s in %.1f s (%s)", self.source.name, time.perf_counter() - started, final)
        super().download_and_prepare(*args, **kwargs)  # finds the build and loads its info
        self._keep_record()

    @property
    def record(self) -> BuildRecord:
        """The record of this builder's build (:mod:`.build_record`), from its info: after
        :meth:`download_and_prepare`, what its record file holds."""
        splits = {name: split.num_examples for name, split in self.info.splits.items()}
        return BuildRecord(Path(self._cache_dir), self.digest, read_metadata(self.info), splits)

    def _write_record(self, build: Path) -> None:
        record = self.record
        write_record(build, self.manifest, record.metadata, record.splits)

    def _keep_record(self) -> None:
        """Write the build's record again where it is missing, lacks the metadata (written before
        records held it) or has the digest of other files (these contents were built from files since touched)."""
        build = Path(self._cache_dir)
        record = read_record(build)
        if record is None or record.digest != self.digest:
            try:
                self._write_record(build)
            except OSError as exc:  # a read-only cache: the build is complete and used as it is
                logger.warning("%s: the build's record could not be written (%s); the build is used as it is, "
                               "and found by stat only while its record matches", build, os_error_line(exc))

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        config = self._params
        chosen = {name: split.images for name, split in self.export.splits.items()}
        if config.test_source == "fewshot":
            chosen["test"] = self._mapped("test")
        if self.fewshot_images is not None:
            chosen[config.fewshot_split] = self.fewshot_images
        if "train" in self.export.splits:
            train = self.export.splits["train"].images
            chosen[config.semisup_split] = split_makers.semisup(train, config.semisup_fraction, config.semisup_seed)
        for name in [name for name, images in chosen.items() if not images]:  # drawn from a train split without boxes
            warnings.warn(f"{self.source.name}: the generated {name} split would hold no image (the train split has "
                          f"{sum(len(image.annotations) for image in self.export.splits['train'].images)} boxes): "
                          "it is left out", split_makers.FewShotWarning, stacklevel=2)
            del chosen[name]
        return [
            datasets.SplitGenerator(name=name, gen_kwargs={"images": images, "split": name})
            for name, images in chosen.items()
        ]

    def _generate_tables(self, images: list[ImageRecord], split: str) -> Iterator[tuple[int, pa.Table]]:
        """Arrow tables of rows holding the original file bytes, which the validation pass left
        in the page cache.

        Reading each file again costs a memory copy; keeping the bytes between the passes
        would cost the whole dataset in RAM, and validating inside this loop would raise a
        bad file's error from within datasets instead of before anything is written. The
        tables are built column-wise in Arrow's own types, not through datasets' per-row
        encoding, which cost more than reading the files.
        """
        schema = self.info.features.arrow_schema
        bar = progress_bar(total=len(images), desc=f"{self.source.name} {split}", unit="img", disable=not self.progress)
        batch: list[tuple[ImageRecord, bytes]] = []
        size, index = 0, 0
        with bar:
            for record in images:
                blob = record.path.read_bytes()
                batch.append((record, blob))
                size += len(blob)
                bar.update()
                if size >= BATCH_BYTES:
                    yield index, _table(batch, schema)
                    batch, size, index = [], 0, index + 1
            if batch or index == 0:
                yield index, _table(batch, schema)


def _table(batch: list[tuple[ImageRecord, bytes]], schema: pa.Schema) -> pa.Table:
    """The rows of ``batch`` as one Arrow table of ``schema`` (the features' own Arrow types)."""
    return pa.Table.from_pydict(
        {
            "image": [{"bytes": blob, "path": record.file_name} for record, blob in batch],
            "image_id": [record.image_id for record, _ in batch],
            "file_name": [record.file_name for record, _ in batch],
            "width": [record.width for record, _ in batch],
            "height": [record.height for record, _ in batch],
            "objects": [
                {
                    "id": [a.id for a in record.annotations],
                    "bbox": [a.bbox for a in record.annotations],
                    "category": [a.category for a in record.annotations],
                    "area": [a.area for a in record.annotations],
                    "iscrowd": [a.iscrowd for a in record.annotations],
                }
                for record, _ in batch
            ],
        },
        schema=schema,
    )


def rf100vl_builder(
    name: str,
    data_dir: str | Path | None = None,
    fewshot_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    verify_images: VerifyImages = "header",
    verify: bool = False,
    record: BuildRecord | None = None,
    **config: Any,
) -> Rf100vl:
    """A builder for the dataset ``name`` (see :func:`.sources.locate` for where it looks).

    ``verify_images="full"`` decodes every image while validating (see
    :func:`rf100vl_hf.images.probe_image`). ``verify`` reads and checks the exports even
    when no file changed since a build (``verify_images="full"`` implies it); ``record`` is an
    unchanged build the caller found (see :class:`Rf100vl`). ``config``
    sets :class:`Rf100vlConfig` fields (``fewshot_k``, ``fewshot_seed``, ``fewshot_strategy``,
    ``fewshot_candidates``, ``semisup_fraction``, ``semisup_seed``); any of them other than
    its default makes the config id differ from the bare name, so such a build is not what
    the bare ``load_dataset`` call finds.
    """
    return Rf100vl(
        config_name=name,
        data_dir=data_dir,
        fewshot_dir=fewshot_dir,
        cache_dir=cache_dir,
        progress=progress,
        verify=verify,
        record=record,
        verify_images=verify_images,
        **config,
    )


def load_rf100vl(
    name: str,
    split: str | None = None,
    data_dir: str | Path | None = None,
    fewshot_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    verify_images: VerifyImages = "header",
    **config: Any,
) -> datasets.Dataset | datasets.DatasetDict:
    """Prepare ``name`` if no build matches its exports, then load it (one split or all).

    When no file of the exports changed since a build (same paths, sizes and mtimes), the
    build is used after one ``stat`` per file; otherwise the exports are read, checked and
    built (see :func:`rf100vl_builder`).
    """
    builder = rf100vl_builder(name, data_dir, fewshot_dir, cache_dir, progress, verify_images, **config)
    builder.download_and_prepare()
    return builder.as_dataset(split=split)


def builder_of(request: DatasetRequest, name: str, progress: bool = True, verify: bool = False,
               record: BuildRecord | None = None) -> Rf100vl:
    """The builder of dataset ``name`` as ``request`` asks for it (:func:`rf100vl_builder`)."""
    return rf100vl_builder(name, request.data_dir, request.fewshot_dir, request.cache_dir, progress,
                           request.verify_images, verify, record, **asdict(request.splits))


class Splits(Mapping[str, "datasets.Dataset"]):
    """A prepared dataset's splits by name, each opened the first time it is asked for: a pair
    scored on ``test`` opens that split alone (opening one costs a copy of the dataset's info)."""

    def __init__(self, builder: Rf100vl):
        self._builder = builder
        self._opened: dict[str, datasets.Dataset] = {}

    def __getitem__(self, name: str) -> datasets.Dataset:
        if name not in self._builder.info.splits:
            raise KeyError(name)
        if name not in self._opened:
            self._opened[name] = self._builder.as_dataset(split=name)
        return self._opened[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._builder.info.splits)

    def __len__(self) -> int:
        return len(self._builder.info.splits)


def load_request(
    request: DatasetRequest, name: str, split: str | None = None, progress: bool = True,
    record: BuildRecord | None = None,
) -> datasets.Dataset | Splits:
    """Dataset ``name`` as ``request`` asks for it (one split, or all as :class:`Splits`),
    prepared first when no build matches its exports (:func:`load_rf100vl`); ``record``: its
    unchanged build, where the caller already found it (:func:`.build_record.unchanged_build`)."""
    builder = builder_of(request, name, progress, record=record)
    builder.download_and_prepare()
    return builder.as_dataset(split=split) if split is not None else Splits(builder)
