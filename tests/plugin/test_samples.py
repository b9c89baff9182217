"""``--rf100vl-log-samples``: one line per image of what a model that answers in text was sent and
wrote, beside the pair's predictions, with the boxes read and why any was dropped or repaired;
no byte of it shows the session's key, whatever the server writes; answers from the answer
cache keep their transcript; ``rf100vl-hf draw --option replies=true`` shows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_rf100vl.adapters.text_answers import LONG_REPLY, LONG_TEXT, UNKNOWN_LABEL, shown_text

from tests.plugin.helpers import results
from tests.support.model_servers import Received, serve_openai

KEY = "sk-samples-91c3f0-never-written"
KEY_VARIABLE = "RF100VL_SAMPLES_TEST_KEY"
SCRUBBED_REPLY = LONG_REPLY - 10 + 100 - len(KEY) + 2 * len("***")
"""The length of :func:`scripted`'s reply with its two keys masked."""
RUN = ("--rf100vl-model", "openai:stand-in-vl", "--rf100vl-dataset", "sample", "--rf100vl-device", "cpu",
       "--benchmark-disable", "-p", "no:cacheprovider", f"--rf100vl-adapter-option=openai.api_key_env={KEY_VARIABLE}",
       "--rf100vl-adapter-option=openai.coordinates=pixels")


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VARIABLE, KEY)


@pytest.fixture(scope="module")
def sample() -> tuple[list[int], list[str]]:
    """The sample's test image ids, in split order, and its classes."""
    from rf100vl_hf.metadata import read_metadata
    from rf100vl_hf.rf100vl.builder import load_rf100vl

    split = load_rf100vl("sample", split="test", progress=False)
    return [int(i) for i in split["image_id"]], read_metadata(split)["classes"]


def scripted(classes: list[str]) -> Any:
    """The stand-in's answer to every image (pixel coordinates of the image sent): a box of the
    first class, one of a label that is no class, one reaching past the image's right edge, one
    whose coordinate cannot be read, all after prose that repeats the key, and then more text than
    the samples log keeps (ending with the key, so a cut through it must not leave a part of it)."""

    def answer(received: Received) -> str:
        width, height = received.image.size
        boxes = [{"bbox_2d": [1, 2, width // 2, height // 2], "label": classes[0]},
                 {"bbox_2d": [3, 3, 9, 9], "label": "unicorn"},
                 {"bbox_2d": [width // 2, 1, width + 40, height // 3], "label": classes[-1]},
                 {"bbox_2d": [1, "NaN", 5, 5], "label": classes[0]}]
        said = f"My key is {KEY}, and here they are: {json.dumps(boxes)} "
        return said + "." * (LONG_REPLY - len(said) - 10) + KEY + "." * 100

    return answer


def lines_of(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def test_a_served_run_logs_one_line_per_image_without_the_key_and_the_cache_keeps_the_transcripts(
    pytester: pytest.Pytester, sample: tuple[list[int], list[str]]
) -> None:
    import faster_coco_eval  # noqa: F401  (loaded once: in-process runs drop what they import)

    ids, classes = sample
    folder = pytester.path / ".rf100vl" / "results"
    with serve_openai(answer=scripted(classes)) as server:
        base_url = f"--rf100vl-adapter-option=openai.base_url={server.url}"
        plain = pytester.runpytest_inprocess(*RUN, base_url)  # answers cached, no samples log
        assert not list(folder.rglob("*.samples.jsonl"))
        asked = len(server.received)
        logged = pytester.runpytest_inprocess(*RUN, base_url, "--override-ini=rf100vl_log_samples=true")
        asked_again = len(server.received) - asked
        from_cache = lines_of(results(folder)[-1]["samples_file"])
        fresh = pytester.runpytest_inprocess(*RUN, base_url, "--override-ini=rf100vl_log_samples=true", "--override-ini", "rf100vl_cache=off",
                                             "--rf100vl-rerun")
        questions = {received.question for received in server.received}
    for run in (plain, logged, fresh):
        run.assert_outcomes(passed=1)
    first, cached, live = results(folder)
    assert asked == len(ids) and asked_again == 0  # the row without a log ran again, answered from the cache
    assert first["samples_file"] is None and cached.get("reused_from") is None and cached["answers_from_cache"]

    path = Path(live["samples_file"])
    assert path.name == "test.samples.jsonl" and path.parent == Path(live["predictions_file"]).parent
    assert KEY.encode() not in path.read_bytes() and b"sk-samples" not in path.read_bytes()
    lines = lines_of(path)
    assert [line["image_id"] for line in lines] == ids  # exactly one line per image, in split order
    assert all(line["from_cache"] for line in from_cache)
    assert [{**line, "from_cache": False} for line in from_cache] == lines  # the cache kept every transcript
    predictions = json.loads(Path(live["predictions_file"]).read_text(encoding="utf-8"))
    for line in lines:
        assert line["from_cache"] is False and line["error"] is None
        (question,) = line["transcript"]
        assert question["reply"].startswith("My key is ***, and here they are: [")
        assert len(question["reply"]) == LONG_REPLY and question["reply"].count("***") == 2
        assert question["reply_cut"] == {"kept": LONG_REPLY, "of": SCRUBBED_REPLY}
        assert question["sent"][-1] in questions and len(question["sent"][-1]) <= LONG_TEXT
        assert question["unreadable_boxes"] == 1
        read = question["boxes"]
        assert [box["label"] for box in read] == [classes[0], "unicorn", classes[-1]]
        assert [box["class"] for box in read] == [classes[0], None, classes[-1]]
        assert read[1]["dropped"] == UNKNOWN_LABEL and "dropped" not in read[0]
        width = question["frame"][0]
        assert read[2]["written"][2] == width + 40 and read[2]["pixels"] == read[2]["written"]  # read as pixels
        assert line["repairs"] == {"dropped": 0, "clipped": 1, "swapped": 0, "truncated": 0}
        scored = [detection["box"] for detection in line["detections"]]
        assert scored == [read[0]["pixels"], [*read[2]["pixels"][:2], width, read[2]["pixels"][3]]]
        assert [detection["class"] for detection in line["detections"]] == [classes[0], classes[-1]]
        written = [[x, y, x + w, y + h] for record in predictions if record["image_id"] == line["image_id"]
                   for x, y, w, h in [record["bbox"]]]
        assert np.allclose(written, scored, rtol=0, atol=1e-9)  # the predictions file's boxes
    drawn_with_replies(folder, pytester.path / "drawn", lines[:2])


def drawn_with_replies(folder: Path, out: Path, lines: list[dict[str, Any]]) -> None:
    """``rf100vl-hf draw --option replies=true`` quotes each image's reply under its picture and writes the
    whole line beside it; a pair without a samples log is an error saying how to get one."""
    from dataclasses import replace

    from PIL import Image

    from rf100vl_hf.cli import main
    from rf100vl_hf.errors import DataError
    from rf100vl_hf.results.draw import draw, pair_of

    assert main(["draw", str(folder), "--dataset", "sample", "--out", str(out / "replies"), "--option", "images=2",
                 "--option", "replies=true"]) == 0
    assert main(["draw", str(folder), "--dataset", "sample", "--out", str(out / "plain"), "--option", "images=2"]) == 0
    for line in lines:
        name = f"sample-{line['image_id']}"
        text = (out / "replies" / f"{name}.reply.txt").read_text(encoding="utf-8")
        assert line["transcript"][0]["reply"] in text and "My key is ***" in text
        assert f"reply (its first {LONG_REPLY} of {SCRUBBED_REPLY} characters):" in text
        assert f"'unicorn' written [3.0, 3.0, 9.0, 9.0], pixels [3.0, 3.0, 9.0, 9.0] dropped: {UNKNOWN_LABEL}" in text
        assert "boxes read: 3 (1 more could not be read)" in text
        assert "detections scored: 2; repaired: clipped 1" in text
        with Image.open(out / "replies" / f"{name}.png") as quoted, Image.open(out / "plain" / f"{name}.png") as plain:
            assert quoted.width == plain.width and quoted.height > plain.height  # the caption quotes the reply
        assert not (out / "plain" / f"{name}.reply.txt").exists()
    with pytest.raises(DataError, match="--option replies: the pair has no samples log: run it with log-samples on"):
        draw(replace(pair_of(folder, "sample"), samples=None), out / "none", replies=True, progress=False)


def test_a_long_text_sent_is_logged_as_its_sha256() -> None:
    import hashlib

    long = "x" * (LONG_TEXT + 1)
    assert shown_text("x" * LONG_TEXT) == "x" * LONG_TEXT
    assert shown_text(long) == "sha256:" + hashlib.sha256(long.encode()).hexdigest()


def test_a_local_text_model_logs_both_benchmarks(pytester: pytest.Pytester, uouo: list[str],
                                                 sample: tuple[list[int], list[str]]) -> None:
    """A tiny random Qwen2.5-VL writes gibberish: each line still holds what it was sent and wrote."""
    import pytest_rf100vl.adapters.qwen_vl  # noqa: F401  (loaded once: in-process runs drop what they import)

    ids, classes = sample
    result = pytester.runpytest_inprocess(
        "--rf100vl-model", "qwen2.5-vl:tiny", "--rf100vl-dataset", "sample,uouo-random", *uouo,
        "--uouo-option", "num-mosaics=3", "--rf100vl-limit", "4", "--override-ini=rf100vl_log_samples=true", "--benchmark-disable",
        "--benchmark-disable",
        "--rf100vl-adapter-option", "max_new_tokens=6",
    )
    result.assert_outcomes(passed=2)
    detection, grounding = results(pytester.path / ".rf100vl" / "results")

    lines = lines_of(detection["samples_file"])
    assert Path(detection["samples_file"]).name == "test.first4.samples.jsonl"
    assert [line["image_id"] for line in lines] == ids[:4]
    for line in lines:
        (question,) = line["transcript"]
        assert all(name in question["sent"][-1] for name in classes)  # one question names every class
        assert isinstance(question["reply"], str) and question["frame"][0] > 0
        assert len(line["detections"]) == sum("dropped" not in box for box in question["boxes"])

    answers = lines_of(grounding["predictions_file"])
    mosaics = lines_of(grounding["samples_file"])
    assert Path(grounding["samples_file"]).name == "test.first4.samples.jsonl"
    assert [line["mosaic_id"] for line in mosaics] == [line["mosaic_id"] for line in answers] and len(mosaics) == 3
    for line, answer in zip(mosaics, answers):
        box, quadrant = line["transcript"]
        assert (box["question"], quadrant["question"]) == ("box", "quadrant")
        assert line["target"] == answer["target"] and answer["target"] in box["sent"][-1]
        assert (box["reply"], quadrant["reply"]) == (answer["raw"]["box"], answer["raw"]["quadrant"])
        assert (line["box"], line["quadrant"]) == (answer["box"], answer["quadrant"])
        assert (box["chosen"] is None) == (line["box"] is None)
