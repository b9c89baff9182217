"""Image decoding shared by the readers and the adapters.

Datasets keep the original file bytes; these helpers check them once at read time and
turn any supported mode into the 8-bit RGB that models expect at inference time.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from rf100vl_hf.errors import DataError

ORIENTATION_TAG = 0x0112
TRANSPOSING_ORIENTATIONS = frozenset({5, 6, 7, 8})
"""EXIF orientations that turn the image by 90 degrees, so displayed width and height swap."""

_HIGH_DEPTH_MODES = frozenset({"I", "I;16", "I;16B", "I;16L", "I;16N", "F"})
_ALPHA_MODES = frozenset({"RGBA", "RGBa", "LA", "PA"})


@dataclass(frozen=True)
class ImageProbe:
    """What reading an image file told us: its displayed size and how it is stored."""

    width: int  # after EXIF orientation, as datasets' Image feature decodes it
    height: int
    stored_width: int  # as the pixels lie in the file
    stored_height: int
    orientation: int  # EXIF orientation tag, 1 when absent
    mode: str
    format: str


def _ends_cleanly(data: bytes, fmt: str) -> bool:
    """Whether the file ends with its format's end marker (cheap evidence it is not truncated)."""
    if fmt == "JPEG":
        return data.rstrip(b"\x00\r\n ").endswith(b"\xff\xd9")
    if fmt == "PNG":
        return data[-8:-4] == b"IEND"
    return False


def _png_has_exif(data: bytes) -> bool:
    """Whether a PNG has an ``eXIf`` chunk anywhere, found by walking the chunk headers."""
    pos = 8  # after the signature
    while pos + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        if kind == b"eXIf":
            return True
        if kind == b"IEND":
            return False
        pos += 12 + length  # length, type, data, CRC
    return False


def _orientation(im: Image.Image, data: bytes) -> int:
    """The EXIF orientation, without decoding pixels.

    Pillow finds a PNG's ``eXIf`` chunk only by decoding the whole image when the chunk
    follows the pixel data, so a PNG is asked only when it has such a chunk at all.
    """
    if im.format == "PNG" and "exif" not in im.info and not _png_has_exif(data):
        return 1
    value = im.getexif().get(ORIENTATION_TAG, 1)
    return int(value) if value in range(1, 9) else 1


def probe_image(data: bytes, path: str | Path, full: bool = False) -> ImageProbe:
    """Read an image's size, mode and EXIF orientation, and catch corrupt or truncated files.

    By default only the header is parsed and a JPEG or PNG must end with its end marker;
    a file that does not (or another format) is decoded in full to decide. ``full=True``
    decodes every file, which also catches damage in the middle of the data at the cost of
    a decode per image.
    """
    try:
        with Image.open(io.BytesIO(data)) as im:
            stored = im.size
            fmt = im.format or "unknown"
            mode = im.mode
            orientation = _orientation(im, data)
            if full or not _ends_cleanly(data, fmt):
                im.load()
    except Exception as exc:  # PIL raises many types for bad files; all mean the same here
        raise DataError(path, "image", f"cannot be decoded ({type(exc).__name__}: {exc})") from exc
    width, height = stored
    if orientation in TRANSPOSING_ORIENTATIONS:
        width, height = height, width
    return ImageProbe(width, height, stored[0], stored[1], orientation, mode, fmt)


def _stretch_to_8bit(image: Image.Image) -> Image.Image:
    array = np.asarray(image, dtype=np.float64)
    low, high = float(array.min()), float(array.max())
    scale = 255.0 / (high - low) if high > low else 0.0
    return Image.fromarray(((array - low) * scale).round().astype(np.uint8))


def to_rgb(image: Image.Image) -> Image.Image:
    """Any PIL mode as 8-bit RGB, the way a viewer would show it.

    - 16- and 32-bit integer and float images are stretched linearly from their own
      minimum and maximum to 0..255 (medical scans often use 12 of 16 bits);
    - palette images with transparency and images with alpha are composited on white;
    - grayscale, bilevel and CMYK are converted by PIL.
    """
    if image.mode == "RGB":
        return image
    if image.mode in _HIGH_DEPTH_MODES:
        return _stretch_to_8bit(image).convert("RGB")
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode in _ALPHA_MODES:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def open_rgb(data: bytes) -> Image.Image:
    """Decode file bytes as displayed (EXIF orientation applied) in 8-bit RGB."""
    with Image.open(io.BytesIO(data)) as im:
        return to_rgb(ImageOps.exif_transpose(im))
