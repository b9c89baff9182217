"""The one rule for characters that act instead of printing, in text that comes from data.

Control characters (the C0 and C1 controls, NUL, ESC and DEL among them), the line and
paragraph separators U+2028 and U+2029, and the bidirectional formatting characters (U+061C,
U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069) can rewrite a terminal (an ANSI escape
sequence), end a markdown table row, stop LaTeX, or show text in another order than it
is read. Ordinary text never needs them, so:

- where text enters, it is refused with the file, the field and the character: a class name
  or a file name of an export or a cut-out source holds none at all, a README (and so the
  annotator instructions) none but tab and line break;
- text that reaches a terminal, markdown, LaTeX or csv by another route (results rows read
  back from files, metadata read back from a card, a path in an error, a model's reply) has
  each such character written as its escape, ``\\x1b`` or ``\\u202e``, as ``repr`` shows it,
  and so has a lone surrogate (``\\ud800``: JSON may hold one, UTF-8 cannot write it).

A card's YAML header needs neither: its writer escapes every control character, and the
names it carries were checked where they entered.
"""

from __future__ import annotations

import re
import unicodedata

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROLS = "\x00-\x1f\x7f-\x9f\u2028\u2029"
_CONTROLS_IN_TEXT = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029"  # tab and line feed are text
_SURROGATES = "\ud800-\udfff"
_ACTING = re.compile(f"[{_CONTROLS}{_BIDI}]")
_ACTING_IN_TEXT = re.compile(f"[{_CONTROLS_IN_TEXT}{_BIDI}]")
_SHOWN = {False: re.compile(f"[{_CONTROLS}{_BIDI}{_SURROGATES}]"),
          True: re.compile(f"[{_CONTROLS_IN_TEXT}{_BIDI}{_SURROGATES}]")}
"""What :func:`visible` escapes (by ``multiline``): the acting characters, and lone surrogates."""
_NAMES = {"\x00": "NUL", "\x1b": "ESC", "\x7f": "DEL", "\x9b": "CSI", "\r": "carriage return"}


def _pattern(multiline: bool) -> re.Pattern[str]:
    return _ACTING_IN_TEXT if multiline else _ACTING


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def control_problem(text: str, multiline: bool = False) -> str | None:
    """Why ``text`` holds a character that acts instead of printing, or None when it holds none.

    ``multiline`` text (a README) may hold tabs and line breaks; the message then gives the line
    when there are several.
    """
    match = _pattern(multiline).search(text)
    if match is None:
        return None
    char = match.group()
    name = _NAMES.get(char) or unicodedata.name(char, "") or "a control character"
    line = f" on line {text.count(chr(10), 0, match.start()) + 1}" if multiline and "\n" in text else ""
    return (f"contains {_escape(char)} ({name}){line}, which acts on a terminal or a document instead of "
            "printing; remove it")


def visible(text: str, multiline: bool = False) -> str:
    """``text`` with each character that acts instead of printing, and each lone surrogate,
    written as its escape (``multiline`` keeps tabs and line breaks)."""
    return _SHOWN[multiline].sub(lambda match: _escape(match.group()), text)


def one_line(value: object) -> str:
    """``value`` as one line of text: whitespace runs (line breaks included) become one space,
    and what else acts instead of printing is written as its escape."""
    return visible(" ".join(str(value).split()))
