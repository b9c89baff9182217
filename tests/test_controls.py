"""Characters that act instead of printing (ANSI escapes, NUL, bidi overrides): the rule, and
every writer that puts text from a results row or a path on a terminal, in markdown, LaTeX or
csv. Refusal where names enter is tested with the readers (tests/rf100vl/test_hostile.py,
tests/uouo/test_sources.py)."""

from __future__ import annotations

import sys
import unicodedata

import datasets
import pytest

from rf100vl_hf.cli import main
from rf100vl_hf.controls import control_problem, visible
from rf100vl_hf.errors import DataError
from rf100vl_hf.metadata import read_metadata, to_description
from rf100vl_hf.results.summary import summary
from rf100vl_hf.results.tables import FORMATS, ap_table, per_class_tables, render, uouo_table

from tests.results.factory import detection_row, uouo_row

BIDI_FORMATTING = {"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"}
BIDI_MARKS = {"LEFT-TO-RIGHT MARK", "RIGHT-TO-LEFT MARK", "ARABIC LETTER MARK"}
HOSTILE = "\x1b[2J\x1b[H\x1b]0;owned\x07\x00\x9b31m\x7f\u202e\u2067\u200f\u2028|\n\n"
"""Clear the screen and home the cursor, set the window title, NUL, an 8-bit CSI, DEL, bidi
override, isolate and mark, a line separator, a table bar and a paragraph break."""


def _acts(char: str) -> bool:
    """Whether ``char`` acts instead of printing, from Unicode's own tables (not the module's):
    a control or separator, or one of Unicode's Bidi_Control characters."""
    if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
        return True
    return unicodedata.bidirectional(char) in BIDI_FORMATTING or unicodedata.name(char, "") in BIDI_MARKS


def _acting(text: str, allowed: str = "") -> list[str]:
    return sorted({char for char in text if _acts(char) and char not in allowed})


def test_the_rule_is_every_control_separator_and_bidi_formatting_character() -> None:
    every = [chr(code) for code in range(sys.maxunicode + 1) if not 0xD800 <= code <= 0xDFFF]  # surrogates: not text
    acting = {char for char in every if _acts(char)}
    assert {char for char in every if control_problem(char)} == acting
    assert {char for char in every if control_problem(char, multiline=True)} == acting - {"\t", "\n"}


def test_a_problem_names_the_character_and_its_line() -> None:
    assert control_problem("one\ntwo \x1b[1m", multiline=True).startswith("contains \\x1b (ESC) on line 2")
    assert control_problem("name\u202e").startswith("contains \\u202e (RIGHT-TO-LEFT OVERRIDE)")
    assert control_problem("ordinary text, Persian \u0645\u06cc\u200c\u0634\u0648\u062f, emoji \U0001f41d") is None


def test_visible_writes_each_acting_character_as_its_escape() -> None:
    shown = visible(HOSTILE)
    assert not _acting(shown)
    assert shown.startswith("\\x1b[2J\\x1b[H\\x1b]0;owned\\x07\\x00\\x9b31m\\x7f\\u202e\\u2067\\u200f\\u2028|")
    assert visible(HOSTILE, multiline=True).endswith("|\n\n")
    assert visible(shown) == shown  # escaping twice changes nothing
    assert visible("a\ud800b\udfff", multiline=True) == "a\\ud800b\\udfff"  # a lone surrogate cannot be written


def _rows() -> list[dict]:
    """Rows as read back from a results file someone else wrote: names that act on terminals."""
    hostile = {
        "checkpoint": f"ckpt{HOSTILE}", "command": f"pytest {HOSTILE}",
        "first_error": "Traceback\nError: \x1b[2J\x1b]0;owned\x07\u202eboom", "failed_images": 1, "per_class": [{"class": f"bee{HOSTILE}", "ap": 50.0, "ap50": 60.0, "n_instances": 3}],
    }
    return [
        detection_row(f"owlv2{HOSTILE}", "bees", 40.0, **hostile),
        {**detection_row("gdino", "bees", 30.0), "dataset": f"bees{HOSTILE}", "domain": f"Flora{HOSTILE}"},
        uouo_row(f"clip{HOSTILE}", "uouo-mmd", 0.5, 0.6),
    ]


def test_a_summary_of_hostile_rows_is_safe_for_a_terminal_and_markdown() -> None:
    text = summary(_rows())
    assert not _acting(text, allowed="\n")
    assert "owlv2\\x1b[2J" in text and "pytest \\x1b[2J" in text and "ckpt\\x1b[2J" in text
    assert "1 image(s) failed; Error: \\x1b[2J\\x1b]0;owned\\x07\\u202eboom" in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_tables_of_hostile_rows_are_safe_in_every_format(fmt: str) -> None:
    rows = _rows()
    texts = []
    for table in [ap_table(rows), *per_class_tables(rows), uouo_table(rows)]:
        text = render(table, fmt)
        assert not _acting(text, allowed="\n")
        lines = [line for line in text.splitlines() if fmt != "latex" or line.endswith("\\\\")]
        assert len(lines) == len(table.rows) + (2 if fmt == "md" else 1), text  # no row split by a line break
        texts.append(text)
    everything = "".join(texts)
    for name in ("owlv2", "bees", "bee", "clip"):  # the names are still there to read
        assert f"{name}\\x1b[2J" in everything or f"{name}\\textbackslash{{}}x1b[2J" in everything, name
    if fmt == "latex":
        assert "\\textbackslash{}u202e" in everything and "\n\n" not in everything


def test_the_cli_error_line_shows_a_path_with_an_escape_as_text(tmp_path, capsys) -> None:
    folder = tmp_path / "results\x1b[2Jhere"
    assert main(["results", "summary", str(folder)]) == 2
    err = capsys.readouterr().err
    assert not _acting(err, allowed="\n") and err.count("\n") == 1
    assert "results\\x1b[2Jhere" in err


def test_metadata_of_a_dataset_from_someone_elses_repository_is_held_to_the_readers_rule() -> None:
    """Names and instructions that enter through a Hub card, not through the export reader."""
    metadata = {"classes": ["bee", "wasp"], "instructions": {"classes": {"bee": {"description": "Striped.\n\tFlies."}}}}
    info = datasets.DatasetInfo(description=to_description(metadata), config_name="bees")
    assert read_metadata(info) == metadata
    metadata["instructions"]["classes"]["bee"]["instructions"] = "Box it.\x1b]0;owned\x07"
    with pytest.raises(DataError) as caught:
        read_metadata(datasets.DatasetInfo(description=to_description(metadata), config_name="bees"))
    assert (caught.value.path, caught.value.field) == ("bees", "metadata.instructions.classes.bee.instructions")
    assert caught.value.reason.startswith("contains \\x1b (ESC),")
