"""How a model is fine-tuned: a named recipe and its hyper-parameters, as rows record them.

A recipe is plain data, so that it can key the trained-weights store and be compared with
the paper's (the README's "Data regimes"). Adapters declare a default recipe per training
split; ``--rf100vl-train-option KEY=VALUE`` overrides any hyper-parameter of it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

PRECISIONS = ("no", "fp16", "bf16")
REGIMES = {None: "zero-shot", "fewshot_10": "few-shot", "semisup_10": "semi-supervised", "train": "fully-supervised"}
"""The regime a training split puts a pair in (``None``: the model as it comes), as Table 2 names them."""


def regime_of(train_split: str | None) -> str:
    """The regime of a pair trained on ``train_split``: few-shot for any ``fewshot_K``, semi-supervised
    for any ``semisup_P``."""
    if train_split in REGIMES:
        return REGIMES[train_split]
    assert train_split is not None
    if train_split.startswith("fewshot_"):
        return "few-shot"
    if train_split.startswith("semisup_"):
        return "semi-supervised"
    raise ValueError(f"no regime trains on split {train_split!r} (known: fewshot_K, semisup_P, train)")


@dataclass(frozen=True)
class Recipe:
    """A training recipe. ``extra`` holds a model's own hyper-parameters (by name); everything but
    ``name`` and ``seed`` is a hyper-parameter (:meth:`hyperparameters`)."""

    name: str
    epochs: int
    batch_size: int
    learning_rate: float
    weight_decay: float = 1e-4
    max_grad_norm: float | None = 0.1
    federated: bool = False
    mixed_precision: str = "no"  # one of PRECISIONS
    grad_accumulation: int = 1
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = [message for message, bad in (
            (f"epochs must be >= 1, got {self.epochs}", self.epochs < 1),
            (f"batch_size must be >= 1, got {self.batch_size}", self.batch_size < 1),
            (f"learning_rate must be > 0, got {self.learning_rate}", not self.learning_rate > 0),
            (f"grad_accumulation must be >= 1, got {self.grad_accumulation}", self.grad_accumulation < 1),
            (f"mixed_precision must be one of {', '.join(PRECISIONS)}, got {self.mixed_precision!r}",
             self.mixed_precision not in PRECISIONS),
        ) if bad]
        if problems:
            raise ValueError(f"recipe {self.name!r}: " + "; ".join(problems))

    def hyperparameters(self) -> dict[str, Any]:
        """Every hyper-parameter (``extra`` flattened in), for rows and the store's key."""
        values = {key: value for key, value in asdict(self).items() if key not in ("name", "seed", "extra")}
        return {**values, **self.extra}

    def with_options(self, options: dict[str, Any]) -> Recipe:
        """This recipe with hyper-parameters overridden (text is read in the type of the value it
        replaces; ``seed`` and keys of ``extra`` too). An unknown key is a ``ValueError`` naming
        the known ones."""
        from rf100vl_hf.arguments import typed_option

        own = {f.name for f in fields(self)} - {"name", "extra"}
        unknown = sorted(set(options) - own - set(self.extra))
        if unknown:
            known = sorted((own - {"seed"}) | set(self.extra))
            raise ValueError(f"recipe {self.name!r} has no hyper-parameter {', '.join(unknown)} "
                             f"(it has: {', '.join(known)})")
        changed = {key: typed_option(key, value, getattr(self, key)) for key, value in options.items() if key in own}
        extra = {key: typed_option(key, value, self.extra[key]) for key, value in options.items() if key in self.extra}
        return replace(self, **changed, extra={**self.extra, **extra})
