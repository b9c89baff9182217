"""What each scoring protocol (``--rf100vl-protocol``, :mod:`rf100vl_hf.protocols`) sets for
one adapter: default adapter options, by adapter name.

A protocol's setting that lives in an adapter (its NMS, its score threshold) is an adapter
option, so it is recorded in the row's ``adapter_options``, keys the answer cache, and a
``--rf100vl-adapter-option`` given by the user overrides it. An adapter not in the table keeps
its own defaults; an entry for an adapter that is not installed costs nothing until a model of
that name is run (``sam3`` takes ``score_threshold``).
"""

from __future__ import annotations

ADAPTER_DEFAULTS: dict[str, dict[str, dict[str, str]]] = {
    "paper": {},
    "rf-scripts": {
        # benchmark_owlv2.py keeps every box above its threshold: no class-wise NMS
        "owlv2": {"class_nms": "false"},
        "owlvit": {"class_nms": "false"},
        "omdet-turbo": {"class_nms": "false"},
        # benchmark_sam3.py: output_prob_thresh 0.5 (an older version of the script defaults to 0.35)
        "sam3": {"score_threshold": "0.5"},
    },
}
"""Protocol -> adapter name -> option -> value, as the command line gives options (text)."""


def adapter_defaults(protocol: str) -> dict[str, dict[str, str]]:
    """Adapter name -> the default options ``protocol`` gives it."""
    return ADAPTER_DEFAULTS[protocol]
