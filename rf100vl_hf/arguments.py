"""The checked argument types of ``rf100vl-hf``: each converts a command-line value and refuses
one out of range with what it expected, so a bad argument is argparse's one-line usage error
(exit status 2) naming the option. Every command's parser takes its types from here, and its
less used settings as ``--option KEY=VALUE`` (:func:`add_settings`), so each command has a few
arguments (docs/cli.md)."""

from __future__ import annotations

import argparse
import math
import re
import textwrap
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable


def checked(kind: Callable[[str], Any], test: Callable[[Any], bool], expected: str) -> Callable[[str], Any]:
    """An argparse ``type=`` that converts with ``kind`` and accepts what passes ``test``."""

    def convert(text: str) -> Any:
        try:
            value = kind(text)
            good = test(value)
        except (ValueError, OSError):  # OSError: a path the system refuses to look at (too long...)
            good = False
        if not good:
            raise argparse.ArgumentTypeError(f"expected {expected}, not {text!r}")
        return value

    convert.__name__ = expected  # argparse names the type in some messages
    return convert


INTEGER = checked(int, lambda v: True, "an integer")
POSITIVE_INTEGER = checked(int, lambda v: v >= 1, "an integer of at least 1")
FRACTION = checked(float, lambda v: math.isfinite(v) and 0 < v <= 1, "a number in (0, 1]")
POSITIVE_NUMBER = checked(float, lambda v: math.isfinite(v) and v > 0, "a positive number")
DIRECTORY = checked(Path, lambda v: v.is_dir(), "an existing folder")


def _can_be_folder(path: Path) -> bool:
    """Whether ``path`` is a folder, or can be made one: its nearest existing ancestor is a folder."""
    for place in (path, *path.absolute().parents):
        if place.exists():
            return place.is_dir()
    return True


FOLDER = checked(Path, _can_be_folder, "a folder, or a path where one can be made")
REPO_ID = checked(
    str,
    lambda v: len(v) <= 96 and re.fullmatch(r"(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*", v) is not None
    and ".." not in v and "--" not in v,
    "a Hub repository id ORG/NAME (letters, digits, '-', '_', '.')",
)


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def typed_option(key: str, value: Any, default: Any) -> Any:
    """An option given as text (command line, ini file) in the type of its default.

    ``None`` defaults take a number or ``none``; other values pass through unchanged.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        if isinstance(default, bool):
            if text.lower() in _TRUE + _FALSE:
                return text.lower() in _TRUE
            raise ValueError("expected true or false")
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float) or (default is None and text.lower() != "none"):
            return float(text)
        if default is None:
            return None
    except ValueError as exc:
        raise ValueError(f"option {key}={value!r}: {exc}") from None
    return value


def boolean(text: str) -> bool:
    """A yes/no setting's text (``true``, ``false``, ``yes``, ``no``, ``on``, ``off``, ``1``, ``0``)."""
    if text.strip().lower() not in _TRUE + _FALSE:
        raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")
    return text.strip().lower() in _TRUE


@dataclass(frozen=True)
class Setting:
    """A command's setting given as ``--option KEY=VALUE``: its key (``fewshot-k``), how its
    text is converted (an argparse ``type``: one of this module's), its default, its help; a
    ``repeated`` setting collects every value given in a list. The command reads it as it
    reads an argument: ``args.fewshot_k``."""

    key: str
    type: Callable[[str], Any] = str
    default: Any = None
    help: str = ""
    choices: tuple[Any, ...] = ()
    repeated: bool = False
    attribute: str = ""
    """The attribute the command reads, when not the key's (``image-id`` -> ``image_ids``)."""

    @property
    def dest(self) -> str:
        return self.attribute or self.key.replace("-", "_")


class _Settings(argparse.Action):
    """``--option KEY=VALUE``: converts and checks the value of a known key and sets it on the
    namespace; an unknown key or a bad value is argparse's usage error naming both."""

    def __init__(self, option_strings: list[str], dest: str, settings: tuple[Setting, ...] = (), **kwargs: Any):
        self.settings = {setting.key: setting for setting in settings}
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        key, sep, text = str(values).partition("=")
        setting = self.settings.get(key.strip().replace("_", "-"))
        if not sep or setting is None:
            raise argparse.ArgumentError(self, f"expected KEY=VALUE with KEY one of {', '.join(self.settings)}, "
                                               f"not {values!r}")
        try:
            value = setting.type(text)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise argparse.ArgumentError(self, f"{setting.key}: {exc}") from None
        if setting.choices and value not in setting.choices:
            raise argparse.ArgumentError(self, f"{setting.key}: {text!r} is not one of "
                                               f"{', '.join(map(str, setting.choices))}")
        if setting.repeated:
            value = [*(getattr(namespace, setting.dest, None) or []), value]
        setattr(namespace, setting.dest, value)


def add_settings(parser: argparse.ArgumentParser, *settings: Setting) -> None:
    """``--option KEY=VALUE`` (repeatable) on ``parser`` for ``settings``, each at its default
    until given; the help lists every key."""
    keys = "; ".join(f"{s.key}: {s.help}" + ("" if s.default in (None, False, ()) else f" (default {s.default})")
                     for s in settings)
    parser.add_argument("--option", action=_Settings, settings=settings, metavar="KEY=VALUE",
                        default=argparse.SUPPRESS, help=f"a setting, repeatable. {keys}")
    parser.set_defaults(**{s.dest: s.default for s in settings})


def setting_keys(parser: argparse.ArgumentParser) -> set[str]:
    """Every ``--option`` key of ``parser`` and its sub-commands: what a usage error suggests for
    a flag that became a setting (``--fewshot-k`` -> ``--option fewshot-k=VALUE``)."""
    found: set[str] = set()
    for action in parser._actions:  # argparse keeps no public list of a parser's arguments
        if isinstance(action, _Settings):
            found.update(action.settings)
        elif isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.update(setting_keys(sub))
    return found


class WholeWords(argparse.HelpFormatter):
    """argparse's help, never breaking a word at a hyphen: a setting's key (``num-mosaics``)
    stays whole in ``--option``'s list."""

    def _split_lines(self, text: str, width: int) -> list[str]:  # argparse's hook for wrapping a help
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class RawDescriptionWholeWords(WholeWords, argparse.RawDescriptionHelpFormatter):
    """:class:`WholeWords`, with the description and epilog as written."""


def whole_words(formatter: type[argparse.HelpFormatter]) -> type[argparse.HelpFormatter]:
    """The formatter like ``formatter`` (plain or raw description) that keeps words whole."""
    return RawDescriptionWholeWords if issubclass(formatter, argparse.RawDescriptionHelpFormatter) else WholeWords
