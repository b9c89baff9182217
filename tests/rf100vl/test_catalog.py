"""The catalogue of the 100 datasets: domains, the RF20-VL subset, and unknown names."""

from __future__ import annotations

import pytest

from rf100vl_hf import catalog
from rf100vl_hf.errors import UnknownNameError

PAPER_COUNTS = {
    "Aerial": 11,
    "Document": 10,
    "Flora & Fauna": 23,
    "Industrial": 22,
    "Medical": 13,
    "Sports": 6,
    "Other": 15,
}
RF20VL = {  # the CVPR 2025 challenge subset, as published with the challenge
    "actions", "aerial-airport", "all-elements", "aquarium-combined", "defect-detection", "dentalai",
    "flir-camera-objects", "gwhd2021", "lacrosse-object-detection", "new-defects-in-wood", "orionproducts",
    "paper-parts", "recode-waste", "soda-bottles", "the-dreidel-project", "trail-camera", "water-meter",
    "wb-prova", "wildfire-smoke", "x-ray-id",
}  # fmt: skip


def test_domains_have_the_papers_counts() -> None:
    assert catalog.DOMAINS == tuple(PAPER_COUNTS)
    assert {d: len(catalog.select(d)) for d in catalog.DOMAINS} == PAPER_COUNTS
    assert len(catalog.select()) == len(catalog.entries()) == 100
    assert len({e.basename for e in catalog.entries()}) == 100


def test_rf20vl_is_the_challenge_subset() -> None:
    assert {e.basename for e in catalog.select(subset="rf20vl")} == RF20VL
    by_domain = [e for d in catalog.DOMAINS for e in catalog.select(d, "rf20vl")]
    assert sorted(e.basename for e in by_domain) == sorted(RF20VL)
    assert catalog.get("soda-bottles").in_rf20vl and not catalog.get("-grccs").in_rf20vl


@pytest.mark.parametrize(
    "spelling, domain",
    [
        ("flora/fauna", "Flora & Fauna"),
        ("Lab Imaging", "Medical"),
        ("misc", "Other"),
        ("Sport", "Sports"),
        ("aerial", "Aerial"),
    ],
)
def test_the_rf100vl_packages_domain_names_are_accepted(spelling: str, domain: str) -> None:
    assert catalog.select(spelling) == catalog.select(domain)


def test_entries_are_found_by_basename_and_by_project_slug() -> None:
    entry = catalog.get("x-ray-id")
    assert entry.domain == "Medical"
    assert catalog.get(entry.full_project) == catalog.get(entry.fewshot_project) == entry
    assert entry.fewshot_url.startswith("https://universe.roboflow.com/")


@pytest.mark.parametrize(
    "call, near",
    [
        (lambda: catalog.get("aerial-airprot"), "aerial-airport"),
        (lambda: catalog.select("Arial"), "Aerial"),
        (lambda: catalog.select(subset="rf20"), "rf20vl"),
    ],
    ids=["dataset", "domain", "subset"],
)
def test_unknown_names_list_the_closest(call, near: str) -> None:
    with pytest.raises(UnknownNameError) as caught:
        call()
    assert "closest: " in str(caught.value)
    assert near in str(caught.value).split("closest: ")[1].split(", ")


def test_a_name_like_nothing_lists_some_known_names() -> None:
    with pytest.raises(UnknownNameError, match=r"known: .*, \.\.\.$"):
        catalog.get("zzzzzzzzzzzzzzzzzzzzzz")
