"""The COCO ground truth of a split loaded with rf100vl_hf, on generated rows."""

from __future__ import annotations

import datasets
import PIL
import pytest

from rf100vl_hf.errors import DataError
from rf100vl_hf.metrics import coco_ground_truth
from rf100vl_hf.rf100vl.builder import features

CLASSES = ["cat", "dog"]


def _split(ids: list[list[int]], image: bytes = b"not an image at all") -> datasets.Dataset:
    """One row per image; box ``j`` of image ``i`` is in class ``j % 2``."""
    rows = [
        {
            "image": {"bytes": image, "path": f"{i}.jpg"},
            "image_id": 10 + i,
            "file_name": f"{i}.jpg",
            "width": 64,
            "height": 48,
            "objects": {
                "id": image_ids,
                "bbox": [[float(j), 2.0, 5.0, 6.0] for j in range(len(image_ids))],
                "category": [j % 2 for j in range(len(image_ids))],
                "area": [30.0] * len(image_ids),
                "iscrowd": [0] * len(image_ids),
            },
        }
        for i, image_ids in enumerate(ids)
    ]
    info = datasets.DatasetInfo(config_name="pets", features=features(CLASSES))
    return datasets.Dataset.from_list(rows, features=features(CLASSES), info=info, split="test")


def test_builds_coco_dict_without_decoding_images():
    split = _split([[1, 2], [], [3]])
    with pytest.raises(PIL.UnidentifiedImageError):
        split[0]  # reading a row decodes its image, which fails here; the metric never does
    ground_truth = coco_ground_truth(split)
    assert ground_truth["images"] == [
        {"id": 10, "width": 64, "height": 48},
        {"id": 11, "width": 64, "height": 48},
        {"id": 12, "width": 64, "height": 48},
    ]
    assert ground_truth["categories"] == [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}]
    assert [(a["id"], a["image_id"], a["category_id"], a["bbox"]) for a in ground_truth["annotations"]] == [
        (1, 10, 1, [0.0, 2.0, 5.0, 6.0]),
        (2, 10, 2, [1.0, 2.0, 5.0, 6.0]),
        (3, 12, 1, [0.0, 2.0, 5.0, 6.0]),
    ]
    assert {(a["area"], a["iscrowd"]) for a in ground_truth["annotations"]} == {(30.0, 0)}


def test_uses_the_given_category_ids():
    ground_truth = coco_ground_truth(_split([[1, 2]]), category_ids=[0, 7])
    assert [c["id"] for c in ground_truth["categories"]] == [0, 7]
    assert [a["category_id"] for a in ground_truth["annotations"]] == [0, 7]


def test_follows_a_selection_of_rows():
    ground_truth = coco_ground_truth(_split([[1], [2], [3]]).select([2, 0]))
    assert [i["id"] for i in ground_truth["images"]] == [12, 10]
    assert [a["id"] for a in ground_truth["annotations"]] == [3, 1]


def test_refuses_annotation_id_zero():
    with pytest.raises(DataError, match=r"pets\[test\]: objects\.id \(image_id 11\): annotation id 0"):
        coco_ground_truth(_split([[1], [0]]))


@pytest.mark.parametrize(
    ("category_ids", "message"),
    [([1], r"category_ids: 1 ids given for 2 classes \(cat, dog\)"), ([3, 3], r"category_ids: ids repeat")],
)
def test_refuses_bad_category_ids(category_ids, message):
    with pytest.raises(DataError, match=message):
        coco_ground_truth(_split([[1]]), category_ids=category_ids)
