"""Read and check a raw image collection for curation: one sub-folder per category.

Every file of a category folder is read and checked once (``docs/uouo.md``, "Curation"):
hidden files are ignored; a file that is no image, is truncated, is animated (more than one
frame) or is larger than :data:`MAX_PIXELS` (a decompression bomb, or a scan no cut-out
needs) is dropped, counted, with its reason. Byte-identical files are one image: the first in
sorted order (category, then file name) is kept, each other is dropped as a duplicate of it.
Nothing here raises for one bad file: a scraped collection always holds some, and the
report lists them. The folder itself, a FIFO or device in place of a file, and a name that
is not text are errors naming the path (:mod:`rf100vl_hf.safepaths`).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import xxhash
from PIL import Image, ImageOps

from rf100vl_hf.errors import DataError
from rf100vl_hf.images import probe_image, to_rgb
from rf100vl_hf.progress import progress_bar
from rf100vl_hf.safepaths import read_file, refuse_special, text_problem

MAX_PIXELS = Image.MAX_IMAGE_PIXELS or 89_478_485
"""Pillow's own decompression-bomb limit (about 89 megapixels): larger images are dropped unread."""


@dataclass(frozen=True)
class RawImage:
    """One readable image: ``source_id`` is its path under the raw folder, with forward slashes."""

    source_id: str
    category: str
    path: Path
    digest: str  # xxh3-128 of the file's bytes
    size: tuple[int, int]  # displayed (EXIF orientation applied)


@dataclass(frozen=True)
class Drop:
    """A source image left out, and why (one line of the manifest)."""

    source_id: str
    category: str
    digest: str
    stage: str  # read, category, classifier, rule, remover
    reason: str


@dataclass
class RawCollection:
    """The categories (sorted) with their readable, distinct images, and every file dropped."""

    root: Path
    images: dict[str, list[RawImage]]
    dropped: list[Drop] = field(default_factory=list)

    @property
    def categories(self) -> list[str]:
        return sorted(self.images)

    def all_images(self) -> list[RawImage]:
        return [image for name in self.categories for image in self.images[name]]


def decode_rgb(image: RawImage, max_side: int) -> Image.Image:
    """The image as displayed, in 8-bit RGB, its longest side at most ``max_side`` (a JPEG is
    decoded at a reduced scale directly)."""
    with Image.open(io.BytesIO(read_file(image.path))) as im:
        im.draft("RGB", (max_side, max_side))
        rgb = to_rgb(ImageOps.exif_transpose(im))
    if max(rgb.size) > max_side:
        rgb.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    return rgb


def check_image(data: bytes, path: Path) -> tuple[tuple[int, int] | None, str]:
    """The displayed size of an image file, or ``None`` and why it is dropped."""
    huge = f"huge: over {MAX_PIXELS} pixels (Pillow's decompression-bomb limit)"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # refused below, by name
            with Image.open(io.BytesIO(data)) as im:
                width, height = im.size
                frames = getattr(im, "n_frames", 1)
    except Image.DecompressionBombError:
        return None, huge
    except Exception:  # Pillow raises many types; probe_image below names the problem
        width = height = 0
        frames = 1
    if width * height > MAX_PIXELS:
        return None, f"{huge}: {width}x{height}"
    if frames > 1:
        return None, f"animated: {frames} frames"
    try:
        probe = probe_image(data, path, full=True)
    except DataError as exc:
        return None, exc.reason
    return (probe.width, probe.height), ""


def _category_files(root: Path, folder: Path) -> list[Path]:
    files = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        problem = text_problem(entry.name)
        if problem:
            raise DataError(folder, "names", f"{entry.name!r} {problem}")
        refuse_special(entry, entry, "file")
        if entry.is_file():
            files.append(entry)
    return files


def read_raw(root: str | Path, progress: bool = True) -> RawCollection:
    """Every category folder under ``root``, each file checked (see the module docstring)."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(root, "folder", "not found")
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not folders:
        raise DataError(root, "folder", "holds no category folder (one sub-folder of images per category)")
    for folder in folders:
        problem = text_problem(folder.name)
        if problem:
            raise DataError(root, "names", f"{folder.name!r} {problem}")
    listed = {folder.name: _category_files(root, folder) for folder in folders}
    collection = RawCollection(root, {name: [] for name in listed})
    first: dict[str, str] = {}
    with progress_bar(total=sum(map(len, listed.values())), desc=f"reading {root.name}", disable=not progress) as bar:
        for name, files in listed.items():
            for path in files:
                bar.update()
                source_id = path.relative_to(root).as_posix()
                data = read_file(path)
                digest = xxhash.xxh3_128_hexdigest(data)
                if digest in first:
                    collection.dropped.append(Drop(source_id, name, digest, "read", f"duplicate of {first[digest]}"))
                    continue
                first[digest] = source_id
                size, reason = check_image(data, path)
                if size is None:
                    collection.dropped.append(Drop(source_id, name, digest, "read", reason))
                    continue
                collection.images[name].append(RawImage(source_id, name, path, digest, size))
    return collection
