"""The ``gemini`` adapter against the stand-in Gemini API: ``box_2d`` read as Google documents
it, the paper's Gemini prompts as received byte for byte, the generation settings, faults,
and the key (``x-goog-api-key``) kept out of everything but the request. What the served
adapters share is tested once, in ``test_openai.py``."""

from __future__ import annotations

import json
import time
import traceback

import numpy as np
import pytest

from rf100vl_hf.uouo.prompts import box_prompt, quadrant_prompt

from pytest_rf100vl.adapters import remote
from pytest_rf100vl.adapters.base import GroundingQuery
from pytest_rf100vl.adapters.gemini import BOXES_SCHEMA, answer_of
from pytest_rf100vl.adapters.registry import create
from pytest_rf100vl.adapters.remote import RequestFailed

from tests.adapters.served import KEY_VARIABLE, TEST_KEY, expected_pixels, items, stored_item, truth_answer
from tests.adapters.test_openai import FEWSHOT, INSTRUCTED_BOTH, INSTRUCTED_CAT, INSTRUCTED_DOG, task
from tests.support.model_servers import GARBAGE, HANG, TRUNCATED, StandInGemini, rate_limited, server_error


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def served(server: StandInGemini, model: str = "gemini-2.5-flash", **options: object):
    return create(f"gemini:{model}", **{"base_url": server.url, "retry_base_delay": 0.001, "retry_max_delay": 1.0,
                                         **options})


@pytest.mark.parametrize("whole", [False, True], ids=["exact", "integers"])
def test_box_2d_is_ymin_xmin_ymax_xmax_over_1000(gemini_server: StandInGemini, whole: bool) -> None:
    gemini_server.answer = truth_answer("gemini", "box_2d", whole)
    adapter = served(gemini_server)
    adapter.set_task(task())
    for item, found in zip(items(), adapter.predict(items())):
        np.testing.assert_allclose(found.boxes, expected_pixels("gemini", whole, item.image.size), rtol=0, atol=1e-9)


def test_a_box_in_the_wrong_convention_is_read_as_written_not_repaired(gemini_server: StandInGemini) -> None:
    """A model that wrote x first: its numbers are read y first, as Gemini's are, and score badly."""
    gemini_server.answer = lambda received: '[{"box_2d": [100, 200, 500, 600], "label": "cat"}]'  # meant x first
    adapter = served(gemini_server)
    adapter.set_task(task())
    (found,) = adapter.predict([stored_item((300, 200))])
    np.testing.assert_allclose(found.boxes, [[60.0, 20.0, 180.0, 100.0]])  # x 200..600, y 100..500 of 1000


SYSTEM = "Return bounding boxes as a JSON array with labels. Never return masks or code fencing."
ASK_BOTH = "Detect the 2d bounding boxes of the following objects: cat, dog."
ASK_CAT = "Detect the 2d bounding boxes of the following objects: cat."
ASK_DOG = "Detect the 2d bounding boxes of the following objects: dog."
EXAMPLE_BOXES = [
    # [ymin, xmin, ymax, xmax] over 0..1000 of the 280x140 examples, truncated: the cat
    # (28, 28, 140, 70) is y 28/140, x 28/280 -> [200, 100, 500, 500]; the last (1, 1, 2, 2) [7, 3, 14, 7]
    [("cat", [200, 100, 500, 500]), ("dog", [500, 500, 1000, 1000])],
    [("dog", [0, 0, 200, 200])],
    [("cat", [50, 50, 150, 150])],
    [("cat", [7, 3, 14, 7])],
]
FIRST_ANSWER = """```json
[
  {
    "label": "cat",
    "box_2d": [
      200,
      100,
      500,
      500
    ]
  },
  {
    "label": "dog",
    "box_2d": [
      500,
      500,
      1000,
      1000
    ]
  }
]
```"""


def fenced(boxes: list[tuple[str, list[int]]]) -> str:
    return "```json\n" + json.dumps([{"label": label, "box_2d": box} for label, box in boxes], indent=2) + "\n```"


def expected_requests(mode: str, per_class: bool) -> list[tuple[list[tuple[str, str]], str]]:
    """Per request: the example turns (every few-shot image: the authors sent Gemini all) and the question."""
    groups = [(None, ASK_BOTH, INSTRUCTED_BOTH)] if not per_class else [
        ("cat", ASK_CAT, INSTRUCTED_CAT), ("dog", ASK_DOG, INSTRUCTED_DOG)]
    requests = []
    for only, ask, instructed in groups:
        shots = []
        if "fewshot" in mode:
            for i, boxes in enumerate(EXAMPLE_BOXES):
                first = instructed if i == 0 and mode == "instructions+fewshot" else ""
                shots.append((ask + first, fenced([(label, box) for label, box in boxes if only in (None, label)])))
        requests.append((shots, ask + (instructed if mode == "instructions" else "")))
    return requests


@pytest.mark.parametrize("per_class", [False, True], ids=["multi-class", "single-class"])
@pytest.mark.parametrize("mode", ["names", "instructions", "fewshot", "instructions+fewshot"])
def test_the_server_receives_the_papers_gemini_prompts_byte_for_byte(
    gemini_server: StandInGemini, mode: str, per_class: bool
) -> None:
    adapter = served(gemini_server, per_class=per_class)
    adapter.set_task(task(mode))
    item = stored_item((300, 200))
    adapter.predict([item])
    expected = expected_requests(mode, per_class)
    assert len(gemini_server.received) == len(expected)
    for received, (shots, question) in zip(gemini_server.received, expected):
        assert received.path == "/v1beta/models/gemini-2.5-flash:generateContent"
        assert received.system == SYSTEM
        assert received.settings == {"temperature": 0.0, "maxOutputTokens": 8192}
        turns = list(received.turns)
        assert [turn.role for turn in turns] == ["user", "model"] * len(shots) + ["user"]
        assert all(turn.layout == ["text", "image"] for turn in turns[::2])  # Gemini: the question first
        assert [(user.texts, reply.texts) for user, reply in zip(turns[:-1:2], turns[1::2])] == [
            ([text], [answer]) for text, answer in shots]
        assert turns[-1].texts == [question] and turns[-1].images == [item.data]
        assert len(shots) in (0, len(FEWSHOT))
    if mode == "fewshot" and not per_class:
        assert gemini_server.received[0].turns[1].texts == [FIRST_ANSWER]


def plain(settings: dict) -> dict:
    """Settings as the API reads them: the client adds a property order to schemas and spells
    the thinking budget either way (both are accepted)."""
    settings = json.loads(json.dumps(settings).replace('"thinking_budget"', '"thinkingbudget"')
                          .replace('"thinkingBudget"', '"thinkingbudget"'))
    if "responseSchema" in settings:
        settings["responseSchema"]["items"].pop("property_ordering", None)
        settings["responseSchema"]["items"].pop("propertyOrdering", None)
    return settings


def test_generation_settings_and_structured_output(gemini_server: StandInGemini) -> None:
    adapter = served(gemini_server, thinking_budget=128, json_output=True, max_output_tokens=1000, temperature=0.5)
    adapter.set_task(task())
    adapter.predict([stored_item((300, 200))])
    query = GroundingQuery("cat", box_prompt("cat"), quadrant_prompt("cat"))
    adapter.ground([stored_item((300, 200))], [query])
    detection, box, quadrant = (plain(received.settings) for received in gemini_server.received)
    common = {"temperature": 0.5, "maxOutputTokens": 1000, "thinkingConfig": {"thinkingbudget": 128}}
    assert detection == {**common, "responseMimeType": "application/json", "responseSchema": BOXES_SCHEMA}
    assert box == quadrant == common  # UOUO answers are free text
    with pytest.raises(ValueError, match="option response_schema is not boxes, none or a JSON schema"):
        served(gemini_server, json_output=True, response_schema="{not json")


def test_grounding_reads_the_box_x_first_as_the_question_asks(gemini_server: StandInGemini) -> None:
    gemini_server.answer = lambda received: "top-left" if "quadrant" in received.question else "[100, 250, 500, 750]"
    adapter = served(gemini_server)
    query = GroundingQuery("cat", box_prompt("cat"), quadrant_prompt("cat"))
    (result,) = adapter.ground([stored_item((300, 200))], [query])
    np.testing.assert_allclose(result.box, [30.0, 50.0, 150.0, 150.0])
    assert result.quadrant == "top-left" and gemini_server.received[0].system is None


def test_faults_are_retried_counted_and_bounded(gemini_server: StandInGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(remote, "pause", waits.append)
    gemini_server.answer = lambda received: '[{"box_2d": [0, 0, 1000, 1000], "label": "dog"}]'
    gemini_server.inject(rate_limited("0.5"), server_error(500), GARBAGE, TRUNCATED)
    adapter = served(gemini_server, timeout=0.3, max_retries=4)
    adapter.start_pair()
    adapter.set_task(task())
    (found,) = adapter.predict([stored_item((300, 200))])
    np.testing.assert_allclose(found.boxes, [[0.0, 0.0, 300.0, 200.0]])
    columns = adapter.pair_columns()
    assert waits[0] == 0.5 and gemini_server.statuses == [429, 500, 200, 200, 200]
    assert (columns["api_requests"], columns["api_retries"], columns["api_unreadable_responses"]) == (5, 4, 2)
    answered = gemini_server.answered[-1]
    assert (columns["api_input_tokens"], columns["api_output_tokens"]) == (answered["input_tokens"],
                                                                           answered["output_tokens"])
    gemini_server.always(HANG)
    hanging = served(gemini_server, timeout=0.3, max_retries=1)
    hanging.set_task(task())
    began = time.perf_counter()
    with pytest.raises(RequestFailed, match=r"no answer within timeout=0.3 s \(gave up after 2 attempts\)"):
        hanging.predict([stored_item((300, 200))])
    assert 0.6 <= time.perf_counter() - began < 3.0


def test_thinking_tokens_are_billed_as_output_and_a_blocked_prompt_is_an_empty_answer() -> None:
    from google.genai import types

    response = types.GenerateContentResponse(
        candidates=[types.Candidate(content=types.Content(role="model", parts=[
            types.Part(text="thinking...", thought=True), types.Part(text="[]")]), finish_reason="MAX_TOKENS")],
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=300, candidates_token_count=20, thoughts_token_count=80),
        model_version="gemini-2.5-flash-001",
    )
    answer = answer_of(response)
    assert (answer.text, answer.input_tokens, answer.output_tokens, answer.truncated, answer.model) == (
        "[]", 300, 100, True, "gemini-2.5-flash-001")
    blocked = answer_of(types.GenerateContentResponse(prompt_feedback={"block_reason": "SAFETY"}))
    assert (blocked.text, blocked.input_tokens, blocked.output_tokens) == ("", None, None)


def test_the_key_goes_in_its_header_and_nowhere_else(gemini_server: StandInGemini, api_key: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "pause", lambda seconds: None)
    gemini_server.key = api_key
    adapter = served(gemini_server, api_key_env=KEY_VARIABLE, max_retries=1)
    adapter.start_pair()
    adapter.set_task(task())
    adapter.predict([stored_item((300, 200))])
    assert gemini_server.received[0].headers["x-goog-api-key"] == api_key
    assert "key=" not in gemini_server.received[0].path
    gemini_server.always(server_error(503))  # its message echoes the credential
    with pytest.raises(RequestFailed) as failed:
        adapter.predict([stored_item((300, 200))])
    shown = [str(failed.value), "".join(traceback.format_exception(failed.value)),
             json.dumps([adapter.options, adapter.describe(), adapter.pair_columns()], default=str)]
    assert "credential ***" in str(failed.value) and all(TEST_KEY not in text for text in shown)


def test_the_key_is_read_from_gemini_then_google_variables(gemini_server: StandInGemini,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    gemini_server.key = "google-key"
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key")
    adapter = served(gemini_server)
    adapter.set_task(task())
    adapter.predict([stored_item((300, 200))])
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")  # read first: the server refuses it
    second = served(gemini_server, max_retries=0)
    second.set_task(task())
    with pytest.raises(RequestFailed, match="HTTP 401"):
        second.predict([stored_item((300, 200))])
    assert [received.headers["x-goog-api-key"] for received in gemini_server.received] == ["google-key", "gemini-key"]
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.delenv("GOOGLE_API_KEY")
    with pytest.raises(ValueError, match="no API key for https://generativelanguage.googleapis.com: set GEMINI_API"):
        create("gemini:gemini-2.5-flash")
