"""``--rf100vl-shard I/N``: part I of N of the matrix, so that N jobs (a Slurm job array, or any
scheduler) cover every pair once, and their results folders merge into one summary
(``rf100vl-hf results summary DIR1 DIR2 ...``).

The parts are balanced by each pair's cost (its benchmark kind's :meth:`BenchmarkKind.cost`:
images in the split's folder, mosaics asked): pairs from the most to the least costly, ties
in matrix order, each to the part with the least cost so far (the lowest-numbered on a tie).
Nothing random and nothing machine-specific goes in, so every job computes the same parts,
provided the jobs see the same data folders and options. pytest-xdist's workers get their
pairs by the same rule, a dataset's pairs kept together so each dataset loads in one worker
(``session/workers.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from pytest_rf100vl.core.pairs import Pair


def parts(pairs: list[Pair], count: int, cost: Callable[[Pair], float],
          together: Callable[[Pair], Hashable] | None = None) -> list[list[Pair]]:
    """The ``count`` parts of ``pairs``, each in matrix order (see the module docstring); with
    ``together``, pairs of the same key stay in one part, placed by their summed cost."""
    key = together or (lambda pair: pair)
    groups: dict[Hashable, list[Pair]] = {}
    for pair in pairs:
        groups.setdefault(key(pair), []).append(pair)
    costs = {name: sum(cost(pair) for pair in members) for name, members in groups.items()}
    loads = [0.0] * count
    owner: dict[Hashable, int] = {}
    for index, name in sorted(enumerate(groups), key=lambda item: (-costs[item[1]], item[0])):
        least = min(range(count), key=lambda part: (loads[part], part))
        owner[name] = least
        loads[least] += costs[name]
    return [[pair for pair in pairs if owner[key(pair)] == part] for part in range(count)]


def shard(pairs: list[Pair], part: int, count: int, cost: Callable[[Pair], float]) -> list[Pair]:
    """The pairs of part ``part`` (1-based) of ``count``, in matrix order."""
    return parts(pairs, count, cost)[part - 1]
