"""Read and validate a folder of UOUO object cut-outs.

Layout (DESIGN.md section 2): one folder per category under the source root, holding
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

The object of a cut-out is every pixel whose alpha is above 0: its bounding box (the
"alpha box") is what mosaics paste, and what an embedding sees. Rules, each a
:class:`~rf100vl_hf.errors.DataError` naming the file and the field:

- an opaque image (no alpha channel, or alpha 255 everywhere) needs a mask;
- the alpha region must be at least :data:`MIN_ALPHA_SIDE` pixels on each side of its
  box and cover at least :data:`MIN_ALPHA_PIXELS` pixels: a smaller object would be a
  blur once scaled to fill a 400-pixel mosaic cell (and CLIP sees 224 pixels);
- a mask must have the size of its image;
- a category needs at least ``min_images`` images (default :data:`MIN_IMAGES`), and a
  source at least four categories, because a mosaic shows four different ones;
- no path may lead outside the root (``..`` in a manifest, a symbolic link).

Files in a category folder that are not images (notes, thumbnails databases) are skipped
with a :class:`SkippedFileWarning`, never silently.
"""

from __future__ import annotations

import io
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xxhash
from PIL import Image, ImageOps
from tqdm.auto import tqdm

from rf100vl_hf.errors import DataError
from rf100vl_hf.images import probe_image

MANIFEST = "manifest.json"
MASK_SUFFIX = ".mask.png"
IMAGE_EXTENSIONS = frozenset({".png", ".webp", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff"})
MIN_ALPHA_SIDE = 16
MIN_ALPHA_PIXELS = 256
MIN_IMAGES = 2
"""Default minimum of images per category: one image says nothing about how a category
varies, and the MMD between categories is about their distributions."""
MOSAIC_CATEGORIES = 4


class SkippedFileWarning(UserWarning):
    """A file in a category folder is not an image or a mask and was skipped."""


@dataclass(frozen=True)
class Cutout:
    """One validated cut-out. ``alpha_box`` is ``xyxy`` with exclusive ends, in the
    displayed frame (EXIF orientation applied)."""

    source_id: str  # path relative to the root, with forward slashes
    category: str
    path: Path
    mask_path: Path | None
    digest: str  # xxh3-128 of the image bytes, then the mask bytes
    size: tuple[int, int]
    alpha_box: tuple[int, int, int, int]


@dataclass(frozen=True)
class CutoutSource:
    """A whole source: categories in sorted order, each with its cut-outs sorted by path."""

    root: Path
    categories: list[str]
    items: dict[str, list[Cutout]]
    fingerprint: str

    @property
    def name(self) -> str:
        return self.root.name

    def cutouts(self) -> list[Cutout]:
        """Every cut-out, category by category (the order embeddings are stored in)."""
        return [c for name in self.categories for c in self.items[name]]


def _inside(root: Path, path: Path, where: Path, field: str) -> Path:
    """``path`` resolved, or an error when it leads outside ``root``."""
    resolved = path.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise DataError(where, field, f"{path} leads outside the source folder {root}")
    return resolved


def _open(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as im:
        return ImageOps.exif_transpose(im)


def read_alpha(path: Path, mask_path: Path | None) -> tuple[Image.Image, np.ndarray, bytes]:
    """The image in RGBA (mask applied), its alpha as an array, and the bytes it came from."""
    data = path.read_bytes()
    probe_image(data, path)
    image = _open(data)
    mask_data = b""
    if mask_path is not None:
        mask_data = mask_path.read_bytes()
        probe_image(mask_data, mask_path)
        mask = _open(mask_data)
        if mask.size != image.size:
            raise DataError(
                mask_path, "size", f"the mask is {mask.size[0]}x{mask.size[1]} but its image {path.name} is "
                f"{image.size[0]}x{image.size[1]}"
            )
        rgba = image.convert("RGB").convert("RGBA")
        rgba.putalpha(mask.convert("L"))
    else:
        has_alpha = image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info
        rgba = image.convert("RGBA")
        if not has_alpha or bool((np.asarray(rgba)[..., 3] == 255).all()):
            raise DataError(
                path, "alpha", f"the image is opaque (no transparent pixel) and has no mask "
                f"{path.with_suffix('').name}{MASK_SUFFIX} beside it"
            )
    return rgba, np.asarray(rgba)[..., 3], data + mask_data


def alpha_box(alpha: np.ndarray) -> tuple[int, int, int, int] | None:
    """Tight ``xyxy`` box (exclusive ends) of the pixels with alpha above 0, or ``None``."""
    cols = np.flatnonzero(alpha.any(axis=0))
    rows = np.flatnonzero(alpha.any(axis=1))
    if not len(cols):
        return None
    return int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1


def read_cutout(root: Path, path: Path, mask_path: Path | None, category: str) -> Cutout:
    """Validate one cut-out (see the module docstring for the rules)."""
    _, alpha, data = read_alpha(path, mask_path)
    where = mask_path or path
    box = alpha_box(alpha)
    if box is None:
        raise DataError(where, "alpha", "the alpha region is empty (every pixel is transparent)")
    width, height = box[2] - box[0], box[3] - box[1]
    pixels = int((alpha > 0).sum())
    if min(width, height) < MIN_ALPHA_SIDE or pixels < MIN_ALPHA_PIXELS:
        raise DataError(
            where, "alpha", f"the alpha region is too small ({width}x{height} box, {pixels} pixels; at least "
            f"{MIN_ALPHA_SIDE}x{MIN_ALPHA_SIDE} and {MIN_ALPHA_PIXELS} pixels are needed)"
        )
    return Cutout(
        source_id=path.relative_to(root.resolve()).as_posix(),
        category=category,
        path=path,
        mask_path=mask_path,
        digest=xxhash.xxh3_128_hexdigest(data),
        size=(alpha.shape[1], alpha.shape[0]),
        alpha_box=box,
    )


def _folder_items(root: Path, folder: Path) -> list[tuple[Path, Path | None]]:
    """(image, mask) pairs of a category folder."""
    images: dict[str, Path] = {}
    masks: dict[str, Path] = {}
    skipped = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        path = _inside(root, entry, entry, "path")
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


def _manifest_items(root: Path, manifest: Path, data: dict[str, Any]) -> dict[str, list[tuple[Path, Path | None]]]:
    if not isinstance(data["items"], list):
        raise DataError(manifest, "items", "must be a list")
    groups: dict[str, list[tuple[Path, Path | None]]] = {}
    for index, item in enumerate(data["items"]):
        field = f"items[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("cutout"), str) or not isinstance(
            item.get("category"), str
        ):
            raise DataError(manifest, field, "needs string 'cutout' and 'category' keys")
        path = _inside(root, root / item["cutout"], manifest, f"{field}.cutout")
        mask = _inside(root, root / item["mask"], manifest, f"{field}.mask") if item.get("mask") else None
        for file, key in ((path, "cutout"), (mask, "mask")):
            if file is not None and not file.is_file():
                raise DataError(manifest, f"{field}.{key}", f"{file} does not exist")
        groups.setdefault(item["category"], []).append((path, mask))
    listed = data.get("categories")
    if isinstance(listed, list) and set(listed) != set(groups):
        raise DataError(manifest, "categories", f"lists {sorted(set(listed) ^ set(groups))} differently from the items")
    return groups


def _folder_groups(root: Path, manifest: Path, data: dict[str, Any]) -> dict[str, list[tuple[Path, Path | None]]]:
    names = data.get("categories", {})
    if not isinstance(names, dict):
        raise DataError(manifest, "categories", "must map folder names to category names (or use 'items')")
    groups: dict[str, list[tuple[Path, Path | None]]] = {}
    folders = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
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


def read_source(root: str | Path, min_images: int = MIN_IMAGES, progress: bool = True) -> CutoutSource:
    """Read and validate every cut-out under ``root``."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(root, "folder", "not found")
    manifest = root / MANIFEST
    data: dict[str, Any] = {}
    if manifest.is_file():
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise DataError(manifest, "json", str(exc)) from exc
        if not isinstance(data, dict):
            raise DataError(manifest, "json", "must be an object")
    groups = _manifest_items(root, manifest, data) if "items" in data else _folder_groups(root, manifest, data)
    for name, pairs in groups.items():
        if len(pairs) < min_images:
            where = pairs[0][0].parent if pairs else root / name
            raise DataError(where, "images", f"category {name!r} has {len(pairs)} images; at least {min_images} are needed")
    if len(groups) < MOSAIC_CATEGORIES:
        raise DataError(root, "categories", f"{len(groups)} categories; a mosaic needs {MOSAIC_CATEGORIES} different ones")
    categories = sorted(groups)
    hasher = xxhash.xxh3_128()
    items: dict[str, list[Cutout]] = {}
    bar = tqdm(total=sum(len(p) for p in groups.values()), desc=f"reading cut-outs of {root.name}", disable=not progress)
    for name in categories:
        items[name] = []
        for path, mask in sorted(groups[name]):
            cutout = read_cutout(root, path, mask, name)
            items[name].append(cutout)
            hasher.update(f"{name}\0{cutout.source_id}\0{cutout.digest}\0".encode())
            bar.update()
    bar.close()
    return CutoutSource(root=root, categories=categories, items=items, fingerprint=hasher.hexdigest())
