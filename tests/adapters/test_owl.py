"""OWLv2 and OWL-ViT adapters on their tiny random models, loaded with from_pretrained(path)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from PIL import Image

from pytest_rf100vl.adapters import DetectionTask, FewShotExample, GroundingQuery, ImageItem, create
from pytest_rf100vl.adapters.owl import instruction_query

from tests.adapters.reference import (
    ON_DEVICE,
    assert_same_detections,
    full_float32,
    host,
    on_device,
    reference_model,
    to_device,
)

CLASSES = ["cat", "red fox", "dog"]
INSTRUCTIONS = {"cat": "- **Small** felines, often striped. Box the whole body.", "red fox": "Foxes are orange canids."}


def noise_items(*sizes: tuple[int, int]) -> list[ImageItem]:
    rng = np.random.default_rng(0)
    return [
        ImageItem(Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)), i, f"{i}.jpg")
        for i, (w, h) in enumerate(sizes)
    ]


@pytest.fixture(scope="module", params=["owlv2", "owlvit"])
def owl(request: pytest.FixtureRequest):
    adapter = create(f"{request.param}:tiny")
    yield adapter
    adapter.close()


def fewshot_task(prompt: str = "fewshot") -> DetectionTask:
    (item,) = noise_items((120, 80))
    example = FewShotExample(
        item.image, np.array([[10.0, 10.0, 60.0, 50.0], [70.0, 20.0, 110.0, 70.0]]), np.array([0, 1])
    )
    return DetectionTask("toy", CLASSES, prompt=prompt, instructions=INSTRUCTIONS, fewshot=(example,))


@pytest.mark.parametrize("prompt", ["names", "instructions", "fewshot"])
def test_every_prompt_mode_gives_well_formed_detections(owl, prompt: str) -> None:
    # "dog" has neither a description nor a few-shot box: those modes fall back to its name
    fallback = pytest.warns(UserWarning, match="dog") if prompt != "names" else contextlib.nullcontext()
    with fallback:
        owl.set_task(fewshot_task(prompt))
    batch = noise_items((200, 100), (64, 160))
    out = owl.predict(batch)
    assert len(out) == len(batch)
    for detections in out:
        detections.check(len(CLASSES))
        assert len(detections.scores) > 0
        assert np.all(detections.scores > owl.options["score_threshold"])


@pytest.mark.parametrize("size", [(1, 1), (1, 300), (300, 1)])
def test_degenerate_images_do_not_crash(owl, size: tuple[int, int]) -> None:
    owl.set_task(DetectionTask("toy", CLASSES))
    (detections,) = owl.predict(noise_items(size))
    detections.check(len(CLASSES))


@pytest.mark.parametrize("spec", ["owlv2:tiny", "owlvit:tiny"])
def test_boxes_are_in_pixels_of_the_original_image(spec: str) -> None:
    """With the box head zeroed, each patch predicts its own grid cell (the model's box
    bias), so every box is at a known place: OWLv2 pads to a square (scale by the longer
    side), OWL-ViT stretches (scale by width and height)."""
    adapter = create(spec, score_threshold=-1.0, nms_iou=1.0)  # keep every box
    head = adapter.model.box_head.dense2
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    adapter.set_task(DetectionTask("toy", ["cat"]))
    width, height = 200, 100
    (detections,) = adapter.predict(noise_items((width, height)))
    cells = adapter.model.config.vision_config.image_size // adapter.model.config.vision_config.patch_size
    sx, sy = (max(width, height),) * 2 if spec.startswith("owlv2") else (width, height)
    centers = np.arange(1, cells + 1) / cells
    expected = np.array(
        [
            [(cx - 0.5 / cells) * sx, (cy - 0.5 / cells) * sy, (cx + 0.5 / cells) * sx, (cy + 0.5 / cells) * sy]
            for cy in centers
            for cx in centers
        ]
    )
    assert len(detections.boxes) == cells * cells
    order = np.lexsort((detections.boxes[:, 0], detections.boxes[:, 1]))
    np.testing.assert_allclose(detections.boxes[order], expected, atol=0.1)


def test_text_queries_are_embedded_once_per_dataset(owl, monkeypatch: pytest.MonkeyPatch) -> None:
    owl.set_task(DetectionTask("toy", CLASSES))
    assert owl.queries.shape[0] == len(CLASSES)

    def refuse(*args, **kwargs):
        raise AssertionError("text tower ran during predict")

    monkeypatch.setattr(owl.model.base_model, "get_text_features", refuse)
    owl.predict(noise_items((50, 40)))


def test_instruction_queries_lead_with_the_name_and_fit_the_text_tower(owl) -> None:
    assert instruction_query("cat", INSTRUCTIONS["cat"]) == "cat: Small felines, often striped."
    assert instruction_query("red fox", "Red fox pups. More.") == "Red fox pups."
    assert instruction_query("dog", "") == ""
    query = instruction_query("cat", "A " + "very " * 40 + "long description. Second.")
    tokens = owl.processor.tokenizer([query], truncation=True, max_length=16)["input_ids"][0]
    head = owl.processor.tokenizer(["cat:"], add_special_tokens=False)["input_ids"][0]
    assert len(tokens) == 16 and tokens[-1] == owl.processor.tokenizer.eos_token_id
    assert tokens[1 : 1 + len(head)] == head
    with pytest.warns(UserWarning, match="dog"):
        owl.set_task(DetectionTask("toy", CLASSES, prompt="instructions", instructions=INSTRUCTIONS))
    described = owl.queries.clone()
    owl.set_task(DetectionTask("toy", CLASSES))
    assert not torch.allclose(described[:2], owl.queries[:2])  # the descriptions were used
    torch.testing.assert_close(described[2], owl.queries[2])  # "dog" fell back to its name


def test_fewshot_query_is_the_embedding_of_the_best_matching_box(owl) -> None:
    """A few-shot box placed exactly on a predicted box must select that box's embedding,
    which checks that few-shot boxes and predictions share one pixel frame."""
    (item,) = noise_items((120, 80))
    with torch.inference_mode():
        _, class_embeds, boxes = owl._image_tower(owl.inputs([item.image]))
        (predicted,) = owl.pixel_corners(boxes, [item.image])
    chosen = 5
    example = FewShotExample(
        item.image, predicted[chosen : chosen + 1].numpy().astype(np.float64), np.array([1])
    )
    with pytest.warns(UserWarning, match="no few-shot box"):
        owl.set_task(DetectionTask("toy", CLASSES, prompt="fewshot", fewshot=(example,)))
    expected = torch.nn.functional.normalize(class_embeds[0, chosen], dim=-1)
    torch.testing.assert_close(owl.queries[1].float(), expected.float())


def test_runs_in_bfloat16() -> None:
    adapter = create("owlv2:tiny", dtype="bfloat16")
    assert adapter.model.dtype == torch.bfloat16
    adapter.set_task(DetectionTask("toy", CLASSES))
    (detections,) = adapter.predict(noise_items((90, 60)))
    detections.check(len(CLASSES))
    assert detections.boxes.dtype == np.float64


def test_unknown_option_is_refused() -> None:
    with pytest.raises(TypeError, match="score_treshold.*accepted: score_threshold"):
        create("owlv2:tiny", score_treshold=0.1)


SHAPES = ((300, 200), (130, 410), (512, 384), (60, 40))  # downscaled (blurred) and upscaled, in one batch


def reference_detections(adapter, images: list[Image.Image], nms: bool = True) -> list[dict]:
    """What transformers' own processor (on the CPU), the model's full forward and the
    processor's post-processing give on the adapter's device (plus the adapter's documented
    class-wise NMS, unless ``nms`` is off)."""
    from torchvision.ops import batched_nms

    model, processor = reference_model(adapter)
    texts = [adapter.options["template"].format(name) for name in CLASSES]
    inputs = processor(
        text=[texts] * len(images),
        images=images,
        padding="max_length",
        truncation=True,
        max_length=16,
        return_tensors="pt",
    )
    with torch.inference_mode():
        outputs = model(**to_device(inputs, model.device))
    results = processor.post_process_grounded_object_detection(
        outputs, threshold=adapter.options["score_threshold"], target_sizes=[(i.height, i.width) for i in images]
    )
    kept = []
    for result in results:
        keep = batched_nms(result["boxes"], result["scores"], result["labels"], adapter.options["nms_iou"]) if nms \
            else slice(None)
        kept.append(host(result, keep))
    return kept


@pytest.mark.parametrize("device", ON_DEVICE)
def test_preprocessing_on_device_gives_transformers_own_detections(owl, device: str) -> None:
    from pytest_rf100vl.adapters.owl import uses_matrix_preprocessing

    adapter = on_device(owl, device)
    assert uses_matrix_preprocessing(adapter.processor.image_processor) == (adapter.name == "owlv2")
    adapter.set_task(DetectionTask("toy", CLASSES))
    items = noise_items(*SHAPES)
    with full_float32():
        found, expected = adapter.predict(items), reference_detections(adapter, [item.image for item in items])
    assert_same_detections(found, expected)


@pytest.mark.parametrize("device", ON_DEVICE)
@pytest.mark.parametrize(
    "shape, out",
    [((2048, 1536), 960), ((700, 961), 960), ((400, 300), 96), ((130, 410), 96), ((96, 96), 96), ((60, 40), 96),
     ((7, 5), 96), ((1, 1), 96)],
)
def test_owlv2_pixels_equal_the_processor(shape: tuple[int, int], out: int, device: str) -> None:
    """The matrix form of OWLv2's pad, blur and resize against the processor itself, on
    images that shrink (blurred), grow (not blurred), are square or a single pixel."""
    from transformers import Owlv2ImageProcessor

    from pytest_rf100vl.adapters.hf import image_tensors
    from pytest_rf100vl.adapters.owl import owlv2_pixel_values

    processor = Owlv2ImageProcessor(size={"height": out, "width": out})
    (item,) = noise_items(shape)
    expected = processor(images=[item.image], return_tensors="pt")["pixel_values"]
    found = owlv2_pixel_values(image_tensors([item.image], torch.device(device)), processor).cpu()
    assert found.shape == expected.shape == (1, 3, out, out)
    torch.testing.assert_close(found, expected, atol=5e-4, rtol=0)


def test_answer_key_parts_follow_what_the_model_is_sent(owl) -> None:
    """The answer cache's key: the classes in order and the query texts of the prompt mode
    (the few-shot examples' content in ``fewshot`` mode); a UOUO question's own text."""
    with pytest.warns(UserWarning):
        owl.set_task(fewshot_task("instructions"))
    described = owl.answer_key_parts()
    assert described[:5] == ("rf100vl", "3 classes", *CLASSES) and "cat: Small felines, often striped." in described
    owl.set_task(fewshot_task("names"))
    assert owl.answer_key_parts()[5:] == ("a photo of a cat", "a photo of a red fox", "a photo of a dog")
    with pytest.warns(UserWarning):
        owl.set_task(fewshot_task("fewshot"))
    shot = owl.answer_key_parts()
    (example,) = fewshot_task().fewshot
    moved = FewShotExample(example.image, example.boxes + 1, example.labels)
    with pytest.warns(UserWarning):
        owl.set_task(DetectionTask("toy", CLASSES, prompt="fewshot", fewshot=(moved,)))
    assert shot[-1].startswith("fewshot:") and owl.answer_key_parts()[-1] != shot[-1]
    query = GroundingQuery("red fox", "Where is the red fox?", "Which quadrant?")
    assert owl.answer_key_parts(query) == ("uouo", "red fox", "a photo of a red fox")


def test_class_nms_off_keeps_every_box_over_the_threshold_as_roboflows_script() -> None:
    """``class_nms=false`` (the ``rf-scripts`` protocol): transformers' post-processing alone, as
    Roboflow's OWLv2 script keeps it; with NMS some of those boxes go."""
    adapter = create("owlv2:tiny", class_nms="false")
    try:
        assert adapter.options["class_nms"] is False
        adapter.set_task(DetectionTask("toy", CLASSES))
        items = noise_items((300, 200))
        with full_float32():
            found = adapter.predict(items)
            assert_same_detections(found, reference_detections(adapter, [item.image for item in items], nms=False))
            with_nms = reference_detections(adapter, [item.image for item in items])
        assert len(found[0].scores) > len(with_nms[0]["scores"])
    finally:
        adapter.close()
