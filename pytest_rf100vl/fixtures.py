"""Public fixtures, for the plugin's own matrix test and for tests users write.

Any test that uses one of them (directly or through another fixture) is parametrized over
the session's matrix, one test per (model, dataset) pair, with ids like ``owlv2-bees``::

    def test_ap50_reaches_a_third(rf100vl_run):
        assert rf100vl_run.row.scores.ap50 >= 33.3

    def test_finds_something(rf100vl_adapter, rf100vl_dataset):
        ...

- ``rf100vl_config`` (session): the run's configuration (:class:`~pytest_rf100vl.core.config.RunConfig`);
- ``rf100vl_pair``: the :class:`~pytest_rf100vl.session.selection.Pair` (``model`` spec, ``dataset``
  name, ``kind``: the benchmark kind, ``rf100vl`` or ``uouo`` for the built-in ones);
- ``rf100vl_adapter``: the pair's loaded model as the session runs it
  (:class:`~pytest_rf100vl.adapters.model.Model`: ``set_task``, ``predict``, ``ground``, ``info``;
  ``detector`` is the model as it was built), loaded once for all of its model's pairs; a pair of
  a benchmark the model does not answer (its registry entry's ``tasks``) is skipped, and the
  summary lists it;
- ``rf100vl_dataset``: the pair's split as a ``datasets.Dataset`` (``read_metadata`` gives
  its classes); a dataset that is not on disk skips the test with how to get it; a UOUO
  dataset is built from the cut-out source on first use;
- ``rf100vl_run``: the pair run once per session (:class:`~pytest_rf100vl.session.stages.PairRun`:
  ``scores``, ``row``: its :class:`~rf100vl_hf.results.schema.ResultRow`, ``scored``, ``answers``,
  ``thresholds``, ``failure``), timed by
  pytest-benchmark when it is active and written to the results folder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import pytest

from rf100vl_hf.errors import DatasetNotFoundError, Rf100vlError

from pytest_rf100vl.collect.collection import matrix_session
from pytest_rf100vl.core.config import RunConfig
from pytest_rf100vl.core.pairs import Pair
from pytest_rf100vl.core.stash import CONFIG_KEY
from pytest_rf100vl.engine.guard import AdapterError

T = TypeVar("T")

if TYPE_CHECKING:  # the session loads models and datasets: imported when a matrix runs, not before
    import datasets

    from pytest_rf100vl.adapters.model import Model
    from pytest_rf100vl.session.matrix import MatrixSession
    from pytest_rf100vl.session.stages import PairRun


@pytest.fixture(scope="session")
def rf100vl_config(pytestconfig: pytest.Config) -> RunConfig:
    """The configuration of this session's run: every ``--rf100vl-*`` option, typed."""
    return pytestconfig.stash[CONFIG_KEY]


@pytest.fixture
def rf100vl_pair(request: pytest.FixtureRequest) -> Pair:
    """The (model, dataset) pair of this test; parametrized by the plugin from the options."""
    if not hasattr(request, "param"):
        pytest.skip("no rf100vl matrix: pass --rf100vl-model (and datasets) to run this test")
    return request.param


def _not_on_disk(session: MatrixSession, pair: Pair, error: Exception) -> NoReturn:
    session.missing.setdefault(pair.dataset, str(error))
    first_line = str(error).splitlines()[0]
    pytest.skip(f"{first_line} (how to get it: see the rf100vl summary)")


def _cannot_run(session: MatrixSession, pair: Pair, what: str, error: Exception) -> NoReturn:
    _pair_error(session, pair, f"{what}: {type(error).__name__}: {error}")


def _pair_error(session: MatrixSession, pair: Pair, message: str) -> NoReturn:
    """The pair errors (a failure while setting up its fixtures), and the summary lists it."""
    session.errors.setdefault(pair.id, message)
    pytest.fail(message, pytrace=False)


def _loading(session: MatrixSession, pair: Pair, load: Callable[[], T]) -> T:
    """``load()``, which may load the pair's dataset: one not on disk skips the pair, one that
    cannot be loaded errors it."""
    try:
        return load()
    except DatasetNotFoundError as exc:
        _not_on_disk(session, pair, exc)
    except (ValueError, RuntimeError, OSError) as exc:
        # bad data (a DataError names the file and field), an unknown split, UOUO mosaics that could not be built
        _cannot_run(session, pair, f"dataset {pair.dataset}", exc)


@pytest.fixture
def rf100vl_dataset(rf100vl_pair: Pair, pytestconfig: pytest.Config) -> "datasets.Dataset":
    """The pair's split (its first N images under ``--rf100vl-limit``), prepared once per session."""
    session = matrix_session(pytestconfig)
    limit = session.config.matrix.limit
    return _loading(session, rf100vl_pair, lambda: session.split(rf100vl_pair).first(limit).images)


@pytest.fixture
def rf100vl_adapter(rf100vl_pair: Pair, pytestconfig: pytest.Config) -> "Model":
    """The pair's model as the session runs it, loaded once for all the pairs of its model."""
    session = matrix_session(pytestconfig)
    try:
        model = session.model(rf100vl_pair.spec)
    except Exception as exc:
        _cannot_run(session, rf100vl_pair, f"model {rf100vl_pair.spec}", exc)
    why = session.why_left_out(rf100vl_pair, model)
    if why:
        session.left_out.setdefault(rf100vl_pair.id, why)
        pytest.skip(f"{why}: pair left out")
    return model


def _benchmark(request: pytest.FixtureRequest) -> Any:
    """pytest-benchmark's fixture for this test, when that plugin is active and not skipping."""
    config = request.config
    if not config.pluginmanager.has_plugin("pytest-benchmark") or config.getoption("benchmark_skip", False):
        return None
    return request.getfixturevalue("benchmark")


@pytest.fixture
def rf100vl_run(rf100vl_pair: Pair, request: pytest.FixtureRequest) -> "PairRun":
    """The pair, run once per session and recorded in the results folder, or its finished row
    reused from an earlier run (then the model is not loaded, nor the dataset where its kind
    identifies it without loading it); a pair that could not be scored at all (its row's
    ``unscored``) errors."""
    session = matrix_session(request.config)
    if rf100vl_pair.unplanned:
        _pair_error(session, rf100vl_pair, f"cannot be fine-tuned: {rf100vl_pair.unplanned}")
    if rf100vl_pair not in session.runs and not _loading(session, rf100vl_pair, lambda: session.resume(rf100vl_pair)):
        request.getfixturevalue("rf100vl_dataset")  # loads the split, or skips a pair whose dataset is missing
        request.getfixturevalue("rf100vl_adapter")  # loads the model, or skips a pair it does not answer
        broken = None
        try:
            session.run(rf100vl_pair, _benchmark(request))
        except AdapterError as exc:  # set_task raised, or sys.exit: this pair only
            broken = str(exc)
        except (Rf100vlError, ValueError) as exc:  # bad data, a split or prompt mode the pair lacks
            _cannot_run(session, rf100vl_pair, rf100vl_pair.id, exc)
        if broken:
            _pair_error(session, rf100vl_pair, broken)  # outside the except: the message alone, no chain
    done = session.runs[rf100vl_pair]
    why = done.row.check.unscored
    if why:
        _pair_error(session, rf100vl_pair, f"could not be scored: {why}")
    return done
