"""How a model is fine-tuned: a named recipe and its hyper-parameters, as rows record them.

A recipe is plain data, so that it can key the trained-weights store and be compared with
the paper's (the README's "Data regimes"). Adapters declare a default recipe per training
split; ``--rf100vl-train-option KEY=VALUE`` overrides any hyper-parameter of it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from rf100vl_hf.arguments import typed_option

PRECISIONS = ("no", "fp16", "bf16")
REGIMES = {None: "zero-shot", "fewshot_10": "few-shot", "semisup_10": "semi-supervised", "train": "fully-supervised"}
"""The regime a training split puts a pair in (``None``: the model as it comes), as Table 2 names them."""


OFF_BY_DEFAULT = frozenset({"backbone_learning_rate", "warmup_steps", "ema_decay", "ema_warmup", "flip", "min_scale",
                            "max_scale", "single_scale_epochs"})
"""Recipe fields whose default is "not done": rows and store keys name them only when set."""
BASIC_FIELDS = frozenset({"epochs", "batch_size", "learning_rate", "weight_decay", "max_grad_norm", "federated",
                          "mixed_precision", "grad_accumulation"})
"""The hyper-parameters any trainer takes; the others (:data:`OFF_BY_DEFAULT`) are the project's
own loop's, which another library's trainer does not have."""


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


def parse_key_values(values: tuple[str, ...]) -> dict[str, str]:
    """``KEY=VALUE`` items (``--rf100vl-train-option``), as hyper-parameter overrides."""
    options = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ValueError(f"expected KEY=VALUE, got {value!r}")
        options[key.strip()] = text.strip()
    return options


MAX_SEEDS = 100
"""The most seeds a run may fit each pair with (each is a fit and a test; the papers use 10)."""
MAX_SEED = 2**31 - 1
"""The largest seed (what every library's generator takes)."""


def parse_seeds(value: str) -> tuple[int, ...]:
    """``0-9``, ``0,3,7`` or ``1-2,5``: the seeds, in order, each once; at most :data:`MAX_SEEDS`."""
    seeds: dict[int, None] = {}
    for part in value.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.strip().isascii() or not first.strip().isdigit() or (
                dash and not (last.strip().isascii() and last.strip().isdigit())):
            raise ValueError(f"expected seeds such as 0-9 or 0,3,7, got {value!r}")
        low, high = int(first), int(last) if dash else int(first)
        if high < low:
            raise ValueError(f"empty seed range {part.strip()!r} (write the lower seed first: {high}-{low})")
        if high > MAX_SEED:
            raise ValueError(f"seed {high} is too large (seeds are at most {MAX_SEED})")
        if high - low + 1 + len(seeds) > MAX_SEEDS:  # counted before a range is made: 0-10**12 is refused at once
            raise ValueError(f"{value!r} holds more than {MAX_SEEDS} seeds: each is a fit of every pair")
        seeds.update(dict.fromkeys(range(low, high + 1)))
    return tuple(seeds)


@dataclass(frozen=True)
class Recipe:
    """A training recipe. ``extra`` holds a model's own hyper-parameters (by name); everything but
    ``name`` and ``seed`` is a hyper-parameter (:meth:`hyperparameters`).

    The fields after ``grad_accumulation`` are what the loop and
    :mod:`~rf100vl_hf.training.augment` do beyond plain AdamW at a constant learning rate, each
    off by default: ``backbone_learning_rate`` (the learning rate of the parameters the model names
    its backbone; ``None``: ``learning_rate``), ``warmup_steps`` (the learning rates ramp up
    linearly over the first optimizer steps), ``ema_decay`` (0: none; else the fit's weights are an exponential
    moving average, its decay ramped as ``ema_decay * (1 - exp(-step / ema_warmup))`` when
    ``ema_warmup`` > 0), ``flip`` (each training image's chance of a horizontal flip),
    ``min_scale``/``max_scale`` (each batch resized to a square side drawn between these multiples of
    the model's resolution) and ``single_scale_epochs`` (the last epochs train at the resolution)."""

    name: str
    epochs: int
    batch_size: int
    learning_rate: float
    weight_decay: float = 1e-4
    max_grad_norm: float | None = 0.1
    federated: bool = False
    mixed_precision: str = "no"  # one of PRECISIONS
    grad_accumulation: int = 1
    backbone_learning_rate: float | None = None
    warmup_steps: int = 0
    ema_decay: float = 0.0
    ema_warmup: int = 0
    flip: float = 0.0
    min_scale: float = 1.0
    max_scale: float = 1.0
    single_scale_epochs: int = 0
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
            (f"backbone_learning_rate must be > 0 or none, got {self.backbone_learning_rate}",
             self.backbone_learning_rate is not None and not self.backbone_learning_rate > 0),
            (f"warmup_steps must be >= 0, got {self.warmup_steps}", self.warmup_steps < 0),
            (f"ema_decay must be in [0, 1), got {self.ema_decay}", not 0 <= self.ema_decay < 1),
            (f"ema_warmup must be >= 0, got {self.ema_warmup}", self.ema_warmup < 0),
            (f"flip must be in [0, 1], got {self.flip}", not 0 <= self.flip <= 1),
            (f"min_scale and max_scale must satisfy 0 < min_scale <= max_scale, got {self.min_scale} and "
             f"{self.max_scale}", not 0 < self.min_scale <= self.max_scale),
            (f"single_scale_epochs must be >= 0, got {self.single_scale_epochs}", self.single_scale_epochs < 0),
        ) if bad]
        if problems:
            raise ValueError(f"recipe {self.name!r}: " + "; ".join(problems))

    def hyperparameters(self) -> dict[str, Any]:
        """Every hyper-parameter (``extra`` flattened in), for rows and the store's key. Those of
        :data:`OFF_BY_DEFAULT` are left out while off, so that a recipe using none of them keeps
        the rows and trained weights it had before they existed."""
        defaults = {f.name: f.default for f in fields(self)}
        values = {key: value for key, value in asdict(self).items() if key not in ("name", "seed", "extra")
                  and not (key in OFF_BY_DEFAULT and value == defaults[key])}
        return {**values, **self.extra}

    def with_options(self, options: dict[str, Any]) -> Recipe:
        """This recipe with hyper-parameters overridden (text is read in the type of the value it
        replaces; ``seed`` and keys of ``extra`` too). An unknown key is a ``ValueError`` naming
        the known ones."""

        own = {f.name for f in fields(self)} - {"name", "extra"}
        unknown = sorted(set(options) - own - set(self.extra))
        if unknown:
            known = sorted((own - {"seed"}) | set(self.extra))
            raise ValueError(f"recipe {self.name!r} has no hyper-parameter {', '.join(unknown)} "
                             f"(it has: {', '.join(known)})")
        changed = {key: typed_option(key, value, getattr(self, key)) for key, value in options.items() if key in own}
        extra = {key: typed_option(key, value, self.extra[key]) for key, value in options.items() if key in self.extra}
        return replace(self, **changed, extra={**self.extra, **extra})
