"""Annotator instructions parsed from the four real README.dataset.txt files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rf100vl_hf.rf100vl.instructions import match_classes, parse_instructions

FILES = {
    "soda-bottles": "soda-bottles-fsod-haga.README.dataset.txt",
    "x-ray-id": "x-ray-id-zfisb-fsod-dyjv.README.dataset.txt",
    "new-defects-in-wood": "new-defects-in-wood-uewd1-fsod-tffp.README.dataset.txt",
    "paper-parts": "paper-parts-fsod-rmrg.README.dataset.txt",
}
CLASS_COUNTS = {"soda-bottles": 3, "x-ray-id": 6, "new-defects-in-wood": 5, "paper-parts": 19}


def _raw(shared_data: Path, name: str) -> str:
    return (shared_data / "rf100vl-instructions" / FILES[name]).read_text(encoding="utf-8")


def _listed_in_introduction(raw: str) -> list[str]:
    """The class names the introduction lists as ``- **Name**: ...`` bullets."""
    introduction = raw.split("# Introduction", 1)[1].split("# Object Classes", 1)[0]
    return re.findall(r"^- \*\*(.+?)\*\*:", introduction, flags=re.MULTILINE)


def _section(raw: str, heading: str) -> tuple[str, str]:
    """Description and instructions of one class, cut out of the raw text by its headings."""
    match = re.search(
        rf"^## {re.escape(heading)}\n### Description\n(.*?)^### Instructions\n(.*?)(?=^## |\Z)",
        raw,
        flags=re.MULTILINE | re.DOTALL,
    )
    assert match, heading
    description, instructions = (match.group(i).replace("[Top](#overview)", "").strip() for i in (1, 2))
    return description, instructions


@pytest.mark.parametrize("name", list(FILES))
def test_every_class_section_is_parsed(name: str, shared_data: Path) -> None:
    raw = _raw(shared_data, name)
    parsed = parse_instructions(raw)
    assert parsed.raw == raw
    assert list(parsed.classes) == _listed_in_introduction(raw)
    assert len(parsed.classes) == CLASS_COUNTS[name]
    for heading, section in parsed.classes.items():
        assert section.name == heading
        assert (section.description, section.instructions) == _section(raw, heading)
        assert section.description and section.instructions
        assert "#" not in section.description + section.instructions
    assert parsed.introduction.startswith("This dataset") or parsed.introduction.startswith("The purpose")


def test_texts_are_whole_and_exact(shared_data: Path) -> None:
    soda = parse_instructions(_raw(shared_data, "soda-bottles")).classes
    assert soda["Coca-Cola"].description.startswith("Coca-Cola bottles are typically dark in color")
    assert soda["Sprite"].instructions.splitlines() == [
        "- Annotate the full visible Sprite bottle, ensuring the label and bottle shape are within the bounding box.",
        "- The bounding box should include the full cap and base of the bottle.",
        "- If only partially visible, annotate only when the bottle's shape and branding are clearly identifiable.",
        "- Avoid labeling reflections or any indirect depictions of the Sprite bottle logo.",
    ]
    xray = parse_instructions(_raw(shared_data, "x-ray-id")).classes
    assert xray["Wrist"].instructions.splitlines()[-1] == (
        "- Avoid marking the Radius or Ulna sections extending into the hand."  # "[Top](#overview)" follows it
    )
    assert xray["Ulna"].description == (
        "The Ulna runs parallel to the Radius and is typically longer and thinner, extending to the elbow."
    )
    paper = parse_instructions(_raw(shared_data, "paper-parts")).classes
    assert paper["Page Number"].instructions == (
        "Locate numbers typically positioned at the top or bottom margins. "
        "Do not include text or symbols beside the numbers."
    )
    wood = parse_instructions(_raw(shared_data, "new-defects-in-wood")).classes
    assert wood["Holes"].instructions.endswith("Make sure not to tag holes that appear in knots.")
    assert wood["Live Knot"].as_prompt() == f"{wood['Live Knot'].description} {wood['Live Knot'].instructions}"


@pytest.mark.parametrize("name", list(FILES))
def test_sanitised_class_names_find_their_sections(name: str, shared_data: Path) -> None:
    parsed = parse_instructions(_raw(shared_data, name))
    for sanitise in (str.lower, lambda h: h.replace(" ", "_"), lambda h: h.lower().replace(" ", "-")):
        names = [sanitise(heading) for heading in parsed.classes]
        matched = match_classes(parsed, names)
        assert {n: s.name for n, s in matched.items()} == dict(zip(names, parsed.classes))


def test_roboflow_plus_to_minus_is_undone_and_ambiguity_decides_nothing() -> None:
    text = "# Object Classes\n## Raspberry Pi 3 B\nthe plain one\n## Raspberry Pi 3 B+\n### Description\nthe plus\n"
    parsed = parse_instructions(text)
    assert parsed.classes["Raspberry Pi 3 B"].description == "the plain one"  # prose with no sub-headings
    matched = match_classes(parsed, ["Raspberry Pi 3 B", "Raspberry Pi 3 B-", "raspberry_pi_3_b", "Camera"])
    assert {n: s.name for n, s in matched.items()} == {
        "Raspberry Pi 3 B": "Raspberry Pi 3 B",
        "Raspberry Pi 3 B-": "Raspberry Pi 3 B+",
    }


def test_a_readme_without_object_classes_has_no_sections() -> None:
    parsed = parse_instructions("# Some dataset\nhttps://example.org\n\n# Introduction\nHello.\n")
    assert (parsed.classes, parsed.introduction) == ({}, "Hello.")
