"""``--rf100vl-shard I/N``: part I of N of the matrix, so that N jobs (a Slurm job array, or any
scheduler) cover every pair once, and their results folders merge into one summary
(``rf100vl-hf results summary DIR1 DIR2 ...``).

The parts are balanced by each pair's cost (its benchmark kind's :meth:`BenchmarkKind.cost`:
images in the split's folder, mosaics asked): pairs from the most to the least costly, ties
in matrix order, each to the part with the least cost so far (the lowest-numbered on a tie).
Nothing random and nothing machine-specific goes in, so every job computes the same parts,
provided the jobs see the same data folders and options. pytest-xdist's workers get their
pairs by the same rule (``session/workers.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_rf100vl.core.pairs import Pair


def parts(pairs: list[Pair], count: int, cost: Callable[[Pair], float]) -> list[list[Pair]]:
    """The ``count`` parts of ``pairs``, each in matrix order (see the module docstring)."""
    loads = [0.0] * count
    owner: dict[Pair, int] = {}
    costs = {pair: cost(pair) for pair in pairs}
    for index, pair in sorted(enumerate(pairs), key=lambda item: (-costs[item[1]], item[0])):
        least = min(range(count), key=lambda shard_index: (loads[shard_index], shard_index))
        owner[pair] = least
        loads[least] += costs[pair]
    return [[pair for pair in pairs if owner[pair] == part] for part in range(count)]


def shard(pairs: list[Pair], part: int, count: int, cost: Callable[[Pair], float]) -> list[Pair]:
    """The pairs of part ``part`` (1-based) of ``count``, in matrix order."""
    return parts(pairs, count, cost)[part - 1]
