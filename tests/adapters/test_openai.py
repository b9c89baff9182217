"""The ``openai`` adapter against the stand-in OpenAI-compatible server: boxes in every
coordinate convention (checked with the tests' own arithmetic), the prompts as received byte
for byte, images sent as stored, retries, time-outs, unreadable answers, spending caps,
concurrency, the answer cache, and the key kept out of everything but the request."""

from __future__ import annotations

import io
import json
import logging
import time
import traceback
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from PIL import Image

from rf100vl_hf.uouo.prompts import box_prompt, quadrant_prompt

from pytest_rf100vl.adapters import remote
from pytest_rf100vl.adapters.base import DetectionTask, FewShotExample, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.registry import create
from pytest_rf100vl.adapters.remote import RequestFailed
from pytest_rf100vl.engine.answer_cache import key_for

from tests.adapters.served import KEY_VARIABLE, SIZES, TEST_KEY, expected_pixels, items, stored_item, truth_answer
from tests.support.model_servers import GARBAGE, HANG, TRUNCATED, StandInOpenAI, rate_limited, server_error

if TYPE_CHECKING:
    import datasets

CLASSES = ["cat", "dog"]
INSTRUCTIONS = {"cat": "A small feline. Box the whole body.", "dog": "Any dog."}


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def served(server: StandInOpenAI, model: str = "stand-in-vl", **options: object):
    """The adapter pointed at the stand-in, with backoff delays too short to notice."""
    return create(f"openai:{model}", **{"base_url": server.url, "retry_base_delay": 0.001, "retry_max_delay": 1.0,
                                         **options})


def pixels(seed: int, size: tuple[int, int] = (280, 140)) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8))


FEWSHOT = (
    FewShotExample(pixels(10), np.array([[28.0, 28.0, 140.0, 70.0], [140.0, 70.0, 280.0, 140.0]]), np.array([0, 1])),
    FewShotExample(pixels(20), np.array([[0.0, 0.0, 56.0, 28.0]]), np.array([1])),
    FewShotExample(pixels(30), np.array([[14.0, 7.0, 42.0, 21.0]]), np.array([0])),
    FewShotExample(pixels(40), np.array([[1.0, 1.0, 2.0, 2.0]]), np.array([0])),
)
"""Four annotated 280x140 images: Qwen is shown the first three."""


def task(mode: str = "names", fewshot: tuple[FewShotExample, ...] = FEWSHOT) -> DetectionTask:
    return DetectionTask("pets", CLASSES, prompt=mode, instructions=INSTRUCTIONS if mode != "names" else {},
                         fewshot=fewshot if "fewshot" in mode else ())


# --------------------------------------------------------------------------- boxes


@pytest.mark.parametrize("whole", [False, True], ids=["exact", "integers"])
@pytest.mark.parametrize("convention", ["qwen2.5", "qwen3", "gemini", "normalized", "pixels"])
def test_boxes_come_back_in_pixels_of_each_image_in_every_convention(
    openai_server: StandInOpenAI, convention: str, whole: bool
) -> None:
    openai_server.answer = truth_answer(convention, "box_2d" if convention == "gemini" else "bbox_2d", whole)
    adapter = served(openai_server, family="generic", coordinates=convention)
    adapter.set_task(task())
    for item, found in zip(items(), adapter.predict(items())):
        expected = expected_pixels(convention, whole, item.image.size)
        np.testing.assert_allclose(found.boxes, expected, rtol=0, atol=1e-9)
        assert found.scores.tolist() == [1.0] * len(expected)
    assert [found.labels.tolist() for found in adapter.predict(items())] == [[0, 1], [1], [0, 0]]


def test_a_downscaled_image_is_read_against_the_size_sent_and_scaled_back(openai_server: StandInOpenAI) -> None:
    # 300x200 with max_pixels 15000 is sent at 150x100 (half): its smart_resize frame is
    # 150/28 = 5.4 -> 140 by 100/28 = 3.6 -> 112, so the cat (75, 50, 225, 150) is written
    # [75/2 * 140/150, 25 * 112/100, 112.5 * 140/150, 75 * 112/100] = [35, 28, 105, 84].
    openai_server.answer = lambda received: json.dumps([{"bbox_2d": [35, 28, 105, 84], "label": "cat"}])
    adapter = served(openai_server, model="Qwen/Qwen2.5-VL-7B-Instruct", max_pixels=15000)
    adapter.set_task(task())
    (found,) = adapter.predict([stored_item((300, 200))])
    assert openai_server.received[0].image.size == (150, 100)
    np.testing.assert_allclose(found.boxes, [[75.0, 50.0, 225.0, 150.0]], atol=1e-9)
    assert adapter.answer_counts()["downscaled_images"] == 1 == adapter.answer_counts()["reencoded_images"]


@pytest.mark.parametrize(("model", "family", "coordinates"), [
    ("Qwen/Qwen2.5-VL-72B-Instruct", "qwen2.5", "qwen2.5"),
    ("qwen2.5vl:7b", "qwen2.5", "qwen2.5"),
    ("Qwen/Qwen3-VL-235B-A22B-Instruct", "qwen3", "qwen3"),
    ("gemini-2.5-pro", "gemini", "gemini"),
    ("gpt-4o", "generic", "normalized"),
    ("qwen-vl-max", "generic", "normalized"),  # no version in the name: ambiguous
])
def test_the_family_and_its_coordinates_follow_the_model_name(
    openai_server: StandInOpenAI, model: str, family: str, coordinates: str
) -> None:
    described = served(openai_server, model=model).describe()
    assert (described["family"], described["coordinates"]) == (family, coordinates)


# --------------------------------------------------------------------------- prompts

SYSTEM = "You are a helpful assistant capable of object detection."
ASK_BOTH = "Locate all of the following objects: cat, dog in the image and output the coordinates in JSON format."
ASK_CAT = ('Locate all of the following objects: cat in the image and output the coordinates in JSON format like '
           '{"bbox_2d":[x1,y1,x2,y2],"label":"class_name"}.')
ASK_DOG = ('Locate all of the following objects: dog in the image and output the coordinates in JSON format like '
           '{"bbox_2d":[x1,y1,x2,y2],"label":"class_name"}.')
EXAMPLE_BOTH = ("Locate all of the following objects: cat, dog (each of those is a separate class) in the image "
                "and output the coordinates in JSON format.")
INSTRUCTED_BOTH = ("\n\nUse the following annotator instructions to improve detection accuracy:\n"
                   "cat: A small feline. Box the whole body.\ndog: Any dog.\n")
INSTRUCTED_CAT = ("\n\nUse the following annotator instructions to improve detection accuracy:\n"
                  "cat: A small feline. Box the whole body.\n")
INSTRUCTED_DOG = "\n\nUse the following annotator instructions to improve detection accuracy:\ndog: Any dog.\n"
COMBINED_BOTH = ("\n\nUse the following annotator instructions:\ncat: A small feline. Box the whole body.\n"
                 "dog: Any dog.\n")
COMBINED_CAT = "\n\nUse the following annotator instructions:\ncat: A small feline. Box the whole body.\n"
COMBINED_DOG = "\n\nUse the following annotator instructions:\ndog: Any dog.\n"

QWEN3_FIRST_ANSWER = """[
  {
    "label": "cat",
    "bbox_2d": [
      100,
      200,
      500,
      500
    ]
  },
  {
    "label": "dog",
    "bbox_2d": [
      500,
      500,
      1000,
      1000
    ]
  }
]"""
"""The first example's ground truth as Qwen3 writes it: 0..1000 of 280x140, x first."""

EXAMPLE_BOXES = {
    # the examples' boxes in each family's numbers: Qwen3 0..1000; Qwen2.5 pixels of the
    # smart_resize of 280x140, which is 280x140 itself (both sides multiples of 28)
    "qwen3": [[("cat", [100, 200, 500, 500]), ("dog", [500, 500, 1000, 1000])], [("dog", [0, 0, 200, 200])],
              [("cat", [50, 50, 150, 150])]],
    "qwen2.5": [[("cat", [28, 28, 140, 70]), ("dog", [140, 70, 280, 140])], [("dog", [0, 0, 56, 28])],
                [("cat", [14, 7, 42, 21])]],
}


def answer_text(boxes: list[tuple[str, list[int]]]) -> str:
    return json.dumps([{"label": label, "bbox_2d": box} for label, box in boxes], indent=2)


def examples(family: str, question: str, only: str | None = None, first_suffix: str = "") -> list[tuple[str, str]]:
    """(question, answer) of the three example turns, the answers limited to class ``only``."""
    turns = []
    for i, boxes in enumerate(EXAMPLE_BOXES[family]):
        kept = [(label, box) for label, box in boxes if only in (None, label)]
        turns.append((question + (first_suffix if i == 0 else ""), answer_text(kept)))
    return turns


def expected_requests(family: str, mode: str, per_class: bool) -> list[tuple[list[tuple[str, str]], str]]:
    """Per request about the image: the example turns and the final question."""
    fewshot = "fewshot" in mode
    instructed = mode == "instructions"
    combined = mode == "instructions+fewshot"
    if not per_class:
        shots = examples(family, EXAMPLE_BOTH, first_suffix=COMBINED_BOTH if combined else "") if fewshot else []
        return [(shots, ASK_BOTH + (INSTRUCTED_BOTH if instructed else ""))]
    requests = []
    for name, ask, instructed_one, combined_one in (("cat", ASK_CAT, INSTRUCTED_CAT, COMBINED_CAT),
                                                    ("dog", ASK_DOG, INSTRUCTED_DOG, COMBINED_DOG)):
        shots = examples(family, ask, only=name, first_suffix=combined_one if combined else "") if fewshot else []
        requests.append((shots, ask + (instructed_one if instructed else "")))
    return requests


@pytest.mark.parametrize("per_class", [False, True], ids=["multi-class", "single-class"])
@pytest.mark.parametrize("mode", ["names", "instructions", "fewshot", "instructions+fewshot"])
@pytest.mark.parametrize(("family", "model"), [("qwen2.5", "Qwen/Qwen2.5-VL-7B-Instruct"),
                                               ("qwen3", "Qwen/Qwen3-VL-8B-Instruct")])
def test_the_server_receives_the_papers_prompts_byte_for_byte(
    openai_server: StandInOpenAI, family: str, model: str, mode: str, per_class: bool
) -> None:
    adapter = served(openai_server, model=model, per_class=per_class)
    adapter.set_task(task(mode))
    item = stored_item((300, 200))
    adapter.predict([item])
    expected = expected_requests(family, mode, per_class)
    assert len(openai_server.received) == len(expected)
    for received, (shots, question) in zip(openai_server.received, expected):
        assert received.model == model and received.system == SYSTEM
        assert received.settings == {"temperature": 0.0, "max_tokens": 4096}
        turns = list(received.turns)
        assert [turn.role for turn in turns] == ["user", "assistant"] * len(shots) + ["user"]
        assert all(turn.layout == ["image", "text"] for turn in turns[::2])  # Qwen: the image first
        assert [(user.texts, reply.texts) for user, reply in zip(turns[:-1:2], turns[1::2])] == [
            ([text], [answer]) for text, answer in shots]
        assert turns[-1].texts == [question]
        for turn, example in zip(turns[:-1:2], FEWSHOT):  # the examples' own pixels, in order
            shown = np.asarray(Image.open(io.BytesIO(turn.images[0])).convert("RGB"))
            assert np.array_equal(shown, np.asarray(example.image))
        assert turns[-1].images == [item.data]  # the stored file, not a re-encoding
    if family == "qwen3" and mode == "fewshot" and not per_class:
        assert openai_server.received[0].turns[1].texts == [QWEN3_FIRST_ANSWER]


def test_fewshot_images_sets_how_many_examples_are_shown(openai_server: StandInOpenAI) -> None:
    adapter = served(openai_server, model="Qwen/Qwen3-VL-8B-Instruct", fewshot_images=4)
    adapter.set_task(task("fewshot"))
    adapter.predict([stored_item((300, 200))])
    (received,) = openai_server.received
    assert len(received.turns) == 2 * 4 + 1
    assert received.turns[7].texts == [answer_text([("cat", [3, 7, 7, 14])])]  # 1/280*1000, 1/140*1000, ... truncated


def test_a_fewshot_mode_without_examples_and_the_cookbook_fewshot_are_refused(openai_server: StandInOpenAI) -> None:
    adapter = served(openai_server)
    with pytest.raises(ValueError, match="'fewshot' on 'pets': the task has no few-shot examples"):
        adapter.set_task(task("fewshot", fewshot=()))
    cookbook = served(openai_server, prompt_style="cookbook")
    with pytest.raises(ValueError, match="prompt_style=cookbook has no few-shot prompt"):
        cookbook.set_task(task("instructions+fewshot"))
    cookbook.set_task(task("instructions"))
    cookbook.predict([stored_item((300, 200))])
    (received,) = openai_server.received
    assert received.system is None and received.turns[-1].texts == [
        'Locate every instance that belongs to the following categories: "cat", "dog". Report bbox coordinates '
        'in JSON format, as a list of {"bbox_2d": [x1, y1, x2, y2], "label": "<category>"}, using the category '
        "names exactly as given.\n\nThe annotators labelled these objects following these instructions:\n"
        "- cat: A small feline. Box the whole body.\n- dog: Any dog."]
    assert cookbook.pair_columns()["prompt_style"] == "cookbook"


def test_grounding_asks_both_questions_and_reads_the_box(openai_server: StandInOpenAI) -> None:
    def answer(received) -> str:
        return "It is in the bottom-right quadrant." if "quadrant" in received.question else "[100, 250, 500, 750]"

    openai_server.answer = answer
    adapter = served(openai_server, model="Qwen/Qwen3-VL-8B-Instruct")
    query = GroundingQuery("resistor", box_prompt("resistor"), quadrant_prompt("resistor"))
    (result,) = adapter.ground([stored_item((300, 200))], [query])
    np.testing.assert_allclose(result.box, [30.0, 50.0, 150.0, 150.0])  # 0..1000 of 300x200
    assert result.quadrant == "bottom-right"
    assert [received.question for received in openai_server.received] == [query.box_prompt, query.quadrant_prompt]
    assert all(received.system is None for received in openai_server.received)
    assert adapter.pair_columns()["prompt_hash"] is None  # no detection task in this pair


# --------------------------------------------------------------------------- images


def exif_jpeg(size: tuple[int, int]) -> ImageItem:
    """A JPEG stored turned, with EXIF orientation 6: displayed, it is ``size`` rotated."""
    stored = pixels(5, size)
    exif = Image.Exif()
    exif[0x0112] = 6
    buffer = io.BytesIO()
    stored.save(buffer, format="JPEG", exif=exif)
    data = buffer.getvalue()
    from PIL import ImageOps

    return ImageItem(ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB"), 5, "5.jpg", data)


def other_mode(mode: str, fmt: str) -> ImageItem:
    rgb = pixels(6, (40, 30))
    image = {"I;16": lambda: Image.fromarray((np.asarray(rgb.convert("L"), dtype=np.uint16) * 257)),
             "CMYK": lambda: rgb.convert("CMYK"), "P": lambda: rgb.convert("P"), "RGBA": lambda: rgb.convert("RGBA"),
             "L": lambda: rgb.convert("L"), "RGB": lambda: rgb}[mode]()
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    data = buffer.getvalue()
    return ImageItem(Image.open(io.BytesIO(data)).convert("RGB"), 6, f"6.{fmt.lower()}", data)


@pytest.mark.parametrize(("item", "as_stored", "mime"), [
    (stored_item((300, 200), fmt="JPEG", quality=80), True, "image/jpeg"),
    (stored_item((300, 200), fmt="PNG"), True, "image/png"),
    (stored_item((300, 200), fmt="WEBP", lossless=True), True, "image/webp"),
    (other_mode("L", "PNG"), True, "image/png"),
    (other_mode("I;16", "PNG"), False, "image/png"),
    (other_mode("CMYK", "JPEG"), False, "image/jpeg"),
    (other_mode("P", "PNG"), False, "image/png"),
    (other_mode("RGBA", "PNG"), False, "image/png"),
    (other_mode("RGB", "BMP"), False, "image/png"),
    (exif_jpeg((60, 40)), False, "image/jpeg"),
    (ImageItem(pixels(7, (50, 20)), 7, "made.png"), False, "image/png"),  # made in memory: no file
], ids=["jpeg", "png", "webp", "grey", "16-bit", "cmyk", "palette", "rgba", "bmp", "exif-turned", "no-file"])
def test_images_go_as_stored_unless_they_must_be_reencoded(
    openai_server: StandInOpenAI, item: ImageItem, as_stored: bool, mime: str
) -> None:
    adapter = served(openai_server, family="generic")  # normalized: a box over the whole image
    openai_server.answer = lambda received: '[{"bbox_2d": [0, 0, 1, 1], "label": "cat"}]'
    adapter.set_task(task())
    (found,) = adapter.predict([item])
    (received,) = openai_server.received
    (part,) = [part for part in received.turns[-1].parts if part.image is not None]
    assert part.mime == mime
    assert (received.image_bytes == item.data) is as_stored
    assert received.image.size == item.image.size  # the displayed frame, never padded
    if not as_stored and mime == "image/png":  # lossless: exactly the pixels the ground truth is in
        assert np.array_equal(np.asarray(received.image.convert("RGB")), np.asarray(item.image))
    np.testing.assert_allclose(found.boxes, [[0, 0, *item.image.size]])
    assert adapter.answer_counts().get("reencoded_images", 0) == int(not as_stored)


# --------------------------------------------------------------------------- faults


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits before each retry, recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(remote, "pause", recorded.append)
    return recorded


def test_rate_limits_and_server_errors_are_retried_after_the_wait_asked(
    openai_server: StandInOpenAI, waits: list[float]
) -> None:
    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    openai_server.answer = lambda received: '[{"bbox_2d": [0.1, 0.1, 0.5, 0.5], "label": "cat"}]'
    openai_server.inject(rate_limited("7"), server_error(500), server_error(503), rate_limited(later))
    adapter = served(openai_server, family="generic", retry_max_delay=40.0)
    adapter.start_pair()
    adapter.set_task(task())
    (found,) = adapter.predict([stored_item((300, 200))])
    np.testing.assert_allclose(found.boxes, [[30.0, 20.0, 150.0, 100.0]])
    assert openai_server.statuses == [429, 500, 503, 429, 200]
    assert waits[0] == 7.0 and 28.0 <= waits[3] <= 30.0  # Retry-After in seconds, then as an HTTP date
    assert 0.002 / 2 <= waits[1] <= 0.002 and 0.004 / 2 <= waits[2] <= 0.004  # backoff doubles from 0.001 (retry 1, 2)
    columns = adapter.pair_columns()
    assert (columns["api_requests"], columns["api_retries"], columns["api_failed_requests"]) == (5, 4, 0)


def test_retries_give_up_with_a_clear_message_and_count_the_failure(
    openai_server: StandInOpenAI, waits: list[float]
) -> None:
    openai_server.always(server_error(502))
    adapter = served(openai_server, max_retries=2)
    adapter.start_pair()
    adapter.set_task(task())
    with pytest.raises(RequestFailed, match=r"openai:stand-in-vl: HTTP 502: .*\(gave up after 3 attempts\)"):
        adapter.predict([stored_item((300, 200))])
    assert len(openai_server.received) == 3 and len(waits) == 2
    assert adapter.pair_columns()["api_failed_requests"] == 1


def test_a_wait_longer_than_allowed_is_not_waited_for(openai_server: StandInOpenAI, waits: list[float]) -> None:
    openai_server.inject(rate_limited("3600"))
    adapter = served(openai_server)
    adapter.set_task(task())
    with pytest.raises(RequestFailed, match="asked to wait 3600 s, more than retry_max_delay=1"):
        adapter.predict([stored_item((300, 200))])
    assert waits == [] and len(openai_server.received) == 1


def test_a_hanging_server_costs_at_most_the_timeout_per_attempt(openai_server: StandInOpenAI) -> None:
    openai_server.always(HANG)
    adapter = served(openai_server, timeout=0.3, max_retries=1)
    adapter.set_task(task())
    began = time.perf_counter()
    with pytest.raises(RequestFailed, match=r"no answer within timeout=0.3 s \(gave up after 2 attempts\)"):
        adapter.predict([stored_item((300, 200))])
    assert 0.6 <= time.perf_counter() - began < 3.0
    openai_server.always(None)
    openai_server.inject(HANG)
    assert len(adapter.predict([stored_item((300, 200))])) == 1  # a retry after one hang answers


def test_a_request_cut_at_its_deadline_takes_no_other_request_with_it(openai_server: StandInOpenAI) -> None:
    # the first request hangs and is cut at 0.9 s, while the second (sent at 0.4 s) waits for its answer until 1.0 s
    from concurrent.futures import ThreadPoolExecutor

    openai_server.answer = lambda received: '[{"bbox_2d": [0, 0, 1, 1], "label": "cat"}]'
    openai_server.inject(HANG)
    openai_server.delay = 0.6
    adapter = served(openai_server, family="generic", timeout=0.9, max_retries=0, concurrency=2)
    adapter.start_pair()
    adapter.set_task(task())
    with ThreadPoolExecutor(2) as pool:
        hung = pool.submit(adapter.predict, [stored_item((300, 200), 1)])
        time.sleep(0.4)
        answered = pool.submit(adapter.predict, [stored_item((300, 200), 2)])
        with pytest.raises(RequestFailed, match=r"no answer within timeout=0.9 s"):
            hung.result(timeout=10)
        assert answered.result(timeout=10)[0].labels.tolist() == [0]
    columns = adapter.pair_columns()
    assert (columns["api_requests"], columns["api_retries"], columns["api_failed_requests"]) == (2, 0, 1)


def test_garbage_and_truncated_bodies_are_counted_unreadable_and_never_crash(
    openai_server: StandInOpenAI, waits: list[float]
) -> None:
    openai_server.answer = lambda received: '[{"bbox_2d": [0, 0, 1, 1], "label": "dog"}]'
    openai_server.inject(GARBAGE, TRUNCATED)
    adapter = served(openai_server, family="generic")
    adapter.start_pair()
    adapter.set_task(task())
    (found,) = adapter.predict([stored_item((300, 200))])
    assert found.labels.tolist() == [1] and adapter.pair_columns()["api_unreadable_responses"] == 2
    openai_server.always(TRUNCATED)
    with pytest.raises(RequestFailed, match="unreadable response"):
        adapter.predict([stored_item((300, 200))])


def test_unreadable_answers_are_counted_not_fatal(openai_server: StandInOpenAI) -> None:
    answers = iter(["I see a cat somewhere.", '[{"bbox_2d": [1, 2, 3], "label": "cat"}, {"bbox_2d": [0, 0', ""])
    openai_server.answer = lambda received: next(answers)
    adapter = served(openai_server, family="generic")
    adapter.set_task(task())
    results = [adapter.predict([stored_item((300, 200))])[0] for _ in range(3)]
    assert [len(found.scores) for found in results] == [0, 0, 0]
    counts = adapter.answer_counts()
    assert (counts["answers"], counts["rejected_boxes"], counts["empty_answers"]) == (3, 1, 1)


def test_a_refused_request_is_not_retried_and_a_bad_key_stops_every_later_request(
    openai_server: StandInOpenAI, api_key: str, waits: list[float]
) -> None:
    adapter = served(openai_server, api_key_env=KEY_VARIABLE)
    adapter.set_task(task())
    openai_server.inject(server_error(400))
    with pytest.raises(RequestFailed, match="HTTP 400"):
        adapter.predict([stored_item((300, 200))])
    assert len(openai_server.received) == 1 and waits == []
    openai_server.key = "sk-the-right-one"
    with pytest.raises(RequestFailed, match="HTTP 401") as refused:
        adapter.predict([stored_item((300, 200))])
    assert TEST_KEY not in str(refused.value) and "***" in str(refused.value)  # the server echoed it
    with pytest.raises(RequestFailed, match="the server refused an earlier request"):
        adapter.predict([stored_item((300, 200))])
    assert len(openai_server.received) == 2  # the last question was never sent


def test_max_requests_caps_the_requests_sent(openai_server: StandInOpenAI) -> None:
    adapter = served(openai_server, max_requests=3)
    adapter.set_task(task())
    outcomes = []
    for seed in range(5):
        try:
            adapter.predict([stored_item((30, 20), seed)])
            outcomes.append("answered")
        except RequestFailed as refused:
            assert "max_requests=3 reached: request not sent" in str(refused)
            outcomes.append("refused")
    assert outcomes == ["answered"] * 3 + ["refused"] * 2 and len(openai_server.received) == 3


def test_max_cost_caps_the_estimated_spend_reported_in_the_row(openai_server: StandInOpenAI) -> None:
    prices = {"input_price": 2.5, "output_price": 10.0}  # per million tokens
    adapter = served(openai_server, max_cost=0.0005, **prices)
    adapter.start_pair()
    adapter.set_task(task())
    sent = 0
    with pytest.raises(RequestFailed, match=r"max_cost=0.0005 reached"):
        for seed in range(50):
            adapter.predict([stored_item((30, 20), seed)])
            sent += 1
    answered = openai_server.answered
    cost = sum(a["input_tokens"] * 2.5 + a["output_tokens"] * 10.0 for a in answered) / 1e6
    before_last = cost - (answered[-1]["input_tokens"] * 2.5 + answered[-1]["output_tokens"] * 10.0) / 1e6
    assert sent == len(answered) and before_last < 0.0005 <= cost
    columns = adapter.pair_columns()
    assert columns["api_cost_estimate"] == pytest.approx(cost)
    assert columns["api_input_tokens"] == sum(a["input_tokens"] for a in answered)
    assert columns["api_output_tokens"] == sum(a["output_tokens"] for a in answered)
    assert columns["api_latency_p95_ms"] >= columns["api_latency_p50_ms"] > 0


@pytest.mark.parametrize(("options", "message"), [
    ({"max_cost": 1.0}, "max_cost needs input_price and output_price"),
    ({"input_price": 1.0}, "give both input_price and output_price"),
    ({"concurrency": 0}, "option concurrency=0 must be a whole number at least 1"),
    ({"timeout": 0}, "option timeout=0 must be a number above 0"),
    ({"family": "llama"}, "option family='llama'"),
    ({"coordinates": "centimetres"}, "unknown box convention 'centimetres'"),
    ({"prompt_style": "poetic"}, "option prompt_style='poetic'"),
    ({"fewshot_images": 0}, "option fewshot_images=0 must be a whole number >= 1"),
    ({"api_key_env": "sk-live-abc123"}, "must name an environment variable"),
    ({"base_url": "ftp://example.org/v1"}, "is not an http"),
    ({"temprature": 0.2}, "unknown option"),
])
def test_bad_options_are_clear_errors(openai_server: StandInOpenAI, options: dict, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message) as refused:
        served(openai_server, **options)
    assert "sk-live-abc123" not in str(refused.value)


def test_the_official_api_needs_a_key_and_takes_max_completion_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="no API key for https://api.openai.com/v1: set OPENAI_API_KEY"):
        create("openai:gpt-4o")
    with pytest.raises(ValueError, match="needs a model name: openai:MODEL"):
        create("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-official")
    assert create("openai:gpt-4o").api.limit_key == "max_completion_tokens"  # built offline: nothing is sent


def test_a_served_adapter_needs_neither_torch_nor_transformers() -> None:
    import subprocess
    import sys

    code = ("import sys\nfrom pytest_rf100vl.adapters.registry import create\n"
            "adapter = create('openai:Qwen/Qwen2.5-VL-7B-Instruct', base_url='http://127.0.0.1:9/v1')\n"
            "import pytest_rf100vl.adapters.gemini\n"
            "assert adapter.convention.to_pixels((1, 2, 3, 4), 300, 200)\n"
            "print(sorted(name for name in ('torch', 'transformers') if name in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


# --------------------------------------------------------------------------- secrets


def test_the_key_reaches_the_server_and_nothing_else(
    openai_server: StandInOpenAI, api_key: str, caplog: pytest.LogCaptureFixture, tmp_path: Path,
    waits: list[float],
) -> None:
    openai_server.key = api_key
    with caplog.at_level(logging.DEBUG):
        adapter = served(openai_server, api_key_env=KEY_VARIABLE, max_retries=1)
        adapter.start_pair()
        adapter.set_task(task())
        adapter.predict([stored_item((300, 200))])
        assert openai_server.received[0].headers["authorization"] == f"Bearer {api_key}"
        openai_server.always(server_error(500))  # its message echoes the credential
        with pytest.raises(RequestFailed) as failed:
            adapter.predict([stored_item((300, 200))])
    shown = [str(failed.value), "".join(traceback.format_exception(failed.value)), caplog.text,
             json.dumps([adapter.options, adapter.describe(), adapter.pair_columns(), adapter.answer_key_parts()],
                        default=str)]
    assert "credential ***" in str(failed.value)
    assert all(api_key not in text for text in shown)


def test_credentials_in_the_base_url_are_never_shown(openai_server: StandInOpenAI) -> None:
    url = openai_server.url.replace("http://", "http://robot:pa55word@")
    adapter = create("openai:stand-in-vl", base_url=url)
    public = openai_server.url
    assert adapter.describe()["base_url"] == public and adapter.pair_columns()["api_base_url"] == public
    shown = adapter.calls.scrub(f"POST {url} failed")
    assert shown == f"POST {public.replace('http://', 'http://***@')} failed"  # user:password is one secret
    assert adapter.calls.scrub("the password is pa55word") == "the password is ***"


# --------------------------------------------------------------------------- the runner


def split(n: int) -> datasets.Dataset:
    import datasets

    rows = {"image": [{"bytes": stored_item(SIZES[i % 3], i).data, "path": None} for i in range(n)],
            "image_id": list(range(n)), "file_name": [f"{i}.png" for i in range(n)]}
    return datasets.Dataset.from_dict(rows).cast_column("image", datasets.Image())


def test_concurrent_requests_stay_within_concurrency_and_a_rerun_pays_nothing(
    openai_server: StandInOpenAI, api_key: str, tmp_path: Path
) -> None:
    from pytest_rf100vl.engine.runner import LoopOptions, run_split

    openai_server.answer = truth_answer("normalized")
    openai_server.delay = 0.1
    openai_server.key = api_key
    dataset = split(9)
    loop = LoopOptions(warmup_batches=1, cache=tmp_path / "answers")

    def run(**options: object):
        adapter = served(openai_server, family="generic", api_key_env=KEY_VARIABLE, **options)
        adapter.set_task(task())
        return adapter, run_split(adapter, dataset, None, progress=False, loop=loop)

    adapter, first = run(concurrency=3)
    assert openai_server.most_in_flight == 3 and len(openai_server.received) == 9
    assert first.counts.failed_images == 0 and adapter.answer_counts()["answers"] == 9
    for image_id, safe in first.detections.items():
        np.testing.assert_allclose(safe.boxes, expected_pixels("normalized", False, SIZES[image_id % 3]), atol=1e-6)
    _, again = run(concurrency=2, timeout=30.0, max_requests=0)  # transport options: the same answers
    assert again.timing.cached_images == 9 and len(openai_server.received) == 9
    run(concurrency=3, per_class=True)  # another prompt: asked again
    assert len(openai_server.received) == 9 + 2 * 9
    written = b"".join(path.read_bytes() for path in tmp_path.rglob("*") if path.is_file())
    assert written and api_key.encode() not in written


def test_the_answer_key_covers_the_model_the_reading_and_every_example(openai_server: StandInOpenAI) -> None:
    item = stored_item((300, 200))

    def key(model: str = "Qwen/Qwen3-VL-8B-Instruct", examples: tuple = FEWSHOT, **options: object) -> str:
        adapter = served(openai_server, model=model, **options)
        adapter.set_task(task("fewshot", fewshot=examples))
        return key_for(adapter, item.image)

    base = key()
    changed_example = (FEWSHOT[0], FewShotExample(pixels(99), FEWSHOT[1].boxes, FEWSHOT[1].labels), *FEWSHOT[2:])
    assert key(concurrency=1, timeout=5.0, max_requests=10, input_price=1.0, output_price=2.0) == base
    others = [key(model="Qwen/Qwen3-VL-32B-Instruct"), key(coordinates="normalized"), key(examples=changed_example),
              key(family="generic"), key(max_pixels=10**5), key(temperature=0.5), key(fewshot_images=2)]
    assert len({base, *others}) == len(others) + 1
    parts = served(openai_server, model="Qwen/Qwen3-VL-8B-Instruct").answer_key_parts(
        GroundingQuery("cat", box_prompt("cat"), quadrant_prompt("cat")))
    assert {"model:Qwen/Qwen3-VL-8B-Instruct", "family:qwen3"} <= set(parts)


# --------------------------------------------------------------------------- a plugin run


def sample_truth(folder: Path) -> list[tuple[np.ndarray, list[tuple[str, list[float]]]]]:
    """The embedded sample's test images (displayed pixels) and their boxes, from its export."""
    from rf100vl_hf.images import open_rgb
    from rf100vl_hf.sample import write_sample_export

    export = write_sample_export(folder)  # seeded: the bytes the plugin's "sample" has
    coco = json.loads((export / "test" / "_annotations.coco.json").read_text(encoding="utf-8"))
    names = {category["id"]: category["name"] for category in coco["categories"]}
    return [
        (np.asarray(open_rgb((export / "test" / image["file_name"]).read_bytes()), dtype=np.int16),
         [(names[a["category_id"]], a["bbox"]) for a in coco["annotations"] if a["image_id"] == image["id"]])
        for image in coco["images"]
    ]


def test_a_plugin_run_scores_the_truth_it_was_told_and_writes_the_key_nowhere(
    pytester: pytest.Pytester, openai_server: StandInOpenAI, api_key: str, tmp_path: Path
) -> None:
    # what the runs import, imported before them: an in-process run unloads what it imported,
    # and an extension module cannot be loaded twice
    import datasets  # noqa: F401
    import faster_coco_eval  # noqa: F401

    import rf100vl_hf.metrics  # noqa: F401

    import pytest_rf100vl.adapters.oracle  # noqa: F401

    warm = served(openai_server)
    warm.set_task(task())
    warm.predict([stored_item((30, 20))])  # the client's lazily imported modules
    openai_server.received.clear()
    openai_server.answered.clear()

    truths = sample_truth(tmp_path / "sample")

    def answer(received) -> str:  # the ground truth of the image received (found by its pixels), normalized
        seen = np.asarray(received.image.convert("RGB"), dtype=np.int16)
        _, boxes = min((t for t in truths if t[0].shape == seen.shape), key=lambda t: np.abs(t[0] - seen).mean())
        height, width = seen.shape[:2]
        return json.dumps([{"bbox_2d": [x / width, y / height, (x + w) / width, (y + h) / height], "label": name}
                           for name, (x, y, w, h) in boxes])

    openai_server.answer, openai_server.key = answer, api_key
    run = ["--rf100vl-model", "openai:stand-in-vl", "--rf100vl-model", "oracle", "--rf100vl-dataset", "sample",
           "--benchmark-disable", "--rf100vl-device", "cpu",
           "--rf100vl-adapter-option", "openai.max_requests=100",
           "--rf100vl-adapter-option", f"openai.base_url={openai_server.url}",
           "--rf100vl-adapter-option", f"openai.api_key_env={KEY_VARIABLE}",
           "--rf100vl-adapter-option", "openai.family=generic", "--rf100vl-adapter-option", "openai.concurrency=4"]
    first = pytester.runpytest_inprocess(*run)
    first.assert_outcomes(passed=2)
    row, oracle = [json.loads(line) for line in (pytester.path / ".rf100vl" / "results" / "results.jsonl").read_text(
        encoding="utf-8").splitlines()]
    # the oracle scores the ground truth itself (below 100: two boxes of the sample have no area)
    assert row["model"] == "openai" and row["ap"] == pytest.approx(oracle["ap"], abs=1e-9) and row["failed_images"] == 0
    assert (row["api_requests"], row["api_retries"], row["api_failed_requests"]) == (8, 0, 0)
    assert len(openai_server.received) == 8 and openai_server.most_in_flight <= 4
    assert row["api_input_tokens"] == sum(a["input_tokens"] for a in openai_server.answered)
    assert row["prompt_style"] == "paper" and row["prompt_hash"].startswith("sha256:")
    assert row["api_base_url"] == openai_server.url and json.loads(row["adapter_options"])["family"] == "generic"
    assert row["answer_counts"]["reencoded_images"] == 5  # the sample's 16-bit, palette, RGBA, CMYK and EXIF-turned
    again = pytester.runpytest_inprocess(*run, "--rf100vl-rerun")
    again.assert_outcomes(passed=2)
    assert len(openai_server.received) == 8  # the rerun was answered from the answer cache
    written = [path for path in pytester.path.rglob("*") if path.is_file()]
    assert len(written) > 3 and all(api_key.encode() not in path.read_bytes() for path in written)
    assert api_key not in first.stdout.str() + again.stdout.str() + first.stderr.str() + again.stderr.str()
