"""Reading the run's configuration from pytest: the options of every section
(:mod:`pytest_rf100vl.core.config`) drive ``pytest --help`` (the flags and the dict options),
the ini keys and a ``--rf100vl-config`` file; the command line wins over the file, and the
file over the ini file. A key the ini file takes may be given on the command line with
pytest's ``--override-ini KEY=VALUE``, above the file. A value is parsed and checked once, by
its option, so a bad value is a usage error naming the option. This module imports nothing
heavy: it runs in every pytest session that has the plugin installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_rf100vl.core.config import CONFIG_OPTION, RunConfig, all_options, build_config, moved_flags, read_file
from pytest_rf100vl.core.options import FILE, Option
from pytest_rf100vl.kinds import option_sections

GROUP = "rf100vl"


def add_options(parser: pytest.Parser, options: tuple[Option, ...]) -> None:
    """Register the flags and dict options on the command line, and every option but a dict
    option in the ini file."""
    group = parser.getgroup(GROUP, "rf100vl: benchmark (model x dataset) pairs of RF100-VL and UOUO (every "
                            "other option is a key of the --rf100vl-config file and the ini file: docs/cli.md)")
    for option in options:
        if option.via:
            pass
        elif option.kind in ("list", "dict"):
            group.addoption(option.flag, action="append", dest=option.dest, metavar=option.metavar, help=option.help)
        elif option.kind == "flag":
            group.addoption(option.flag, action="store_true", default=None, dest=option.dest, help=option.help)
        else:
            group.addoption(option.flag, dest=option.dest, metavar=option.metavar, help=option.help)
        if option.kind == "dict":
            continue
        ini_type = {"list": "linelist", "path": "string" if option.keywords else "paths", "flag": "bool"}.get(
            option.kind, "string")
        ini_default = {"string": "", "bool": False}.get(ini_type, [])
        parser.addini(option.dest, option.help, type=ini_type, default=ini_default)


def _command_line(config: pytest.Config, option: Option, by_key: dict[tuple[str, str], dict[str, list[str]]]) -> Any:
    """The command-line value: the option's flag, or its key in its dict option (``by_key``:
    each dict option's keys, by prefix and name), else pytest's ``--override-ini`` of its ini
    key; paths resolved against where pytest was started; else ``None``."""
    value = None
    if option.via and option.via != FILE:
        texts = by_key.get((option.prefix, option.via), {}).get(option.name)
        value = None if texts is None else option.from_text(texts)
    elif not option.via:
        value = config.getoption(option.dest)
    if value is None:
        overridden = [line for key, sep, text in (item.partition("=") for item in config.option.override_ini or [])
                      if sep and key.strip() == option.dest
                      for line in (text.splitlines() if option.kind == "list" else [text])]  # ini's linelist
        value = option.from_text(overridden) if overridden else None
    return option.relative_to(config.invocation_params.dir, value) if value is not None else None


def _ini(config: pytest.Config, option: Option) -> Any:
    """The ini file's value (paths resolved against the ini file's folder), else ``None``."""
    value = config.getini(option.dest)
    if option.kind == "path" and option.keywords:  # read as text, so that a keyword stays one
        return option.relative_to(config.inipath.parent if config.inipath else config.rootpath, value or None)
    if option.kind == "path":
        return value[0] if value else None
    return value or None


def read_config(config: pytest.Config) -> RunConfig:
    """This session's configuration: each option from the command line (its flag or its dict
    option), else the ``--rf100vl-config`` file, else the ini file, else its default."""
    kind_sections = option_sections()
    by_key = {(option.prefix, option.name): option.parse(config.getoption(option.dest))
              for option in all_options(kind_sections) if option.kind == "dict"}
    path = CONFIG_OPTION.parse(_command_line(config, CONFIG_OPTION, by_key) or _ini(config, CONFIG_OPTION))
    from_file = read_file(path, kind_sections) if path is not None else {}

    def lookup(section: str, attribute: str, option: Option) -> Any:
        for given in (_command_line(config, option, by_key), from_file.get((section, attribute)), _ini(config, option)):
            if given is not None:
                return given
        if option.kind == "path" and option.default is not None:  # a default folder is where pytest was started
            return config.invocation_params.dir / option.default
        return None

    return build_config(lookup, kind_sections)


def load_config(path: str | Path) -> RunConfig:
    """A ``--rf100vl-config`` file as a :class:`RunConfig`, from Python: every option it does
    not set at its default (relative paths in it are relative to the file's folder). Run it
    with ``pytest.main(config.to_args())``; a bad key or value raises ``pytest.UsageError``
    naming it."""
    kind_sections = option_sections()
    from_file = read_file(Path(path), kind_sections)

    def lookup(section: str, attribute: str, option: Option) -> Any:
        return from_file.get((section, attribute))

    return build_config(lookup, kind_sections)


def check_rootdir(config: pytest.Config, options: tuple[Option, ...]) -> None:
    """Refuse a run whose rootdir one of these options moved.

    pytest chooses its rootdir (and ini file) before it loads plugins, so the value of a plugin
    option written apart from it (``--rf100vl-results /data``) counts as a test path there:
    the rootdir becomes ``/data``, the project's ini file is not read, and ``.pytest_cache``
    is written there (pytest's documentation: a plugin option with a path makes ``args``
    mandatory). Nothing here can move it back, so the run stops before anything is written,
    saying how to write the option."""
    from _pytest.config.findpaths import determine_setup

    args = [str(arg) for arg in config.invocation_params.args]
    flags = {option.flag for option in options if option.kind != "flag" and not option.via}
    here = config.invocation_params.dir
    values = {args[i + 1] for i, arg in enumerate(args[:-1])
              if arg in flags and not args[i + 1].startswith("-") and (here / args[i + 1]).exists()}
    given = [arg for arg in config.known_args_namespace.file_or_dir if arg not in values]
    if not values:
        return
    try:
        wanted = determine_setup(inifile=config.known_args_namespace.inifilename,
                                 override_ini=config.known_args_namespace.override_ini, args=given,
                                 rootdir_cmd_arg=config.known_args_namespace.rootdir or None,
                                 invocation_dir=here)[0]
    except Exception:  # pytest's rootdir search changed: nothing to compare with
        return
    if wanted == config.rootpath:
        return
    moved = [f"{args[i]} {args[i + 1]}" for i, arg in enumerate(args[:-1]) if arg in flags and args[i + 1] in values]
    fixed = " ".join(f"{arg.split(' ', 1)[0]}={arg.split(' ', 1)[1]}" for arg in moved)
    raise pytest.UsageError(
        f"{', '.join(moved)}: pytest took the path for a test path and chose the rootdir {config.rootpath} "
        f"instead of {wanted} (it decides before it knows plugin options); write {fixed}"
    )


def check_moved_flags(args: list[str], options: tuple[Option, ...]) -> None:
    """Refuse a flag the command line no longer has, as pytest refuses an unknown one, saying
    how to give it now (its dict option, ``--override-ini``, or what replaced it)."""
    moved = moved_flags(options)
    given = dict.fromkeys(str(arg).partition("=")[0] for arg in args if str(arg).startswith("--"))
    hints = [f"{flag} (now {moved[flag]})" for flag in given if flag in moved]
    if hints:
        raise pytest.UsageError(f"unrecognized arguments: {'; '.join(hints)}")
