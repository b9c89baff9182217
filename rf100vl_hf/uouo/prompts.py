"""The two UOUO questions, written once.

Both are asked about the same target object of a mosaic:

- :data:`BOX_PROMPT`, "where is the <category>": answered with a box, scored by IoU
  against the target box in pixels of the mosaic (mean over mosaics: mIoU). The question
  names no coordinate space, because models answer in their own (0..1000, pixels of a
  resized input, location tokens): each adapter reads its model's answer and converts
  it to pixels of the mosaic it was given;
- :data:`QUADRANT_PROMPT`, "which quadrant": answered with one of the four words of
  :data:`QUADRANTS` (top-left, top-right, bottom-left, bottom-right: the order of the
  mosaic's cells; the scorer defines them), scored by accuracy.

The templates are stored with each mosaic (so a model is always asked what the data
says) and in the dataset's metadata.
"""

from __future__ import annotations

from rf100vl_hf.metrics.grounding import QUADRANTS  # the cells of a mosaic in order; the only valid answers

BOX_PROMPT = "Where is the {category} in this image? Answer with its bounding box as [x_min, y_min, x_max, y_max]."
QUADRANT_PROMPT = "Which quadrant of the image is the {category} in? Answer with one of: " + ", ".join(QUADRANTS) + "."


def box_prompt(category: str) -> str:
    return BOX_PROMPT.format(category=category)


def quadrant_prompt(category: str) -> str:
    return QUADRANT_PROMPT.format(category=category)
