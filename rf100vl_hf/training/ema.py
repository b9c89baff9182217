"""An exponential moving average of a model's weights, the EMA that D-FINE, DEIMv2, LW-DETR and
RF-DETR (and RT-DETR before them) evaluate and release instead of the raw weights.

After each optimizer step every floating-point tensor of the model's state becomes
``average = d * average + (1 - d) * current``, with ``d = decay * (1 - exp(-steps / warmup))``
(``d = decay`` when ``warmup`` is 0): the ramp of D-FINE's ``ModelEMA`` (``warmups``) and
RF-DETR's ``ModelEma`` (``tau``), which keeps the first steps' average close to the model
instead of to the checkpoint it started from. Other tensors (step counters) are copied.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def weights_problem(weights: Any, expected: Mapping[str, torch.Tensor]) -> str | None:
    """Why ``weights`` are not a state dict with ``expected``'s keys and shapes (another model's,
    not weights at all), or ``None``: the one check of saved weights, an average's or a fit's."""
    import torch

    if not isinstance(weights, Mapping):
        return f"holds a {type(weights).__name__}, not a model's weights"
    missing, extra = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
    if missing or extra:
        return (f"holds the weights of another model ({len(missing)} of this model's tensors missing, "
                f"{len(extra)} others; first: {(missing or extra)[0]})")
    reshaped = [name for name, tensor in expected.items()
                if not torch.is_tensor(weights[name]) or weights[name].shape != tensor.shape]
    if reshaped:
        return f"holds the weights of another model ({reshaped[0]} has another shape)"
    return None


class WeightAverage:
    """The average of ``model``'s weights over the optimizer steps since it was made."""

    def __init__(self, model: torch.nn.Module, decay: float, warmup: int = 0):
        self.decay = decay
        self.warmup = warmup
        self.steps = 0
        self.weights = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}

    def current_decay(self) -> float:
        """The ``d`` of the next update."""
        if self.warmup == 0:
            return self.decay
        return self.decay * (1 - math.exp(-(self.steps + 1) / self.warmup))

    def update(self, model: torch.nn.Module) -> None:
        """Fold the model's weights after an optimizer step into the average."""
        import torch

        decay = self.current_decay()
        with torch.no_grad():
            for name, tensor in model.state_dict().items():
                average = self.weights[name]
                if average.is_floating_point():
                    average.mul_(decay).add_(tensor.detach().to(average.dtype), alpha=1 - decay)
                else:
                    average.copy_(tensor)
        self.steps += 1

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "weights": self.weights}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take a saved average (``ValueError`` when it is not one of this model's)."""
        weights = state.get("weights") if isinstance(state, Mapping) else None
        problem = weights_problem(weights, self.weights)
        if problem is None and not isinstance(state.get("steps"), int):
            problem = f"its step count is {state.get('steps')!r}, not an integer"
        if problem is not None:
            raise ValueError(problem)
        self.steps = state["steps"]
        for name, tensor in self.weights.items():
            tensor.copy_(weights[name])
