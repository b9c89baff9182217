"""Parse the annotator instructions of an RF100-VL few-shot export (``README.dataset.txt``).

The layout is markdown: ``# Object Classes``, then ``## <class>`` with ``### Description``
and ``### Instructions``. Real files vary: some have a table of contents (and "[Top]"
links back to it, dropped here), some prose instead of bullets, some blank lines after
headings. The raw text is always kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")  # an ATX heading; closing hashes need a space
_ANCHOR_LINK = re.compile(r"^\s*\[[^\]]*\]\(#[^)]*\)\s*$")  # a navigation line such as "[Top](#overview)"


@dataclass(frozen=True)
class ClassInstructions:
    name: str  # the class heading as written in the file
    description: str
    instructions: str

    def as_prompt(self) -> str:
        """Description and instructions as one paragraph, for models prompted with text."""
        return " ".join(part for part in (self.description, self.instructions) if part)


@dataclass(frozen=True)
class Instructions:
    raw: str
    introduction: str = ""
    classes: dict[str, ClassInstructions] = field(default_factory=dict)  # keyed by heading


def _sections(lines: list[str], level: int) -> list[tuple[str, list[str]]]:
    """Split ``lines`` at headings of exactly ``level``; text before the first is dropped."""
    out: list[tuple[str, list[str]]] = []
    for line in lines:
        match = _HEADING.match(line)
        if match and len(match.group(1)) == level:
            out.append((match.group(2).strip(), []))
        elif out:
            out[-1][1].append(line)
    return out


def _text(lines: list[str]) -> str:
    """Section text without navigation links, trimmed."""
    return "\n".join(line for line in lines if not _ANCHOR_LINK.match(line)).strip()


def parse_instructions(text: str) -> Instructions:
    """Per-class description and instructions from a README.dataset.txt."""
    lines = text.splitlines()
    top = _sections(lines, 1)
    introduction = next((_text(body) for title, body in top if title.lower() == "introduction"), "")
    body = next((body for title, body in top if title.lower() == "object classes"), None)
    classes: dict[str, ClassInstructions] = {}
    for name, class_lines in _sections(body or [], 2):
        parts = {title.lower(): _text(b) for title, b in _sections(class_lines, 3)}
        first_heading = next((i for i, line in enumerate(class_lines) if _HEADING.match(line)), len(class_lines))
        preamble = _text(class_lines[:first_heading])  # the description when a section has no "### Description"
        classes[name] = ClassInstructions(
            name=name,
            description=parts.get("description", preamble),
            instructions=parts.get("instructions", ""),
        )
    return Instructions(raw=text, introduction=introduction, classes=classes)


def _key(name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", name.casefold())


def _roboflow_sanitised(name: str) -> str:
    return name.replace("+", "-").casefold()


def match_classes(instructions: Instructions, class_names: list[str]) -> dict[str, ClassInstructions]:
    """Instructions per dataset class name.

    Headings are written for people ("Knot with Crack", "Raspberry Pi 3 B+") and class names
    are sanitised by Roboflow ("knot_with_crack", "Raspberry Pi 3 B-"), so a class takes the
    section whose heading equals its name; else the one that does once "+" is written "-"
    and case is ignored; else the one that does ignoring case, spaces and punctuation. A
    comparison that finds two headings decides nothing. Classes without a section are
    absent from the result.
    """
    headings = list(instructions.classes)
    out: dict[str, ClassInstructions] = {}
    for name in class_names:
        for same in (str.__str__, _roboflow_sanitised, _key):
            found = [h for h in headings if same(h) == same(name)]
            if len(found) == 1:
                out[name] = instructions.classes[found[0]]
                break
    return out
