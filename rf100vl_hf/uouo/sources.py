"""Read and validate a folder of UOUO object cut-outs.

Layout (``docs/uouo.md``): one folder per category under the source root, holding
background-removed images. An image is either

- an image with an alpha channel (RGBA PNG or WebP, ...): the alpha is the object, or
- any image plus a mask beside it named ``<stem>.mask.png`` (for ``x.jpg``,
  ``x.mask.png``): the mask's grey level is the object's alpha and replaces any alpha
  the image has.

The category name is the folder name, unless a ``manifest.json`` at the root says
otherwise, in one of two forms:

- ``{"categories": {"<folder>": "<display name>", ...}}`` maps folder names to names;
- ``{"items": [{"cutout": "<path>", "category": "<name>", "mask": "<path>"?}, ...]}``
  lists every cut-out explicitly (paths relative to the root; ``mask`` is optional).
  Only the listed files are read, so a root may also hold other things (the IoTKITs
  cut-outs keep their source images beside them). A list-valued ``categories`` next to
  ``items`` must name exactly the items' categories.

The object of a cut-out is every pixel whose alpha is above ``alpha_threshold``
(default :data:`DEFAULT_ALPHA_THRESHOLD` = 8): pixels at or below it are cleared to fully
transparent when the cut-out is read. Background removers leave a faint haze (alpha 1..8
over the whole canvas); counted as object it would make the object's box the whole image.
A pixel at alpha 8 moves the composited colour by at most 8 of 255 levels (3%), which no
one sees on the white mosaic background, so ignoring it loses nothing visible; an object's
anti-aliased rim loses at most its faintest pixel. The object's bounding box (the "alpha
box") is what mosaics paste, and what an embedding sees. When the box of every pixel with
alpha above 0 is much larger than the alpha box (by :data:`HAZE_AREA_RATIO` in area), a
:class:`HazeWarning` names the file and the source counts it. Rules, each a
:class:`~rf100vl_hf.errors.DataError` naming the file and the field:

- an opaque image (no alpha channel, or alpha 255 everywhere) needs a mask;
- the alpha region must be at least :data:`MIN_ALPHA_SIDE` pixels on each side of its
  box and cover at least :data:`MIN_ALPHA_PIXELS` pixels: a smaller object would be a
  blur once scaled to fill a 400-pixel mosaic cell (and CLIP sees 224 pixels);
- a mask must have the size of its image;
- a category needs at least ``min_images`` images (default :data:`MIN_IMAGES`), and a
  source at least four categories, because a mosaic shows four different ones;
- no path may climb out of the root (``..`` in a manifest; links are followed wherever they
  lead), and none may be a FIFO, a device or a socket (refused by name before it is opened, which could block);
- every manifest field has its documented type (a category name is a non-empty string);
- a category name, a folder name and a file name hold no control character
  (:mod:`rf100vl_hf.controls`) and are Unicode text: a category name reaches prompts,
  terminals and cards, a file name the metadata.

Byte-identical cut-outs (same image and mask bytes) are one object: the first in sorted
order is used, each other one is left out with a :class:`DuplicateCutoutWarning` naming
both files, and the source counts them.

The source's licence is read from the manifest's ``"license"`` or a licence file at the
root (:mod:`.licence`), for the Hub card.

Files in a category folder that are not images (notes, thumbnails databases) are skipped
with a :class:`SkippedFileWarning`, never silently.
"""

from __future__ import annotations

import io
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xxhash
from PIL import Image, ImageOps

from rf100vl_hf.errors import DataError, shown
from rf100vl_hf.images import probe_image
from rf100vl_hf.progress import logger, progress_bar
from rf100vl_hf.safepaths import read_file, refuse_special, resolve_inside, text_problem
from rf100vl_hf.uouo.defaults import DEFAULT_ALPHA_THRESHOLD
from rf100vl_hf.uouo.licence import Licence, source_licence

MANIFEST = "manifest.json"
MASK_SUFFIX = ".mask.png"
IMAGE_EXTENSIONS = frozenset({".png", ".webp", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff"})
MIN_ALPHA_SIDE = 16
MIN_ALPHA_PIXELS = 256
MIN_IMAGES = 2
"""Default minimum of images per category: one image says nothing about how a category
varies, and the MMD between categories is about their distributions."""
MOSAIC_CATEGORIES = 4
HAZE_AREA_RATIO = 1.25
"""A cut-out whose faint-alpha box is this much larger in area than its alpha box is hazy:
an anti-aliased rim adds a pixel or two per side (a few percent), haze adds the canvas."""


class SkippedFileWarning(UserWarning):
    """A file in a category folder is not an image or a mask and was skipped."""


class HazeWarning(UserWarning):
    """A cut-out has faint alpha far outside its object; it is ignored (``alpha_threshold``)."""


class DuplicateCutoutWarning(UserWarning):
    """Two cut-outs have the same bytes; only the first is used."""


@dataclass(frozen=True)
class Cutout:
    """One validated cut-out. ``alpha_box`` is ``xyxy`` with exclusive ends, in the
    displayed frame (EXIF orientation applied), of the pixels above ``alpha_threshold``."""

    source_id: str  # path relative to the root, with forward slashes
    category: str
    path: Path
    mask_path: Path | None
    digest: str  # xxh3-128 of the image bytes, then the mask bytes
    size: tuple[int, int]
    alpha_box: tuple[int, int, int, int]
    alpha_threshold: int = DEFAULT_ALPHA_THRESHOLD


@dataclass(frozen=True)
class CutoutSource:
    """A whole source: categories in sorted order, each with its cut-outs sorted by path.

    ``hazy`` lists the cut-outs that had a faint haze (ignored), ``duplicates`` each left-out
    cut-out with the one used instead (source ids)."""

    root: Path
    categories: list[str]
    items: dict[str, list[Cutout]]
    fingerprint: str
    alpha_threshold: int = DEFAULT_ALPHA_THRESHOLD
    hazy: list[str] = field(default_factory=list)
    duplicates: list[tuple[str, str]] = field(default_factory=list)
    licence: Licence = field(default_factory=Licence)

    @property
    def name(self) -> str:
        return self.root.name

    def cutouts(self) -> list[Cutout]:
        """Every cut-out, category by category (the order embeddings are stored in)."""
        return [c for name in self.categories for c in self.items[name]]


def _inside(root: Path, path: Path, where: Path, field: str) -> Path:
    """``path`` under the root, or an error when it climbs out of ``root`` (or is a loop of links)."""
    return resolve_inside(root, path, where, field, what="source folder")


def _open(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as im:
        return ImageOps.exif_transpose(im)


def read_rgba(path: Path, mask_path: Path | None) -> tuple[Image.Image, bytes]:
    """The image in RGBA as stored (mask applied, nothing cleared) and the bytes it came from."""
    data = read_file(path)
    probe_image(data, path)
    image = _open(data)
    if mask_path is None:
        has_alpha = image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info
        rgba = image.convert("RGBA")
        if not has_alpha or bool((np.asarray(rgba)[..., 3] == 255).all()):
            raise DataError(
                path, "alpha", f"the image is opaque (no transparent pixel) and has no mask "
                f"{path.with_suffix('').name}{MASK_SUFFIX} beside it"
            )
        return rgba, data
    mask_data = read_file(mask_path)
    probe_image(mask_data, mask_path)
    mask = _open(mask_data)
    if mask.size != image.size:
        raise DataError(
            mask_path, "size", f"the mask is {mask.size[0]}x{mask.size[1]} but its image {path.name} is "
            f"{image.size[0]}x{image.size[1]}"
        )
    rgba = image.convert("RGB").convert("RGBA")
    rgba.putalpha(mask.convert("L"))
    return rgba, data + mask_data


def clear_haze(rgba: Image.Image, alpha_threshold: int) -> Image.Image:
    """``rgba`` with every pixel at or below ``alpha_threshold`` made fully transparent."""
    if alpha_threshold <= 0:
        return rgba
    alpha = rgba.getchannel("A").point(lambda v: v if v > alpha_threshold else 0)
    cleared = rgba.copy()
    cleared.putalpha(alpha)
    return cleared


def cutout_crop(cutout: Cutout) -> Image.Image:
    """The RGBA object of a validated cut-out, haze cleared, cropped to its alpha box:
    what a mosaic pastes and what CLIP embeds."""
    rgba, _ = read_rgba(cutout.path, cutout.mask_path)
    return clear_haze(rgba, cutout.alpha_threshold).crop(cutout.alpha_box)


def alpha_box(alpha: np.ndarray, threshold: int = 0) -> tuple[int, int, int, int] | None:
    """Tight ``xyxy`` box (exclusive ends) of the pixels with alpha above ``threshold``, or ``None``."""
    inside = alpha > threshold
    cols = np.flatnonzero(inside.any(axis=0))
    rows = np.flatnonzero(inside.any(axis=1))
    if not len(cols):
        return None
    return int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1


def _area(box: tuple[int, int, int, int]) -> int:
    return (box[2] - box[0]) * (box[3] - box[1])


def read_cutout(
    root: Path, path: Path, mask_path: Path | None, category: str, alpha_threshold: int = DEFAULT_ALPHA_THRESHOLD
) -> tuple[Cutout, bool]:
    """Validate one cut-out (see the module docstring for the rules); also whether it is hazy."""
    rgba, data = read_rgba(path, mask_path)
    alpha = np.asarray(rgba.getchannel("A"))
    where = mask_path or path
    box = alpha_box(alpha, alpha_threshold)
    if box is None:
        raise DataError(where, "alpha", f"the alpha region is empty (no pixel above alpha_threshold={alpha_threshold})")
    width, height = box[2] - box[0], box[3] - box[1]
    pixels = int((alpha > alpha_threshold).sum())
    if min(width, height) < MIN_ALPHA_SIDE or pixels < MIN_ALPHA_PIXELS:
        raise DataError(
            where, "alpha", f"the alpha region is too small ({width}x{height} box, {pixels} pixels; at least "
            f"{MIN_ALPHA_SIDE}x{MIN_ALPHA_SIDE} and {MIN_ALPHA_PIXELS} pixels are needed)"
        )
    faint = alpha_box(alpha)
    hazy = faint is not None and _area(faint) > HAZE_AREA_RATIO * _area(box)
    if hazy:
        warnings.warn(
            f"{where}: alpha: faint alpha covers a {faint[2] - faint[0]}x{faint[3] - faint[1]} box but the object "
            f"(alpha above {alpha_threshold}) only {width}x{height}; the faint pixels are ignored "
            f"(raise alpha_threshold if the haze is stronger)", HazeWarning, stacklevel=3,
        )
    cutout = Cutout(
        source_id=path.relative_to(root.resolve()).as_posix(),
        category=category,
        path=path,
        mask_path=mask_path,
        digest=xxhash.xxh3_128_hexdigest(data),
        size=(alpha.shape[1], alpha.shape[0]),
        alpha_box=box,
        alpha_threshold=alpha_threshold,
    )
    return cutout, hazy


def _entry_name(folder: Path, entry: Path) -> None:
    """An error naming ``folder`` when the name of ``entry`` in it holds a control character or
    bytes that are not text."""
    problem = text_problem(entry.name)
    if problem:
        raise DataError(folder, "names", f"{shown(entry.name)} {problem}")


def _folder_items(root: Path, folder: Path) -> list[tuple[Path, Path | None]]:
    """(image, mask) pairs of a category folder."""
    images: dict[str, Path] = {}
    masks: dict[str, Path] = {}
    skipped = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        _entry_name(folder, entry)
        path = _inside(root, entry, entry, "path")
        refuse_special(path, entry, "file")
        named_as_image = entry.name.lower().endswith(MASK_SUFFIX) or entry.suffix.lower() in IMAGE_EXTENSIONS
        if named_as_image and entry.is_dir():  # a folder, or a link to one, named as an image
            raise DataError(entry, "file", "is a directory, not a file")
        if entry.name.lower().endswith(MASK_SUFFIX):
            masks[entry.name[: -len(MASK_SUFFIX)]] = path
        elif entry.is_file() and entry.suffix.lower() in IMAGE_EXTENSIONS:
            if entry.stem in images:
                raise DataError(entry, "name", f"has the same stem as {images[entry.stem].name}, so a mask is ambiguous")
            images[entry.stem] = path
        else:
            skipped.append(entry.name)
    if skipped:
        warnings.warn(f"{folder}: skipped {len(skipped)} entries that are not images: {', '.join(skipped)}",
                      SkippedFileWarning, stacklevel=3)
    for stem, mask in masks.items():
        if stem not in images:
            raise DataError(mask, "mask", f"no image named {stem}.* beside it")
    return [(path, masks.get(stem)) for stem, path in sorted(images.items())]


def _name(value: Any, manifest: Path, field: str) -> str:
    """A category name or a path from the manifest: a non-empty string of text, or an error naming the field."""
    if not isinstance(value, str) or not value.strip():
        raise DataError(manifest, field, f"must be a non-empty string (the category name), got {shown(value)}")
    problem = text_problem(value)
    if problem:
        raise DataError(manifest, field, f"{shown(value)} {problem}")
    return value


def _manifest_items(root: Path, manifest: Path, data: dict[str, Any]) -> dict[str, list[tuple[Path, Path | None]]]:
    if not isinstance(data["items"], list):
        raise DataError(manifest, "items", "must be a list")
    groups: dict[str, list[tuple[Path, Path | None]]] = {}
    for index, item in enumerate(data["items"]):
        field = f"items[{index}]"
        if not isinstance(item, dict):
            raise DataError(manifest, field, f"must be an object with 'cutout' and 'category', got {shown(item)}")
        for key in ("cutout", "category"):
            _name(item.get(key), manifest, f"{field}.{key}")
        if item.get("mask") is not None:
            _name(item["mask"], manifest, f"{field}.mask")
        path = _inside(root, root / item["cutout"], manifest, f"{field}.cutout")
        mask = _inside(root, root / item["mask"], manifest, f"{field}.mask") if item.get("mask") else None
        for file, key in ((path, "cutout"), (mask, "mask")):
            if file is not None:
                refuse_special(file, manifest, f"{field}.{key}")
                if not file.is_file():
                    raise DataError(manifest, f"{field}.{key}", f"{file} does not exist")
        groups.setdefault(item["category"], []).append((path, mask))
    listed = data.get("categories")
    if listed is not None:
        if not isinstance(listed, list):
            raise DataError(manifest, "categories", "next to 'items' must be a list of the category names")
        for index, name in enumerate(listed):
            _name(name, manifest, f"categories[{index}]")
        if set(listed) != set(groups):
            raise DataError(manifest, "categories", f"lists {sorted(set(listed) ^ set(groups))} differently from the items")
    return groups


def _folder_groups(root: Path, manifest: Path, data: dict[str, Any]) -> dict[str, list[tuple[Path, Path | None]]]:
    names = data.get("categories", {})
    if not isinstance(names, dict):
        raise DataError(manifest, "categories", "must map folder names to category names (or use 'items')")
    for folder, name in names.items():
        _name(name, manifest, f"categories.{folder}")
    groups: dict[str, list[tuple[Path, Path | None]]] = {}
    folders = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        _entry_name(root, folder)
        _inside(root, folder, folder, "path")
        name = names.get(folder.name, folder.name)
        if name in folders:
            raise DataError(manifest, "categories", f"folders {folders[name]} and {folder.name} are both {name!r}")
        folders[name] = folder.name
        groups[name] = _folder_items(root, folder)
    missing = sorted(set(names) - {p.name for p in root.iterdir()})
    if missing:
        raise DataError(manifest, f"categories.{missing[0]}", "no such folder")
    return groups


def _read_manifest(manifest: Path) -> dict[str, Any]:
    refuse_special(manifest, manifest, "file")
    if not manifest.is_file():
        return {}
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise DataError(manifest, "json", f"cannot be parsed ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise DataError(manifest, "json", f"must be an object, got {type(data).__name__}")
    return data


def read_source(
    root: str | Path,
    min_images: int = MIN_IMAGES,
    progress: bool = True,
    alpha_threshold: int = DEFAULT_ALPHA_THRESHOLD,
) -> CutoutSource:
    """Read and validate every cut-out under ``root``."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(root, "folder", "not found")
    if not isinstance(alpha_threshold, int) or not 0 <= alpha_threshold < 255:
        raise ValueError(f"alpha_threshold must be an integer in 0..254, got {alpha_threshold!r}")
    manifest = root / MANIFEST
    data = _read_manifest(manifest)
    groups = _manifest_items(root, manifest, data) if "items" in data else _folder_groups(root, manifest, data)
    if len(groups) < MOSAIC_CATEGORIES:
        raise DataError(root, "categories", f"{len(groups)} categories; a mosaic needs {MOSAIC_CATEGORIES} different ones")
    categories = sorted(groups)
    hasher = xxhash.xxh3_128(f"alpha>{alpha_threshold}\0".encode())
    items: dict[str, list[Cutout]] = {}
    first: dict[str, Cutout] = {}
    hazy: list[str] = []
    duplicates: list[tuple[str, str]] = []
    total = sum(len(p) for p in groups.values())
    with progress_bar(total=total, desc=f"reading cut-outs of {root.name}", disable=not progress) as bar:
        for name in categories:
            items[name] = []
            for path, mask in sorted(groups[name]):
                cutout, is_hazy = read_cutout(root, path, mask, name, alpha_threshold)
                bar.update()
                if is_hazy:
                    hazy.append(cutout.source_id)
                kept = first.setdefault(cutout.digest, cutout)
                if kept is not cutout:
                    warnings.warn(
                        f"{cutout.path}: bytes: identical to {kept.path}; only {kept.source_id} is used",
                        DuplicateCutoutWarning, stacklevel=2,
                    )
                    duplicates.append((cutout.source_id, kept.source_id))
                    continue
                items[name].append(cutout)
                hasher.update(f"{name}\0{cutout.source_id}\0{cutout.digest}\0".encode())
    for name in categories:
        if len(items[name]) < min_images:
            pairs = groups[name]
            where = pairs[0][0].parent if pairs else root / name
            left = f" ({len(pairs) - len(items[name])} duplicates left out)" if len(pairs) > len(items[name]) else ""
            raise DataError(where, "images",
                            f"category {name!r} has {len(items[name])} images{left}; at least {min_images} are needed")
    if hazy or duplicates:
        logger.info("%s: %d hazy cut-outs (faint alpha ignored), %d duplicates left out", root, len(hazy), len(duplicates))
    return CutoutSource(root=root, categories=categories, items=items, fingerprint=hasher.hexdigest(),
                        alpha_threshold=alpha_threshold, hazy=hazy, duplicates=duplicates,
                        licence=source_licence(root, data, manifest))
