"""LLaVA-1.5, LLaVA-1.6 (NeXT) and LLaVA-OneVision adapters: tiny models end to end, then
scripted answers through the real processor and tokenizer to check prompts, labels, what
the model is shown, and the padded-square coordinate frame on non-square images."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from rf100vl_hf.uouo.prompts import box_prompt, quadrant_prompt

from pytest_rf100vl.adapters.base import DetectionTask, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.llava import LlavaFamilyAdapter, expand2square
from pytest_rf100vl.adapters.registry import create

from tests.adapters.text_models import WIDE, check_end_to_end, image_item, script

FAMILIES = ["llava", "llava-next", "llava-onevision"]


@pytest.fixture(scope="module", params=FAMILIES)
def llava(request: pytest.FixtureRequest) -> LlavaFamilyAdapter:
    adapter = create(f"{request.param}:tiny", max_new_tokens=4)
    assert isinstance(adapter, LlavaFamilyAdapter)
    return adapter


def solid(size: tuple[int, int], colour: tuple[int, int, int] = (255, 0, 0)) -> ImageItem:
    return ImageItem(Image.new("RGB", size, colour), image_id=0, file_name="0.jpg")


@pytest.mark.filterwarnings("ignore:.*is not a class of")
def test_tiny_model_end_to_end(llava: LlavaFamilyAdapter) -> None:
    check_end_to_end(llava, {"box", "quadrant"})
    described = llava.describe()
    assert described["smoke"] is True and described["revision"].startswith("xxh3:")
    assert described["answers"]["answers"] == 2 + 2


# The convention, worked by hand: a 200x100 image sits on a 200x200 square 50 px below its
# top edge, so the fractions [0.1, 0.3, 0.5, 0.7] are x 20..100 and y 60-50..140-50 = 10..90.
# A 100x200 image sits 50 px right of the left edge: [0.3, 0.1, 0.7, 0.5] is x 10..90, y 20..100.
# A 200x101 image leaves 99 rows of padding, 49 above (rounded down, as expand2square pastes):
# [0.25, 0.5, 0.75, 0.745] is x 50..150, y 100-49..149-49 = 51..100.
FRAME_CASES = [
    ((200, 100), "[0.1, 0.3, 0.5, 0.7]", [20.0, 10.0, 100.0, 90.0]),
    ((100, 200), "[0.3, 0.1, 0.7, 0.5]", [10.0, 20.0, 90.0, 100.0]),
    ((200, 101), "[0.25, 0.5, 0.75, 0.745]", [50.0, 51.0, 150.0, 100.0]),
]


@pytest.mark.parametrize(("size", "answer", "expected"), FRAME_CASES)
def test_answers_are_fractions_of_the_padded_square(
    llava: LlavaFamilyAdapter,
    monkeypatch: pytest.MonkeyPatch,
    size: tuple[int, int],
    answer: str,
    expected: list[float],
) -> None:
    script(llava, monkeypatch, lambda prompt: f'[{{"bbox": {answer}, "label": "cat"}}]')
    llava.set_task(DetectionTask(dataset="d", classes=["cat"]))
    (found,) = llava.predict([solid(size)])
    np.testing.assert_allclose(found.boxes, [expected], atol=1e-6)
    assert found.labels.tolist() == [0] and found.scores.tolist() == [1.0]


def test_boxes_beyond_the_image_are_clipped_to_it(llava: LlavaFamilyAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    # on the 200x100 image, y fractions 0.1 and 0.9 are 20-50 and 180-50: above and below the image
    script(llava, monkeypatch, lambda prompt: '[{"bbox": [0.0, 0.1, 1.0, 0.9], "label": "cat"}]')
    llava.set_task(DetectionTask(dataset="d", classes=["cat"]))
    (found,) = llava.predict([solid((200, 100))])
    np.testing.assert_allclose(found.boxes, [[0.0, 0.0, 200.0, 100.0]])


def shown_to_model(adapter: LlavaFamilyAdapter, monkeypatch: pytest.MonkeyPatch, item: ImageItem) -> dict[str, Any]:
    """The tensors the model's ``generate`` receives for one image."""
    received: dict[str, Any] = {}

    def generate(input_ids: torch.Tensor, **kwargs: object) -> torch.Tensor:
        received.update(kwargs)
        return input_ids

    monkeypatch.setattr(adapter.transport.weights.model, "generate", generate)
    adapter.set_task(DetectionTask(dataset="d", classes=["cat"]))
    adapter.predict([item])
    return received


def test_llava_15_sees_the_image_centred_on_a_square_of_the_mean_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    """The frame the answers are read in is the input the model gets: a 200x100 red image on a
    200x200 square (not the processor's centre crop, which would keep a red 100x100 middle)."""
    adapter = create("llava:tiny")
    processor = adapter.transport.weights.processor.image_processor
    pixels = shown_to_model(adapter, monkeypatch, solid((200, 100)))["pixel_values"][0]
    mean, std = torch.tensor(processor.image_mean)[:, None, None], torch.tensor(processor.image_std)[:, None, None]
    rgb = ((pixels * std + mean) * 255).round()
    side = rgb.shape[-1]
    red = torch.tensor([255.0, 0.0, 0.0])
    mean_colour = torch.tensor([float(int(m * 255)) for m in processor.image_mean])
    # rows 0..1/4 and 3/4..1 of the square are padding, the middle half is the image, full width
    torch.testing.assert_close(rgb[:, side // 8, :].T, mean_colour.expand(side, 3), atol=1.0, rtol=0)
    torch.testing.assert_close(rgb[:, side - 1 - side // 8, :].T, mean_colour.expand(side, 3), atol=1.0, rtol=0)
    torch.testing.assert_close(rgb[:, side // 2, :].T, red.expand(side, 3), atol=1.0, rtol=0)


@pytest.mark.parametrize("name", ["llava-next", "llava-onevision"])
def test_tiling_models_get_the_image_itself(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """NeXT and OneVision tile the image at its own aspect ratio, as they were trained:
    nothing pads it to a square first."""
    received = shown_to_model(create(f"{name}:tiny"), monkeypatch, solid((200, 100)))
    assert received["image_sizes"].tolist() == [[100, 200]]  # (height, width) of the image given


def test_expand2square_centres_the_image() -> None:
    image = Image.fromarray(np.full((3, 6, 3), 200, dtype=np.uint8))
    square = np.asarray(expand2square(image, (1, 2, 3)))
    expected = np.empty((6, 6, 3), dtype=np.uint8)
    expected[:] = (1, 2, 3)
    expected[1:4] = 200  # (6 - 3) // 2 = 1 row above, 2 below
    np.testing.assert_array_equal(square, expected)
    assert expand2square(image.resize((6, 6)), (0, 0, 0)).size == (6, 6)


def test_labels_map_to_classes_and_unknown_ones_are_counted(
    llava: LlavaFamilyAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    labels = ["cat", "DOG.", "horse"]
    answer = "[" + ", ".join(f'{{"bbox": [0.1, 0.2, 0.3, 0.4], "label": "{label}"}}' for label in labels) + "]"
    script(llava, monkeypatch, lambda prompt: answer)
    llava.set_task(DetectionTask(dataset="pets", classes=["Cat", "dog"]))
    with pytest.warns(UserWarning, match="label 'horse' is not a class of 'pets'"):
        (found,) = llava.predict([image_item(WIDE)])
    assert found.labels.tolist() == [0, 1]
    assert llava.describe()["unknown_labels"] == {"horse": 1}


def test_prompts_reach_the_chat_template(llava: LlavaFamilyAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = script(llava, monkeypatch, lambda prompt: "[]")
    instructions = {"knot": "A dark, round area in the grain.", "crack": ""}
    task = DetectionTask("wood", ["knot", "crack"], prompt="instructions", instructions=instructions)
    llava.set_task(task)
    llava.predict([image_item(WIDE), image_item((64, 64), 1)])
    llava.set_task(DetectionTask("wood", ["knot", "crack"], instructions=instructions))
    llava.predict([image_item(WIDE)])
    assert len(seen) == 3
    assert all('categories: "knot", "crack".' in prompt and '"bbox": [x1, y1, x2, y2]' in prompt for prompt in seen)
    assert "- knot: A dark, round area in the grain." in seen[0] and "- crack:" not in seen[0]
    assert "round area" not in seen[2]
    # the user turn holds the image, then the prompt; the assistant's turn is opened
    user, assistant = ("USER:", "ASSISTANT:") if llava.name != "llava-onevision" else ("user\n", "assistant\n")
    assert all(user in prompt and prompt.rstrip().endswith(assistant.strip()) for prompt in seen)
    assert all(prompt.index("<image>") < prompt.index("Please provide") for prompt in seen)


def test_per_class_prompts_label_boxes_by_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = create("llava-onevision:tiny", per_class="true")
    seen = script(adapter, monkeypatch, lambda prompt: "[0.1, 0.1, 0.5, 0.5]")
    adapter.set_task(DetectionTask(dataset="d", classes=["cat", "dog"]))
    (found,) = adapter.predict([solid((100, 100))])
    assert [[name for name in ("cat", "dog") if f'"{name}"' in prompt] for prompt in seen] == [["cat"], ["dog"]]
    assert found.labels.tolist() == [0, 1]
    np.testing.assert_allclose(found.boxes, [[10.0, 10.0, 50.0, 50.0]] * 2)


def test_ground_reads_box_and_quadrant(llava: LlavaFamilyAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    # a 400x300 mosaic on a 400x400 square, 50 px down: [0.5, 0.5, 1.0, 0.8] is x 200..400, y 150..270
    def answer(prompt: str) -> str:
        return "[0.5, 0.5, 1.0, 0.8]" if "bounding box" in prompt else "Bottom right."

    seen = script(llava, monkeypatch, answer)
    query = GroundingQuery("resistor", box_prompt("resistor"), quadrant_prompt("resistor"))
    (result,) = llava.ground([image_item((400, 300))], [query])
    np.testing.assert_allclose(result.box, (200.0, 150.0, 400.0, 270.0))
    assert result.quadrant == "bottom-right"
    assert result.raw == {"box": "[0.5, 0.5, 1.0, 0.8]", "quadrant": "Bottom right."}
    assert query.box_prompt in seen[0] and query.quadrant_prompt in seen[1]


def test_bad_options_and_modes_are_refused(llava: LlavaFamilyAdapter) -> None:
    with pytest.raises(TypeError, match="unknown option"):
        create("llava:tiny", temperature=0.7)
    with pytest.raises(ValueError, match="prompt mode 'fewshot'"):
        llava.set_task(DetectionTask(dataset="d", classes=["cat"], prompt="fewshot"))


def test_answer_key_parts_are_the_prompts_sent(llava: LlavaFamilyAdapter) -> None:
    llava.set_task(DetectionTask("d", ["cat", "dog"], prompt="instructions", instructions={"cat": "Whole body."}))
    parts = llava.answer_key_parts()
    assert parts[:4] == ("rf100vl", "2 classes", "cat", "dog") and len(parts) == 5
    assert '"cat", "dog"' in parts[4] and "Whole body." in parts[4]
    query = GroundingQuery("cat", box_prompt("cat"), quadrant_prompt("cat"))
    assert llava.answer_key_parts(query) == ("uouo", "cat", box_prompt("cat"), quadrant_prompt("cat"))
