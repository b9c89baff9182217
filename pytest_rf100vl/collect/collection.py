"""Collection of the matrix: one module node, ``rf100vl``, that holds the plugin's tests, added
to what the session collects (or replacing it when the user named no test paths)."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from rf100vl_hf.specs import ModelSpec

from pytest_rf100vl.collect.matrix_tests import matrix_tests
from pytest_rf100vl.core.pairs import Pair, pair_of
from pytest_rf100vl.core.stash import CONFIG_KEY, KINDS_KEY, SESSION_KEY

if TYPE_CHECKING:
    from pytest_rf100vl.session.matrix import MatrixSession

NODE = "rf100vl"


def matrix_session(config: pytest.Config) -> "MatrixSession":
    """The session's matrix state, created on first use (it reads the catalogue and thresholds)."""
    if SESSION_KEY not in config.stash:
        from pytest_rf100vl.session.matrix import MatrixSession

        config.stash[SESSION_KEY] = MatrixSession(config, config.stash[CONFIG_KEY], config.stash[KINDS_KEY])
    return config.stash[SESSION_KEY]  # type: ignore[return-value]


class MatrixModule(pytest.Module):
    """The plugin's test module, built from the session's kinds (the user's ``sys.path`` and
    ``python_functions`` settings do not apply to it). A kind's test is collected only when
    the session has pairs of that kind."""

    def _getobj(self) -> ModuleType:
        session = matrix_session(self.config)
        present = {pair.kind for pair in session.pairs}
        return matrix_tests([type(kind) for name, kind in session.kinds.items() if name in present])

    def istestfunction(self, obj: object, name: str) -> bool:
        return callable(obj) and not name.startswith("_")

    def istestclass(self, obj: object, name: str) -> bool:
        return False


def matrix_module(session: pytest.Session) -> MatrixModule:
    # The node's path is only a name under the rootdir (no file is read there); it gives
    # the node its place among the user's tests and conftest files.
    return MatrixModule.from_parent(session, path=session.config.rootpath / NODE, name=NODE, nodeid=NODE)


def user_named_paths(config: pytest.Config) -> bool:
    """Whether test paths came from the command line (not from testpaths or the current folder)."""
    return config.args_source == pytest.Config.ArgsSource.ARGS


def matrix_pairs(metafunc: pytest.Metafunc, pairs: list[Pair], test_names: dict[str, str]) -> list[Pair]:
    """The pairs a test is parametrized over: the plugin's own test of a kind gets that kind's
    pairs (``test_names``: kind -> its test); a user's test gets every pair."""
    if not isinstance(metafunc.definition.parent, MatrixModule):
        return pairs
    return [pair for pair in pairs if test_names[pair.kind] == metafunc.definition.name]


def model_major(items: list[pytest.Item], models: tuple[ModelSpec, ...]) -> None:
    """Reorder, in place, the items of pairs so each model's pairs run together (the model is
    then loaded once); other items keep their places."""
    slots = [i for i, item in enumerate(items) if pair_of(item) is not None]
    ordered = sorted((items[i] for i in slots),
                     key=lambda item: models.index(pair_of(item).spec))  # type: ignore[union-attr]
    for slot, item in zip(slots, ordered):
        items[slot] = item
