"""The ``rf100vl`` datasets builder: one config per export, five splits.

The builder is constructed from an export on disk (see :mod:`.sources`) and writes the
Arrow cache under ``<HF_DATASETS_CACHE>/rf100vl/<config>/<version>/<hash>``, where the
hash is the source fingerprint. Because the config id is the bare config name, the cache
is what ``load_dataset("rf100vl", "<config>")`` falls back to when no Hub repository of
that name answers: preparing once makes the bare call work anywhere, offline (with
``HF_HUB_OFFLINE=1``, or it first waits for the Hub to answer), from any working
directory that has no ``rf100vl`` folder of its own. When exports of different contents
were prepared under one name, the bare call takes the latest; split parameters other than
the defaults make another config id, which the bare call does not find.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

import datasets
import xxhash

from rf100vl_hf.errors import DataError
from rf100vl_hf.metadata import to_description
from rf100vl_hf.rf100vl import splits as split_makers
from rf100vl_hf.rf100vl.instructions import Instructions, match_classes, parse_instructions
from rf100vl_hf.rf100vl.reader import Export, ImageRecord, VerifyImages, read_export
from rf100vl_hf.rf100vl.sources import DatasetSource, locate

BUILDER_NAME = "rf100vl"
FORMAT_VERSION = "2"
"""Bumped whenever the normalisation changes, so an old cache is not reused."""

CITATION = """@article{robicheaux2025roboflow100vl,
  title={Roboflow100-VL: A Multi-Domain Object Detection Benchmark for Vision-Language Models},
  author={Robicheaux, Peter and Popov, Matvei and Madan, Anish and Robinson, Isaac and Nelson, Joseph and Ramanan, Deva and Peri, Neehar},
  journal={arXiv preprint arXiv:2505.20612},
  year={2025}
}"""


@dataclass
class Rf100vlConfig(datasets.BuilderConfig):
    """Parameters of the derived splits; the defaults are the benchmark's."""

    fewshot_k: int = 10
    fewshot_seed: int = 0
    semisup_fraction: float = 0.1
    semisup_seed: int = 0

    @property
    def fewshot_split(self) -> str:
        return f"fewshot_{self.fewshot_k}"

    @property
    def semisup_split(self) -> str:
        return f"semisup_{round(self.semisup_fraction * 100)}"


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


class Rf100vl(datasets.GeneratorBasedBuilder):
    """One export (plus its official few-shot export, if any) as a datasets builder."""

    BUILDER_CONFIG_CLASS = Rf100vlConfig
    VERSION = datasets.Version("1.0.0")

    def __init__(
        self,
        source: DatasetSource,
        export: Export | None = None,
        fewshot_export: Export | None = None,
        progress: bool = True,
        verify_images: VerifyImages = "header",
        **kwargs: Any,
    ):
        self.source = source
        self.export = export or read_export(source.root, verify_images, progress)
        if fewshot_export is None and source.fewshot_root is not None:
            fewshot_export = read_export(source.fewshot_root, verify_images, progress, splits=["train"])
        self.fewshot_export = fewshot_export
        fewshot_fingerprint = fewshot_export.fingerprint if fewshot_export else ""
        digest = xxhash.xxh3_64(f"{FORMAT_VERSION}:{self.export.fingerprint}:{fewshot_fingerprint}".encode())
        kwargs.setdefault("dataset_name", BUILDER_NAME)
        kwargs.setdefault("config_name", source.name)
        kwargs.setdefault("hash", digest.hexdigest())
        super().__init__(**kwargs)
        # datasets names a builder after its module; this one's module is not its name.
        self.name = self.info.builder_name = BUILDER_NAME

    @cached_property
    def fewshot_images(self) -> list[ImageRecord] | None:
        """The few-shot split: the official export's train split, else drawn from train."""
        config: Rf100vlConfig = self.config
        if self.fewshot_export is not None:
            mapping = self._fewshot_class_map()
            return [
                replace(image, annotations=[replace(a, category=mapping[a.category]) for a in image.annotations])
                for image in self.fewshot_export.splits["train"].images
            ]
        if "train" not in self.export.splits:
            return None
        return split_makers.fewshot(
            self.export.splits["train"].images,
            len(self.export.classes),
            config.fewshot_k,
            config.fewshot_seed,
            class_names=self.export.classes,
        )

    def _fewshot_class_map(self) -> dict[int, int]:
        """Few-shot class index -> full export class index, matched by name."""
        assert self.fewshot_export is not None
        full = {name: i for i, name in enumerate(self.export.classes)}
        missing = [name for name in self.fewshot_export.classes if name not in full]
        if missing:
            raise DataError(
                self.fewshot_export.splits["train"].annotation_file,
                "categories",
                f"classes {missing} are not classes of {self.export.root}",
            )
        return {i: full[name] for i, name in enumerate(self.fewshot_export.classes)}

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
        config: Rf100vlConfig = self.config
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
                "split": config.fewshot_split if fewshot is not None else None,
                "source": "official" if self.fewshot_export else "generated",
                "k": config.fewshot_k,
                "seed": None if self.fewshot_export else config.fewshot_seed,
                "fingerprint": self.fewshot_export.fingerprint if self.fewshot_export else None,
                "federated": not self.fewshot_export,
                "instances": {name: instances[name] for name in export.classes},
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
            "license": next((v for v in (_readme_field(t, "License") for t in readmes) if v), None),
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

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        config: Rf100vlConfig = self.config
        generators = [
            datasets.SplitGenerator(name=name, gen_kwargs={"images": split.images})
            for name, split in self.export.splits.items()
        ]
        if self.fewshot_images is not None:
            generators.append(
                datasets.SplitGenerator(name=config.fewshot_split, gen_kwargs={"images": self.fewshot_images})
            )
        if "train" in self.export.splits:
            semisup = split_makers.semisup(
                self.export.splits["train"].images, config.semisup_fraction, config.semisup_seed
            )
            generators.append(datasets.SplitGenerator(name=config.semisup_split, gen_kwargs={"images": semisup}))
        return generators

    def _generate_examples(self, images: list[ImageRecord]) -> Iterator[tuple[int, dict[str, Any]]]:
        """Rows with the original file bytes, which the validation pass left in the page cache.

        Reading each file again costs a memory copy; keeping the bytes between the passes
        would cost the whole dataset in RAM, and validating inside this loop would raise a
        bad file's error from within datasets instead of before anything is written.
        """
        for index, record in enumerate(images):
            anns = record.annotations
            yield index, {
                "image": {"bytes": record.path.read_bytes(), "path": record.file_name},
                "image_id": record.image_id,
                "file_name": record.file_name,
                "width": record.width,
                "height": record.height,
                "objects": {
                    "id": [a.id for a in anns],
                    "bbox": [a.bbox for a in anns],
                    "category": [a.category for a in anns],
                    "area": [a.area for a in anns],
                    "iscrowd": [a.iscrowd for a in anns],
                },
            }


def rf100vl_builder(
    name: str,
    data_dir: str | Path | None = None,
    fewshot_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    verify_images: VerifyImages = "header",
    **config: Any,
) -> Rf100vl:
    """A builder for the dataset ``name`` (see :func:`.sources.locate` for where it looks).

    ``verify_images="full"`` decodes every image while validating (see
    :func:`rf100vl_hf.images.probe_image`). ``config`` sets :class:`Rf100vlConfig` fields
    (``fewshot_k``, ``fewshot_seed``, ``semisup_fraction``, ``semisup_seed``); any of them
    makes the config id differ from the bare name, so such a build is not what the bare
    ``load_dataset`` call finds.
    """
    source = locate(name, data_dir, fewshot_dir)
    cache = str(cache_dir) if cache_dir else None
    return Rf100vl(source, cache_dir=cache, progress=progress, verify_images=verify_images, **config)


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
    """Prepare ``name`` if its cache is missing or stale, then load it (one split or all).

    Finding the cache reads and fingerprints the export; a prepared config loads faster,
    from anywhere, with ``load_dataset("rf100vl", name, split=...)``.
    """
    builder = rf100vl_builder(name, data_dir, fewshot_dir, cache_dir, progress, verify_images, **config)
    builder.download_and_prepare()
    return builder.as_dataset(split=split)
