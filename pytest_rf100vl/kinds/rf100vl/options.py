"""The RF100-VL kind's options: which split, prompt and scoring protocol, the comparison with a
published table, and the dataset request ``rf100vl-hf prepare`` takes (where the exports are,
how the derived splits are made, how images are checked), so the plugin can set each. The split,
prompt and protocol are flags; the others are keys of ``--rf100vl-data-option KEY=VALUE``."""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from rf100vl_hf.constants import PROMPT_MODES
from rf100vl_hf.protocols import PAPER, PROTOCOLS, Protocol
from rf100vl_hf.rf100vl.request import VERIFY_IMAGES, DatasetRequest, SplitParameters, check_split_parameter

from pytest_rf100vl.core.options import option
from pytest_rf100vl.kinds.rf100vl.adapter_defaults import adapter_defaults
from pytest_rf100vl.kinds.rf100vl.reference import ReferenceChoice, parse_reference

DATA = "data-option"
"""The dict option (``--rf100vl-data-option KEY=VALUE``) of the options that are not flags."""


def _methods(values: tuple[str, ...]) -> dict[str, str]:
    """``SPEC=ROW`` items of ``reference-method``."""
    methods = {}
    for value in values:
        spec, sep, row = value.partition("=")
        if not sep or not spec.strip() or not row.strip():
            raise ValueError(f"expected SPEC=ROW, got {value!r}")
        methods[spec.strip()] = row.strip()
    return methods


def _split_parameter(name: str, metavar: str) -> Any:
    """A split parameter as a key of ``--rf100vl-data-option``: its kind, default, help and check
    are :class:`SplitParameters`' own (what ``rf100vl-hf prepare --option`` shows too)."""
    declared = next(item for item in fields(SplitParameters) if item.name == name)
    return option(name.replace("_", "-"), str(declared.type), f"{declared.metadata['help']} (default: "
                  f"{declared.default})", metavar, default=declared.default,
                  check=functools.partial(check_split_parameter, name), via=DATA)


@dataclass(frozen=True)
class DetectionOptions:
    split: str = option("split", "str", "split to evaluate (default: test; UOUO datasets have only test)", "SPLIT",
                        default="test")
    prompt: str = option("prompt", "str", "names, instructions or fewshot (default: names)", "MODE",
                         default="names", choices=PROMPT_MODES)
    reference: ReferenceChoice | None = option(
        "reference", "str", "compare each complete domain's mean with a published table: paper (the RF100-VL paper's "
        "Tables 2, 3 and 7, arXiv 2505.20612v1), leaderboard (newer published RF100-VL All means: the rf-detr "
        "README, the SAM 3 paper) or detpo (the DetPO paper's RF20-VL board); SOURCE@VERSION keeps the rows of one "
        "version (a part of their version, e.g. detpo@2603.23455v1)", "SOURCE[@VERSION]", check=parse_reference,
        via=DATA)
    protocol: str = option(
        "protocol", "str", "scoring protocol: paper (default: maxDets 500, category 0 never prompted) or rf-scripts "
        "(Roboflow's public scripts: maxDets 100, category 0 prompted in zero-shot names pairs, no class-wise NMS, "
        "SAM 3 at score 0.5); recorded in each row, whose rows never merge or rank with another protocol's", "NAME",
        default=PAPER, choices=tuple(PROTOCOLS))
    tolerance: float = option("tolerance", "float", "allowed distance, in AP points, from the reference table "
                              "(default: 1.0)", "AP", default=1.0, minimum=0, via=DATA)
    reference_methods: dict[str, str] = option(
        "reference-method", "list", "map a model to a row of the reference table: SPEC=ROW (repeatable)", "SPEC=ROW",
        check=_methods, via=DATA)
    data_dir: Path | None = option("data-dir", "path", "root of the full exports (default: $RF100VL_DATA_DIR or the "
                                   "cache home)", "DIR", via=DATA)
    fewshot_dir: Path | None = option("fewshot-dir", "path", "root of the official few-shot exports (default: "
                                      "$RF100VL_FEWSHOT_DIR)", "DIR", via=DATA)
    fewshot_k: int = _split_parameter("fewshot_k", "K")
    fewshot_seed: int = _split_parameter("fewshot_seed", "N")
    fewshot_strategy: str = _split_parameter("fewshot_strategy", "NAME")
    fewshot_candidates: int = _split_parameter("fewshot_candidates", "N")
    semisup_fraction: float = _split_parameter("semisup_fraction", "F")
    semisup_seed: int = _split_parameter("semisup_seed", "N")
    test_source: str = _split_parameter("test_source", "SOURCE")
    fewshot_class_match: str = _split_parameter("fewshot_class_match", "name|id")
    verify_images: str = option("verify-images", "str", "header: parse headers and check JPEG/PNG end markers "
                                "(fast, default); full: decode every image", "HOW", default="header",
                                choices=VERIFY_IMAGES, via=DATA)
    def __post_init__(self) -> None:
        self.splits()  # a bad combination of split parameters is refused here, at the edge

    def splits(self) -> SplitParameters:
        return SplitParameters(**{item.name: getattr(self, item.name) for item in fields(SplitParameters)})

    @property
    def scoring(self) -> Protocol:
        """The scoring protocol (:mod:`rf100vl_hf.protocols`)."""
        return PROTOCOLS[self.protocol]

    def adapter_defaults(self) -> dict[str, dict[str, str]]:
        """Adapter name -> the options the protocol gives it by default (``kinds/rf100vl/adapter_defaults.py``);
        ``--rf100vl-adapter-option`` overrides them."""
        return adapter_defaults(self.protocol)

    @property
    def request(self) -> DatasetRequest:
        """The dataset request these options make (the one ``rf100vl-hf prepare`` takes)."""
        return DatasetRequest(self.data_dir, self.fewshot_dir, None, self.verify_images,  # type: ignore[arg-type]
                              self.splits())
