"""The generated few-shot split against the challenge tooling's loop, and the semi-supervised split."""

from __future__ import annotations

import random
import warnings
from collections import Counter
from pathlib import Path

import pytest

from rf100vl_hf.rf100vl.reader import Annotation, ImageRecord, read_export
from rf100vl_hf.rf100vl.splits import FewShotWarning, fewshot, semisup
from tests.rf100vl.exports import copy_export, edit, load

def tooling_selection(data: dict, k: int = 10, seed: int = 0) -> tuple[dict[int, list[int]], int | None]:
    """The challenge tooling's few-shot loop, written out again from its description.

    ``random.seed(seed)``, then for every category in id order (category 0 included: it has
    no boxes, so it draws nothing): the category's non-crowd annotations grouped by image in
    annotation order; while fewer than ``shots`` are taken, ``random.sample`` ``shots``
    image ids (or, when there are fewer images than ``shots``, lower ``shots`` to their
    number and go through all of them in order), skipping an image taken already or whose
    boxes would exceed ``shots``.

    Returns the exported ids of the annotations chosen per category id, and the first
    category on which the tooling would loop forever (None if none): it stops there.
    """
    rng = random.Random(seed)  # the same stream as random.seed(seed) and the module functions
    by_category: dict[int, list[dict]] = {c["id"]: [] for c in data["categories"]}
    for ann in data["annotations"]:
        if ann["iscrowd"] != 1:
            by_category[ann["category_id"]].append(ann)
    chosen: dict[int, list[int]] = {}
    for category in sorted(by_category):
        img_ids: dict[int, list[dict]] = {}
        for ann in by_category[category]:
            img_ids.setdefault(ann["image_id"], []).append(ann)
        shots, sample_shots = k, []
        for _ in range(10_000):
            if len(img_ids) < shots:
                shots = len(img_ids)
                imgs = list(img_ids)
            else:
                imgs = rng.sample(list(img_ids), shots)
            for img in imgs:
                if any(s["image_id"] == img for s in sample_shots):
                    continue
                if len(img_ids[img]) + len(sample_shots) > shots:
                    continue
                sample_shots.extend(img_ids[img])
                if len(sample_shots) == shots:
                    break
            if len(sample_shots) == shots:
                break
        else:
            return chosen, category
        chosen[category] = sorted(ann["id"] for ann in sample_shots)
    return chosen, None


def _train(root: Path) -> tuple[list[ImageRecord], list[str]]:
    export = read_export(root, progress=False)
    return export.splits["train"].images, export.classes


def _source_ids(images: list[ImageRecord]) -> list[int]:
    return sorted(a.source_id for image in images for a in image.annotations)


def _quiet_fewshot(images: list[ImageRecord], n_classes: int, **kwargs) -> list[ImageRecord]:
    with pytest.warns(FewShotWarning):  # both real exports have classes in fewer than 10 images
        return fewshot(images, n_classes, **kwargs)


def _by_category(images: list[ImageRecord], category_ids: list[int]) -> dict[int, list[int]]:
    chosen: dict[int, list[int]] = {c: [] for c in category_ids}
    for image in images:
        for ann in image.annotations:
            chosen[category_ids[ann.category]].append(ann.source_id)
    return {c: sorted(ids) for c, ids in chosen.items()}


def test_fewshot_draws_what_the_challenge_tooling_draws(shared_data: Path) -> None:
    export = read_export(shared_data / "microcontroller", progress=False)
    expected, stuck = tooling_selection(load(shared_data / "microcontroller"))
    assert stuck is None
    with pytest.warns(FewShotWarning, match="Arduino_Nano: 1 "):  # one train box in all
        ours = fewshot(export.splits["train"].images, len(export.classes), k=10, seed=0, class_names=export.classes)
    assert {0: []} | _by_category(ours, export.category_ids) == expected


def test_fewshot_agrees_with_the_tooling_until_the_tooling_would_loop_forever(shared_data: Path) -> None:
    export = read_export(shared_data / "chess-pieces", progress=False)
    expected, stuck = tooling_selection(load(shared_data / "chess-pieces"))
    assert stuck is not None  # no exact 10 of this class: the tooling never finishes here
    stuck_class = export.classes[export.category_ids.index(stuck)]
    with pytest.warns(FewShotWarning, match=f"{stuck_class}: "):
        ours = fewshot(export.splits["train"].images, len(export.classes), class_names=export.classes)
    drawn = _by_category(ours, export.category_ids)
    assert len(expected) > 5
    assert {c: drawn.get(c, []) for c in expected} == expected


def test_fewshot_takes_k_instances_of_every_class_that_has_k_images(shared_data: Path, sample_root: Path) -> None:
    for root in (shared_data / "microcontroller", sample_root / "sample"):
        images, classes = _train(root)
        holding = Counter(c for image in images for c in {a.category for a in image.annotations})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FewShotWarning)  # microcontroller has a class with one box
            taken = Counter(a.category for image in fewshot(images, len(classes)) for a in image.annotations)
        assert {c: taken[c] for c in range(len(classes))} == {c: min(10, holding[c]) for c in range(len(classes))}
        assert any(holding[c] >= 10 for c in range(len(classes)))


def test_fewshot_keeps_only_the_boxes_of_the_classes_an_image_was_drawn_for(shared_data: Path) -> None:
    images, classes = _train(shared_data / "chess-pieces")
    full = {image.image_id: image for image in images}
    chosen = _quiet_fewshot(images, len(classes))
    dropped_some = False
    for image in chosen:
        kept_classes = {a.category for a in image.annotations}
        expected = [a for a in full[image.image_id].annotations if a.category in kept_classes]
        assert [a.source_id for a in image.annotations] == [a.source_id for a in expected]
        dropped_some |= len(expected) < len(full[image.image_id].annotations)
    assert dropped_some, "some drawn image should hold boxes of classes it was not drawn for"
    ids = [a.id for image in chosen for a in image.annotations]
    assert ids == list(range(1, len(ids) + 1))


def test_fewshot_is_deterministic_and_depends_on_the_seed(shared_data: Path) -> None:
    images, classes = _train(shared_data / "microcontroller")
    first, again = (_source_ids(_quiet_fewshot(images, len(classes), seed=0)) for _ in range(2))
    other = _source_ids(_quiet_fewshot(images, len(classes), seed=1))
    assert first == again
    assert other != first


def _record(image_id: int, categories: list[int], crowd: bool = False) -> ImageRecord:
    anns = [Annotation(image_id * 100 + i + 1, i, c, [0, 0, 1, 1], 1.0, int(crowd)) for i, c in enumerate(categories)]
    return ImageRecord(image_id, f"{image_id}.jpg", Path(f"{image_id}.jpg"), 10, 10, anns)


def test_fewshot_takes_exactly_k_when_reachable() -> None:
    images = [_record(i, [0] * (1 + i % 3) + [1]) for i in range(40)]
    taken = Counter(a.category for image in fewshot(images, 2, k=7, seed=3) for a in image.annotations)
    assert taken == {0: 7, 1: 7}


def test_fewshot_stops_and_warns_when_k_cannot_be_met_exactly() -> None:
    images = [_record(0, [0] * 6), _record(1, [0] * 6), _record(2, [1], crowd=True)]
    with pytest.warns(FewShotWarning, match="class index 0: 0 .*class index 1: 0"):
        assert fewshot(images, 2, k=10, max_rounds=50) == []


def test_semisup_does_not_depend_on_the_order_of_the_json(shared_data: Path, tmp_path: Path) -> None:
    root = copy_export(shared_data / "microcontroller", tmp_path / "shuffled", link_images=True)

    def shuffle(data: dict) -> None:
        random.Random(7).shuffle(data["images"])
        random.Random(8).shuffle(data["annotations"])

    edit(root, shuffle)
    picks = []
    for source in (shared_data / "microcontroller", root):
        images, _ = _train(source)
        picked = semisup(images, 0.1, seed=0)
        picks.append([image.file_name for image in picked])
        assert [a.id for image in picked for a in image.annotations] == list(
            range(1, sum(len(image.annotations) for image in picked) + 1)
        )
    assert picks[0] == picks[1]
    assert len(picks[0]) == round(0.1 * len(load(root)["images"])) == 12
    assert picks[0] == sorted(picks[0])


def test_semisup_depends_on_the_seed_and_checks_its_fraction() -> None:
    images = [_record(i, [0]) for i in range(50)]
    assert [i.image_id for i in semisup(images, 0.2, seed=0)] != [i.image_id for i in semisup(images, 0.2, seed=1)]
    assert len(semisup(images[:3], 0.1)) == 1
    with pytest.raises(ValueError, match="fraction"):
        semisup(images, 0)
