"""Florence-2 adapter: the tiny model end to end, then scripted answers through the real
processor and tokenizer, with the processor's own post-processing as the reference."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from rf100vl_hf.uouo.prompts import box_prompt, quadrant_prompt

from pytest_rf100vl.adapters.base import DetectionTask, GroundingQuery
from pytest_rf100vl.adapters.florence2 import GROUNDING, OPEN_VOCABULARY, Florence2Adapter
from pytest_rf100vl.adapters.registry import create

from tests.adapters.text_models import WIDE, check_end_to_end, image_item


@pytest.fixture(scope="module")
def florence() -> Florence2Adapter:
    adapter = create("florence-2:tiny", max_new_tokens=4)
    assert isinstance(adapter, Florence2Adapter)
    return adapter


def script(adapter: Florence2Adapter, monkeypatch: pytest.MonkeyPatch, answer: Callable[[str], str]) -> list[str]:
    """Make the decoder "write" ``</s><s>`` + ``answer(prompt)`` + ``</s>`` for each prompt of
    a batch, as Florence-2's decoder does. Returns the prompts the encoder got."""
    tokenizer = adapter.transport.weights.processor.tokenizer
    seen: list[str] = []

    def generate(input_ids: torch.Tensor, **kwargs: object) -> torch.Tensor:
        rows = []
        for ids in input_ids:
            seen.append(tokenizer.decode(ids, skip_special_tokens=True))
            text = answer(seen[-1])
            rows.append(
                [
                    tokenizer.eos_token_id,
                    tokenizer.bos_token_id,
                    *tokenizer.encode(text, add_special_tokens=False),
                    tokenizer.eos_token_id,
                ]
            )
        width = max(map(len, rows))
        return torch.tensor([row + [tokenizer.pad_token_id] * (width - len(row)) for row in rows], dtype=torch.long)

    monkeypatch.setattr(adapter.transport.weights.model, "generate", generate)
    return seen


@pytest.mark.filterwarnings("ignore:.*is not a class of")
def test_tiny_model_end_to_end(florence: Florence2Adapter) -> None:
    answers = check_end_to_end(florence, {"box"})
    assert all(answer.quadrant is None for answer in answers)
    assert florence.describe()["smoke"] is True


def test_boxes_match_the_processors_post_processing(
    florence: Florence2Adapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = (
        "cat<loc_249><loc_249><loc_749><loc_749><loc_10><loc_500><loc_20><loc_990>dog<loc_0><loc_0><loc_999><loc_999>"
    )
    seen = script(florence, monkeypatch, lambda prompt: answer)
    florence.set_task(DetectionTask(dataset="d", classes=["cat", "dog"]))
    (found,) = florence.predict([image_item(WIDE)])
    reference = florence.transport.weights.processor.post_process_generation(f"</s><s>{answer}</s>", task=GROUNDING, image_size=WIDE)[
        GROUNDING
    ]
    assert reference["labels"] == ["cat", "cat", "dog"]
    np.testing.assert_allclose(found.boxes, reference["bboxes"], atol=1.0)  # the processor rounds down to whole pixels
    np.testing.assert_allclose(found.boxes[0], [74.85, 49.9, 224.85, 149.9])  # bin centres, x over 300, y over 200
    assert found.labels.tolist() == [0, 0, 1]
    assert seen == ["Locate the phrases in the caption: cat. dog"]


def test_per_class_uses_open_vocabulary_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = create("florence-2:tiny", per_class=True)
    seen = script(adapter, monkeypatch, lambda prompt: "thing<loc_100><loc_100><loc_200><loc_200>")
    adapter.set_task(DetectionTask(dataset="d", classes=["cat", "dog"]))
    (found,) = adapter.predict([image_item(WIDE)])
    assert seen == ["Locate cat in the image.", "Locate dog in the image."]
    assert found.labels.tolist() == [0, 1]


def test_ground_asks_open_vocabulary_detection_of_the_target(
    florence: Florence2Adapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = script(florence, monkeypatch, lambda prompt: "resistor<loc_500><loc_0><loc_999><loc_499>")
    query = GroundingQuery("resistor", box_prompt("resistor"), quadrant_prompt("resistor"))
    (result,) = florence.ground([image_item((800, 800))], [query])
    assert seen == ["Locate resistor in the image."]
    np.testing.assert_allclose(result.box, [400.4, 0.4, 799.6, 399.6])
    assert result.quadrant is None  # no question answering: the scorer reads the box centre
    assert florence.prompter.box_prompt(query) == OPEN_VOCABULARY + "resistor"


def test_instructions_mode_is_refused(florence: Florence2Adapter) -> None:
    with pytest.raises(ValueError, match="prompt mode 'instructions'"):
        florence.set_task(DetectionTask(dataset="d", classes=["cat"], prompt="instructions"))


def test_pixels_resized_on_the_model_device_equal_the_processors_own(
    florence: Florence2Adapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pixels the model gets (the processor run on image tensors on the model's device) are
    those of the processor on the PIL images."""
    images = [image_item(WIDE).image, image_item((48, 80)).image]
    sent: dict[str, torch.Tensor] = {}

    def generate(**inputs: torch.Tensor) -> torch.Tensor:
        sent.update(inputs)
        return torch.full((len(images), 2), florence.transport.weights.processor.tokenizer.eos_token_id)

    monkeypatch.setattr(florence.transport.weights.model, "generate", generate)
    florence.transport.generate(images, [GROUNDING + "cat"] * 2)
    own = florence.transport.weights.processor(text=[GROUNDING + "cat"] * 2, images=images, padding=True, return_tensors="pt")
    torch.testing.assert_close(sent["pixel_values"].cpu(), own["pixel_values"], atol=1e-5, rtol=0)
    torch.testing.assert_close(sent["input_ids"].cpu(), own["input_ids"])
