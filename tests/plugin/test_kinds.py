"""Benchmark kinds are registered units: a third kind, installed the way a user's package would
install it (an entry point in the ``rf100vl.kinds`` group), runs through the plugin end to end
from its own file alone; a kind that reuses a built-in name is an error naming both."""

from __future__ import annotations

import ast
import inspect
import os
import textwrap
from pathlib import Path

import pytest

from tests.plugin.helpers import results

TOY_KIND = '''
"""A toy benchmark: count the objects in blank images; a pair scores the share of images
where the model found exactly ``--toy-objects`` of them."""

from dataclasses import dataclass

import datasets
from PIL import Image

from rf100vl_hf.markdown import table
from pytest_rf100vl.adapters.base import DetectionTask
from pytest_rf100vl.kinds.base import BenchmarkKind, Metric, Report, Scored, Split, option

ACCURACY = Metric("count_accuracy", "count accuracy", 2, kind="toy", fraction="a share of images")


@dataclass(frozen=True)
class ToyOptions:
    objects: int = option("objects", "int", "objects in every toy image", "N", prefix="toy", default=2, minimum=0)


class ToyKind(BenchmarkKind):
    name = "toy"
    test_name = "test_counting"
    options_section = ToyOptions
    metrics = (ACCURACY,)

    def datasets(self):
        return ["toy-a", "toy-b"]

    def load(self, dataset, device):
        images = datasets.Dataset.from_dict({
            "image": [Image.new("RGB", (32, 32)) for _ in range(3)], "image_id": [0, 1, 2],
            "file_name": [f"{dataset}-{i}.png" for i in range(3)],
        }).cast_column("image", datasets.Image())
        return Split(images, DetectionTask(dataset, ["object"]), identity={"dataset_fingerprint": dataset})

    def score(self, answers, split):
        right = [len(found.scores) == self.options.objects for found in answers.detections.values()]
        return Scored({ACCURACY.name: sum(right) / len(right)})

    def report(self, rows, rules):
        body = [[row["spec"], row["dataset"], f"{row['count_accuracy']:.2f}"] for row in rows]
        return Report(["## Counting", "", *table(["Model", "Dataset", "count accuracy"], body, numeric=[2]), ""])
'''

COUNTER = '''
import numpy as np

from pytest_rf100vl.adapters.base import Adapter, Detections


class Counter(Adapter):
    name = "counter"
    tasks = ("toy",)

    def predict(self, batch):
        return [Detections(np.array([[0, 0, 4, 4], [8, 8, 12, 12]], dtype=float), np.ones(2), np.zeros(2, dtype=int))
                for _ in batch]


def pytest_rf100vl_make_adapter(config, spec, device, dtype):
    if spec.name == "counter":
        return Counter(device=device, dtype=dtype)
'''


def install(folder: Path, name: str, entry_points: str) -> None:
    """Make ``folder`` hold an installed distribution ``name`` with these entry points, as pip would."""
    info = folder / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points), encoding="utf-8")


@pytest.fixture
def toy(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A folder where the toy kind is installed as a package and the counter adapter is in the conftest."""
    site = pytester.mkdir("site")
    (site / "toy_kind.py").write_text(TOY_KIND, encoding="utf-8")
    install(site, "toy_kind", "[rf100vl.kinds]\ntoy = toy_kind:ToyKind\n")
    pytester.makeconftest(COUNTER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    return pytester


def test_a_third_kind_runs_end_to_end_from_its_own_file(toy: pytest.Pytester) -> None:
    toy.path.joinpath("thresholds.csv").write_text("model,target,min_count_accuracy\ncounter,toy-b,0.5\n")
    result = toy.runpytest_subprocess(
        "--rf100vl-model", "counter", "--rf100vl-dataset", "toy-a,toy-b", "--toy-objects", "3",
        "--override-ini", "rf100vl_thresholds=thresholds.csv", "--rf100vl-device", "cpu", "-v",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "rf100vl::test_counting[[]counter-toy-a[]] PASSED*",
        "rf100vl::test_counting[[]counter-toy-b[]] FAILED*",
        "*counter on toy-b: count accuracy 0.00 is below the minimum 0.50 (from thresholds.csv line 2)*",
        "## Counting",
        "| counter | toy-a | 0.00 |",
    ])
    rows = results(toy.path / ".rf100vl" / "results")
    assert [(row["benchmark"], row["dataset"], row["count_accuracy"], row["n_images"]) for row in rows] == [
        ("toy", "toy-a", 0.0, 3), ("toy", "toy-b", 0.0, 3)
    ]


def test_the_kind_options_and_defaults_reach_it(toy: pytest.Pytester) -> None:
    result = toy.runpytest_subprocess("--rf100vl-model", "counter", "--rf100vl-dataset", "toy-a",
                                      "--rf100vl-device", "cpu")
    result.assert_outcomes(passed=1)
    (row,) = results(toy.path / ".rf100vl" / "results")
    assert row["count_accuracy"] == 1.0  # two objects found, two by default
    help_text = toy.runpytest_subprocess("--help").stdout.str()
    assert "--toy-objects=N" in help_text and "objects in every toy image" in help_text


def test_a_kind_that_reuses_a_built_in_name_is_an_error_naming_both(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = pytester.mkdir("site")
    (site / "toy_kind.py").write_text(TOY_KIND, encoding="utf-8")
    install(site, "impostor", "[rf100vl.kinds]\nuouo = toy_kind:ToyKind\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    result = pytester.runpytest_subprocess("--rf100vl-model", "oracle", "--rf100vl-dataset", "sample")
    assert result.ret != 0
    text = result.stdout.str() + result.stderr.str()
    assert "benchmark kind 'uouo' is registered twice" in text
    assert "pytest_rf100vl.kinds.uouo.kind:UouoKind" in text and "toy_kind:ToyKind (package impostor)" in text


def test_the_toy_kind_is_within_the_protocol_s_size() -> None:
    """A third kind implements at most 6 methods and imports from at most 2 plugin modules."""
    tree = ast.parse(TOY_KIND)
    (kind,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "ToyKind"]
    methods = [node.name for node in kind.body if isinstance(node, ast.FunctionDef)]
    plugin_modules = {node.module for node in ast.walk(tree)
                      if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_rf100vl")}
    assert len(methods) <= 6 and len(plugin_modules) <= 2, (methods, plugin_modules)


def test_the_kind_protocol_is_narrow() -> None:
    """What a kind must or may implement: its datasets, loading (and identifying a split without
    loading it, so that a rerun reuses its pairs without loading it), cost, score and report."""
    from pytest_rf100vl.kinds.base import BenchmarkKind

    overridable = {name for name, value in vars(BenchmarkKind).items()
                   if inspect.isfunction(value) and not name.startswith("_")}
    assert overridable == {"datasets", "claims", "group", "load", "identify", "cost", "score", "report"}


def test_no_module_outside_a_kind_names_a_kind() -> None:
    """The house rule the kinds exist for: collection, running and reporting never branch on a kind."""
    package = Path(__file__).resolve().parents[2] / "pytest_rf100vl"
    offenders = []
    for path in package.rglob("*.py"):
        if "kinds" in path.relative_to(package).parts:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            code = line.split("#")[0]
            if any(word in code for word in ('== "uouo"', '== "rf100vl"', "UOUO_DATASETS", "uouo_config", "RF100VL,")):
                offenders.append(f"{path.relative_to(package)}:{number}: {line.strip()}")
    assert offenders == []

