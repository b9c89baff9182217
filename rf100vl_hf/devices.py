"""The one device resolver: what ``auto``, ``cpu``, ``cuda``, ``cuda:N`` and ``mps`` mean.

Every place that places a model or a tensor (adapters, CLIP embeddings, MMD) resolves its
device here, so ``auto`` means the same everywhere: cuda, then mps, then cpu. torch is
imported only when a name has to be checked against the machine.
"""

from __future__ import annotations

import importlib.util
import re

from rf100vl_hf.errors import needs_extra

DEVICE_PATTERN = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
DEVICE_HELP = "auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps"


def check_device_name(device: str) -> str:
    """``device`` when it is a name this project understands; ``ValueError`` otherwise (no torch import)."""
    if not DEVICE_PATTERN.match(device):
        raise ValueError(f"unknown device {device!r} (use {DEVICE_HELP})")
    return device


def resolve_device(device: str | None = "auto") -> str:
    """A concrete device for ``device`` (``None`` is ``auto``), checked against this machine.

    ``auto`` picks cuda, then mps, then cpu (cpu where torch is not installed); an explicit
    device the machine lacks is a ``RuntimeError`` that says what is missing.
    """
    device = check_device_name(device or "auto")
    if device == "cpu" or (device == "auto" and importlib.util.find_spec("torch") is None):
        return "cpu"  # without torch (a served model, the metric alone) nothing here runs on an accelerator
    with needs_extra(f"device {device!r}"):
        import torch

    cuda = torch.cuda.is_available()
    mps = bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    if device == "auto":
        return "cuda" if cuda else "mps" if mps else "cpu"
    if device.startswith("cuda"):
        if not cuda:
            raise RuntimeError(f"device {device!r} requested but CUDA is not available on this machine")
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise RuntimeError(f"device {device!r} requested but only {torch.cuda.device_count()} CUDA device(s) exist")
    elif device == "mps" and not mps:
        raise RuntimeError(f"device {device!r} requested but MPS is not available on this machine")
    return device
