"""The generated few-shot split against the challenge tooling's loop, the best-split strategy against
its description, and the semi-supervised split."""

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


def best_selection(data: dict, k: int = 10, seed: int = 0, candidates: int = 10) -> dict[int, list[int]]:
    """The best split written out again from its description: for each category, of the
    tooling's selections with seeds ``seed`` to ``seed + candidates - 1``, the one with the most
    boxes, then the largest mean ``w * h``, then the lowest seed."""
    boxes = {ann["id"]: ann["bbox"] for ann in data["annotations"]}
    drawn = []
    for j in range(candidates):
        chosen, stuck = tooling_selection(data, k, seed + j)
        assert stuck is None
        drawn.append(chosen)

    def rank(category: int, j: int) -> tuple[int, float, int]:
        ids = drawn[j][category]
        mean = sum(boxes[i][2] * boxes[i][3] for i in ids) / len(ids) if ids else 0.0
        return -len(ids), -mean, j

    return {c: drawn[min(range(candidates), key=lambda j: rank(c, j))][c] for c in drawn[0]}


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


def _record(image_id: int, categories: list[int], crowd: bool = False, side: float = 1) -> ImageRecord:
    anns = [Annotation(image_id * 100 + i + 1, i, c, [0, 0, side, side], side * side, int(crowd))
            for i, c in enumerate(categories)]
    return ImageRecord(image_id, f"{image_id}.jpg", Path(f"{image_id}.jpg"), 100, 100, anns)


def test_fewshot_takes_exactly_k_when_reachable() -> None:
    images = [_record(i, [0] * (1 + i % 3) + [1]) for i in range(40)]
    taken = Counter(a.category for image in fewshot(images, 2, k=7, seed=3) for a in image.annotations)
    assert taken == {0: 7, 1: 7}


def test_fewshot_stops_and_warns_when_k_cannot_be_met_exactly() -> None:
    images = [_record(0, [0] * 6), _record(1, [0] * 6), _record(2, [1], crowd=True)]
    with pytest.warns(FewShotWarning, match="class index 0: 0 .*class index 1: 0"):
        assert fewshot(images, 2, k=10, max_rounds=50) == []


# ------------------------------------------------------------------ the best-split strategy


def _mean_areas(images: list[ImageRecord]) -> dict[int, float]:
    areas: dict[int, list[float]] = {}
    for image in images:
        for ann in image.annotations:
            areas.setdefault(ann.category, []).append(ann.bbox[2] * ann.bbox[3])
    return {c: sum(a) / len(a) for c, a in areas.items()}


def test_random_is_the_default_and_the_tooling_on_a_generated_export(sample_root: Path) -> None:
    export = read_export(sample_root / "sample", progress=False)
    images, n = export.splits["train"].images, len(export.classes)
    expected, stuck = tooling_selection(load(sample_root / "sample"))
    assert stuck is None
    random_split = fewshot(images, n, strategy="random")
    assert random_split == fewshot(images, n) == fewshot(images, n, strategy="best", candidates=1)
    assert {0: []} | _by_category(random_split, export.category_ids) == expected


@pytest.mark.parametrize("k, seed, candidates", [(10, 0, 10), (3, 5, 4), (5, -2, 7)])
def test_best_keeps_per_class_the_candidate_with_the_largest_mean_area(
    sample_root: Path, k: int, seed: int, candidates: int
) -> None:
    export = read_export(sample_root / "sample", progress=False)
    images, n = export.splits["train"].images, len(export.classes)
    best = fewshot(images, n, k=k, seed=seed, strategy="best", candidates=candidates)
    expected = best_selection(load(sample_root / "sample"), k, seed, candidates)
    assert _by_category(best, export.category_ids) == {c: expected[c] for c in export.category_ids}
    taken = Counter(a.category for image in best for a in image.annotations)
    assert taken == {c: k for c in range(n)}
    random_areas, best_areas = _mean_areas(fewshot(images, n, k=k, seed=seed)), _mean_areas(best)
    assert all(best_areas[c] >= random_areas[c] for c in range(n)) and best_areas != random_areas
    assert [a.id for image in best for a in image.annotations] == list(range(1, n * k + 1))


def test_best_is_deterministic_and_depends_on_the_seed(sample_root: Path) -> None:
    images, classes = _train(sample_root / "sample")
    first, again = (fewshot(images, len(classes), k=3, strategy="best") for _ in range(2))
    assert first == again
    other = fewshot(images, len(classes), k=3, seed=100, strategy="best")  # candidates of seeds 100 to 109
    assert _source_ids(other) != _source_ids(first)


def test_best_is_federated(sample_root: Path) -> None:
    images, classes = _train(sample_root / "sample")
    full = {image.image_id: image for image in images}
    for image in fewshot(images, len(classes), k=3, strategy="best"):
        kept_classes = {a.category for a in image.annotations}
        expected = [a for a in full[image.image_id].annotations if a.category in kept_classes]
        assert [a.source_id for a in image.annotations] == [a.source_id for a in expected]


def test_best_breaks_ties_towards_the_lowest_seed() -> None:
    images = [_record(i, [0] * (1 + i % 3) + [1]) for i in range(40)]  # every box of one size: all candidates tie
    assert fewshot(images, 2, k=7, seed=3, strategy="best") == fewshot(images, 2, k=7, seed=3)


def test_best_prefers_a_candidate_with_k_instances_to_larger_boxes() -> None:
    """Nine large boxes in one image, pairs of small ones in nine others: a draw that takes the
    large image first can never reach 10 (the tooling stops), one that does not always can."""
    images = [_record(0, [0] * 9, side=50)] + [_record(i, [0, 0]) for i in range(1, 10)]

    def taken(seed: int, **kwargs) -> int:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FewShotWarning)
            return sum(len(image.annotations) for image in fewshot(images, 1, seed=seed, max_rounds=5, **kwargs))

    short = next(seed for seed in range(100) if taken(seed) == 9)  # this seed's draw takes the large image
    assert any(taken(seed) == 10 for seed in range(short, short + 10))
    assert taken(short, strategy="best") == 10


def test_best_keeps_what_a_class_cannot_reach() -> None:
    images = [_record(0, [0] * 6, side=5), _record(1, [0] * 6), _record(2, [1], crowd=True)]
    with pytest.warns(FewShotWarning, match="class index 0: 0 .*class index 1: 0"):
        assert fewshot(images, 2, k=10, max_rounds=50, strategy="best", candidates=3) == []


@pytest.mark.parametrize(
    "kwargs, message",
    [({"strategy": "worst"}, "strategy must be one of 'random', 'best', not 'worst'"),
     ({"strategy": "best", "candidates": 0}, "candidates must be an integer of at least 1, not 0"),
     ({"strategy": "best", "candidates": 2.5}, "candidates must be an integer of at least 1, not 2.5")],
)  # fmt: skip
def test_a_bad_strategy_or_candidate_count_is_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fewshot([_record(0, [0])], 1, **kwargs)


def test_best_on_a_real_export_is_its_description(shared_data: Path) -> None:
    root = shared_data / "microcontroller"
    export = read_export(root, progress=False)
    with pytest.warns(FewShotWarning, match="Arduino_Nano: 1 "):  # one train box in all
        best = fewshot(export.splits["train"].images, len(export.classes), strategy="best", class_names=export.classes)
    expected = best_selection(load(root))
    assert {0: []} | _by_category(best, export.category_ids) == expected
    with pytest.warns(FewShotWarning):
        random_split = fewshot(export.splits["train"].images, len(export.classes))
    assert _by_category(random_split, export.category_ids) != _by_category(best, export.category_ids)


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
