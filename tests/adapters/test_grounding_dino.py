"""Grounding DINO and MM Grounding DINO: captions, token spans and the tiny models end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from pytest_rf100vl.adapters import DetectionTask, ImageItem, create
from pytest_rf100vl.adapters.grounding_dino import build_captions, clean_description, clean_name, tiny_bert_tokenizer

from tests.adapters.reference import (
    ON_DEVICE,
    assert_same_detections,
    full_float32,
    on_device,
    reference_model,
    to_device,
)

CLASSES = ["Red Fox", "cat", "St. Bernard"]


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_bert_tokenizer()


@pytest.fixture(scope="module", params=["grounding-dino", "mm-grounding-dino"])
def dino(request: pytest.FixtureRequest):
    adapter = create(f"{request.param}:tiny")
    yield adapter
    adapter.close()


def noise_items(*sizes: tuple[int, int]) -> list[ImageItem]:
    rng = np.random.default_rng(1)
    return [
        ImageItem(Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)), i, f"{i}.png")
        for i, (w, h) in enumerate(sizes)
    ]


def span_texts(tokenizer, caption) -> list[str]:
    ids = tokenizer(caption.text)["input_ids"]
    return [tokenizer.decode(ids[start:end]) for start, end in caption.spans]


def test_tiny_tokenizer_has_the_ids_the_model_hard_codes(tokenizer) -> None:
    assert tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]", ".", "?"]) == [101, 102, 1012, 1029]


def test_spans_cover_multi_token_names(tokenizer) -> None:
    (caption,) = build_captions(CLASSES, tokenizer, 256)
    assert caption.text == "red fox . cat . st bernard ."
    assert caption.classes == (0, 1, 2)
    assert span_texts(tokenizer, caption) == ["red fox", "cat", "st bernard"]
    assert all(end - start > 1 for start, end in caption.spans)  # one token per character here


def test_long_class_lists_are_split_into_captions_that_fit(tokenizer) -> None:
    classes = [f"class {i}" for i in range(60)]
    captions = build_captions(classes, tokenizer, 64)
    assert len(captions) > 1
    assert all(c.num_tokens <= 64 and len(tokenizer(c.text)["input_ids"]) == c.num_tokens for c in captions)
    assert [i for c in captions for i in c.classes] == list(range(60))
    for caption in captions:
        assert span_texts(tokenizer, caption) == [classes[i] for i in caption.classes]


def test_a_name_longer_than_a_caption_is_cut_to_fit(tokenizer) -> None:
    (caption,) = build_captions(["x" * 100], tokenizer, 32)
    assert caption.num_tokens <= 32 and caption.text.startswith("xxxx")


def test_descriptions_share_the_room_the_names_leave(tokenizer) -> None:
    descriptions = {
        "cat": "Small felines. Often striped? Yes.",
        "Red Fox": "- **Orange** canids " + "with a bushy tail " * 20,
    }
    (caption,) = build_captions(CLASSES, tokenizer, 128, descriptions)
    assert caption.num_tokens <= 128
    assert "cat, small felines, often striped, yes ." in caption.text
    assert caption.text.startswith("red fox, orange canids with a bushy tail")
    assert caption.text.split(" . ")[0].split()[-1] in {"with", "a", "bushy", "tail"}  # cut between words
    assert span_texts(tokenizer, caption) == ["red fox", "cat", "st bernard"]  # names alone score a class
    assert caption.text.count(".") == 3  # descriptions add no phrase separators


def test_cleaning_removes_phrase_separators() -> None:
    assert clean_name("St. Bernard?") == "st bernard"
    assert clean_name("...") == "object"
    assert clean_description("## Round. *Red*? OK") == "round, red, ok"


def test_decode_maps_spans_to_classes_and_boxes_to_pixels(dino, tokenizer) -> None:
    dino.set_task(DetectionTask("toy", CLASSES))
    (caption,) = dino.captions
    logits = torch.full((1, 2, 256), -10.0)
    logits[0, 0, caption.spans[2][0] + 1] = 3.0  # second token of "st bernard"
    logits[0, 1, caption.spans[0][0]] = 1.0  # first token of "red fox"
    boxes = torch.tensor([[[0.5, 0.5, 0.5, 0.5], [0.25, 0.75, 0.5, 0.5]]])
    (detections,) = dino.detections([(logits, boxes)], [Image.new("RGB", (200, 100))])
    np.testing.assert_array_equal(detections.labels, [2, 0])
    np.testing.assert_allclose(detections.scores, torch.sigmoid(torch.tensor([3.0, 1.0])).numpy(), rtol=1e-6)
    np.testing.assert_allclose(detections.boxes, [[50, 25, 150, 75], [0, 50, 100, 100]], atol=1e-4)


@pytest.mark.parametrize("prompt", ["names", "instructions"])
def test_every_prompt_mode_gives_well_formed_detections(dino, prompt: str) -> None:
    dino.set_task(DetectionTask("toy", CLASSES, prompt=prompt, instructions={"cat": "Small felines. Striped."}))
    batch = noise_items((200, 100), (64, 160), (1, 1), (1, 300))
    out = dino.predict(batch)
    assert len(out) == len(batch)
    for detections in out:
        detections.check(len(CLASSES))
        assert len(detections.scores) > 0


def test_captions_that_do_not_fit_run_separately_and_merge(dino, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dino.model.config, "max_text_len", 8)  # [CLS] a b . c d . [SEP]: two names
    monkeypatch.setitem(dino.options, "box_threshold", -1.0)  # keep every query
    classes = ["ab", "cd", "ef"]
    dino.set_task(DetectionTask("toy", classes))
    assert [c.classes for c in dino.captions] == [(0, 1), (2,)]
    (detections,) = dino.predict(noise_items((80, 60)))
    queries = dino.model.config.num_queries
    assert len(detections.labels) == queries * len(dino.captions)
    for block, caption in enumerate(dino.captions):
        assert set(detections.labels[block * queries : (block + 1) * queries]) <= set(caption.classes)


def test_fewshot_mode_is_refused(dino) -> None:
    with pytest.raises(ValueError, match="does not support prompt mode 'fewshot'"):
        dino.set_task(DetectionTask("toy", CLASSES, prompt="fewshot"))


def test_runs_in_bfloat16() -> None:
    adapter = create("grounding-dino:tiny", dtype="bfloat16")
    adapter.set_task(DetectionTask("toy", CLASSES))
    (detections,) = adapter.predict(noise_items((90, 60)))
    detections.check(len(CLASSES))


@pytest.mark.parametrize("device", ON_DEVICE)
def test_preprocessing_on_device_gives_transformers_own_detections(dino, device: str) -> None:
    """Against transformers' own processor (PIL images, CPU) and the model's output: the
    boxes its post-processing keeps, and each box's class span scored from those logits."""
    adapter = on_device(dino, device)
    adapter.set_task(DetectionTask("toy", CLASSES))
    (caption,) = adapter.captions
    items = noise_items((300, 200), (130, 410), (60, 40))  # different sizes: the batch is padded
    images = [item.image for item in items]
    model, processor = reference_model(adapter)
    inputs = to_device(processor(images=images, text=[caption.text] * len(images), return_tensors="pt"),
                       model.device)
    with full_float32(), torch.inference_mode():
        outputs = model(**inputs)
        found = adapter.predict(items)
    kept = processor.post_process_grounded_object_detection(
        outputs, inputs["input_ids"], threshold=adapter.options["box_threshold"], text_threshold=0.0,
        target_sizes=[(image.height, image.width) for image in images],
    )
    scored = adapter.detections([(outputs.logits, outputs.pred_boxes)], images)
    expected = [
        {"boxes": result["boxes"].cpu().numpy(), "scores": span.scores, "labels": span.labels}
        for result, span in zip(kept, scored)
    ]
    assert_same_detections(found, expected)
