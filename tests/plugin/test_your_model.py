"""A model is two methods (``docs/your-model.md``): a class in a conftest with exactly
``set_task`` and ``predict``, made by the ``pytest_rf100vl_make_adapter`` hook, runs a pair,
is reused on rerun and is answered from the answer cache after an interruption; and the
plugin reads no more than a few of its members outside the capability protocols."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from pytest_rf100vl.adapters.base import (
    Accounted,
    Adapter,
    Detections,
    DetectionTask,
    Detector,
    Grounder,
    GroundingAnswer,
    GroundingQuery,
    ImageItem,
    ModelInfo,
    Pipelined,
    Prompted,
    Trainable,
)
from pytest_rf100vl.adapters.model import READ, Model, hosted
from rf100vl_hf.specs import ModelSpec

from tests.plugin.helpers import results, session_rows

MAX_MEMBERS_READ = 8
"""The most members of a model the plugin may read outside the capability protocols."""

TWO_METHODS = '''
import json
import os

import numpy as np

from pytest_rf100vl.adapters.base import Detections

READ = set()
"""Every member of the model the plugin read (added to read.json when a session ends)."""


class Corners:
    """One box in each image's top-left quarter, of the first class."""

    def __getattribute__(self, member):
        READ.add(member)
        return object.__getattribute__(self, member)

    def set_task(self, task):
        self.classes = task.classes

    def predict(self, batch):
        stop = int(os.environ.get("STOP_AFTER", "-1"))
        answers = []
        for item in batch:
            if stop == 0:
                raise KeyboardInterrupt  # Ctrl-C in the middle of the split
            stop -= 1
            os.environ["STOP_AFTER"] = str(stop)
            with open("asked.txt", "a") as asked:
                asked.write(f"{item.image_id}\\n")
            width, height = item.image.size
            answers.append(Detections(np.array([[0.0, 0.0, width / 2, height / 2]]), np.array([0.9]),
                                      np.array([0])))
        return answers


def pytest_rf100vl_make_adapter(config, spec, device, dtype, options):
    if spec.name == "corners":
        return Corners()


def pytest_sessionfinish(session):
    earlier = json.load(open("read.json")) if os.path.exists("read.json") else []
    with open("read.json", "w") as out:
        json.dump(sorted({*earlier, *(member for member in READ if not member.startswith("__"))}), out)
'''

RUN = ("--rf100vl-model=corners", "--rf100vl-dataset=sample", "--rf100vl-device=cpu", "--rf100vl-batch-size=1")


def asked(pytester: pytest.Pytester) -> list[int]:
    """The image ids the model was asked since the last call (each file read once)."""
    path = pytester.path / "asked.txt"
    ids = [int(line) for line in path.read_text().split()] if path.exists() else []
    path.unlink(missing_ok=True)
    return ids


def test_a_two_method_model_in_a_conftest_runs_is_reused_and_resumes_from_the_cache(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(TWO_METHODS)
    folder = pytester.path / ".rf100vl" / "results"
    monkeypatch.setenv("STOP_AFTER", "3")
    interrupted = pytester.runpytest_inprocess(*RUN, no_reraise_ctrlc=True)
    assert interrupted.ret == pytest.ExitCode.INTERRUPTED
    first = asked(pytester)
    assert len(first) == 3 and not (folder / "results.jsonl").exists()

    monkeypatch.delenv("STOP_AFTER")
    pytester.runpytest_inprocess(*RUN).assert_outcomes(passed=1)
    (row,) = results(folder)
    resumed = asked(pytester)
    assert not set(first) & set(resumed)  # the three answers came from the cache
    assert row["cached_images"] == 3 and len(set(resumed)) == row["n_images"] - 3 > 0
    assert (row["model"], row["checkpoint"], row["spec"]) == ("corners", None, "corners")
    assert row.get("reused_from") is None and row["n_predictions"] == row["n_images"]

    pytester.runpytest_inprocess(*RUN).assert_outcomes(passed=1)
    assert results(folder) == [row]  # reused: its row is not written again
    (reused,) = session_rows(folder)
    assert reused["reused_from"] == row["run_id"] != reused["run_id"] and reused["ap"] == row["ap"]
    assert asked(pytester) == []  # reused: the model was not asked again

    read = json.loads((pytester.path / "read.json").read_text())
    capabilities = {name for protocol in (Grounder, Pipelined, Trainable, Prompted, Accounted)
                    for name in (*vars(protocol), *protocol.__annotations__) if not name.startswith("_")}
    outside = set(read) - capabilities
    assert {"set_task", "predict"} <= outside <= set(READ) and len(outside) <= MAX_MEMBERS_READ, read


class Boxless:
    def predict(self, batch):
        return []


def test_a_model_without_the_two_methods_or_with_a_bad_concurrency_is_a_clear_error_an_adapter_is_wrapped() -> None:
    with pytest.raises(TypeError, match="model 'boxless' .Boxless. is not a detector: it has no set_task"):
        hosted(Boxless(), ModelSpec.parse("boxless"), "cpu", "float32")

    class Built(Adapter):
        name = "built"

        def predict(self, batch):
            return []

    crowded = Counting()
    crowded.concurrency = "4"
    with pytest.raises(TypeError, match="model 'crowded': concurrency must be a whole number of at least 1, not '4'"):
        hosted(crowded, ModelSpec.parse("crowded"), "cpu", "float32")

    built = Built()
    model = hosted(built, ModelSpec.parse("built"), "cpu", "float32")
    assert isinstance(model, Model) and model.detector is built and model.entry == Built.entry()
    assert isinstance(built, Detector) and model.info == built.info == ModelInfo("built", None, None, {}, False)


class Counting:
    """Two methods and two capabilities: it grounds (a fixed box) and counts its calls per pair."""

    def __init__(self):
        self.calls = 0

    def set_task(self, task):
        self.classes = task.classes

    def predict(self, batch):
        self.calls += len(batch)
        return [Detections.empty() for _ in batch]

    def ground(self, batch, queries):
        return [GroundingAnswer((0.0, 0.0, 4.0, 4.0), "top-left") for _ in batch]

    def start_pair(self):
        self.calls = 0

    def pair_columns(self):
        return {"requests": self.calls}


def test_a_hosted_model_keeps_its_capabilities_and_its_answers_are_keyed_on_what_it_was_told() -> None:
    model = Counting()
    adapter = hosted(model, ModelSpec.parse("counting:v2").with_options({"size": "4"}), "cpu", "float32")
    assert adapter.info == ModelInfo("counting", "v2", None, {"size": "4"}, False)
    assert isinstance(model, Grounder) and isinstance(model, Accounted) and not isinstance(model, Prompted)
    item = ImageItem(Image.new("RGB", (8, 8)), 0, "0.jpg")
    adapter.start_pair()
    adapter.set_task(DetectionTask("a", ["cat", "dog"]))
    assert len(adapter.predict([item, item])) == 2 and adapter.pair_columns() == {"requests": 2}
    query = GroundingQuery("cat", "Where is the cat?", "Which quadrant?")
    assert adapter.ground([item], [query]) == [GroundingAnswer((0.0, 0.0, 4.0, 4.0), "top-left")]
    keys = {adapter.answer_key_parts(query), adapter.answer_key_parts()}
    for task in (DetectionTask("a", ["dog", "cat"]), DetectionTask("b", ["cat", "dog"]),
                 DetectionTask("a", ["cat", "dog"], prompt="instructions", instructions={"cat": "whiskers"})):
        adapter.set_task(task)
        keys.add(adapter.answer_key_parts())
    assert len(keys) == 5  # the question, and each task: its classes' order, dataset and instructions count
