"""Replaying COCO results files: id mapping both ways, file layouts, clear errors, and a score
that is exactly what pycocotools gives the file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rf100vl_hf.boxes import sanitize_detections, xyxy_to_xywh
from rf100vl_hf.errors import DataError
from rf100vl_hf.metrics import BACKENDS, evaluate

from pytest_rf100vl.adapters import DetectionTask, ImageItem, create

from tests.support.coco_reference import noisy_predictions, precision_ap, pycocotools_eval, synthetic_ground_truth

# A raw export numbers classes from 1 (0 is the supercategory); ids need not be dense
CATEGORY_IDS = (1, 2, 5)
IMAGE_IDS = (0, 3, 8)
RECORDS = [
    {"image_id": 3, "category_id": 5, "bbox": [10, 20, 30, 40], "score": 0.9},
    {"image_id": 3, "category_id": 1, "bbox": [0.5, 1.5, 2.0, 0.0], "score": 0.25},
    {"image_id": 8, "category_id": 2, "bbox": [1, 1, 1, 1], "score": 0.5, "area": 1},
]


def task(**overrides) -> DetectionTask:
    return DetectionTask(
        **{
            "dataset": "toy",
            "classes": ["a", "b", "c"],
            "category_ids": CATEGORY_IDS,
            "image_ids": IMAGE_IDS,
            **overrides,
        }
    )


def items(*image_ids: int) -> list[ImageItem]:
    return [ImageItem(Image.new("RGB", (64, 64)), i, f"{i}.jpg") for i in image_ids]


def write(path: Path, records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records))
    return path


def test_records_become_detections_with_class_indices(tmp_path: Path) -> None:
    adapter = create(f"predictions:{write(tmp_path / 'run.json', RECORDS)}")
    adapter.set_task(task())
    empty, three, eight = adapter.predict(items(0, 3, 8))
    assert len(empty.scores) == 0
    np.testing.assert_array_equal(three.boxes, [[10, 20, 40, 60], [0.5, 1.5, 2.5, 1.5]])
    np.testing.assert_array_equal(three.labels, [2, 0])
    np.testing.assert_array_equal(three.scores, [0.9, 0.25])
    np.testing.assert_array_equal(eight.labels, [1])
    for detections in (empty, three, eight):
        detections.check(3)


def test_detections_written_back_replay_unchanged(tmp_path: Path) -> None:
    """Class index -> export category id on the way out, and back on the way in."""
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 50, (20, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(0, 10, (20, 2))], axis=1)
    labels, scores, image_ids = rng.integers(0, 3, 20), rng.uniform(0, 1, 20), rng.choice(IMAGE_IDS, 20)
    records = [
        {
            "image_id": int(i),
            "category_id": CATEGORY_IDS[l],
            "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]],
            "score": float(s),
        }
        for b, l, s, i in zip(boxes.tolist(), labels.tolist(), scores, image_ids)
    ]
    adapter = create(f"predictions:{write(tmp_path / 'p.json', records)}")
    adapter.set_task(task())
    for item, detections in zip(items(*IMAGE_IDS), adapter.predict(items(*IMAGE_IDS))):
        mine = image_ids == item.image_id
        np.testing.assert_allclose(detections.boxes, boxes[mine], atol=1e-9)
        np.testing.assert_array_equal(detections.labels, labels[mine])
        np.testing.assert_array_equal(detections.scores, scores[mine])


@pytest.mark.parametrize("layout", ["toy/test.json", "toy_test.json", "toy.json"])
def test_a_folder_holds_one_file_per_dataset(tmp_path: Path, layout: str) -> None:
    write(tmp_path / layout, RECORDS)
    write(tmp_path / "other.json", [])
    adapter = create(f"predictions:{tmp_path}")
    adapter.set_task(task())
    assert adapter.file == tmp_path / layout
    assert adapter.revision.startswith("xxh3:")
    assert len(adapter.predict(items(3))[0].scores) == 2


def test_the_split_specific_file_wins(tmp_path: Path) -> None:
    write(tmp_path / "toy.json", [])
    write(tmp_path / "toy" / "valid.json", RECORDS)
    adapter = create(f"predictions:{tmp_path}")
    adapter.set_task(task(split="valid"))
    assert adapter.file == tmp_path / "toy" / "valid.json"


def test_a_missing_file_names_the_folder_and_what_was_looked_for(tmp_path: Path) -> None:
    adapter = create(f"predictions:{tmp_path}")
    with pytest.raises(FileNotFoundError, match=r"no predictions for dataset 'toy', split 'test'.*toy_test\.json"):
        adapter.set_task(task())
    with pytest.raises(FileNotFoundError, match="does not exist"):
        create(f"predictions:{tmp_path / 'nowhere.json'}").set_task(task())


def bad(**change) -> list[dict]:
    """RECORDS with entry 1 changed (a key set to None is removed)."""
    entry = {k: v for k, v in {**RECORDS[1], **change}.items() if v is not None}
    return [RECORDS[0], entry, RECORDS[2]]


@pytest.mark.parametrize(
    ("content", "field", "reason"),
    [
        ({"annotations": []}, "top level", "expected a list"),
        (["not a record"], "[0]", "expected an object"),
        (bad(score=None), "[1]", "missing score"),
        (bad(category_id="1"), "[1].category_id", "expected an integer"),
        (bad(image_id="3"), "[1].image_id", "a string: pycocotools takes"),
        (bad(image_id=3.5), "[1].image_id", "expected an integer id"),
        (bad(image_id=True), "[1].image_id", "expected an integer"),
        (bad(image_id=4), "[1].image_id", "4 is not an image of this split"),
        (bad(bbox=[1, 2, 3]), "[1].bbox", "expected [x, y, w, h]"),
        (bad(bbox=[1, 2, float("nan"), 3]), "[1].bbox", "finite number"),
        (bad(bbox=[1, 2, -3, 4]), "[1].bbox", "negative width"),
        (bad(score="high"), "[1].score", "finite number"),
    ],
)
def test_each_malformed_record_names_the_file_and_the_entry(tmp_path: Path, content, field: str, reason: str) -> None:
    path = write(tmp_path / "run.json", content)
    with pytest.raises(DataError) as caught:
        create(f"predictions:{path}").set_task(task())
    assert caught.value.path == str(path) and caught.value.field == field
    assert reason in caught.value.reason


def test_ids_written_as_floats_replay_as_the_integers_and_are_counted(tmp_path: Path) -> None:
    """As a file written from numpy arrays has them; pycocotools reads 3.0 as the image 3."""
    as_floats = [{**r, "image_id": float(r["image_id"]), "category_id": float(r["category_id"])} for r in RECORDS]
    adapter = create(f"predictions:{write(tmp_path / 'floats.json', as_floats)}")
    with pytest.warns(UserWarning, match=r"floats\.json: 6 id\(s\) written as floats \(3\.0\) read as integers"):
        adapter.set_task(task())
    as_integers = create(f"predictions:{write(tmp_path / 'integers.json', RECORDS)}")
    as_integers.set_task(task())
    for got, expected in zip(adapter.predict(items(0, 3, 8)), as_integers.predict(items(0, 3, 8))):
        for name in ("boxes", "scores", "labels"):
            np.testing.assert_array_equal(getattr(got, name), getattr(expected, name))
    assert adapter.float_ids == 6 and adapter.answer_counts() == {"ignored_records": 0, "float_ids": 6}
    assert as_integers.answer_counts() == {"ignored_records": 0}


def test_a_file_that_is_not_json_is_a_data_error(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text('[{"image_id": 3,')
    with pytest.raises(DataError, match="run.json: file: cannot be read as JSON"):
        create(f"predictions:{path}").set_task(task())


def test_without_image_ids_unknown_images_cannot_be_reported(tmp_path: Path) -> None:
    adapter = create(f"predictions:{write(tmp_path / 'run.json', bad(image_id=99))}")
    with pytest.warns(UserWarning, match="image ids were not given"):
        adapter.set_task(task(image_ids=()))


def test_replay_needs_a_path_and_the_category_ids(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a path"):
        create("predictions")
    adapter = create(f"predictions:{write(tmp_path / 'run.json', RECORDS)}")
    with pytest.raises(ValueError, match="category ids"):
        adapter.set_task(task(category_ids=()))


@pytest.mark.parametrize("category", [0, 7])
def test_records_of_a_category_that_is_not_a_class_are_ignored_and_counted(tmp_path: Path, category: int) -> None:
    adapter = create(f"predictions:{write(tmp_path / 'run.json', bad(category_id=category))}")
    assert adapter.submitted_output
    with pytest.warns(UserWarning, match=r"1 record\(s\) of a category id that is not a class"):
        adapter.set_task(task())
    assert adapter.ignored_records == 1
    assert len(adapter.predict(items(3))[0].scores) == 1


def hostile_submission(rng: np.random.Generator, ground_truth: dict) -> list[dict]:
    """A plausible file, plus boxes crossing every image edge, records of category 0 and of an
    unknown id, and exact duplicates."""
    records = noisy_predictions(rng, ground_truth)
    for image in ground_truth["images"]:
        w, h = image["width"], image["height"]
        for x, y in ((-20.0, 10.0), (w - 30.0, 5.0), (15.0, -12.0), (20.0, h - 8.0)):
            records.append({"image_id": image["id"], "category_id": 1, "bbox": [x, y, 60.0, 40.0],
                            "score": float(rng.random())})
    for ann in ground_truth["annotations"][:40:4]:  # a found box that crosses the edge keeps its overlap
        x, y, w, h = ann["bbox"]
        records.append({"image_id": ann["image_id"], "category_id": ann["category_id"],
                        "bbox": [x - 0.3 * w, y - 0.3 * h, w, h], "score": 0.99})
    records += [{**r, "category_id": c} for r, c in zip(records[:30], [0, 9] * 15)]
    records += [dict(r) for r in records[:25]]
    return records


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_a_replayed_file_scores_what_pycocotools_gives_it(tmp_path: Path, backend: str) -> None:
    rng = np.random.default_rng(11)
    ground_truth = synthetic_ground_truth(rng, n_images=12, boxes_per_image=5, category_ids=[1, 2, 3, 4])
    records = hostile_submission(rng, ground_truth)
    images = {image["id"]: image for image in ground_truth["images"]}
    category_ids = (1, 2, 3, 4)
    adapter = create(f"predictions:{write(tmp_path / 'run.json', records)}")
    with pytest.warns(UserWarning, match="30 record"):
        adapter.set_task(task(classes=["a", "b", "c", "d"], category_ids=category_ids, image_ids=tuple(images)))
    assert adapter.ignored_records == 30
    batch = [ImageItem(Image.new("RGB", (images[i]["width"], images[i]["height"])), i, f"{i}.jpg") for i in images]
    scored = []
    for item, detections in zip(batch, adapter.predict(batch)):
        width, height = item.image.size
        safe = sanitize_detections(detections.boxes, detections.scores, detections.labels, width, height,
                                   clip=not adapter.submitted_output)
        scored += [
            {"image_id": item.image_id, "category_id": category_ids[label], "bbox": box, "score": score}
            for box, score, label in zip(xyxy_to_xywh(safe.boxes).tolist(), safe.scores.tolist(), safe.labels.tolist())
        ]
    reference = pycocotools_eval(ground_truth, records)
    scores = evaluate(ground_truth, scored, backend=backend)
    assert scores.ap == pytest.approx(precision_ap(reference), abs=1e-9)
    for k, name in enumerate(ground_truth["categories"]):
        assert scores.per_class[name["name"]] == pytest.approx(precision_ap(reference, k), abs=1e-9, nan_ok=True)
    clipped = [dict(r, bbox=_clipped(r["bbox"], images[r["image_id"]])) for r in scored]
    assert abs(evaluate(ground_truth, clipped, backend=backend).ap - scores.ap) > 1e-4  # clipping would change it


def _clipped(bbox: list[float], image: dict) -> list[float]:
    x0, y0 = max(bbox[0], 0), max(bbox[1], 0)
    x1, y1 = min(bbox[0] + bbox[2], image["width"]), min(bbox[1] + bbox[3], image["height"])
    return [x0, y0, max(x1 - x0, 0), max(y1 - y0, 0)]
