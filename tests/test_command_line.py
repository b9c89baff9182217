"""The two command lines stay small: the pytest plugin has about 16 options (at most 20: the
rest are keys of the config file and the ini file, a benchmark's also of its dict option),
and ``rf100vl-hf`` at most 70 arguments over all its commands (each command's less used
settings are ``--option KEY=VALUE``). A flag either no longer has is refused as an unknown
one is, with how to give it now. Before this bound: 58 pytest options and 148 arguments."""

from __future__ import annotations

import argparse
import re

import pytest

from rf100vl_hf.cli import build_parser, main

MAX_PYTEST_OPTIONS = 20
MAX_CLI_ARGUMENTS = 70


def plugin_options(pytester: pytest.Pytester) -> set[str]:
    """The ``--rf100vl-*`` and ``--uouo-*`` options ``pytest --help`` lists."""
    out = pytester.runpytest_inprocess("--help").stdout.str()
    return set(re.findall(r"^\s+(--(?:rf100vl|uouo)-[a-z0-9-]+)", out, re.MULTILINE))


def cli_arguments(parser: argparse.ArgumentParser, command: str = "") -> list[str]:
    """Every argparse action of every (sub-)command, positionals included, help left out."""
    found = []
    for action in parser._actions:  # argparse keeps no public list of a parser's arguments
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += cli_arguments(sub, f"{command} {name}".strip())
        else:
            found.append(f"{command} {(action.option_strings or [action.dest])[0]}")
    return found


def test_the_plugin_has_at_most_20_options(pytester: pytest.Pytester) -> None:
    options = plugin_options(pytester)
    assert len(options) <= MAX_PYTEST_OPTIONS, sorted(options)
    assert {"--rf100vl-config", "--rf100vl-model", "--rf100vl-dataset", "--rf100vl-data-option",
            "--uouo-option"} <= options  # what the others became reachable by
    assert not {"--rf100vl-min-ap", "--rf100vl-push-results", "--rf100vl-min-time", "--rf100vl-domain"} & options


def test_the_cli_has_at_most_70_arguments() -> None:
    arguments = cli_arguments(build_parser())
    assert 40 <= len(arguments) <= MAX_CLI_ARGUMENTS, arguments
    assert "prepare --option" in arguments and "prepare --fewshot-k" not in arguments


@pytest.mark.parametrize(("flag", "now"), [
    ("--rf100vl-data-dir=/data", "--rf100vl-data-option=data-dir=VALUE"),
    ("--rf100vl-cache=off", "--override-ini=rf100vl_cache=VALUE"),
    ("--rf100vl-min-ap=30", "a thresholds-file row with target *"),
])
def test_a_flag_the_plugin_no_longer_has_is_a_usage_error_saying_how_now(pytester: pytest.Pytester, flag: str,
                                                                       now: str) -> None:
    result = pytester.runpytest_inprocess("--rf100vl-model=oracle", flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: unrecognized arguments: {flag.partition('=')[0]} (now {now}*"])


def test_a_flag_the_cli_no_longer_has_is_a_usage_error_saying_how_now(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["prepare", "sample", "--fewshot-k", "5"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --fewshot-k 5; --fewshot-k is now --option fewshot-k=VALUE" in (
        capsys.readouterr().err)
