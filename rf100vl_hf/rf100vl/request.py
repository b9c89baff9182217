"""What a user asks of an RF100-VL dataset besides its name: where its exports are, how its
images are checked, and the parameters of its derived splits. One type for every route in
(``rf100vl-hf prepare`` and the pytest plugin, through :func:`.builder.builder_of` and
:func:`.builder.load_request`), so each takes the same parameters and refuses the same bad
values. Light: it imports no ``datasets``, so command lines and the plugin parse it before
anything heavy loads.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from rf100vl_hf.errors import Rf100vlError

FEWSHOT_STRATEGIES = ("random", "best")
"""How a generated few-shot split is drawn: the challenge tooling's way, or the paper's best split."""
TEST_SOURCES = ("full", "fewshot")
"""Where the ``test`` split comes from: the full export's test split (the default) or the
few-shot export's, which can differ from it (rf100-vl issue #31)."""
FEWSHOT_CLASS_MATCHES = ("name", "id")
"""How the few-shot export's classes are matched to the full export's: by name (the default;
a name the full export lacks stops the build) or by category id (names that differ are
mapped, with a warning listing the pairs)."""
VerifyImages = Literal["header", "full"]
VERIFY_IMAGES: tuple[str, ...] = ("header", "full")


SPLIT_PARAMETERS: dict[str, Any] = {
    "fewshot_k": 10, "fewshot_seed": 0, "fewshot_strategy": "random", "fewshot_candidates": 10,
    "semisup_fraction": 0.1, "semisup_seed": 0, "test_source": "full", "fewshot_class_match": "name",
}
"""The parameters of the splits and their defaults (the benchmark's): the few-shot ones apply to
a generated few-shot split only (see :func:`.splits.fewshot`); ``test_source`` says whose test
split ``test`` is, and ``fewshot_class_match`` how the few-shot export's classes meet the full
export's (see :meth:`.builder.Rf100vl.fewshot_classes`)."""


class ParameterError(Rf100vlError, ValueError):
    """A config parameter out of its range; the message names the parameter and the range."""


def check_split_parameter(name: str, value: Any) -> Any:
    """``value`` if it is a valid ``name`` (a field of :class:`SplitParameters`), else a :class:`ParameterError`."""
    if name in ("fewshot_seed", "semisup_seed"):
        ok = isinstance(value, int) and not isinstance(value, bool)
        expected = "an integer"
    elif name in ("fewshot_k", "fewshot_candidates"):
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        expected = "an integer of at least 1"
    elif name == "fewshot_strategy":
        ok = isinstance(value, str) and value in FEWSHOT_STRATEGIES
        expected = " or ".join(map(repr, FEWSHOT_STRATEGIES))
    elif name == "semisup_fraction":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 < value <= 1
        expected = "a number in (0, 1]"
    elif name in ("test_source", "fewshot_class_match"):
        choices = TEST_SOURCES if name == "test_source" else FEWSHOT_CLASS_MATCHES
        ok = isinstance(value, str) and value in choices
        expected = " or ".join(map(repr, choices))
    else:
        raise ParameterError(f"unknown split parameter {name!r} (known: {', '.join(SPLIT_PARAMETERS)})")
    if not ok:
        raise ParameterError(f"{name} must be {expected}, not {value!r}")
    return value


def _parameter(name: str, help: str) -> Any:
    """A field of :class:`SplitParameters`: its default, and its help (``field.metadata["help"]``,
    which ``rf100vl-hf prepare --option`` and the plugin's ``--rf100vl-data-option`` show)."""
    return field(default=SPLIT_PARAMETERS[name], metadata={"help": help})


@dataclass(frozen=True)
class SplitParameters:
    """How the derived splits are made (defaults: the benchmark's). The few-shot ones apply to
    a generated few-shot split only (see :func:`.splits.fewshot`); ``fewshot_candidates`` to
    the ``best`` strategy only."""

    fewshot_k: int = _parameter("fewshot_k", "instances per class of a generated few-shot split")
    fewshot_seed: int = _parameter("fewshot_seed", "seed of a generated few-shot split")
    fewshot_strategy: str = _parameter(
        "fewshot_strategy", "how a generated few-shot split is drawn: random (the challenge tooling's) or best (per "
        "class, the candidate selection with the largest mean box area)")
    fewshot_candidates: int = _parameter("fewshot_candidates", "candidate selections per class of fewshot_strategy "
                                         "best (seeds SEED to SEED+N-1)")
    semisup_fraction: float = _parameter("semisup_fraction", "fraction of train images in the semi-supervised split")
    semisup_seed: int = _parameter("semisup_seed", "seed of the semi-supervised split")
    test_source: str = _parameter("test_source", "whose test split 'test' is: full (the full export's) or fewshot "
                                  "(the few-shot export's, which can differ: RF100-VL issue #31); recorded in "
                                  "split_parameters")
    fewshot_class_match: str = _parameter(
        "fewshot_class_match", "match the few-shot export's classes to the full export's by name (a name the full "
        "export lacks stops with an error naming both names) or by id (category id: the names that differ are "
        "mapped, with a warning listing the pairs)")

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            check_split_parameter(name, value)
        if self.fewshot_strategy == "random" and self.fewshot_candidates != SPLIT_PARAMETERS["fewshot_candidates"]:
            # refused rather than ignored: it would change the config id, not the rows
            raise ParameterError(
                f"fewshot_candidates={self.fewshot_candidates} needs fewshot_strategy='best' "
                "(the random strategy draws one selection)"
            )

    def changed(self) -> dict[str, Any]:
        """The parameters that differ from the benchmark's (what a build's config id carries)."""
        return {name: value for name, value in asdict(self).items() if value != SPLIT_PARAMETERS[name]}

    @property
    def fewshot_split(self) -> str:
        return f"fewshot_{self.fewshot_k}"

    @property
    def semisup_split(self) -> str:
        return f"semisup_{round(self.semisup_fraction * 100)}"




@dataclass(frozen=True)
class DatasetRequest:
    """Where an RF100-VL dataset's exports are (``None``: as :func:`.sources.locate` says), where
    its build is cached, how its images are checked, and its split parameters."""

    data_dir: Path | None = None
    fewshot_dir: Path | None = None
    cache_dir: Path | None = None
    verify_images: VerifyImages = "header"
    splits: SplitParameters = field(default_factory=SplitParameters)

    def __post_init__(self) -> None:
        if self.verify_images not in VERIFY_IMAGES:
            raise ParameterError(f"verify_images must be 'header' or 'full', not {self.verify_images!r}")
