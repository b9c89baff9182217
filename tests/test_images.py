"""Image probing (sizes, EXIF, damage) and conversion of every mode to 8-bit RGB."""

from __future__ import annotations

import io
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFile

from rf100vl_hf.errors import DataError
from rf100vl_hf.images import open_rgb, probe_image, to_rgb


def _encode(image: Image.Image, fmt: str, orientation: int | None = None) -> bytes:
    buffer = io.BytesIO()
    extra = {}
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        extra["exif"] = exif.tobytes()
    image.save(buffer, format=fmt, **extra)
    return buffer.getvalue()


def _rgb(image: Image.Image) -> np.ndarray:
    out = to_rgb(image)
    assert (out.mode, out.size) == ("RGB", image.size)
    return np.asarray(out).astype(int)


# ------------------------------------------------------------------ to_rgb


def test_rgb_is_returned_as_is() -> None:
    image = Image.new("RGB", (4, 3), (1, 2, 3))
    assert to_rgb(image) is image


def test_grayscale_and_bilevel_become_equal_channels() -> None:
    gray = Image.fromarray(np.array([[0, 77, 255]], dtype=np.uint8))
    assert _rgb(gray).tolist() == [[[0, 0, 0], [77, 77, 77], [255, 255, 255]]]
    bilevel = gray.convert("1")
    assert _rgb(bilevel)[0, :, 0].tolist() == [0, 0, 255]


@pytest.mark.parametrize(
    "mode, values",
    [
        ("I;16", np.array([[1000, 3000, 5000]], dtype=np.uint16)),  # 12 bits used of 16, as scanners write
        ("I", np.array([[-70000, 0, 70000]], dtype=np.int32)),
        ("F", np.array([[-1.5, 0.0, 1.5]], dtype=np.float32)),
    ],
)
def test_high_depth_images_are_stretched_from_their_own_range(mode: str, values: np.ndarray) -> None:
    image = Image.fromarray(values)
    assert image.mode == mode
    rgb = _rgb(image)
    assert rgb[0, :, 0].tolist() == [0, 128, 255]
    assert (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all()


def test_a_flat_16_bit_image_is_black_not_a_division_by_zero() -> None:
    flat = Image.fromarray(np.full((2, 2), 4000, dtype=np.uint16))
    assert _rgb(flat).max() == 0


def test_a_16_bit_png_file_is_stretched() -> None:
    values = np.array([[0, 2048, 4095]], dtype=np.uint16)
    data = _encode(Image.fromarray(values), "PNG")
    assert Image.open(io.BytesIO(data)).mode == "I;16"
    assert np.asarray(open_rgb(data))[0, :, 0].tolist() == [0, 128, 255]


def test_palette_keeps_its_colours_and_transparency_shows_white() -> None:
    palette = Image.new("P", (3, 1))
    palette.putpalette([200, 10, 10, 10, 200, 10, 10, 10, 200])
    palette.putdata([0, 1, 2])
    assert _rgb(palette)[0].tolist() == [[200, 10, 10], [10, 200, 10], [10, 10, 200]]
    palette.info["transparency"] = 1
    assert _rgb(palette)[0].tolist() == [[200, 10, 10], [255, 255, 255], [10, 10, 200]]
    again = Image.open(io.BytesIO(_encode(palette, "PNG")))
    assert _rgb(again)[0, 1].tolist() == [255, 255, 255]


@pytest.mark.parametrize("mode", ["RGBA", "LA", "PA"])
def test_alpha_is_composited_on_white(mode: str) -> None:
    rgba = Image.fromarray(np.array([[[0, 0, 0, 0], [0, 0, 0, 255], [0, 0, 0, 128]]], dtype=np.uint8), mode="RGBA")
    image = rgba if mode == "RGBA" else rgba.convert(mode)
    rgb = _rgb(image)
    assert rgb[0, 0].tolist() == [255, 255, 255]
    assert rgb[0, 1].tolist() == [0, 0, 0]
    assert np.abs(rgb[0, 2] - 127).max() <= 1


def test_cmyk_becomes_its_rgb_colours() -> None:
    cmyk = Image.fromarray(np.array([[[255, 0, 0, 0], [0, 0, 0, 255], [0, 0, 0, 0]]], dtype=np.uint8), mode="CMYK")
    assert _rgb(cmyk)[0].tolist() == [[0, 255, 255], [0, 0, 0], [255, 255, 255]]
    jpeg = _encode(cmyk.resize((16, 16), Image.Resampling.NEAREST), "JPEG")
    assert Image.open(io.BytesIO(jpeg)).mode == "CMYK"
    assert open_rgb(jpeg).mode == "RGB"


def test_open_rgb_shows_the_image_as_displayed() -> None:
    shown = Image.new("RGB", (40, 20), (0, 0, 0))
    shown.paste((255, 0, 0), (0, 0, 10, 20))  # red on the left
    stored = shown.transpose(Image.Transpose.ROTATE_90)  # orientation 6 turns it back
    decoded = open_rgb(_encode(stored, "JPEG", orientation=6))
    assert decoded.size == (40, 20)
    pixels = np.asarray(decoded).astype(int)
    assert pixels[10, 2, 0] > 200 and pixels[10, 30, 0] < 60


# ------------------------------------------------------------ probe_image


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
@pytest.mark.parametrize("orientation, displayed", [(1, (40, 20)), (3, (40, 20)), (6, (20, 40)), (8, (20, 40))])
def test_probe_reads_size_mode_and_orientation(fmt: str, orientation: int, displayed: tuple[int, int]) -> None:
    data = _encode(Image.new("RGB", (40, 20)), fmt, orientation)
    probe = probe_image(data, "x")
    assert (probe.width, probe.height) == displayed
    assert (probe.stored_width, probe.stored_height, probe.orientation) == (40, 20, orientation)
    assert (probe.mode, probe.format) == ("RGB", fmt)


def test_probe_finds_a_png_exif_chunk_after_the_pixels() -> None:
    data = _encode(Image.new("RGB", (40, 20)), "PNG", orientation=6)
    start = data.index(b"eXIf") - 4
    length = int.from_bytes(data[start : start + 4], "big")
    chunk = data[start : start + 12 + length]
    late = data[:start] + data[start + len(chunk) : -12] + chunk + data[-12:]  # moved just before IEND
    assert late.index(b"eXIf") > late.index(b"IDAT")
    with Image.open(io.BytesIO(late)) as im:
        assert "exif" not in im.info  # Pillow sees it only once the pixels are decoded
        im.load()
        assert im.getexif().get(0x0112) == 6
    probe = probe_image(late, "late.png")
    assert (probe.orientation, probe.width, probe.height) == (6, 20, 40)


def test_probe_decodes_no_pixels_of_a_well_formed_file(monkeypatch) -> None:
    files = [_encode(Image.new(mode, (30, 20)), fmt) for mode, fmt in [("RGB", "JPEG"), ("L", "PNG"), ("I;16", "PNG")]]

    def refuse(self: ImageFile.ImageFile) -> None:
        raise AssertionError("decoded pixels")

    monkeypatch.setattr(ImageFile.ImageFile, "load", refuse)
    assert [probe_image(data, "x").width for data in files] == [30, 30, 30]


def _damaged_png() -> bytes:
    """A PNG whose compressed pixels are broken while its chunk layout and end marker are intact."""
    data = bytearray(_encode(Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), np.uint8)), "PNG"))
    start = data.index(b"IDAT") + 4
    data[start + 40 : start + 60] = bytes(20)
    assert data[-8:-4] == b"IEND"
    return bytes(data)


def test_full_verification_catches_damage_that_headers_do_not_show() -> None:
    damaged = _damaged_png()
    assert probe_image(damaged, "damaged.png").width == 64
    with pytest.raises(DataError, match=r"^damaged.png: image: cannot be decoded"):
        probe_image(damaged, "damaged.png", full=True)
    with pytest.raises(zlib.error):
        zlib.decompressobj().decompress(damaged[damaged.index(b"IDAT") + 4 :])


@pytest.mark.parametrize(
    "data",
    [
        _encode(Image.new("RGB", (64, 64), (9, 9, 9)), "JPEG")[:300],
        _encode(Image.new("RGB", (64, 64), (9, 9, 9)), "PNG")[:-30],
        b"GIF89a but nothing else",
        b"",
    ],
    ids=["truncated JPEG", "truncated PNG", "garbage", "empty"],
)
def test_broken_files_are_named(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "broken.img"
    with pytest.raises(DataError) as caught:
        probe_image(data, path)
    assert (caught.value.path, caught.value.field) == (str(path), "image")
    assert str(caught.value).startswith(f"{path}: image: cannot be decoded")


# ------------------------------------------------------ full verification

ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


def _chunk(kind: bytes, body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")


def _gray_png(pixels: np.ndarray, interlace: bool = False, keep: slice = slice(None), height: int = 0) -> bytes:
    """A grey PNG written by hand (Pillow writes no interlaced PNG); ``keep`` cuts its filtered
    rows, ``height`` tells the header another height than the pixels have."""
    rows_high, width = pixels.shape
    height = height or rows_high
    passes = ADAM7 if interlace else ((0, 0, 1, 1),)
    rows = [b"\x00" + row.tobytes() for x, y, dx, dy in passes for row in pixels[y::dy, x::dx] if row.size]
    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, int(interlace)])
    body = zlib.compress(b"".join(rows[keep]))
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", body) + _chunk(b"IEND", b"")


PIXELS = np.random.default_rng(1).integers(0, 255, (23, 37), np.uint8)


@pytest.mark.parametrize("interlace", [False, True], ids=["progressive rows", "interlaced"])
def test_full_verification_accepts_every_row_of_a_whole_png(interlace: bool) -> None:
    data = _gray_png(PIXELS, interlace)
    with Image.open(io.BytesIO(data)) as im:
        assert (np.asarray(im) == PIXELS).all()
    assert probe_image(data, "whole.png", full=True).width == 37


@pytest.mark.parametrize(
    "data, words",
    [
        (_gray_png(PIXELS, keep=slice(0, 3)), "holds 3 of 23 rows"),
        (_gray_png(PIXELS, interlace=True, keep=slice(0, -2)), "bytes"),
        (_gray_png(PIXELS, height=22), "longer than its 22 rows"),
    ],
    ids=["3 of 23 rows", "interlaced, short", "more rows than the header"],
)
def test_full_verification_counts_the_rows_of_a_png(data: bytes, words: str) -> None:
    with Image.open(io.BytesIO(data)) as im:
        im.load()  # what Pillow alone accepts
    assert probe_image(data, "rows.png").height in (22, 23)  # and so do headers
    with pytest.raises(DataError, match=r"^rows.png: image: cannot be decoded") as caught:
        probe_image(data, "rows.png", full=True)
    assert words in str(caught.value)


def test_full_verification_checks_png_chunk_crcs() -> None:
    data = bytearray(_encode(Image.new("RGB", (8, 8), (1, 2, 3)), "PNG"))
    crc_at = data.index(b"IEND") - 4  # the last byte of the CRC of the chunk before IEND
    data[crc_at - 1] ^= 0xFF
    with pytest.raises(DataError, match="fails its CRC check"):
        probe_image(bytes(data), "crc.png", full=True)


def test_full_verification_refuses_a_jpeg_that_libjpeg_repairs_silently() -> None:
    pixels = np.random.default_rng(0).integers(0, 255, (240, 320, 3), np.uint8)
    data = bytearray(_encode(Image.fromarray(pixels), "JPEG"))
    middle = len(data) // 2
    data[middle : middle + 4000] = bytes(4000)
    with Image.open(io.BytesIO(bytes(data))) as im:
        im.load()  # Pillow decodes it without a word
    assert probe_image(bytes(data), "zeroed.jpg").width == 320  # the end marker is there
    with pytest.raises(DataError, match=r"^zeroed.jpg: image: cannot be decoded .*Corrupt JPEG data"):
        probe_image(bytes(data), "zeroed.jpg", full=True)


@pytest.mark.parametrize("mode", ["RGB", "L", "CMYK"])
def test_full_verification_accepts_whole_jpegs_of_every_colour_space(mode: str) -> None:
    image = Image.fromarray(np.random.default_rng(2).integers(0, 255, (40, 60, 3), np.uint8)).convert(mode)
    assert probe_image(_encode(image, "JPEG", orientation=6), "whole.jpg", full=True).width == 40
