"""Whether a pair that ran passes, from its results row: the model may fail on at most
the report key ``max-failed-fraction`` of its images (default 0: any failed image fails the pair).
Whether it could be scored at all is its kind's question (``BenchmarkKind.unscored``)."""

from __future__ import annotations

from rf100vl_hf.results.schema import ResultRow

from pytest_rf100vl.engine.guard import first_error_line

FLAG = "max-failed-fraction"


def too_many_failed_images(row: ResultRow, max_fraction: float) -> str | None:
    """The failure message when the model failed on more than ``max_fraction`` of the row's images."""
    failed, total, error = row.output.failed_images, row.data.n_images, row.output.first_error
    if not failed or failed <= max_fraction * total:
        return None
    first = f"; first error: {first_error_line(error)}" if error else ""
    return (
        f"{row.spec} on {row.data.dataset}: the model failed on {failed} of {total} images "
        f"({failed / total:.1%}), more than {FLAG} {max_fraction:g} allows{first} "
        f"(full traceback in results.jsonl)"
    )


def fraction(value: float) -> float:
    """An option check: a fraction in [0, 1]."""
    if not 0 <= value <= 1:
        raise ValueError(f"expected a fraction in [0, 1], got {value:g}")
    return value
