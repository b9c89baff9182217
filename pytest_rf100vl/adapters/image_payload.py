"""Images as a served model is sent them: the file as stored whenever the server can take it,
so the model sees exactly the pixels every other model and the ground truth see.

An image is re-encoded (from the decoded RGB frame the ground truth is in) only when it
must be: no file bytes, a format the API does not take, an EXIF orientation other than
identity (servers differ in whether they apply it), a mode other than 8-bit RGB or grey
(16-bit, CMYK, palette, alpha: servers differ in how they flatten them), several frames, or
``max_pixels`` asking for a smaller image (then it is downscaled, keeping its aspect
ratio). A JPEG is re-encoded as JPEG (quality 95), anything else as PNG. Images are never
padded. Few-shot images (decoded, no file) go as PNG.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass

import numpy as np
from PIL import Image

from pytest_rf100vl.adapters.base import FewShotExample, ImageItem

MIME = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp", "GIF": "image/gif"}
SENT_MODES = frozenset({"RGB", "L"})
"""Modes every server decodes the same way; any other is flattened here, as the runner did."""
ORIENTATION = 0x0112


@dataclass(frozen=True)
class SentImage:
    """The bytes sent for one image, their type, the ``(width, height)`` they decode to, and
    why they are not the stored file (``None``: they are)."""

    data: bytes
    mime: str
    size: tuple[int, int]
    reencoded: str | None = None

    @property
    def downscaled(self) -> bool:
        return self.reencoded == "max_pixels"

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.base64()}"


def downscaled_size(size: tuple[int, int], max_pixels: int | None) -> tuple[int, int]:
    """``size`` scaled down (aspect kept, sides rounded down) to at most ``max_pixels``."""
    width, height = size
    if not max_pixels or width * height <= max_pixels:
        return size
    scale = math.sqrt(max_pixels / (width * height))
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


def encoded(image: Image.Image, jpeg: bool, reason: str) -> SentImage:
    """``image`` (RGB) as JPEG (quality 95) or PNG."""
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG" if jpeg else "PNG", **({"quality": 95} if jpeg else {}))
    return SentImage(buffer.getvalue(), MIME["JPEG" if jpeg else "PNG"], image.size, reason)


def stored_format(data: bytes | None, size: tuple[int, int], accepted: frozenset[str]) -> tuple[str | None, str | None]:
    """``(format, why it must be re-encoded)`` of a stored file; the reason is ``None`` when the
    file can go as it is (``size``: the decoded frame's, which the file must match;
    ``accepted``: the formats of :data:`MIME` the API takes)."""
    if data is None:
        return None, "no file bytes"
    try:
        with Image.open(io.BytesIO(data)) as file:
            found, mode, frames = file.format, file.mode, getattr(file, "n_frames", 1)
            orientation, stored = file.getexif().get(ORIENTATION, 1), file.size
    except Exception:  # the runner decoded it, so this is a header PIL reads differently: re-encode
        return None, "unreadable header"
    reasons = {
        f"format {found}": found not in accepted,
        f"mode {mode}": mode not in SENT_MODES,
        f"EXIF orientation {orientation}": orientation not in (1, None),
        f"{frames} frames": frames != 1,
        f"stored size {stored} is not the decoded {size}": stored != size,
    }
    return found, next((reason for reason, applies in reasons.items() if applies), None)


def sent_image(item: ImageItem, accepted: frozenset[str], max_pixels: int | None = None) -> SentImage:
    """What is sent for ``item``: its stored file, or a re-encoding when it must be."""
    image = item.image
    found, reason = stored_format(item.data, image.size, accepted)
    target = downscaled_size(image.size, max_pixels)
    if target != image.size:
        return encoded(image.resize(target, Image.Resampling.LANCZOS), found == "JPEG", "max_pixels")
    if reason is None:
        assert item.data is not None and found is not None
        return SentImage(item.data, MIME[found], image.size)
    return encoded(image.convert("RGB"), found == "JPEG", reason)


def shown_example(example: FewShotExample, max_pixels: int | None = None) -> FewShotExample:
    """A few-shot example as the model is shown it: downscaled to ``max_pixels`` if asked, its
    boxes scaled to match (its ground-truth answer is written from this)."""
    image = example.image
    target = downscaled_size(image.size, max_pixels)
    if target == image.size:
        return example
    scale = np.array([target[0] / image.width, target[1] / image.height] * 2)
    boxes = np.asarray(example.boxes, dtype=np.float64).reshape(-1, 4) * scale
    return FewShotExample(image.convert("RGB").resize(target, Image.Resampling.LANCZOS), boxes, example.labels)


def sent_example(image: Image.Image) -> SentImage:
    """A few-shot image (decoded: it has no file) as PNG."""
    return encoded(image.convert("RGB"), False, "few-shot")
