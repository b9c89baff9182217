"""The federated loss (Madan et al. 2024; RF100-VL's "w/ federated loss" rows) as a loss mask.

On a federated split, such as a generated ``fewshot_10`` where each image is annotated only
for the classes drawn for it, a class absent from an image's labels is unknown there, not
negative. So an image's classification loss only sees the classes annotated in it: every
other class's logit is replaced by a large negative constant, whose sigmoid is 0 (3e-7 with
:data:`LOG_SAFE_FILL`, for losses that take the logarithm of the sigmoid), so that
sigmoid-focal, varifocal, BCE and IoU-aware BCE losses and their gradients vanish for it, and
the Hungarian matcher's class cost ignores it. An image with no box says nothing about any class: all of
its classes are masked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

FILL = -1e4
"""The logit a masked class gets (sigmoid 0 in float16 too)."""

LOG_SAFE_FILL = -15.0
"""The fill for a loss that takes the logarithm of the sigmoid itself rather than working from
logits (LW-DETR's and RF-DETR's IoU-aware BCE, ``-w * log(p)``): there a sigmoid of exactly 0
gives ``0 * -inf``, NaN. At -15 the sigmoid is 3e-7 (a float16 subnormal, so no precision
rounds it to 0): a masked class adds about ``p**3`` = 3e-20 to such a loss, and nothing to its
gradient (the fill is a constant)."""


def federated_mask(labels: Sequence[Sequence[int]], num_classes: int) -> np.ndarray:
    """``(images, classes)``: True where the class is annotated in the image (its logits take part in the loss)."""
    mask = np.zeros((len(labels), num_classes), dtype=bool)
    for image, classes in enumerate(labels):
        mask[image, np.asarray(classes, dtype=np.int64)] = True
    return mask


def mask_logits(logits: torch.Tensor, mask: torch.Tensor, fill: float = FILL) -> torch.Tensor:
    """``logits`` ``(images, queries, classes)`` with the classes ``mask`` ``(images, classes)``
    leaves out set to ``fill``; kept logits are unchanged and keep their gradient."""
    import torch

    return torch.where(mask[:, None, :].to(logits.device), logits, torch.full_like(logits, fill))


class FederatedMask:
    """The current batch's mask, applied to the output of every classification head it is hooked
    on (:meth:`attach`); with no mask set (at inference), outputs pass unchanged."""

    def __init__(self, fill: float = FILL) -> None:
        self.mask: torch.Tensor | None = None
        self.fill = fill

    def set(self, labels: Sequence[Sequence[int]], num_classes: int) -> None:
        import torch

        self.mask = torch.from_numpy(federated_mask(labels, num_classes))

    def clear(self) -> None:
        self.mask = None

    def hook(self, module: torch.nn.Module, inputs: Any, output: torch.Tensor) -> torch.Tensor:
        if self.mask is None or output.shape[0] != self.mask.shape[0]:
            return output
        return mask_logits(output, self.mask, self.fill)

    def attach(self, heads: Sequence[torch.nn.Module]) -> list[Any]:
        """Hook each head once (a head shared by two names counts once); returns the handles."""
        unique = {id(head): head for head in heads}
        return [head.register_forward_hook(self.hook) for head in unique.values()]
