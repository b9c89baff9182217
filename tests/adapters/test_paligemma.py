"""PaliGemma adapter: the tiny model end to end, then scripted answers through the real
processor and tokenizer (``y``-first location tokens over 1024 bins, non-square image)."""

from __future__ import annotations

import numpy as np
import pytest

from rf100vl_hf.uouo.prompts import box_prompt, quadrant_prompt

from pytest_rf100vl.adapters.base import DetectionTask, GroundingQuery
from pytest_rf100vl.adapters.paligemma import PaliGemmaAdapter
from pytest_rf100vl.adapters.registry import create

from tests.adapters.text_models import WIDE, check_end_to_end, image_item, script


@pytest.fixture(scope="module")
def paligemma() -> PaliGemmaAdapter:
    adapter = create("paligemma:tiny", max_new_tokens=4)
    assert isinstance(adapter, PaliGemmaAdapter)
    return adapter


def prompt_of(seen: str) -> str:
    """The text after the image tokens and ``<bos>``, as the model received it."""
    return seen.rsplit("<bos>", 1)[1].strip()


@pytest.mark.filterwarnings("ignore:.*is not a class of")
def test_tiny_model_end_to_end(paligemma: PaliGemmaAdapter) -> None:
    check_end_to_end(paligemma, {"box", "quadrant"})
    assert paligemma.describe()["smoke"] is True


def test_location_tokens_are_y_first_over_1024_bins(
    paligemma: PaliGemmaAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = (
        "<loc0128><loc0256><loc0512><loc0768> cat ; <loc0000><loc0000><loc1023><loc1023> dog ; <loc0001><loc0002> cat"
    )
    seen = script(paligemma, monkeypatch, lambda prompt: answer)
    paligemma.set_task(DetectionTask(dataset="d", classes=["cat", "dog"]))
    (found,) = paligemma.predict([image_item(WIDE)])
    # y1 = 128/1024 of 200 px, x1 = 256/1024 of 300 px...; the three-token group is rejected
    np.testing.assert_allclose(found.boxes, [[75.0, 25.0, 225.0, 100.0], [0.0, 0.0, 299.70703125, 199.8046875]])
    assert found.labels.tolist() == [0, 1]
    assert [prompt_of(text) for text in seen] == ["detect cat ; dog"]
    assert paligemma.describe()["answers"]["rejected_boxes"] >= 1


def test_per_class_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = create("paligemma:tiny", per_class=True)
    seen = script(adapter, monkeypatch, lambda prompt: "<loc0000><loc0000><loc0512><loc0512> anything")
    adapter.set_task(DetectionTask(dataset="d", classes=["cat", "dog"]))
    (found,) = adapter.predict([image_item(WIDE)])
    assert [prompt_of(text) for text in seen] == ["detect cat", "detect dog"]
    assert found.labels.tolist() == [0, 1]


def test_ground_uses_detect_and_answer_prefixes(paligemma: PaliGemmaAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(prompt: str) -> str:
        return "<loc0512><loc0000><loc1023><loc0511> resistor" if "detect" in prompt else "top left"

    seen = script(paligemma, monkeypatch, answer)
    query = GroundingQuery("resistor", box_prompt("resistor"), quadrant_prompt("resistor"))
    (result,) = paligemma.ground([image_item((800, 800))], [query])
    assert [prompt_of(text) for text in seen] == ["detect resistor", f"answer en {query.quadrant_prompt}"]
    np.testing.assert_allclose(result.box, [0.0, 400.0, 399.21875, 799.21875])
    assert result.quadrant == "top-left"
