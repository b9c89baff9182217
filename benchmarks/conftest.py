"""Benchmarks use the tests' stand-ins and tiny models (``tests/support``): the repository root
goes on ``sys.path`` so ``pytest benchmarks/...`` finds them as ``python -m pytest`` would."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
