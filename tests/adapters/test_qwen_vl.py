"""Qwen2.5-VL and Qwen3-VL adapters: tiny models end to end, then scripted answers through
the real processor and tokenizer to check prompts, labels and each coordinate space."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

from rf100vl_hf.uouo.prompts import box_prompt, quadrant_prompt

from pytest_rf100vl.adapters.base import DetectionTask, FewShotExample, GroundingQuery
from pytest_rf100vl.adapters.qwen_vl import QwenVLAdapter
from pytest_rf100vl.adapters.registry import create

from tests.adapters.text_models import WIDE, check_end_to_end, image_item, script

SYSTEM = "You are a helpful assistant capable of object detection."


def example(seed: int, boxes: list[list[float]], labels: list[int]) -> FewShotExample:
    pixels = np.random.default_rng(seed).integers(0, 255, (140, 280, 3), dtype=np.uint8)
    return FewShotExample(Image.fromarray(pixels), np.array(boxes), np.array(labels))


FEWSHOT = (
    example(10, [[28.0, 28.0, 140.0, 70.0]], [0]),
    example(20, [[0.0, 0.0, 56.0, 28.0]], [1]),
    example(30, [[14.0, 7.0, 42.0, 21.0]], [0]),
    example(40, [[1.0, 1.0, 2.0, 2.0]], [0]),
)
"""280x140 examples; the tiny Qwen2.5 processor (at most 16 patches of 28) shows them at 140x56:
beta = sqrt(39200 / 12544) = 1.77, 280 / 1.77 / 28 = 5.7 -> 5 patches, 140 / 1.77 / 28 = 2.8 -> 2."""
EXAMPLE_ANSWERS = {  # the three examples shown, in each model's numbers (truncated)
    "qwen2.5-vl": [("cat", [14, 11, 70, 28]), ("dog", [0, 0, 28, 11]), ("cat", [7, 2, 21, 8])],  # x / 2, y * 0.4
    "qwen3-vl": [("cat", [100, 200, 500, 500]), ("dog", [0, 0, 200, 200]), ("cat", [50, 50, 150, 150])],  # /280, /140
}

@pytest.fixture(scope="module", params=["qwen2.5-vl", "qwen3-vl"])
def qwen(request: pytest.FixtureRequest) -> QwenVLAdapter:
    adapter = create(f"{request.param}:tiny", max_new_tokens=4)
    assert isinstance(adapter, QwenVLAdapter)
    return adapter


def native_box(adapter: QwenVLAdapter, size: tuple[int, int], box: tuple[float, ...]) -> list[float]:
    """A pixel box of an image of ``size`` written in the model's own coordinates, computed
    with the reference resize (Qwen2.5-VL) or the 0..1000 convention (Qwen3-VL)."""
    width, height = size
    if adapter.name == "qwen3-vl":
        frame_w, frame_h = 1000, 1000
    else:
        processor = adapter.transport.weights.processor.image_processor
        frame_h, frame_w = smart_resize(
            height,
            width,
            factor=processor.patch_size * processor.merge_size,
            min_pixels=processor.size["shortest_edge"],
            max_pixels=processor.size["longest_edge"],
        )
    return [box[0] * frame_w / width, box[1] * frame_h / height, box[2] * frame_w / width, box[3] * frame_h / height]


@pytest.mark.filterwarnings("ignore:.*is not a class of")
def test_tiny_model_end_to_end(qwen: QwenVLAdapter) -> None:
    check_end_to_end(qwen, {"box", "quadrant"})
    described = qwen.describe()
    assert described["smoke"] is True and described["revision"].startswith("xxh3:")
    assert described["answers"]["answers"] == 2 + 2


def test_boxes_come_back_in_pixels(qwen: QwenVLAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
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
    qwen: QwenVLAdapter, monkeypatch: pytest.MonkeyPatch
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


def test_multi_class_prompt_names_every_class_once(qwen: QwenVLAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = script(qwen, monkeypatch, lambda prompt: "[]")
    qwen.set_task(DetectionTask(dataset="d", classes=["black-pawn", "white king"]))
    qwen.predict([image_item(WIDE), image_item((64, 64), 1)])
    assert len(seen) == 2
    assert all(prompt.replace("<|endoftext|>", "").startswith(  # the shorter prompt of a batch is padded on the left
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n<|vision_start|>") for prompt in seen)
    assert all(prompt.endswith("<|vision_end|>Locate all of the following objects: black-pawn, white king in the image "
                               "and output the coordinates in JSON format.<|im_end|>\n<|im_start|>assistant\n")
               for prompt in seen)


def test_per_class_prompts_label_boxes_by_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = create("qwen3-vl:tiny", per_class="true")
    assert isinstance(adapter, QwenVLAdapter) and adapter.per_class
    seen = script(adapter, monkeypatch, lambda prompt: '[{"bbox_2d": [100, 100, 500, 500], "label": "whatever"}]')
    adapter.set_task(DetectionTask(dataset="d", classes=["cat", "dog", "bird"]))
    (found,) = adapter.predict([image_item(WIDE)])
    classes = ["cat", "dog", "bird"]
    assert [[name for name in classes if f"objects: {name} in the image" in prompt] for prompt in seen] == [
        ["cat"], ["dog"], ["bird"]]
    assert all('format like {"bbox_2d":[x1,y1,x2,y2],"label":"class_name"}.' in prompt for prompt in seen)
    assert found.labels.tolist() == [0, 1, 2]


def test_instructions_mode_appends_each_classes_instructions(
    qwen: QwenVLAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = script(qwen, monkeypatch, lambda prompt: "[]")
    instructions = {"knot": "A dark, round area in the grain. Box the whole knot.", "crack": ""}
    qwen.set_task(
        DetectionTask(dataset="wood", classes=["knot", "crack"], prompt="instructions", instructions=instructions)
    )
    qwen.predict([image_item(WIDE)])
    qwen.set_task(DetectionTask(dataset="wood", classes=["knot", "crack"], prompt="names", instructions=instructions))
    qwen.predict([image_item(WIDE)])
    assert ("in JSON format.\n\nUse the following annotator instructions to improve detection accuracy:\n"
            "knot: A dark, round area in the grain. Box the whole knot.\n<|im_end|>") in seen[0]
    assert "crack:" not in seen[0]
    assert "round area" not in seen[1]


def test_ground_reads_box_and_quadrant(qwen: QwenVLAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
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


def test_unanswerable_grounding_gives_none(qwen: QwenVLAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    script(qwen, monkeypatch, lambda prompt: "I am not sure.")
    query = GroundingQuery("resistor", box_prompt("resistor"), quadrant_prompt("resistor"))
    (result,) = qwen.ground([image_item((800, 800))], [query])
    assert (result.box, result.quadrant) == (None, None)
    assert result.raw == {"box": "I am not sure.", "quadrant": "I am not sure."}


def test_bad_options_and_modes_are_refused(qwen: QwenVLAdapter) -> None:
    with pytest.raises(TypeError, match="unknown option"):
        create("qwen2.5-vl:tiny", temperature=0.7)
    with pytest.raises(ValueError, match="option prompt_style='poetic'"):
        create("qwen2.5-vl:tiny", prompt_style="poetic")
    with pytest.raises(ValueError, match="option fewshot_images=0"):
        create("qwen2.5-vl:tiny", fewshot_images="0")
    with pytest.raises(ValueError, match="the task has no few-shot examples"):
        qwen.set_task(DetectionTask(dataset="d", classes=["cat"], prompt="fewshot"))


def test_tiny_models_cap_generation_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """A smoke run of a random model generates TINY_MAX_NEW_TOKENS per answer, not the real default."""
    from pytest_rf100vl.adapters.vlm import TINY_MAX_NEW_TOKENS

    capped = create("qwen2.5-vl:tiny")
    asked: list[int] = []
    monkeypatch.setattr(capped.transport.weights.model, "generate", lambda input_ids, **kw: asked.append(kw["max_new_tokens"]) or input_ids)
    capped.set_task(DetectionTask("d", ["cat"]))
    capped.predict([image_item(WIDE)])
    assert asked == [TINY_MAX_NEW_TOKENS] and capped.describe()["max_new_tokens"] == TINY_MAX_NEW_TOKENS
    assert create("qwen2.5-vl:tiny", max_new_tokens="40").transport.max_new_tokens == 40
    assert type(capped).option_defaults["max_new_tokens"] == 2048  # real checkpoints keep theirs


def test_answer_key_parts_are_the_prompts_sent(qwen: QwenVLAdapter) -> None:
    qwen.set_task(DetectionTask("d", ["cat", "dog"], prompt="instructions", instructions={"cat": "Whole body."}))
    parts = qwen.answer_key_parts()
    assert parts[:5] == ("rf100vl", "2 classes", "cat", "dog", f"system:{SYSTEM}") and len(parts) == 6
    assert "objects: cat, dog in the image" in parts[5] and "cat: Whole body." in parts[5]
    qwen.set_task(DetectionTask("d", ["cat", "dog"]))
    assert "Whole body." not in qwen.answer_key_parts()[5]
    query = GroundingQuery("cat", box_prompt("cat"), quadrant_prompt("cat"))
    assert qwen.answer_key_parts(query) == ("uouo", "cat", box_prompt("cat"), quadrant_prompt("cat"))


def test_the_cookbook_style_asks_as_this_adapter_did_before(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = create("qwen3-vl:tiny", max_new_tokens=4, prompt_style="cookbook")
    seen = script(adapter, monkeypatch, lambda prompt: "[]")
    adapter.set_task(DetectionTask("wood", ["knot", "crack"], prompt="instructions", instructions={"knot": "Dark."}))
    adapter.predict([image_item(WIDE)])
    (prompt,) = seen
    assert prompt.startswith("<|im_start|>user\n<|vision_start|>")  # no system prompt
    assert prompt.endswith(
        '<|vision_end|>Locate every instance that belongs to the following categories: "knot", "crack". Report bbox '
        'coordinates in JSON format, as a list of {"bbox_2d": [x1, y1, x2, y2], "label": "<category>"}, using the '
        "category names exactly as given.\n\nThe annotators labelled these objects following these instructions:\n"
        "- knot: Dark.<|im_end|>\n<|im_start|>assistant\n")
    assert adapter.answer_key_parts()[4:] == (prompt.split("<|vision_end|>")[1].split("<|im_end|>")[0],)
    with pytest.raises(ValueError, match="prompt_style=cookbook has no few-shot prompt"):
        adapter.set_task(DetectionTask("wood", ["knot"], prompt="fewshot", fewshot=FEWSHOT))


def test_the_appendix_style_reaches_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local adapter sends the style it is given, not the paper's: Appendix A's single-class question."""
    adapter = create("qwen3-vl:tiny", max_new_tokens=4, prompt_style="appendix", per_class=True)
    seen = script(adapter, monkeypatch, lambda prompt: "[]")
    adapter.set_task(DetectionTask("wood", ["knot", "crack"]))
    adapter.predict([image_item(WIDE)])
    assert [prompt.split("<|vision_end|>")[1].split("<|im_end|>")[0] for prompt in seen] == [
        "Locate every knot in the image and output the coordinates in JSON format.",
        "Locate every crack in the image and output the coordinates in JSON format."]
    assert adapter.pair_columns()["prompt_style"] == "appendix"




@pytest.mark.parametrize("mode", ["fewshot", "instructions+fewshot"])
def test_fewshot_turns_reach_the_chat_template_with_their_images(
    qwen: QwenVLAdapter, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    cat = (75.0, 50.0, 225.0, 150.0)
    seen = script(qwen, monkeypatch, lambda prompt: f'[{{"bbox_2d": {native_box(qwen, WIDE, cat)}, "label": "cat"}}]')
    qwen.set_task(DetectionTask("pets", ["cat", "dog"], prompt=mode, instructions={"cat": "Whole body."},
                                fewshot=FEWSHOT))
    (found,) = qwen.predict([image_item(WIDE)])
    np.testing.assert_allclose(found.boxes, [cat], atol=1e-6)  # read in the frame of the image asked about
    (prompt,) = seen
    question = ("Locate all of the following objects: cat, dog (each of those is a separate class) in the image and "
                "output the coordinates in JSON format.")
    first = question + ("\n\nUse the following annotator instructions:\ncat: Whole body.\n" if "instr" in mode else "")
    answers = prompt.split("<|im_start|>assistant\n")[1:-1]
    assert prompt.count("<|vision_start|>") == 4 and prompt.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>")
    assert prompt.split("<|vision_end|>")[1].startswith(first + "<|im_end|>")
    assert [json.loads(answer.split("<|im_end|>")[0]) for answer in answers] == [  # three: the fourth is not shown
        [{"label": label, "bbox_2d": box}] for label, box in EXAMPLE_ANSWERS[qwen.name]]
    assert prompt.endswith("<|vision_end|>Locate all of the following objects: cat, dog in the image and output the "
                           "coordinates in JSON format.<|im_end|>\n<|im_start|>assistant\n")


def test_fewshot_images_and_example_pixels_are_part_of_the_answer_key(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = create("qwen3-vl:tiny", max_new_tokens=4, fewshot_images="2")
    seen = script(adapter, monkeypatch, lambda prompt: "[]")
    adapter.start_pair()
    adapter.set_task(DetectionTask("pets", ["cat", "dog"], prompt="fewshot", fewshot=FEWSHOT))
    adapter.predict([image_item(WIDE)])
    assert seen[0].count("<|vision_start|>") == 3
    parts = adapter.answer_key_parts()
    other = (FEWSHOT[0], example(99, [[0.0, 0.0, 56.0, 28.0]], [1]), *FEWSHOT[2:])
    adapter.set_task(DetectionTask("pets", ["cat", "dog"], prompt="fewshot", fewshot=other))
    assert adapter.answer_key_parts() != parts and sum(a != b for a, b in zip(parts, adapter.answer_key_parts())) == 1
    columns = adapter.pair_columns()
    assert columns["prompt_style"] == "paper" and columns["prompt_hash"].startswith("sha256:")
    adapter.start_pair()
    assert adapter.pair_columns()["prompt_hash"] is None  # a pair that set no task (UOUO)
