"""``draw``: a pair's predictions against the ground truth as PNG, boxes where the files put them,
coloured by pycocotools' matching at IoU 0.5 and TIDE's error types, with a legend, from a
results folder or a predictions file."""

from __future__ import annotations

import json
import shutil
from typing import Any

import numpy as np
import pytest
from PIL import Image

from rf100vl_hf.cli import main
from rf100vl_hf.errors import DataError
from rf100vl_hf.metrics.errors import TRUE_POSITIVE
from rf100vl_hf.results.draw import COLOURS, LEGEND, MIN_SIDE, MISSED, draw, pair_of
from rf100vl_hf.results.predictions import load_split
from rf100vl_hf.results.rows import read_jsonl

from tests.results.factory import write_jsonl
from tests.results.scored import write_exports, write_folder

MATCHED_COLOUR = COLOURS[TRUE_POSITIVE]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The bees export, and a folder whose predictions on its first image are: one ground-truth
    box exactly (matched), the same box a little to the right (a duplicate), one box far from
    every ground-truth box (background), another box with the wrong class (classification),
    that box's class half a box off (localisation), and one box scoring too little to be drawn
    by default."""
    root = tmp_path_factory.mktemp("draw")
    exported = write_exports(root / "data", ("bees",))
    truth = exported["bees"].truth
    first = truth["images"][0]
    boxes = [ann for ann in truth["annotations"] if ann["image_id"] == first["id"]]
    hit, other = sorted(boxes, key=lambda ann: -ann["bbox"][2] * ann["bbox"][3])[:2]
    lonely = free_spot(boxes, first["width"], first["height"])
    wrong = next(c["id"] for c in truth["categories"] if c["id"] != other["category_id"])
    x, y, w, h = other["bbox"]
    shifted = [x + 0.6 * w, y, w, h]
    twin = [hit["bbox"][0] + 3, *hit["bbox"][1:]]
    predictions = [
        {"image_id": first["id"], "category_id": hit["category_id"], "bbox": hit["bbox"], "score": 0.9},
        {"image_id": first["id"], "category_id": hit["category_id"], "bbox": twin, "score": 0.5},
        {"image_id": first["id"], "category_id": hit["category_id"], "bbox": lonely, "score": 0.8},
        {"image_id": first["id"], "category_id": wrong, "bbox": other["bbox"], "score": 0.7},
        {"image_id": first["id"], "category_id": other["category_id"], "bbox": shifted, "score": 0.6},
        {"image_id": first["id"], "category_id": hit["category_id"], "bbox": [2.0, 2.0, 6.0, 6.0], "score": 0.1},
    ]
    write_folder(root / "run", "owlv2", exported, {"bees": predictions})
    return {"root": root, "data": root / "data", "truth": truth, "first": first, "hit": hit, "lonely": lonely,
            "other": other, "shifted": shifted, "twin": twin}


def free_spot(boxes: list[dict[str, Any]], width: int, height: int, size: float = 40.0) -> list[float]:
    """A square far from every box (the drawn tags included)."""
    for x in np.arange(5, width - size - 5, 10.0):
        for y in np.arange(30, height - size - 5, 10.0):
            if all(x + size + 20 < bx or bx + bw + 20 < x or y + size + 20 < by or by + bh + 20 < y
                   for bx, by, bw, bh in (ann["bbox"] for ann in boxes)):
                return [float(x), float(y), size, size]
    raise AssertionError("no free spot")


def edge_colour(picture: Image.Image, bbox: list[float], scale: float) -> tuple[int, int, int]:
    """The colour of a box's left edge, halfway down (below any tag)."""
    x, y, _, h = bbox
    return picture.getpixel((round(x * scale) + 1, round((y + h * 0.6) * scale)))


def test_boxes_are_drawn_where_they_are_coloured_by_their_error_type(world, tmp_path) -> None:
    (path,) = draw(pair_of(world["root"] / "run", "bees", data_dir=world["data"]), tmp_path,
                   image_ids=[world["first"]["id"]], progress=False)
    assert path == tmp_path / f"bees-{world['first']['id']}.png"
    picture = Image.open(path).convert("RGB")
    scale = MIN_SIDE / max(world["first"]["width"], world["first"]["height"])
    assert picture.width == MIN_SIDE and picture.height > world["first"]["height"] * scale  # enlarged, captioned
    assert edge_colour(picture, world["hit"]["bbox"], scale) == MATCHED_COLOUR  # drawn over its ground truth
    assert edge_colour(picture, world["twin"], scale) == COLOURS["dupe"]
    assert edge_colour(picture, world["lonely"], scale) == COLOURS["bkg"]
    assert edge_colour(picture, world["other"]["bbox"], scale) == COLOURS["cls"]
    assert edge_colour(picture, world["shifted"], scale) == COLOURS["loc"]
    others = [ann for ann in world["truth"]["annotations"] if ann["image_id"] == world["first"]["id"]
              and ann is not world["hit"] and ann is not world["other"] and ann["bbox"][2] > 2]
    assert all(edge_colour(picture, ann["bbox"], scale) == MISSED for ann in others)  # nothing found them
    legend = np.asarray(picture)[round(world["first"]["height"] * scale):]
    for colour, name in LEGEND:  # each swatch is drawn under the image
        assert (legend == colour).all(axis=-1).sum() > 50, name

    (everything,) = draw(pair_of(world["root"] / "run", "bees", data_dir=world["data"]), tmp_path / "all",
                         image_ids=[world["first"]["id"]], min_score=0.0, progress=False)
    assert edge_colour(Image.open(everything).convert("RGB"), [2.0, 2.0, 6.0, 6.0], scale) == COLOURS["bkg"]
    assert edge_colour(picture, [2.0, 2.0, 6.0, 6.0], scale) != COLOURS["bkg"]  # below the default score


def test_the_rows_label_error_candidates_are_drawn_by_their_files(world, tmp_path, capsys) -> None:
    folder = tmp_path / "run"
    shutil.copytree(world["root"] / "run", folder)
    (row,) = read_jsonl(folder / "results.jsonl")
    split = load_split("bees", "test", world["data"]).dataset
    images = [{"id": i, "file_name": name} for i, name in zip(split["image_id"], split["file_name"])]
    args = ["draw", str(folder), "--dataset", "bees", "--out", str(tmp_path / "out"), "--option", "label-errors=true", "--option", f"data-dir={world['data']}"]
    assert main(args) == 2
    assert "the row names no label-error candidates" in capsys.readouterr().err
    write_jsonl(folder, [dict(row, label_error_files=[images[3]["file_name"], images[1]["file_name"]])])
    assert main(args) == 0
    assert [line.split("/")[-1] for line in capsys.readouterr().out.splitlines()] == [
        f"bees-{images[3]['id']}.png", f"bees-{images[1]['id']}.png"]


def test_a_predictions_file_is_drawn_on_the_first_images_of_a_split(world, tmp_path) -> None:
    file = world["root"] / "run" / "predictions" / "owlv2" / "bees" / "test.json"
    paths = draw(pair_of(file, "bees", split="test", data_dir=world["data"]), tmp_path, images=3, progress=False)
    assert [p.name for p in paths] == [f"bees-{image['id']}.png" for image in world["truth"]["images"][:3]]
    assert all(Image.open(p).width == MIN_SIDE for p in paths)


def test_the_command_writes_the_pictures(world, tmp_path, capsys) -> None:
    assert main(["draw", str(world["root"] / "run"), "--dataset", "bees", "--out", str(tmp_path), "--option", "images=2",
                 "--option", f"data-dir={world['data']}"]) == 0
    assert capsys.readouterr().out.count("wrote ") == 2 and len(list(tmp_path.glob("bees-*.png"))) == 2


def test_what_cannot_be_drawn_is_a_clear_error(world, tmp_path, capsys) -> None:
    with pytest.raises(DataError, match=r"--dataset: 0 rows of fish-market-ggjso \(RF100-VL rows found: owlv2 on bees"):
        pair_of(world["root"] / "run", "fish-market-ggjso", data_dir=world["data"])
    pair = pair_of(world["root"] / "run", "bees", data_dir=world["data"])
    with pytest.raises(DataError, match=r"--option image-id: 999 is not an image of the split \(its first ids: 0, 1, 2"):
        draw(pair, tmp_path, image_ids=[999], progress=False)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{"image_id": 0, "category_id": 1, "bbox": [1, 2, 3], "score": 0.5}]))
    with pytest.raises(DataError, match=r"broken\.json: \[0\]\.bbox: expected 4 numbers"):
        draw(pair_of(broken, "bees", data_dir=world["data"]), tmp_path, progress=False)
    with pytest.raises(SystemExit) as exit_info:
        main(["draw", str(world["root"] / "run"), "--dataset", "bees", "--out", str(tmp_path), "--option", "images=0"])
    assert exit_info.value.code == 2
    assert "argument --option: images: expected an integer of at least 1, not '0'" in capsys.readouterr().err
    assert main(["draw", str(world["root"] / "run"), "--dataset", "actions", "--out", str(tmp_path),
                 "--option", f"data-dir={world['data']}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rf100vl-hf: error: ") and "0 rows of actions" in err and err.count("\n") == 1


@pytest.mark.parametrize(("record", "field"), [
    ({"bbox": [float("nan")] * 4}, "[0].bbox"),
    ({"score": float("nan")}, "[0].score"),
    ({"bbox": [1.0, 2.0]}, "[0].bbox"),
])
def test_predictions_that_are_not_finite_boxes_are_an_error_naming_the_record(world, tmp_path, capsys, record,
                                                                             field) -> None:
    first = world["first"]
    path = tmp_path / "bad.json"
    good = {"image_id": first["id"], "category_id": world["hit"]["category_id"], "bbox": world["hit"]["bbox"],
            "score": 0.5}
    path.write_text(json.dumps([{**good, **record}]), encoding="utf-8")
    code = main(["draw", str(path), "--dataset", "bees", "--out", str(tmp_path / "out"), "--option", f"data-dir={world['data']}"])
    error = capsys.readouterr().err.splitlines()[-1]
    assert code == 2 and error.startswith(f"rf100vl-hf: error: {path}: {field}: ")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_an_empty_results_folder_is_an_error_naming_it(world, tmp_path, capsys) -> None:
    (tmp_path / "results.jsonl").write_text("", encoding="utf-8")
    code = main(["draw", str(tmp_path), "--dataset", "bees", "--out", str(tmp_path / "out"), "--option", f"data-dir={world['data']}"])
    assert code == 2 and "--dataset: 0 rows of bees (RF100-VL rows found: none)" in capsys.readouterr().err


def test_replies_holding_escapes_nul_and_a_lone_surrogate_are_drawn_and_shown_as_text(world, tmp_path, capsys) -> None:
    """A model may write anything: every image is drawn, the ``.reply.txt`` and the caption show
    an ESC, a NUL and a lone surrogate as their escapes (neither obeyed nor drawn as a box)."""
    import shutil

    from rf100vl_hf.results.draw import _quoted

    file = tmp_path / "test.json"
    shutil.copy(world["root"] / "run" / "predictions" / "owlv2" / "bees" / "test.json", file)
    replies = ["fine \ud800 lone\x00nul", "\x1b[31mred\x1b[0m\x1b]0;title\x07", "plain [1, 2, 3, 4]"]
    ids = [image["id"] for image in world["truth"]["images"][:3]]
    lines = [{"image_id": i, "file_name": f"{i}.jpg", "from_cache": False, "error": None, "repairs": {},
              "detections": [], "transcript": [{"sent": ["find \x1b[2Jbees"], "reply": reply, "frame": [1.0, 1.0],
                                                "boxes": [], "unreadable_boxes": 0}]}
             for i, reply in zip(ids, replies)]
    (tmp_path / "test.samples.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "drawn"
    assert main(["draw", str(file), "--dataset", "bees", "--out", str(out), "--option", "images=3", "--option", "replies=true",
                 "--option", f"data-dir={world['data']}"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(f"bees-{i}.{kind}" for i in ids for kind in ("png", "reply.txt"))
    texts = [(out / f"bees-{i}.reply.txt").read_text(encoding="utf-8") for i in ids]
    assert "  fine \\ud800 lone\\x00nul" in texts[0]
    assert "  \\x1b[31mred\\x1b[0m\\x1b]0;title\\x07" in texts[1] and "  find \\x1b[2Jbees" in texts[1]
    assert not any(set(text) & {"\x00", "\x1b", "\x07"} for text in texts)
    caption = " ".join(_quoted(lines[0]) + _quoted(lines[1]))
    assert "reply 1: fine \\ud800 lone\\x00nul" in caption and "reply 1: \\x1b[31mred" in caption
    assert not set(caption) & {"\x00", "\x1b", "\x07", "\ud800"}
