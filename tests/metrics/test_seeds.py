"""The seed-variance figures of Tables 8 and 9, computed by hand, and the significance test."""

from __future__ import annotations

import statistics

import pytest

from rf100vl_hf.metrics.seeds import seed_variance, significance

AP = {  # (domain, dataset) -> AP per seed 0, 1, 2
    ("Aerial", "a1"): [10.0, 12.0, 14.0],
    ("Aerial", "a2"): [20.0, 18.0, 16.0],  # moves against a1: the domain mean stays still
    ("Medical", "m1"): [5.0, 6.0, 10.0],
    ("Medical", "m2"): [1.0, 1.0, 1.0],
}


def _rows(table: dict = AP, offset: float = 0.0) -> list[dict]:
    return [{"dataset": d, "domain": dom, "seed": s, "ap": ap + offset}
            for (dom, d), values in table.items() for s, ap in enumerate(values)]


def test_both_spreads_by_hand_and_they_differ_where_datasets_move_apart() -> None:
    spread = seed_variance(_rows())
    aerial = spread["Aerial"]
    assert aerial.mean == pytest.approx(15.0) and aerial.std_of_mean == pytest.approx(0.0)
    assert aerial.mean_of_std == pytest.approx(statistics.fmean([statistics.stdev([10, 12, 14]),
                                                                 statistics.stdev([20, 18, 16])]))
    medical_means = [statistics.fmean([5, 1]), statistics.fmean([6, 1]), statistics.fmean([10, 1])]
    assert spread["Medical"].std_of_mean == pytest.approx(statistics.stdev(medical_means))
    assert spread["Medical"].mean_of_std == pytest.approx(statistics.fmean([statistics.stdev([5, 6, 10]), 0.0]))
    every = [statistics.fmean(values[s] for values in AP.values()) for s in range(3)]
    assert spread["All"].std_of_mean == pytest.approx(statistics.stdev(every))
    assert (spread["All"].seeds, spread["All"].datasets) == (3, 4)
    assert list(spread) == ["Aerial", "Medical", "All"]


def test_a_missing_seed_is_refused_and_one_seed_has_no_spread() -> None:
    rows = [row for row in _rows() if not (row["dataset"] == "m2" and row["seed"] == 1)]
    with pytest.raises(ValueError, match=r"m2 \(seed 1\)"):
        seed_variance(rows)
    single = seed_variance([row for row in _rows() if row["seed"] == 0])
    assert single["All"].std_of_mean is None and single["All"].mean_of_std is None


def test_a_clear_difference_is_significant_and_none_is_not() -> None:
    better = significance(_rows(offset=5.0), _rows(), "tuned", "base")
    assert better.test.startswith("Welch t-test over seeds") and better.mean_difference == pytest.approx(5.0)
    assert better.p_value < 0.05 and "tuned is higher than base by 5.00 AP" in better.statement
    same = significance(_rows(), _rows(), "a", "b")
    assert "not significant" in same.statement or "cannot be told apart" in same.statement
    one_seed = [row for row in _rows() if row["seed"] == 0]
    paired = significance(one_seed, [dict(row, ap=row["ap"] - 1) for row in one_seed])
    assert paired.test == "Wilcoxon signed-rank test over 4 datasets" and paired.mean_difference == pytest.approx(1.0)
