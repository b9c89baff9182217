"""MMD^2 against a direct numpy computation, and the scalable route against the exact one."""

from __future__ import annotations

import numpy as np
import pytest

from rf100vl_hf.uouo import mmd
from rf100vl_hf.uouo.mmd import (
    EXACT_LIMIT,
    MIN_AGREEMENT,
    CategoryNeighbours,
    category_means,
    mmd2_matrix,
    nearest_by_means,
    nearest_exact,
    nearest_from_matrix,
)


def _direct_mmd2(x: np.ndarray, y: np.ndarray, sigma: float) -> float:
    """The textbook biased estimator, one kernel value at a time."""

    def k(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.exp(-np.sum((a - b) ** 2) / (2 * sigma**2)))

    xx = np.mean([k(a, b) for a in x for b in x])
    yy = np.mean([k(a, b) for a in y for b in y])
    xy = np.mean([k(a, b) for a in x for b in y])
    return xx + yy - 2 * xy


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _clustered(rng: np.random.Generator, categories: int, per: int, d: int, clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit-norm embeddings where categories come in groups of similar ones, like CLIP's."""
    centres = _unit(rng, clusters, d)
    means = centres[rng.integers(clusters, size=categories)] + 0.5 * _unit(rng, categories, d)
    features = np.repeat(means, per, axis=0) + 0.6 * rng.normal(size=(categories * per, d)) / np.sqrt(d)
    features /= np.linalg.norm(features, axis=1, keepdims=True)
    return features.astype(np.float32), np.repeat(np.arange(categories), per)


@pytest.mark.parametrize("sigma", [10.0, 0.7])
def test_matrix_matches_direct_computation(sigma: float) -> None:
    rng = np.random.default_rng(0)
    sizes = [3, 5, 1, 4]
    features = np.concatenate([_unit(rng, n, 6) * (1 + i) for i, n in enumerate(sizes)])  # not unit: exercise the kernel
    labels = np.repeat(np.arange(len(sizes)), sizes)
    matrix = mmd2_matrix(features, labels, sigma=sigma, chunk_bytes=8 * 13 * 3)  # several row chunks
    groups = [features[labels == c] for c in range(len(sizes))]
    for a in range(len(sizes)):
        for b in range(len(sizes)):
            assert matrix[a, b] == pytest.approx(_direct_mmd2(groups[a], groups[b], sigma), abs=1e-12)
    assert np.allclose(matrix, matrix.T) and np.all(np.diag(matrix) == 0) and np.all(matrix >= 0)


def test_labels_need_not_be_grouped() -> None:
    rng = np.random.default_rng(1)
    features, labels = _clustered(rng, 6, 4, 16, 2)
    order = rng.permutation(len(labels))
    assert np.allclose(mmd2_matrix(features, labels), mmd2_matrix(features[order], labels[order]))


def test_empty_category_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"without embeddings: \[1\]"):
        mmd2_matrix(np.zeros((2, 3)), np.array([0, 2]), num_categories=3)


def test_mean_embedding_approximation_is_close() -> None:
    rng = np.random.default_rng(2)
    features, labels = _clustered(rng, 20, 6, 32, 4)
    exact = mmd2_matrix(features, labels)
    means = category_means(features, labels, 20)
    approx = ((means[:, None] - means[None]) ** 2).sum(-1) / 10.0**2
    assert np.allclose(approx, exact, rtol=0.02, atol=1e-9)


def _every_pair(means: np.ndarray, k: int) -> np.ndarray:
    sq = (means**2).sum(1)
    d2 = sq[:, None] + sq[None, :] - 2 * means @ means.T
    np.fill_diagonal(d2, np.inf)
    return np.argsort(d2, axis=1, kind="stable")[:, :k]


def test_cell_search_finds_what_every_pair_finds_comparing_fewer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inverted-file search against comparing every pair; the pairs it compares grow with the
    categories, and past ``probes * cell_size`` categories fall well below every pair (no cliff)."""
    compared: list[int] = []
    chunks = mmd._chunks

    def counting(shapes: list[tuple[int, int]], dim: int, chunk_bytes: int) -> list[list[int]]:
        compared.append(sum(rows * columns for rows, columns in shapes))
        return chunks(shapes, dim, chunk_bytes)

    monkeypatch.setattr(mmd, "_chunks", counting)
    for count in (100, 600, 2400):  # about 17 categories a cluster, as the benchmark's (25,864 in 1,500)
        features, labels = _clustered(np.random.default_rng(count), count, 1, 64, count // 17)
        means = category_means(features, labels, count)
        found, values = nearest_by_means(means, k=3, cell_size=20, progress=False)
        assert np.mean([set(a) == set(b) for a, b in zip(found, _every_pair(means, 3))]) >= 0.97
        assert np.all(np.diff(values, axis=1) >= 0) and not np.any(found == np.arange(count)[:, None])
    assert compared[0] == 100 * 100 and compared[0] < compared[1] < compared[2] < 0.2 * 2400**2
    assert nearest_by_means(means, k=3, cell_size=20, progress=False)[0].tolist() == found.tolist()  # deterministic


def test_agreement_bound_holds_and_catches_wrong_neighbours() -> None:
    """For unit-norm embeddings each exact nearest is within 8 / sigma^4 of the k-th by mean
    embedding: the check ranks every possible neighbour, so wrong neighbours never pass."""
    sigma, count = 4.0, 60
    features, labels = _clustered(np.random.default_rng(12), count, 4, 16, 8)
    exact = mmd2_matrix(features, labels, sigma=sigma)
    means = category_means(features, labels, count)
    approx = ((means[:, None] - means[None]) ** 2).sum(-1) / sigma**2
    np.fill_diagonal(approx, np.inf)
    for row, nearest in zip(approx, nearest_from_matrix(exact, 3)):
        assert row[nearest].max() <= np.sort(row)[2] + 8 / sigma**4
    right = mmd.means_agreement(features, labels, nearest_from_matrix(exact, 3), means, sigma, sample=40)
    assert (right.fraction, right.anchors, right.complete) == (1.0, 40, 40)
    wrong = nearest_from_matrix(-exact, 3)  # the farthest
    assert mmd.means_agreement(features, labels, wrong, means, sigma, sample=40).fraction == 0.0


def test_scalable_route_agrees_on_1000_categories() -> None:
    rng = np.random.default_rng(3)
    features, labels = _clustered(rng, 1000, 6, 64, 60)
    exact = nearest_from_matrix(mmd2_matrix(features, labels), k=3)
    means = category_means(features, labels, 1000)
    approx, values = nearest_by_means(means, k=3, cell_size=25, progress=False)  # 40 cells, 8 probed
    agree = np.mean([set(a) == set(b) for a, b in zip(exact, approx)])
    assert agree >= 0.9, f"top-3 neighbours agree on {agree:.1%} of categories"
    assert np.all(np.diff(values, axis=1) >= 0) and np.all(approx != np.arange(1000)[:, None])


def test_nearest_excludes_itself_and_breaks_ties_by_index() -> None:
    matrix = np.array([[0, 1, 1, 1, 2], [1, 0, 3, 3, 3], [1, 3, 0, 2, 2], [1, 3, 2, 0, 2], [2, 3, 2, 2, 0]], float)
    assert nearest_from_matrix(matrix, k=3).tolist() == [[1, 2, 3], [0, 2, 3], [0, 3, 4], [0, 2, 4], [0, 2, 3]]


@pytest.mark.parametrize("route", ["exact", "means"])
def test_neighbours_find_constructed_look_alikes(route: str) -> None:
    """Categories 4k..4k+3 are built near each other: each one's three neighbours are the rest of its group."""
    rng = np.random.default_rng(4)
    groups, per, d = 5, 5, 32
    centres = _unit(rng, groups, d)
    means = np.repeat(centres, 4, axis=0) + 0.3 * _unit(rng, groups * 4, d)
    features = np.repeat(means, per, axis=0) + 0.05 * rng.normal(size=(groups * 4 * per, d))
    features /= np.linalg.norm(features, axis=1, keepdims=True)
    labels = np.repeat(np.arange(groups * 4), per)
    neighbours = CategoryNeighbours(features, labels, groups * 4, route=route, progress=False)
    for c in range(groups * 4):
        assert set(neighbours.neighbours[c]) == {4 * (c // 4) + i for i in range(4)} - {c}
    exact = mmd2_matrix(features, labels)
    assert neighbours.mmd2(3, [0, 17]) == pytest.approx([exact[3, 0], exact[3, 17]], rel=1e-9)


def test_auto_route_and_unknown_route() -> None:
    features, labels = _clustered(np.random.default_rng(5), 8, 2, 8, 2)
    assert CategoryNeighbours(features, labels, 8, progress=False).route == "exact"
    with pytest.raises(ValueError, match="unknown neighbour route 'fast'"):
        CategoryNeighbours(features, labels, 8, route="fast")


def test_small_sigma_warns_on_the_mean_route() -> None:
    means = _unit(np.random.default_rng(6), 5, 4)
    with pytest.warns(UserWarning, match="sigma=2.0"):
        nearest_by_means(means, k=2, sigma=2.0, progress=False)


def test_exact_by_blocks_matches_the_matrix() -> None:
    features, labels = _clustered(np.random.default_rng(7), 40, 3, 16, 5)
    order = np.random.default_rng(8).permutation(len(labels))  # labels need not be grouped
    expected = nearest_from_matrix(mmd2_matrix(features, labels, sigma=0.7), k=3)
    blocks = nearest_exact(features[order], labels[order], 40, k=3, sigma=0.7, chunk_bytes=8 * 120 * 2 * 7)
    assert blocks.tolist() == expected.tolist()


@pytest.mark.filterwarnings("ignore:sigma=0.5:UserWarning")
@pytest.mark.parametrize(("sigma", "route"), [(0.5, "exact"), (10.0, "means")])
def test_auto_route_above_the_limit_follows_measured_agreement(sigma: float, route: str) -> None:
    """Past EXACT_LIMIT categories ``auto`` keeps the mean-embedding neighbours only where they agree with exact MMD."""
    count = EXACT_LIMIT + 52
    features, labels = _clustered(np.random.default_rng(9), count, 2, 16, 100)
    neighbours = CategoryNeighbours(features, labels, count, sigma=sigma, progress=False)
    assert neighbours.route == route and neighbours.agreement is not None
    assert (neighbours.agreement >= MIN_AGREEMENT) == (route == "means")
    by_means, _ = nearest_by_means(category_means(features, labels, count), k=3, sigma=sigma, progress=False)
    if route == "means":
        assert neighbours.neighbours.tolist() == by_means.tolist()
        return
    x = features.astype(np.float64).reshape(count, 2, -1)  # labels are grouped, two embeddings each

    def kernel_mean(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # (m, d) against (C, 2, d): (C,)
        d2 = ((a[None, :, None, :] - b[:, None, :, :]) ** 2).sum(-1)
        return np.exp(-d2 / (2 * sigma**2)).mean(axis=(1, 2))

    within = np.exp(-((x[:, :, None] - x[:, None]) ** 2).sum(-1) / (2 * sigma**2)).mean(axis=(1, 2))
    for anchor in np.random.default_rng(11).choice(count, 12, replace=False):  # exact rows of a few anchors
        row = within[anchor] + within - 2 * kernel_mean(x[anchor], x)
        row[anchor] = np.inf
        assert neighbours.neighbours[anchor].tolist() == np.argsort(row, kind="stable")[:3].tolist()
    assert (neighbours.neighbours != by_means).any(axis=1).mean() > 0.1  # where the routes disagree, exact wins


def test_explicit_means_route_is_not_measured() -> None:
    features, labels = _clustered(np.random.default_rng(10), 12, 2, 8, 3)
    neighbours = CategoryNeighbours(features, labels, 12, route="means", progress=False)
    assert neighbours.route == "means" and neighbours.agreement is None


def test_device_auto_honours_mps(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert mmd._device(None) == torch.device("mps") and mmd._device("cpu") == torch.device("cpu")
