"""Defaults of ``results compare`` and ``draw``, in a module that imports nothing heavy: the
command line reads them here, so ``--help`` does not import numpy or pycocotools."""

from __future__ import annotations

RESAMPLES = 1000
"""Bootstrap resamples per dataset and per mean (the percentiles of 1000 are stable to a few
hundredths of an AP point on the benchmark's splits)."""
CONFIDENCE = 0.95
"""Level of the bootstrap intervals."""
MIN_SCORE = 0.3
"""``draw`` shows predictions scoring at least this."""
