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
