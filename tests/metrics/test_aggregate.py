"""Domain means, checked by hand."""

from __future__ import annotations

import math

import pytest

from rf100vl_hf.errors import UnknownNameError
from rf100vl_hf.metrics import ALL, DomainMean, domain_means


def test_domain_means_and_all_follow_the_paper():
    means = domain_means(
        [
            ("my-export", "custom", 0.9),
            ("xray", "Medical", 0.1),
            ("aerial-a", "Aerial", 0.2),
            ("aerial-b", "Aerial", 0.4),
        ]
    )
    assert list(means) == ["Aerial", "Medical", "custom", ALL]  # the paper's column order, whatever came first
    assert means["Aerial"] == DomainMean(pytest.approx(0.3), 2)
    assert means["Medical"] == DomainMean(0.1, 1)
    assert means["custom"] == DomainMean(0.9, 1)
    # All is over the four datasets, (0.2 + 0.4 + 0.1 + 0.9) / 4, not over the three domain means (0.4333)
    assert means[ALL] == DomainMean(pytest.approx(0.4), 4)


def test_accepts_the_rf100vl_package_domain_names():
    means = domain_means([("a", "Lab Imaging", 0.5), ("b", "Flora/Fauna", 0.25), ("c", "Sport", 1.0)])
    assert list(means) == ["Flora & Fauna", "Medical", "Sports", ALL]
    assert means[ALL].mean == pytest.approx(1.75 / 3)


@pytest.mark.parametrize(
    ("rows", "error", "message"),
    [
        ([("a", "Aerial", 0.5), ("a", "Aerial", 0.7)], ValueError, "dataset 'a' appears twice"),
        ([("a", "Aerial", math.nan)], ValueError, "dataset 'a' has no finite score"),
        ([("a", "Aeriel", 0.5)], UnknownNameError, "unknown domain 'Aeriel'; closest: Aerial"),
        ([], ValueError, "no scores to aggregate"),
    ],
)
def test_refuses_rows_that_would_skew_the_means(rows, error, message):
    with pytest.raises(error, match=message):
        domain_means(rows)
