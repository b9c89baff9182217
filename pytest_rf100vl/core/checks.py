"""Checks run when the session ends (a kind's checks of means: RF100-VL's domain minimums and
its comparison with the paper). They are reported in the terminal summary and ``summary.md``,
and a failed one makes the session's exit status 1."""

from __future__ import annotations

from dataclasses import dataclass

PASSED, FAILED, NOT_CHECKED = "passed", "failed", "not checked"


@dataclass(frozen=True)
class MeanCheck:
    model: str  # the adapter spec
    target: str  # what was checked: a domain, "All", ...
    status: str  # PASSED, FAILED or NOT_CHECKED
    message: str  # measured value, what was expected and where that came from, or why not checked
