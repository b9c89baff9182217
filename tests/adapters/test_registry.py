"""Creating adapters: the registry (built-ins, entry points, spec parsing, unknown names),
device and dtype checks, tiny models built once, and the revision recorded with results."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import EntryPoint
from pathlib import Path

import huggingface_hub
import numpy as np
import pytest

from rf100vl_hf.errors import UnknownNameError
from rf100vl_hf.specs import ModelSpec

from pytest_rf100vl.adapters import (
    ENTRY_POINT_GROUP,
    Adapter,
    Detections,
    ImageItem,
    available,
    create,
    registry,
)
from pytest_rf100vl.adapters.hf import HFDetector, build_once, checkpoint_revision
from pytest_rf100vl.core import registry as registries

DETECTORS = ["owlv2", "owlvit", "grounding-dino", "mm-grounding-dino", "omdet-turbo", "sam3"]


class EmptyAdapter(Adapter):
    """A third-party adapter, as another package would register it."""

    name = "empty"

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        return [Detections.empty() for _ in batch]


NOT_AN_ADAPTER = object()


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch):
    """Pretend these entry points are installed."""

    def install(**names: str) -> None:
        points = [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in names.items()]

        def entry_points(group: str):
            return [p for p in points if p.group == group]

        monkeypatch.setattr(registries, "entry_points", entry_points)

    return install


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("owlv2", ("owlv2", None)),
        ("owlv2:", ("owlv2", None)),
        ("owlv2:google/owlv2-large-patch14-ensemble", ("owlv2", "google/owlv2-large-patch14-ensemble")),
        ("predictions:/runs/2025-06-01T12:00/preds.json", ("predictions", "/runs/2025-06-01T12:00/preds.json")),
        ("predictions:C:\\runs\\preds.json", ("predictions", "C:\\runs\\preds.json")),
    ],
)
def test_spec_parsing_keeps_colons_in_paths(spec: str, expected: tuple[str, str | None]) -> None:
    parsed = ModelSpec.parse(spec)
    assert (parsed.name, parsed.checkpoint) == expected


def test_an_unknown_name_lists_the_closest(installed) -> None:
    installed()
    with pytest.raises(UnknownNameError, match="unknown model adapter 'owlv3'; closest: owlv2"):
        create("owlv3")


def test_entry_point_adapters_are_found(installed) -> None:
    installed(empty=f"{__name__}:EmptyAdapter")
    assert available()["empty"] == f"{__name__}:EmptyAdapter"
    adapter = create("empty:some/checkpoint:v2", device="cpu")
    assert isinstance(adapter, EmptyAdapter) and adapter.checkpoint == "some/checkpoint:v2"


def test_an_entry_point_that_reuses_a_built_in_name_is_an_error_naming_both(installed) -> None:
    installed(oracle=f"{__name__}:EmptyAdapter")
    with pytest.raises(registries.RegistryError) as error:
        create("oracle")
    message = str(error.value)
    assert "'oracle' is registered twice" in message
    assert "pytest_rf100vl.adapters.oracle:OracleAdapter" in message and f"{__name__}:EmptyAdapter" in message


def test_an_entry_point_that_is_not_an_adapter_is_refused(installed) -> None:
    installed(broken=f"{__name__}:NOT_AN_ADAPTER")
    with pytest.raises(TypeError, match="'broken' points at .*NOT_AN_ADAPTER, which is not a subclass of Adapter"):
        create("broken")


@pytest.mark.parametrize("name", DETECTORS + ["oracle", "predictions"])
def test_built_in_detectors_resolve_to_their_class(name: str) -> None:
    cls = registry.adapter_class(name)
    assert issubclass(cls, Adapter) and cls.name == name


@pytest.mark.parametrize("name", DETECTORS)
def test_each_detector_documents_its_default_checkpoint(name: str) -> None:
    cls = registry.adapter_class(name)
    assert issubclass(cls, HFDetector)
    assert cls.default_checkpoint and cls.default_checkpoint in cls.__doc__


def test_device_and_dtype_are_checked_when_an_adapter_is_created() -> None:
    with pytest.raises(RuntimeError, match="'cuda:7' requested"):
        create("owlv2:tiny", device="cuda:7")
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        create("owlv2:tiny", device="gpu")
    with pytest.raises(ValueError, match="unknown dtype 'float64'"):
        create("owlv2:tiny", dtype="float64")


def test_a_tiny_model_is_built_once_even_by_concurrent_callers(tmp_path: Path) -> None:
    calls = []

    def build(folder: Path) -> None:
        calls.append(folder)
        folder.mkdir()
        time.sleep(0.2)
        (folder / "config.json").write_text("{}")

    target = tmp_path / "tiny-models" / "toy"
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: build_once(target, build), range(4)))
    assert results == [target] * 4 and len(calls) == 1
    assert sorted(p.name for p in target.parent.iterdir() if not p.name.endswith(".lock")) == ["toy"]
    assert (target / "config.json").read_text() == "{}"


def test_a_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    def build(folder: Path) -> None:
        folder.mkdir()
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        build_once(tmp_path / "toy", build)
    assert [p.name for p in tmp_path.iterdir()] == ["toy.lock"]


def test_revision_is_the_hub_commit_or_a_content_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--org--detector"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text("{}")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert checkpoint_revision("org/detector") == commit
    assert checkpoint_revision("org/not-downloaded") is None
    local = repo / "snapshots" / commit
    first = checkpoint_revision(local)
    assert first.startswith("xxh3:") and checkpoint_revision(local) == first
    (local / "config.json").write_text('{"changed": true}')
    assert checkpoint_revision(local) != first


@pytest.mark.parametrize(
    ("detections", "problem"),
    [
        (Detections(np.zeros((2, 4)), np.zeros(2), np.array([0, 3])), r"labels outside 0\.\.2: \[0, 3\]"),
        (Detections(np.zeros((2, 3)), np.zeros(2), np.array([0, 1])), r"boxes of shape \(2, 3\), expected \(2, 4\)"),
        (Detections(np.zeros((1, 4)), np.zeros(2), np.array([0])), r"boxes of shape \(1, 4\), expected \(2, 4\)"),
        (Detections(np.zeros((1, 4)), np.zeros(1), np.array([0.0])), "labels of dtype float64"),
    ],
)
def test_the_contract_check_catches_malformed_detections(detections: Detections, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        detections.check(3)
    Detections.empty().check(3)
