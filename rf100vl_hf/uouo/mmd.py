"""Maximum mean discrepancy between categories of CLIP embeddings, and nearest categories.

Exact route (DESIGN.md section 2). With the Gaussian RBF kernel
``k(a, b) = exp(-||a - b||^2 / (2 sigma^2))`` (``sigma`` = 10 by default),

    MMD^2(X, Y) = mean k(x, x') + mean k(y, y') - 2 mean k(x, y)

where each mean runs over *all* pairs, the diagonal ``x = x'`` included: the biased
(V-statistic) estimator. It is never negative and is 0 between a set and itself.
:func:`mmd2_matrix` computes it for every pair of categories at once: the kernel is
evaluated for blocks of rows against all embeddings (the block size keeps memory under
``chunk_bytes``), summed per category with ``index_add``, in float64, on the GPU when
there is one. Cost: O(N^2 d) for N embeddings, and a C x C matrix for C categories.

Scalable route (:func:`nearest_by_means`): for unit-norm embeddings every squared
distance is at most 4, so with sigma = 10 the kernel's exponent is at most 0.02 and
``k(a, b) = 1 - ||a - b||^2 / (2 sigma^2)`` up to a relative error below 1%. Put into
the formula, the constant terms cancel and

    MMD^2(X, Y) ~= ||mean(X) - mean(Y)||^2 / sigma^2,

so the nearest categories by MMD are the nearest by mean embedding: O(N d) to get the
means and O(C^2 d) matrix products (in row blocks, with ``topk``) for the neighbours:
about a minute for the paper's 25,864 categories on 2 CPU cores, where the exact route
would take about a day (``benchmarks/test_uouo_speed.py``). The error grows with
``2 / sigma^2`` (a warning says so below sigma = 4.5). Random Fourier features were
rejected: they approximate each kernel value with an error of about ``1/sqrt(D)``
(0.03 for D = 1024 features), larger than the MMD^2 differences between neighbours at
sigma = 10 (about 1e-3), whereas the mean-embedding error is second order in the same
small quantity.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from tqdm.auto import tqdm

DEFAULT_SIGMA = 10.0
DEFAULT_CHUNK_BYTES = 256 * 2**20
MEANS_SIGMA_WARNING = 4.5


def _device(device: str | None) -> torch.device:
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


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
    for start in tqdm(range(0, len(x), rows), desc="exact MMD", disable=not progress):
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


def category_means(features: np.ndarray, labels: np.ndarray, num_categories: int, rows: int = 1 << 16) -> np.ndarray:
    """Mean embedding of each category, ``(C, d)`` float64 (not re-normalised: the approximation needs the mean).

    Summed in float64 blocks of ``rows`` embeddings, so the input may stay float32 and large.
    """
    sums = torch.zeros(num_categories, features.shape[1], dtype=torch.float64)
    lab = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    for start in range(0, len(features), rows):
        block = torch.as_tensor(np.asarray(features[start : start + rows]), dtype=torch.float64)
        sums.index_add_(0, lab[start : start + rows], block)
    counts = torch.bincount(lab, minlength=num_categories).to(torch.float64)
    return (sums / counts[:, None]).numpy()


def nearest_by_means(
    means: np.ndarray,
    k: int = 3,
    sigma: float = DEFAULT_SIGMA,
    device: str | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    progress: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Approximate nearest categories by MMD: indices ``(C, k)`` and approximate MMD^2 ``(C, k)``."""
    if sigma < MEANS_SIGMA_WARNING:
        warnings.warn(
            f"sigma={sigma}: the mean-embedding approximation of MMD^2 loses accuracy below sigma "
            f"{MEANS_SIGMA_WARNING}; use the exact route",
            stacklevel=2,
        )
    dev = _device(device)
    mu = torch.as_tensor(means, dtype=torch.float32, device=dev)
    sq = (mu * mu).sum(1)
    rows = _rows_per_chunk(len(mu), chunk_bytes, itemsize=4)
    indices = np.empty((len(mu), k), dtype=np.int64)
    values = np.empty((len(mu), k), dtype=np.float64)
    for start in tqdm(range(0, len(mu), rows), desc="nearest categories", disable=not progress):
        block = mu[start : start + rows]
        d2 = _squared_distances(block, mu, sq)
        d2[torch.arange(len(block), device=dev), torch.arange(start, start + len(block), device=dev)] = math.inf
        best = torch.topk(d2, k, dim=1, largest=False, sorted=True)
        indices[start : start + len(block)] = best.indices.cpu().numpy()
        values[start : start + len(block)] = best.values.double().cpu().numpy() / sigma**2
    return indices, values


EXACT_LIMIT = 2048
"""Up to this many categories the ``auto`` route computes the exact C x C matrix."""
ROUTES = ("auto", "exact", "means")


def resolve_route(route: str, num_categories: int) -> str:
    """The route ``auto`` stands for with this many categories (or ``route`` itself, checked)."""
    if route not in ROUTES:
        raise ValueError(f"unknown neighbour route {route!r}; one of {', '.join(ROUTES)}")
    if route != "auto":
        return route
    return "exact" if num_categories <= EXACT_LIMIT else "means"


class CategoryNeighbours:
    """The nearest categories of every category, and exact MMD^2 between any few of them.

    ``route`` is ``exact`` (:func:`mmd2_matrix`), ``means`` (:func:`nearest_by_means`) or
    ``auto`` (exact up to :data:`EXACT_LIMIT` categories). Whatever the route, the values
    :meth:`mmd2` returns are exact: they are what a mosaic records.
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
        self.route = resolve_route(route, num_categories)
        self._matrix: np.ndarray | None = None
        if self.route == "exact":
            self._matrix = mmd2_matrix(features, labels, num_categories, sigma, device, progress=progress)
            self.neighbours = nearest_from_matrix(self._matrix, k)
        else:
            means = category_means(self.features, self.labels, num_categories)
            self.neighbours, _ = nearest_by_means(means, k, sigma, device, progress=progress)
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
