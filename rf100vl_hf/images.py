"""Image decoding shared by the readers and the adapters.

Datasets keep the original file bytes; these helpers check them once at read time and
turn any supported mode into the 8-bit RGB that models expect at inference time.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import simplejpeg
from PIL import Image, ImageOps, UnidentifiedImageError

from rf100vl_hf.errors import DataError, shown

ORIENTATION_TAG = 0x0112
TRANSPOSING_ORIENTATIONS = frozenset({5, 6, 7, 8})
"""EXIF orientations that turn the image by 90 degrees, so displayed width and height swap."""

_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
"""Samples per pixel of each PNG colour type."""
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
"""The seven passes of an interlaced PNG: first column, first row, column step, row step."""
_JPEG_TARGET = {"Gray": "GRAY", "CMYK": "CMYK", "YCCK": "CMYK"}
"""The colour space to decode a JPEG into for checking, by its stored colour space (else RGB)."""

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


def _png_chunk_spans(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """``(offset, length, type)`` of each chunk of a PNG up to ``IEND``, from the chunk headers alone."""
    pos = 8  # after the signature
    while pos + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        yield pos, length, kind
        if kind == b"IEND":
            return
        pos += 12 + length  # length, type, data, CRC


def _png_has_exif(data: bytes) -> bool:
    """Whether a PNG has an ``eXIf`` chunk anywhere, found by walking the chunk headers."""
    return any(kind == b"eXIf" for _, _, kind in _png_chunk_spans(data))


def _orientation(im: Image.Image, data: bytes) -> int:
    """The EXIF orientation, without decoding pixels.

    Pillow finds a PNG's ``eXIf`` chunk only by decoding the whole image when the chunk
    follows the pixel data, so a PNG is asked only when it has such a chunk at all.
    """
    if im.format == "PNG" and "exif" not in im.info and not _png_has_exif(data):
        return 1
    value = im.getexif().get(ORIENTATION_TAG, 1)
    return int(value) if value in range(1, 9) else 1


def _png_chunks(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Each ``(type, data)`` chunk of a PNG, refusing a chunk cut short or failing its CRC."""
    for pos, length, kind in _png_chunk_spans(data):
        body, crc = data[pos + 8 : pos + 8 + length], data[pos + 8 + length : pos + 12 + length]
        name = kind.decode("latin-1")
        if len(crc) < 4:
            raise ValueError(f"PNG chunk {name} at byte {pos} is cut short")
        if zlib.crc32(kind + body) != int.from_bytes(crc, "big"):
            raise ValueError(f"PNG chunk {name} at byte {pos} fails its CRC check")
        yield kind, body


def _check_png_rows(data: bytes) -> None:
    """Refuse a PNG whose pixel stream holds fewer (or more) rows than its header says.

    Pillow stops at the end of the compressed stream without counting rows, so a PNG whose
    ``IDAT`` holds 3 of 600 rows decodes as an image that is black below row 3.
    """
    header, idat = b"", []
    for kind, body in _png_chunks(data):
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat.append(body)
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header[:13])
    bits = depth * _PNG_CHANNELS[color]
    passes = _ADAM7 if interlace else ((0, 0, 1, 1),)
    sizes = [(-(-(width - x) // dx), -(-(height - y) // dy)) for x, y, dx, dy in passes]
    expected = sum(rows * (1 + (cols * bits + 7) // 8) for cols, rows in sizes if cols and rows)
    stream = zlib.decompressobj()
    try:
        pixels = stream.decompress(b"".join(idat), expected + 1)
    except zlib.error as exc:
        raise ValueError(f"PNG pixel data cannot be inflated ({exc})") from None
    if len(pixels) < expected:
        if interlace:
            raise ValueError(f"PNG pixel data holds {len(pixels)} of {expected} bytes")
        raise ValueError(f"PNG pixel data holds {len(pixels) // (1 + (width * bits + 7) // 8)} of {height} rows")
    if len(pixels) > expected:
        raise ValueError(f"PNG pixel data is longer than its {height} rows")
    if not stream.eof:
        raise ValueError("PNG pixel data stream is cut short")


def _check_jpeg(data: bytes) -> None:
    """Decode every pixel of a JPEG with libjpeg-turbo's warnings as errors.

    libjpeg repairs damaged entropy-coded data (zeroed bytes, a lost segment) with a
    warning that Pillow does not pass on, so the image would decode grey or black and
    no error would say so.
    """
    colorspace = simplejpeg.decode_jpeg_header(data)[2]
    simplejpeg.decode_jpeg(data, colorspace=_JPEG_TARGET.get(colorspace, "RGB"), strict=True)


def _decode_all(im: Image.Image, data: bytes, fmt: str) -> None:
    """Decode every pixel and refuse the damage each format's decoder would paper over."""
    if fmt == "JPEG":
        _check_jpeg(data)
        return
    im.load()
    if fmt == "PNG":
        _check_png_rows(data)


def probe_image(data: bytes, path: str | Path, full: bool = False) -> ImageProbe:
    """Read an image's size, mode and EXIF orientation, and catch corrupt or truncated files.

    By default only the header is parsed and a JPEG or PNG must end with its end marker;
    a file that does not (or another format) is decoded in full to decide. ``full=True``
    decodes every pixel row of every file, which also catches damage in the middle of
    the data at the cost of a decode per image: a JPEG's corrupt-data warnings, a PNG
    chunk failing its CRC, or a PNG pixel stream shorter than its rows are errors.
    """
    try:
        with Image.open(io.BytesIO(data)) as im:
            stored = im.size
            fmt = im.format or "unknown"
            mode = im.mode
            orientation = _orientation(im, data)
            if full:
                _decode_all(im, data, fmt)
            elif not _ends_cleanly(data, fmt):
                im.load()
    except UnidentifiedImageError:  # a text file, an archive... (a link may lead anywhere): never embedded
        raise DataError(path, "image", f"cannot be decoded: no image format recognises it (it starts "
                        f"{shown(data[:16])}), so it is not embedded") from None
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
