"""What pytest shows of a test, scrubbed: a pair's failure or error (its message and
traceback) and the output captured with it are printed, and written by reporters such as
junitxml, from the report, so the report is scrubbed where it is made
(:mod:`rf100vl_hf.redact`)."""

from __future__ import annotations

import pytest

from rf100vl_hf.redact import scrub


def scrub_report(report: pytest.TestReport) -> None:
    """``report``'s long representation and captured sections, with every secret masked."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line, reason)
        report.longrepr = (longrepr[0], longrepr[1], scrub(longrepr[2]))
    elif longrepr is not None:
        text = str(longrepr)
        clean = scrub(text)
        if clean != text:
            report.longrepr = clean
    report.sections = [(title, scrub(content)) for title, content in report.sections]
