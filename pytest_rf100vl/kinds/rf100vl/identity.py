"""What tells a measurement on an RF100-VL split apart: the row's data columns a pair's split
gives, from the dataset's metadata alone (light: a rerun works them out from a build's record,
with no dataset opened, ``session/resume.py``)."""

from __future__ import annotations

import json
from typing import Any

from rf100vl_hf.protocols import Protocol


def split_parameters(metadata: dict[str, Any], split: str, prompt: str) -> str:
    """What made the split, as JSON: a few-shot split's source, K, seed, strategy and candidates
    (and, for an official split whose classes were matched by category id, ``class_match`` and
    the names mapped), the semi-supervised split's fraction and seed, a test split taken from the
    few-shot export (``test_source``, its export's fingerprint); and under ``examples`` what made
    the few-shot split a ``fewshot`` prompt shows the model. Part of a row's identity: another K,
    seed or strategy, or another test split, is another measurement, whether the model is scored
    on the split or prompted with it."""
    parameters: dict[str, Any] = {}
    fewshot, semisup = metadata.get("fewshot") or {}, metadata.get("semisup") or {}
    test = metadata.get("test") or {}
    renamed = {"class_match": "id", "renamed": fewshot["renamed"]} if fewshot.get("renamed") else {}
    made_fewshot = {"fewshot_source": fewshot.get("source"),
                    **{key: fewshot.get(key) for key in ("k", "seed", "strategy", "candidates")}, **renamed}
    if split == fewshot.get("split"):
        parameters = dict(made_fewshot)
    elif split == semisup.get("split"):
        parameters = {"fraction": semisup.get("fraction"), "seed": semisup.get("seed")}
    elif split == "test" and test.get("source") == "fewshot":
        parameters = {"test_source": "fewshot", "test_fingerprint": test.get("fingerprint"), **renamed}
    if "fewshot" in prompt:  # the test by which the task gives the model the few-shot split
        parameters["examples"] = made_fewshot
    return json.dumps(parameters, sort_keys=True)


def detection_identity(metadata: dict[str, Any], name: str, prompt: str, protocol: Protocol) -> dict[str, Any]:
    """The row's data columns that tell a measurement on the split ``name`` of a dataset (its
    ``metadata``) apart, prompted in mode ``prompt`` and scored under ``protocol``."""
    return {"dataset_fingerprint": metadata.get("fingerprint"), "prompt": prompt,
            "split_parameters": split_parameters(metadata, name, prompt), "protocol": protocol.name}
