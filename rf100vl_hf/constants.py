"""Names shared by the library, the command line and the plugin, defined once."""

from __future__ import annotations

PROMPT_MODES: tuple[str, ...] = ("names", "instructions", "fewshot", "instructions+fewshot")
"""How a detector is prompted: class names, annotator instructions, few-shot examples, or both
(the paper's "Instructions + Images" rows)."""

DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16")
"""Model dtypes, by the names torch gives them."""

