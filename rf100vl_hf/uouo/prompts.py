"""The two UOUO questions, written once.

Both are asked about the same target object of a mosaic:

- :data:`BOX_PROMPT`, "where is the <category>": answered with a box in pixels of the
  800 x 800 mosaic, scored by IoU against the target box (mean over mosaics: mIoU);
- :data:`QUADRANT_PROMPT`, "which quadrant": answered with one of the four words of
  :data:`QUADRANTS` (top-left, top-right, bottom-left, bottom-right: the order of the
  mosaic's cells; the scorer defines them), scored by accuracy.

The templates are stored with each mosaic (so a model is always asked what the data
says) and in the dataset's metadata.
"""

from __future__ import annotations

from rf100vl_hf.metrics.grounding import QUADRANTS  # the cells of a mosaic in order; the only valid answers

BOX_PROMPT = (
    "Where is the {category} in this image? Answer with its bounding box as [x_min, y_min, x_max, y_max] "
    "in pixels of the {size}x{size} image."
)
QUADRANT_PROMPT = "Which quadrant of the image is the {category} in? Answer with one of: " + ", ".join(QUADRANTS) + "."


def box_prompt(category: str, size: int) -> str:
    return BOX_PROMPT.format(category=category, size=size)


def quadrant_prompt(category: str) -> str:
    return QUADRANT_PROMPT.format(category=category)
