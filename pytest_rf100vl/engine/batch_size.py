"""``--rf100vl-batch-size auto``: the largest batch that fits on the GPU, found once per model.

On CUDA the model is run on batches of 1, 2, 4, ... copies of the split's largest image (by
pixel count) until a batch runs out of memory, its peak passes :data:`HEADROOM` of the
device's memory (the loop holds a second batch on the device while one runs), or
:data:`LARGEST` is reached; the last batch that fitted is the size, for every dataset the
model then runs. Elsewhere (CPU, MPS, a model behind a server) ``auto`` is 1: batching there
buys no throughput worth a probe. Rows record both the size used (``batch_size``) and what
was asked (``batch_size_requested``).
"""

from __future__ import annotations

import logging
import sys
import weakref
from collections.abc import Callable
from typing import Any

from pytest_rf100vl.adapters.base import Adapter, ImageItem
from pytest_rf100vl.adapters.model import Model, as_model
from pytest_rf100vl.core.config import AUTO_BATCH

LARGEST = 256
"""The largest batch ``auto`` tries."""
HEADROOM = 0.8
"""The share of the device's memory a probe's peak may reach."""

_found: "weakref.WeakKeyDictionary[Model, int]" = weakref.WeakKeyDictionary()
_log = logging.getLogger("pytest_rf100vl")


def batch_size_for(adapter: Model | Adapter, requested: int | str, run: Callable[[int], Any]) -> int:
    """The batch size to run the model with: ``requested`` when it is a number, else the size
    ``auto`` finds for this model (probed once, with ``run(size)`` running one batch)."""
    if requested != AUTO_BATCH:
        return int(requested)
    model = as_model(adapter)
    if model not in _found:
        _found[model] = _probe(model, run)
    return _found[model]


def _probe(model: Model, run: Callable[[int], Any]) -> int:
    torch = sys.modules.get("torch")
    if not (model.entry.transformers_model and model.device.startswith("cuda") and torch is not None
            and torch.cuda.is_available()):
        return 1
    device = torch.device(model.device)
    limit = HEADROOM * torch.cuda.get_device_properties(device).total_memory
    fitted, size = 1, 1
    while size <= LARGEST:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        try:
            run(size)
            torch.cuda.synchronize(device)
        except torch.cuda.OutOfMemoryError:
            break
        if torch.cuda.max_memory_allocated(device) > limit and size > 1:
            break
        fitted, size = size, size * 2
    torch.cuda.empty_cache()
    _log.info("%s: batch size auto is %d on %s", model.name, fitted, device)
    return fitted


def copies(item: ImageItem, size: int) -> list[ImageItem]:
    """One image ``size`` times, as a probe's batch."""
    return [ImageItem(item.image, -1 - i, item.file_name, item.data) for i in range(size)]
