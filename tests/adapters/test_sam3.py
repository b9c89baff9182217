"""SAM 3 on its tiny random model: boxes and scores as transformers' own path gives them, visual
exemplars as SAM 3 encodes them, the score threshold and per-image cap honoured and recorded."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import AutoProcessor, Sam3Model

from pytest_rf100vl.adapters import DetectionTask, FewShotExample, ImageItem, create
from pytest_rf100vl.adapters.sam3 import Sam3Adapter

from tests.adapters.reference import ON_DEVICE, assert_same_detections, full_float32, on_device, to_device

CLASSES = ["cat", "red fox", "dog"]
QUERIES = 20  # the tiny model's


def noise_items(*sizes: tuple[int, int], seed: int = 0) -> list[ImageItem]:
    rng = np.random.default_rng(seed)
    return [
        ImageItem(Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)), i, f"{i}.jpg")
        for i, (w, h) in enumerate(sizes)
    ]


@pytest.fixture(scope="module")
def sam3():
    adapter = create("sam3:tiny")
    yield adapter
    adapter.close()


def full_model(adapter: Sam3Adapter) -> tuple[Sam3Model, object]:
    """transformers' own model (its mask decoder included) and processor, from the adapter's checkpoint."""
    model = Sam3Model.from_pretrained(adapter.source).to(adapter.torch_device).eval()
    return model, AutoProcessor.from_pretrained(adapter.source)


def reference(adapter: Sam3Adapter, images: list[Image.Image], boxes: dict[int, list] | None = None) -> list[dict]:
    """Per image, transformers' own detections: per class the processor on the PIL image (with
    that class's exemplar ``boxes`` on it, when given), the full forward, and the processor's
    ``post_process_object_detection`` at the adapter's threshold, every class together."""
    model, processor = full_model(adapter)
    per_image: list[dict[str, list]] = [{"boxes": [], "scores": [], "labels": []} for _ in images]
    for label, name in enumerate(adapter.task.classes):
        for image, gathered in zip(images, per_image):
            prompt = {}
            if boxes and label in boxes:
                prompt = {"input_boxes": [boxes[label]], "input_boxes_labels": [[1] * len(boxes[label])]}
            inputs = processor(images=image, text=name, return_tensors="pt", **prompt)
            inputs = to_device({key: value for key, value in inputs.items() if key != "original_sizes"}, model.device)
            with full_float32(), torch.inference_mode():
                outputs = model(**inputs)
            (result,) = processor.post_process_object_detection(
                outputs, threshold=adapter.options["score_threshold"], target_sizes=[(image.height, image.width)])
            gathered["boxes"].append(result["boxes"].cpu().numpy())
            gathered["scores"].append(result["scores"].cpu().numpy())
            gathered["labels"].append(np.full(len(result["scores"]), label))
    return [{key: np.concatenate(values) for key, values in gathered.items()} for gathered in per_image]


def fewshot_task(example: FewShotExample, classes: list[str] = CLASSES) -> DetectionTask:
    return DetectionTask("toy", classes, prompt="fewshot", fewshot=(example,))


EXEMPLARS = {0: [[10.0, 12.0, 60.0, 50.0], [70.0, 20.0, 110.0, 70.0]], 1: [[5.0, 40.0, 40.0, 90.0]]}


def example_on(image: Image.Image) -> FewShotExample:
    """Boxes of classes 0 and 1 on ``image`` (class 2 has none)."""
    labels = [label for label, boxes in EXEMPLARS.items() for _ in boxes]
    return FewShotExample(image, np.array([box for boxes in EXEMPLARS.values() for box in boxes]), np.array(labels))


@pytest.mark.parametrize("device", ON_DEVICE)
def test_names_give_transformers_own_detections_on_non_square_images(sam3, device: str) -> None:
    """The vision encoder once per image, its features reused by every class's prompt, without
    the mask decoder, and post-processed over the whole batch: the same boxes and scores as the
    processor, the full forward per (image, class) and the processor's post-processing."""
    adapter = on_device(sam3, device)
    adapter.set_task(DetectionTask("toy", CLASSES))
    items = noise_items((300, 200), (130, 410), (64, 48))
    with full_float32():
        found = adapter.predict(items)
    assert_same_detections(found, reference(adapter, [item.image for item in items]))
    assert all(len(detections.scores) == QUERIES * len(CLASSES) for detections in found)  # threshold 0: every query


def test_exemplars_on_the_scored_image_are_sam3s_own_text_and_box_prompt(sam3) -> None:
    """Exemplar tokens made on their own image and appended to the class's text tokens are, when
    that image is the one scored, exactly what SAM 3 computes from text and boxes on it; a
    class without exemplars keeps its text prompt alone."""
    (item,) = noise_items((160, 120))
    with pytest.warns(UserWarning, match=r"no few-shot box for \['dog'\]"):
        sam3.set_task(fewshot_task(example_on(item.image)))
    (found,) = sam3.predict([item])
    assert sam3.pair_columns()["fewshot_exemplars"] == 3
    assert_same_detections([found], reference(sam3, [item.image], EXEMPLARS))

    sam3.set_task(DetectionTask("toy", CLASSES))
    (names,) = sam3.predict([item])
    for label in (0, 1):  # the exemplars changed these classes' scores...
        assert not np.allclose(found.scores[found.labels == label], names.scores[names.labels == label], atol=1e-4)
    # ...and not the third's
    np.testing.assert_allclose(found.scores[found.labels == 2], names.scores[names.labels == 2], atol=1e-6)
    np.testing.assert_allclose(found.boxes[found.labels == 2], names.boxes[names.labels == 2], atol=1e-4)


def test_exemplars_from_another_image_are_encoded_on_that_image(sam3) -> None:
    """The same boxes on two different few-shot images give two different prompts: the
    exemplars' features come from the image they were drawn on, not from the scored one."""
    scored, first, second = noise_items((160, 120), (160, 120), (160, 120), seed=3)
    answers = []
    for source in (first, second):
        with pytest.warns(UserWarning, match="dog"):
            sam3.set_task(fewshot_task(example_on(source.image)))
        answers.append(sam3.predict([scored])[0])
    one, two = answers
    assert not np.allclose(one.scores[one.labels == 0], two.scores[two.labels == 0], atol=1e-4)
    np.testing.assert_allclose(one.scores[one.labels == 2], two.scores[two.labels == 2], atol=1e-6)


@pytest.mark.parametrize("prompt", ["names", "fewshot", "instructions", "instructions+fewshot"])
def test_every_prompt_mode_runs_or_is_refused_with_the_reason(sam3, prompt: str) -> None:
    (item,) = noise_items((90, 60))
    task = DetectionTask("toy", CLASSES[:2], prompt=prompt, instructions={"cat": "A small feline. Box the body."},
                         fewshot=(example_on(item.image),))
    if "instructions" in prompt:
        with pytest.raises(ValueError, match="short noun phrases.*use prompt mode names or fewshot"):
            sam3.set_task(task)
        return
    sam3.set_task(task)
    (detections,) = sam3.predict([item])
    detections.check(2)
    assert sorted(set(detections.labels.tolist())) == [0, 1]


def test_the_score_threshold_is_honoured_and_recorded() -> None:
    default, strict = create("sam3:tiny"), create("sam3:tiny", score_threshold="0.3")  # as given on a command line
    items = noise_items((200, 100), (100, 200))
    for adapter in (default, strict):
        adapter.set_task(DetectionTask("toy", CLASSES))
    everything, kept = default.predict(items), strict.predict(items)
    assert default.pair_columns()["score_threshold"] == 0.0 and strict.pair_columns()["score_threshold"] == 0.3
    for before, after in zip(everything, kept):
        assert 0 < len(after.scores) < len(before.scores)  # the tiny model's scores straddle 0.3
        above = before.scores > 0.3
        np.testing.assert_allclose(np.sort(after.scores), np.sort(before.scores[above]), atol=1e-6)


def test_the_per_image_cap_keeps_each_images_best_boxes_over_all_classes() -> None:
    full, capped = create("sam3:tiny"), create("sam3:tiny", max_detections=7)
    items = noise_items((200, 100), (100, 200))
    for adapter in (full, capped):
        adapter.set_task(DetectionTask("toy", CLASSES))
    for before, after in zip(full.predict(items), capped.predict(items)):
        assert len(before.scores) == QUERIES * len(CLASSES) and len(after.scores) == 7
        best = np.argsort(-before.scores, kind="stable")[:7]
        np.testing.assert_allclose(np.sort(after.scores), np.sort(before.scores[best]), atol=1e-6)
        np.testing.assert_allclose(after.boxes, before.boxes[np.sort(best)], atol=1e-4)  # in their own order
        np.testing.assert_array_equal(after.labels, before.labels[np.sort(best)])
    assert capped.pair_columns()["max_detections"] == 7 and full.pair_columns()["max_detections"] == 500


def test_a_fewshot_label_outside_the_classes_is_an_error(sam3) -> None:
    (item,) = noise_items((90, 60))
    example = FewShotExample(item.image, np.array([[1.0, 1.0, 20.0, 20.0]]), np.array([3]))
    with pytest.raises(ValueError, match=r"labels \[3\]; expected one label in 0..2 per box"):
        sam3.set_task(fewshot_task(example))


@pytest.mark.parametrize("option", ["max_detections", "prompts_per_forward"])
def test_a_count_below_one_is_refused_before_loading(option: str) -> None:
    with pytest.raises(ValueError, match=f"option {option} must be at least 1, not 0"):
        create("sam3:tiny", **{option: 0})


def test_the_image_is_encoded_once_for_all_its_prompts(sam3, monkeypatch: pytest.MonkeyPatch) -> None:
    """One vision-encoder call per batch; the (image, class) pairs go through the DETR in calls of
    ``prompts_per_forward`` pairs, and how they are split changes no answer."""
    sam3.set_task(DetectionTask("toy", CLASSES))
    items = noise_items((120, 90), (90, 120))
    whole = sam3.predict(items)
    calls = {"vision": 0, "detr": 0}
    vision, detr = sam3.model.vision_encoder.forward, sam3.model.detr_encoder.forward

    def count(name, forward):
        def counted(*args, **kwargs):
            calls[name] += 1
            return forward(*args, **kwargs)
        return counted

    monkeypatch.setattr(sam3.model.vision_encoder, "forward", count("vision", vision))
    monkeypatch.setattr(sam3.model.detr_encoder, "forward", count("detr", detr))
    monkeypatch.setitem(sam3.options, "prompts_per_forward", 4)
    split = sam3.predict(items)
    assert calls == {"vision": 1, "detr": 2}  # 6 pairs in calls of 4
    for one, two in zip(whole, split):
        np.testing.assert_allclose(one.scores, two.scores, atol=1e-6)
        np.testing.assert_allclose(one.boxes, two.boxes, atol=1e-4)
        np.testing.assert_array_equal(one.labels, two.labels)


def test_runs_in_bfloat16() -> None:
    adapter = create("sam3:tiny", dtype="bfloat16")
    assert adapter.model.dtype == torch.bfloat16
    (item,) = noise_items((90, 60))
    with pytest.warns(UserWarning, match="dog"):
        adapter.set_task(fewshot_task(example_on(item.image)))
    (detections,) = adapter.predict([item])
    detections.check(len(CLASSES))
    assert detections.scores.dtype == np.float64 and len(detections.scores) == QUERIES * len(CLASSES)


def test_answer_key_parts_follow_what_the_model_is_sent(sam3) -> None:
    first, second = noise_items((90, 60), (90, 60), seed=5)
    sam3.set_task(DetectionTask("toy", CLASSES))
    names = sam3.answer_key_parts()
    keys = []
    for source in (first, second):
        with pytest.warns(UserWarning, match="dog"):
            sam3.set_task(fewshot_task(example_on(source.image)))
        keys.append(sam3.answer_key_parts())
    assert names[-len(CLASSES):] == tuple(CLASSES)
    assert keys[0][:len(names)] == names and len(keys[0]) == len(names) + 1
    assert keys[0] != keys[1]  # other exemplar pixels, another prompt
