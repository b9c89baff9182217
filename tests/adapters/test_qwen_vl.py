"""Qwen2.5-VL and Qwen3-VL adapters: tiny models end to end, then scripted answers through
the real processor and tokenizer to check prompts, labels and each coordinate space."""

from __future__ import annotations


import numpy as np
import pytest
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

from rf100vl_hf.uouo.prompts import box_prompt, quadrant_prompt

from pytest_rf100vl.adapters.base import DetectionTask, GroundingQuery
from pytest_rf100vl.adapters.registry import create
from pytest_rf100vl.adapters.vlm import TextAnswerAdapter
from tests.adapters.text_models import WIDE, check_end_to_end, image_item, script

@pytest.fixture(scope="module", params=["qwen2.5-vl", "qwen3-vl"])
def qwen(request: pytest.FixtureRequest) -> TextAnswerAdapter:
    adapter = create(f"{request.param}:tiny", max_new_tokens=4)
    assert isinstance(adapter, TextAnswerAdapter)
    return adapter


def native_box(adapter: TextAnswerAdapter, size: tuple[int, int], box: tuple[float, ...]) -> list[float]:
    """A pixel box of an image of ``size`` written in the model's own coordinates, computed
    with the reference resize (Qwen2.5-VL) or the 0..1000 convention (Qwen3-VL)."""
    width, height = size
    if adapter.name == "qwen3-vl":
        frame_w, frame_h = 1000, 1000
    else:
        processor = adapter.processor.image_processor
        frame_h, frame_w = smart_resize(
            height,
            width,
            factor=processor.patch_size * processor.merge_size,
            min_pixels=processor.size["shortest_edge"],
            max_pixels=processor.size["longest_edge"],
        )
    return [box[0] * frame_w / width, box[1] * frame_h / height, box[2] * frame_w / width, box[3] * frame_h / height]


@pytest.mark.filterwarnings("ignore:.*is not a class of")
def test_tiny_model_end_to_end(qwen: TextAnswerAdapter) -> None:
    check_end_to_end(qwen, {"box", "quadrant"})
    described = qwen.describe()
    assert described["smoke"] is True and described["revision"].startswith("xxh3:")
    assert described["answers"]["answers"] == 2 + 2


def test_boxes_come_back_in_pixels(qwen: TextAnswerAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    cat, dog = (75.0, 50.0, 225.0, 150.0), (3.0, 120.0, 60.0, 199.0)
    answer = (
        "```json\n[\n"
        f'  {{"bbox_2d": {native_box(qwen, WIDE, cat)}, "label": "cat"}},\n'
        f'  {{"bbox_2d": {native_box(qwen, WIDE, dog)}, "label": "dog"}}\n'
        "]\n```"
    )
    script(qwen, monkeypatch, lambda prompt: answer)
    qwen.set_task(DetectionTask(dataset="d", classes=["cat", "dog"]))
    (found,) = qwen.predict([image_item(WIDE)])
    np.testing.assert_allclose(found.boxes, [cat, dog], atol=1e-6)
    assert found.labels.tolist() == [0, 1] and found.scores.tolist() == [1.0, 1.0]


def test_labels_map_to_classes_and_unknown_ones_are_counted(
    qwen: TextAnswerAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    labels = ["cat", "DOG.", "B+", "b", "horse"]
    answer = "[" + ", ".join(f'{{"bbox_2d": [1, 1, 9, 9], "label": "{label}"}}' for label in labels) + "]"
    script(qwen, monkeypatch, lambda prompt: answer)
    qwen.set_task(DetectionTask(dataset="parts", classes=["Cat", "dog", "B+", "B-"]))
    with pytest.warns(UserWarning) as warned:
        (found,) = qwen.predict([image_item(WIDE)])
    assert [str(w.message).split(" is not")[0] for w in warned] == [
        f"{qwen.name}: label 'b'",
        f"{qwen.name}: label 'horse'",
    ]
    assert found.labels.tolist() == [0, 1, 2]
    assert qwen.describe()["unknown_labels"] == {"b": 1, "horse": 1}


def test_multi_class_prompt_names_every_class_once(qwen: TextAnswerAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = script(qwen, monkeypatch, lambda prompt: "[]")
    qwen.set_task(DetectionTask(dataset="d", classes=["black-pawn", "white king"]))
    qwen.predict([image_item(WIDE), image_item((64, 64), 1)])
    assert len(seen) == 2
    assert all('categories: "black-pawn", "white king".' in prompt and "bbox_2d" in prompt for prompt in seen)


def test_per_class_prompts_label_boxes_by_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = create("qwen3-vl:tiny", per_class="true")
    assert isinstance(adapter, TextAnswerAdapter) and adapter.per_class
    seen = script(adapter, monkeypatch, lambda prompt: '[{"bbox_2d": [100, 100, 500, 500], "label": "whatever"}]')
    adapter.set_task(DetectionTask(dataset="d", classes=["cat", "dog", "bird"]))
    (found,) = adapter.predict([image_item(WIDE)])
    classes = ["cat", "dog", "bird"]
    assert [[name for name in classes if f'"{name}"' in prompt] for prompt in seen] == [["cat"], ["dog"], ["bird"]]
    assert found.labels.tolist() == [0, 1, 2]


def test_instructions_mode_appends_each_classes_instructions(
    qwen: TextAnswerAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = script(qwen, monkeypatch, lambda prompt: "[]")
    instructions = {"knot": "A dark, round area in the grain. Box the whole knot.", "crack": ""}
    qwen.set_task(
        DetectionTask(dataset="wood", classes=["knot", "crack"], prompt="instructions", instructions=instructions)
    )
    qwen.predict([image_item(WIDE)])
    qwen.set_task(DetectionTask(dataset="wood", classes=["knot", "crack"], prompt="names", instructions=instructions))
    qwen.predict([image_item(WIDE)])
    assert "- knot: A dark, round area in the grain. Box the whole knot." in seen[0]
    assert "- crack:" not in seen[0]
    assert "round area" not in seen[1]


def test_ground_reads_box_and_quadrant(qwen: TextAnswerAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    size, target = (800, 800), (430.0, 412.0, 790.0, 700.0)
    box = native_box(qwen, size, target)

    def answer(prompt: str) -> str:
        if "bounding box" in prompt:
            return f"The resistor is at {box}."
        return "It is in the Bottom Right quadrant."

    seen = script(qwen, monkeypatch, answer)
    query = GroundingQuery("resistor", box_prompt("resistor"), quadrant_prompt("resistor"))
    (result,) = qwen.ground([image_item(size)], [query])
    np.testing.assert_allclose(result.box, target, atol=1e-6)
    assert result.quadrant == "bottom-right"
    assert result.raw == {"box": f"The resistor is at {box}.", "quadrant": "It is in the Bottom Right quadrant."}
    assert query.box_prompt in seen[0] and query.quadrant_prompt in seen[1]


def test_unanswerable_grounding_gives_none(qwen: TextAnswerAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    script(qwen, monkeypatch, lambda prompt: "I am not sure.")
    query = GroundingQuery("resistor", box_prompt("resistor"), quadrant_prompt("resistor"))
    (result,) = qwen.ground([image_item((800, 800))], [query])
    assert (result.box, result.quadrant) == (None, None)
    assert result.raw == {"box": "I am not sure.", "quadrant": "I am not sure."}


def test_bad_options_and_modes_are_refused(qwen: TextAnswerAdapter) -> None:
    with pytest.raises(TypeError, match="unknown option"):
        create("qwen2.5-vl:tiny", temperature=0.7)
    with pytest.raises(ValueError, match="prompt mode 'fewshot'"):
        qwen.set_task(DetectionTask(dataset="d", classes=["cat"], prompt="fewshot"))


def test_tiny_models_cap_generation_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """A smoke run of a random model generates TINY_MAX_NEW_TOKENS per answer, not the real default."""
    from pytest_rf100vl.adapters.vlm import TINY_MAX_NEW_TOKENS

    capped = create("qwen2.5-vl:tiny")
    asked: list[int] = []
    monkeypatch.setattr(capped.model, "generate", lambda input_ids, **kw: asked.append(kw["max_new_tokens"]) or input_ids)
    capped.set_task(DetectionTask("d", ["cat"]))
    capped.predict([image_item(WIDE)])
    assert asked == [TINY_MAX_NEW_TOKENS] and capped.describe()["max_new_tokens"] == TINY_MAX_NEW_TOKENS
    assert create("qwen2.5-vl:tiny", max_new_tokens="40").max_new_tokens == 40
    assert type(capped).option_defaults["max_new_tokens"] == 2048  # real checkpoints keep theirs


def test_answer_key_parts_are_the_prompts_sent(qwen: TextAnswerAdapter) -> None:
    qwen.set_task(DetectionTask("d", ["cat", "dog"], prompt="instructions", instructions={"cat": "Whole body."}))
    parts = qwen.answer_key_parts()
    assert parts[:4] == ("rf100vl", "2 classes", "cat", "dog") and len(parts) == 5
    assert '"cat", "dog"' in parts[4] and "Whole body." in parts[4]
    qwen.set_task(DetectionTask("d", ["cat", "dog"]))
    assert "Whole body." not in qwen.answer_key_parts()[4]
    query = GroundingQuery("cat", box_prompt("cat"), quadrant_prompt("cat"))
    assert qwen.answer_key_parts(query) == ("uouo", "cat", box_prompt("cat"), quadrant_prompt("cat"))
