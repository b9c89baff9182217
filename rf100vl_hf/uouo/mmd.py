"""Maximum mean discrepancy between categories of CLIP embeddings, and nearest categories.

Exact route (``docs/uouo.md``). With the Gaussian RBF kernel
``k(a, b) = exp(-||a - b||^2 / (2 sigma^2))`` (``sigma`` = 10 by default),

    MMD^2(X, Y) = mean k(x, x') + mean k(y, y') - 2 mean k(x, y)

where each mean runs over *all* pairs, the diagonal ``x = x'`` included: the biased
(V-statistic) estimator. It is never negative and is 0 between a set and itself.
:func:`mmd2_matrix` computes it for every pair of categories at once: the kernel is
evaluated for blocks of rows against all embeddings (the block size keeps memory under
``chunk_bytes``), summed per category with ``index_add``, in float64, on the GPU when
there is one. Cost: O(N^2 d) for N embeddings, and a C x C matrix for C categories.
:func:`nearest_exact` gives the same neighbours without the C x C matrix, a block of
categories at a time, for sources past :data:`EXACT_LIMIT` categories.

Scalable route (:func:`nearest_by_means`): for unit-norm embeddings every squared
distance is at most 4, so the kernel's exponent is at most ``t = 2 / sigma^2`` and
``k = 1 - ||a - b||^2 / (2 sigma^2) + e`` with ``0 <= e <= t^2 / 2``. Put into the formula,
the constant terms cancel and

    MMD^2(X, Y) = ||mean(X) - mean(Y)||^2 / sigma^2 + R,   |R| <= t^2 = 4 / sigma^4,

so the nearest categories by MMD are the nearest by mean embedding when the gaps between
neighbours' ``||mean(X) - mean(Y)||^2`` exceed ``8 / sigma^2``: 0.08 at sigma = 10, but 32
at sigma = 0.5, more than the largest possible distance (4). The bound says when the
approximation *can* fail, not whether it does on a given source, so ``route="auto"``
measures it (:func:`means_agreement`): above :data:`EXACT_LIMIT` categories it finds each
category's nearest by mean embedding, then, for :data:`AGREEMENT_SAMPLE` seeded anchors,
ranks by exact MMD^2 every category the bound leaves possible (at most :data:`CANDIDATES`)
and keeps the mean-embedding neighbours only when the exact top 3 is the same set for at
least :data:`MIN_AGREEMENT` of the anchors; otherwise it falls back to the exact route,
chunked. At sigma = 10 on CLIP-like embeddings agreement is above 98%; at sigma = 0.5 it is
far lower, so ``auto`` computes MMD exactly there.

The mean-embedding search (:func:`nearest_by_means`) is an inverted file: k-means cells of
about :data:`CELL_SIZE` categories, each compared with the :data:`PROBES` cells nearest it.
It costs ``C d (PROBES CELL_SIZE + (KMEANS_ROUNDS + 1) C / CELL_SIZE)`` multiply-adds:
at the paper's 25,864 categories about a twelfth of comparing every pair (``C^2 d``, a
25,864^2 x 512 product; ``benchmarks/test_uouo_speed.py``), and no C x C matrix. Random
Fourier features were rejected: they approximate each kernel value with an error of about
``1/sqrt(D)`` (0.03 for D = 1024 features), larger than the MMD^2 differences between
neighbours at sigma = 10 (about 1e-3), whereas the mean-embedding error is second order
in the same small quantity.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rf100vl_hf.devices import resolve_device
from rf100vl_hf.progress import logger, progress_bar
from rf100vl_hf.uouo.defaults import AGREEMENT_SAMPLE, DEFAULT_SIGMA, EXACT_LIMIT, MIN_AGREEMENT, check_route

if TYPE_CHECKING:  # torch is the models extra's: imported where MMD is computed, so loading a built UOUO needs none
    import torch

DEFAULT_CHUNK_BYTES = 256 * 2**20
MEANS_SIGMA_WARNING = 4.5
CANDIDATES = 32
"""Most categories whose exact MMD^2 to an anchor :func:`means_agreement` ranks."""
PROBES = 8
"""Cells whose categories a cell's categories are compared with (:func:`nearest_by_means`)."""
CELL_SIZE = 128
"""Categories per k-means cell, on average: up to ``PROBES * CELL_SIZE`` categories every pair is compared."""
KMEANS_ROUNDS = 4


def _device(device: str | None) -> torch.device:
    import torch

    return torch.device(resolve_device(device))


def _rows_per_chunk(columns: int, chunk_bytes: int, itemsize: int = 8) -> int:
    return max(1, chunk_bytes // max(1, columns * itemsize * 2))


def _squared_distances(a: torch.Tensor, b: torch.Tensor, b_sq: torch.Tensor) -> torch.Tensor:
    return ((a * a).sum(1, keepdim=True) + b_sq[None, :] - 2 * a @ b.T).clamp_min_(0)


def mmd2_matrix(
    features: np.ndarray,
    labels: np.ndarray,
    num_categories: int | None = None,
    sigma: float = DEFAULT_SIGMA,
    device: str | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    progress: bool = False,
) -> np.ndarray:
    """Exact biased MMD^2 between every pair of categories, ``(C, C)`` float64.

    ``features`` is ``(N, d)``; ``labels`` gives each row's category in ``0..C-1``, and
    every category needs at least one row.
    """
    import torch

    dev = _device(device)
    x = torch.as_tensor(np.asarray(features), dtype=torch.float64, device=dev)
    lab = torch.as_tensor(np.asarray(labels), dtype=torch.long, device=dev)
    count = int(num_categories if num_categories is not None else int(lab.max()) + 1)
    sizes = torch.bincount(lab, minlength=count).to(torch.float64)
    if bool((sizes == 0).any()):
        raise ValueError(f"categories without embeddings: {torch.nonzero(sizes == 0).flatten().tolist()[:10]}")
    sq = (x * x).sum(1)
    sums = torch.zeros(count, count, dtype=torch.float64, device=dev)
    rows = _rows_per_chunk(len(x), chunk_bytes)
    for start in progress_bar(range(0, len(x), rows), desc="exact MMD", disable=not progress):
        block = x[start : start + rows]
        kernel = torch.exp(_squared_distances(block, x, sq) / (-2 * sigma**2))
        per_column = torch.zeros(len(block), count, dtype=torch.float64, device=dev).index_add_(1, lab, kernel)
        sums.index_add_(0, lab[start : start + rows], per_column)
    means = sums / (sizes[:, None] * sizes[None, :])
    within = torch.diagonal(means)
    mmd2 = (within[:, None] + within[None, :] - 2 * means).clamp_min_(0)
    mmd2.fill_diagonal_(0)
    return mmd2.cpu().numpy()


def nearest_from_matrix(mmd2: np.ndarray, k: int = 3) -> np.ndarray:
    """The ``k`` categories closest to each one (itself excluded), ties broken by index: ``(C, k)``."""
    distances = np.array(mmd2, dtype=np.float64, copy=True)
    np.fill_diagonal(distances, np.inf)
    return np.argsort(distances, axis=1, kind="stable")[:, :k]


def category_means(features: np.ndarray, labels: np.ndarray, num_categories: int) -> np.ndarray:
    """Mean embedding of each category, ``(C, d)`` float64 (not re-normalised: the approximation needs the mean).

    Summed in float32, the embeddings' own precision, in one ``index_add``: converting all
    N x d embeddings to float64 first cost more than the rest of the search.
    """
    import torch

    lab = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    x = torch.as_tensor(np.asarray(features)).float()
    sums = torch.zeros(num_categories, x.shape[1], dtype=torch.float32).index_add_(0, lab, x)
    counts = torch.bincount(lab, minlength=num_categories).to(torch.float64)
    return (sums.double() / counts[:, None]).numpy()


def _cells(mu: torch.Tensor, count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """k-means cells of the rows of ``mu``: each row's cell ``(C,)`` and the cells' centres
    ``(count, d)``, from ``count`` rows drawn with ``seed`` and :data:`KMEANS_ROUNDS` rounds of Lloyd's."""
    import torch

    drawn = np.sort(np.random.default_rng(seed).choice(len(mu), count, replace=False))
    centres = mu[torch.as_tensor(drawn, device=mu.device)]

    def nearest_centre() -> torch.Tensor:
        return torch.addmm((centres * centres).sum(1)[None, :], mu, centres.T, alpha=-2).argmin(1)

    for _ in range(KMEANS_ROUNDS if count > 1 else 0):
        members = torch.nn.functional.one_hot(nearest_centre(), count).T.to(mu.dtype)  # a product: index_add_ is slower
        counts = members.sum(1, keepdim=True)
        centres = torch.where(counts > 0, members @ mu / counts.clamp_min(1), centres)
    return nearest_centre(), centres


def _padded(rows: list[np.ndarray]) -> np.ndarray:
    """``rows`` as one ``(len(rows), longest)`` array, padded with -1."""
    out = np.full((len(rows), max(len(r) for r in rows)), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def _chunks(shapes: list[tuple[int, int]], dim: int, chunk_bytes: int) -> list[list[int]]:
    """Indices of ``shapes`` (rows, columns of one product each) in batches whose padded float32
    operands and product stay under ``chunk_bytes``: sorted by size, so each batch pads little,
    and few batches, since each torch call costs a wait for its threads on a busy machine."""
    chunks: list[list[int]] = []
    rows = columns = 0
    for i in sorted(range(len(shapes)), key=lambda i: (shapes[i][1], shapes[i][0])):
        rows, columns = max(rows, shapes[i][0]), max(columns, shapes[i][1])
        if chunks and (len(chunks[-1]) + 1) * (rows * columns + (rows + columns) * dim) * 4 <= chunk_bytes:
            chunks[-1].append(i)
        else:
            chunks.append([i])
            rows, columns = shapes[i]
    return [chunk for chunk in chunks if any(shapes[i][0] for i in chunk)]


def nearest_by_means(
    means: np.ndarray,
    k: int = 3,
    sigma: float = DEFAULT_SIGMA,
    device: str | None = None,
    probes: int = PROBES,
    cell_size: int = CELL_SIZE,
    seed: int = 0,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    progress: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Approximate nearest categories by MMD: indices ``(C, k)`` and approximate MMD^2 ``(C, k)``,
    ordered by distance, then index.

    An inverted-file search (as faiss' ``IndexIVFFlat``, in torch): the means are split into
    k-means cells of about ``cell_size`` categories, and each cell's categories are compared,
    at full dimension in float32, with the categories of the ``probes`` cells whose centres
    are nearest its own (more where those hold no more than ``k`` categories); up to
    ``probes * cell_size`` categories that is every pair. A neighbour in a cell not probed is
    missed, which :func:`means_agreement` counts. (Probing the cells nearest each category
    instead found 0.3% more of the every-pair top 3 at 10,000 categories, for 3.7 times the
    products.) Deterministic for a ``seed``.
    """
    import torch

    if sigma < MEANS_SIGMA_WARNING:
        warnings.warn(
            f"sigma={sigma}: the mean-embedding approximation of MMD^2 loses accuracy below sigma "
            f"{MEANS_SIGMA_WARNING}; use the exact route",
            stacklevel=2,
        )
    dev = _device(device)
    mu = torch.as_tensor(means, dtype=torch.float32, device=dev)
    if len(mu) <= k:
        raise ValueError(f"{len(mu)} categories: {k} nearest of each need at least {k + 1}")
    count = len(mu) // cell_size
    if count <= probes:  # every cell would be probed: one cell, every pair compared
        count = 1
    cell, centres = _cells(mu, count, seed)
    sizes = torch.bincount(cell, minlength=count)
    between = _squared_distances(centres, centres, (centres * centres).sum(1))
    between.fill_diagonal_(-1)  # a cell probes itself first
    near = torch.argsort(between, dim=1, stable=True)
    held = torch.cumsum(sizes[near], dim=1)  # categories in a cell's nearest 1, 2, ... cells
    reach = torch.maximum(torch.full_like(held[:, 0], min(probes, count)), (held <= k).sum(1) + 1)
    cell, sizes, near, reach = (t.cpu().numpy() for t in (cell, sizes, near, reach))
    members = np.split(np.argsort(cell, kind="stable"), np.cumsum(sizes)[:-1])
    columns = [np.sort(np.concatenate([members[j] for j in near[c, : reach[c]]])) for c in range(count)]
    sq = (mu * mu).sum(1)
    indices = torch.empty(len(mu), k, dtype=torch.long, device=dev)
    values = torch.empty(len(mu), k, dtype=torch.float32, device=dev)
    chunks = _chunks([(len(members[c]), len(columns[c])) for c in range(count)], mu.shape[1], chunk_bytes)
    for chunk in progress_bar(chunks, desc="nearest categories", disable=not progress):
        queries = torch.as_tensor(_padded([members[c] for c in chunk]), device=dev)
        candidates = torch.as_tensor(_padded([columns[c] for c in chunk]), device=dev)
        x, y = mu[queries.clamp_min(0)], mu[candidates.clamp_min(0)]
        d2 = torch.baddbmm(sq[candidates.clamp_min(0)][:, None, :], x, y.transpose(1, 2), alpha=-2)
        d2.masked_fill_((candidates[:, None, :] < 0) | (candidates[:, None, :] == queries[:, :, None]), math.inf)
        best = torch.topk(d2, k, dim=2, largest=False, sorted=False)
        real = queries >= 0
        indices[queries[real]] = torch.gather(candidates, 1, best.indices.flatten(1)).view_as(best.indices)[real]
        values[queries[real]] = (best.values + sq[queries.clamp_min(0)][:, :, None])[real]
    found, distances = indices.cpu().numpy(), values.clamp_min(0).double().cpu().numpy() / sigma**2
    order = np.lexsort((found, distances), axis=1)  # distance, then index: ties do not depend on topk
    return np.take_along_axis(found, order, axis=1), np.take_along_axis(distances, order, axis=1)


def _segment_sums(values: torch.Tensor, ends: torch.Tensor, dim: int) -> torch.Tensor:
    """Sums of consecutive segments of ``values`` along ``dim`` ending (exclusive) at ``ends``
    (one cumulative sum instead of a scatter: embeddings are sorted by category)."""
    import torch

    total = torch.cumsum(values, dim=dim)
    at_ends = total.index_select(dim, ends - 1)
    before = at_ends.narrow(dim, 0, at_ends.shape[dim] - 1)
    return torch.cat([at_ends.narrow(dim, 0, 1), at_ends.narrow(dim, 1, at_ends.shape[dim] - 1) - before], dim=dim)


def nearest_exact(
    features: np.ndarray,
    labels: np.ndarray,
    num_categories: int,
    k: int = 3,
    sigma: float = DEFAULT_SIGMA,
    device: str | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    progress: bool = False,
) -> np.ndarray:
    """The ``k`` nearest categories by exact MMD^2, ``(C, k)``, a block of categories at a time:
    memory stays under ``chunk_bytes`` whatever C (ties broken by index, as :func:`nearest_from_matrix`)."""
    import torch

    dev = _device(device)
    labels = np.asarray(labels)
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=num_categories)
    if (counts == 0).any():
        raise ValueError(f"categories without embeddings: {np.flatnonzero(counts == 0).tolist()[:10]}")
    x = torch.as_tensor(np.asarray(features)[order], dtype=torch.float64, device=dev)
    ends = np.cumsum(counts)
    starts = ends - counts
    sizes = torch.as_tensor(counts, dtype=torch.float64, device=dev)
    all_ends = torch.as_tensor(ends, device=dev)
    sq = (x * x).sum(1)
    rows = _rows_per_chunk(len(x), chunk_bytes)
    blocks, first = [], 0
    while first < num_categories:  # whole categories per block, about ``rows`` embeddings each
        last = max(first + 1, int(np.searchsorted(ends, starts[first] + rows, side="right")))
        blocks.append((first, min(last, num_categories)))
        first = blocks[-1][1]

    def block_sums(c0: int, c1: int, columns: torch.Tensor, column_sq: torch.Tensor, column_ends: torch.Tensor):
        block = x[starts[c0] : ends[c1 - 1]]
        kernel = torch.exp(_squared_distances(block, columns, column_sq) / (-2 * sigma**2))
        per_column = _segment_sums(kernel, column_ends, dim=1)
        return _segment_sums(per_column, torch.as_tensor(ends[c0:c1] - starts[c0], device=dev), dim=0)

    within = torch.empty(num_categories, dtype=torch.float64, device=dev)
    for c0, c1 in blocks:  # mean k(x, x') of each category: its block against itself
        span = slice(starts[c0], ends[c1 - 1])
        local_ends = torch.as_tensor(ends[c0:c1] - starts[c0], device=dev)
        within[c0:c1] = torch.diagonal(block_sums(c0, c1, x[span], sq[span], local_ends)) / sizes[c0:c1] ** 2
    nearest = np.empty((num_categories, k), dtype=np.int64)
    for c0, c1 in progress_bar(blocks, desc="exact MMD, by blocks", disable=not progress):
        cross = block_sums(c0, c1, x, sq, all_ends)
        mmd2 = within[c0:c1, None] + within[None, :] - 2 * cross / (sizes[c0:c1, None] * sizes[None, :])
        mmd2 = mmd2.clamp_min_(0).cpu().numpy()
        mmd2[np.arange(c1 - c0), np.arange(c0, c1)] = np.inf
        nearest[c0:c1] = np.argsort(mmd2, axis=1, kind="stable")[:, :k]
    return nearest


def _mean_kernel(a: np.ndarray, b: np.ndarray, sigma: float) -> float:
    """Mean ``k(a_i, b_j)``: one small product per pair of categories (in one product against all
    candidates, numpy's BLAS started threads, and on a busy machine took 7x longer)."""
    d2 = np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T, 0)
    return float(np.exp(d2 / (-2 * sigma**2)).mean())


@dataclass(frozen=True)
class Agreement:
    """What :func:`means_agreement` measured."""

    fraction: float
    """Of the anchors, those whose neighbours are their nearest by exact MMD^2."""
    anchors: int
    complete: int
    """Anchors whose every possible neighbour (by the bound) was ranked exactly: for these the
    check is against the full exact answer, not only the nearest :data:`CANDIDATES`."""


def means_agreement(
    features: np.ndarray,
    labels: np.ndarray,
    neighbours: np.ndarray,
    means: np.ndarray,
    sigma: float = DEFAULT_SIGMA,
    sample: int = AGREEMENT_SAMPLE,
    seed: int = 0,
) -> Agreement:
    """How many of ``sample`` seeded anchors have ``neighbours`` (``(C, k)``) that are the same set
    as their ``k`` nearest by exact MMD^2.

    An anchor's exact ``k`` nearest are looked for among the categories whose mean-embedding
    MMD^2 is within twice the bound (``4 / sigma^4``) of its ``k``-th smallest, which holds them
    all for unit-norm embeddings (module docstring); at most :data:`CANDIDATES` of those, the
    nearest, and the anchor's ``neighbours`` themselves. Each anchor costs one mean-distance row
    and a small kernel block per candidate, whatever C."""
    k = neighbours.shape[1]
    labels, features = np.asarray(labels), np.asarray(features)
    groups = np.split(np.argsort(labels, kind="stable"), np.cumsum(np.bincount(labels, minlength=len(means)))[:-1])
    anchors = np.random.default_rng(seed).choice(len(means), size=min(sample, len(means)), replace=False)
    mu = np.asarray(means, dtype=np.float64)
    rows_d2 = np.maximum((mu[anchors] ** 2).sum(1)[:, None] + (mu**2).sum(1)[None, :] - 2 * mu[anchors] @ mu.T, 0)
    rows_d2[np.arange(len(anchors)), anchors] = np.inf
    rows_d2 /= sigma**2
    window = 8 / sigma**4
    candidates, complete = [], 0
    for row, anchor in zip(rows_d2, anchors):
        nearest = np.argpartition(row, CANDIDATES)[:CANDIDATES] if len(row) > CANDIDATES else np.arange(len(row))
        nearest = nearest[np.lexsort((nearest, row[nearest]))]
        limit = row[nearest[k - 1]] + window
        complete += int(np.count_nonzero(row <= limit) <= CANDIDATES)
        candidates.append(np.union1d(nearest[row[nearest] <= limit], neighbours[anchor]))

    @functools.cache
    def rows(c: int) -> np.ndarray:  # only the rows asked for become float64, not all N x d
        return features[groups[c]].astype(np.float64)

    @functools.cache
    def self_term(c: int) -> float:
        return _mean_kernel(rows(c), rows(c), sigma)

    agree = 0
    for anchor, found in zip(anchors.tolist(), candidates):
        xa = rows(anchor)
        exact = [self_term(anchor) + self_term(c) - 2 * _mean_kernel(xa, rows(c), sigma) for c in found.tolist()]
        agree += set(found[np.lexsort((found, exact))[:k]].tolist()) == set(neighbours[anchor].tolist())
    return Agreement(agree / len(anchors), len(anchors), complete)


class CategoryNeighbours:
    """The nearest categories of every category, and exact MMD^2 between any few of them.

    ``route`` is ``exact`` (:func:`mmd2_matrix`, or :func:`nearest_exact` past
    :data:`EXACT_LIMIT` categories), ``means`` (:func:`nearest_by_means`) or ``auto``
    (exact up to :data:`EXACT_LIMIT` categories; above, means where
    :func:`means_agreement` shows it agrees with exact MMD, else exact). After
    construction ``route`` is the route taken, ``measurement`` what was measured and ``agreement``
    its fraction (``None`` when nothing was). Whatever the route, the values :meth:`mmd2` returns
    are exact: they are what a mosaic records.
    """

    def __init__(
        self,
        features: np.ndarray,
        labels: np.ndarray,
        num_categories: int,
        k: int = 3,
        sigma: float = DEFAULT_SIGMA,
        route: str = "auto",
        device: str | None = None,
        progress: bool = True,
    ):
        self.features = np.asarray(features)
        self.labels = np.asarray(labels)
        self.sigma = sigma
        self.device = device
        self.agreement: float | None = None
        self.measurement: Agreement | None = None
        self._matrix: np.ndarray | None = None
        route = check_route(route)
        if route == "auto":
            route = "exact" if num_categories <= EXACT_LIMIT else "measure"
        if route == "exact" and num_categories <= EXACT_LIMIT:
            self._matrix = mmd2_matrix(features, labels, num_categories, sigma, device, progress=progress)
            self.neighbours = nearest_from_matrix(self._matrix, k)
        elif route in ("means", "measure"):
            means = category_means(self.features, self.labels, num_categories)
            with warnings.catch_warnings():
                if route == "measure":  # the measurement, not the sigma, decides
                    warnings.simplefilter("ignore")
                self.neighbours, _ = nearest_by_means(means, k, sigma, device, progress=progress)
            if route == "measure":
                self.measurement = measured = means_agreement(self.features, self.labels, self.neighbours, means, sigma)
                self.agreement = measured.fraction
                route = "means" if self.agreement >= MIN_AGREEMENT else "exact"
                logger.info("MMD route auto: mean-embedding neighbours agree with exact MMD on %.1f%% of %d "
                            "sampled categories (%d of them checked against every possible neighbour) at "
                            "sigma=%g: %s route", 100 * self.agreement, measured.anchors, measured.complete,
                            sigma, route)
        if route == "exact" and self._matrix is None:
            self.neighbours = nearest_exact(features, labels, num_categories, k, sigma, device, progress=progress)
        self.route = route
        order = np.argsort(self.labels, kind="stable")
        self._rows = np.split(order, np.cumsum(np.bincount(self.labels, minlength=num_categories))[:-1])

    def mmd2(self, anchor: int, others: list[int]) -> list[float]:
        """Exact MMD^2 between ``anchor`` and each of ``others``."""
        if self._matrix is not None:
            return [float(self._matrix[anchor, other]) for other in others]
        categories = [anchor, *others]
        rows = [self._rows[c] for c in categories]
        local = np.concatenate([np.full(len(r), i) for i, r in enumerate(rows)])
        matrix = mmd2_matrix(self.features[np.concatenate(rows)], local, len(categories), self.sigma, self.device)
        return [float(v) for v in matrix[0, 1:]]
