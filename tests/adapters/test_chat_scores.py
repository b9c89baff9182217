"""Scores of chat-model boxes (adapter option ``scores``): ``one`` (the papers' protocol, every
box 1.0), ``ask`` (the question asks for a score per box, the reply's is read) and ``vqa`` (each
box re-scored by a yes/no question to the same model). Run against the stand-in OpenAI server:
each row scores what pycocotools gives the same boxes with the same scores, records its score
source, differs from the others in identity, and counts the re-scoring questions as requests."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest
from PIL import Image

from pytest_rf100vl.adapters.base import DetectionTask, ImageItem
from pytest_rf100vl.adapters.prompts import ASK_SCORES
from pytest_rf100vl.adapters.registry import create
from pytest_rf100vl.adapters.text_answers import yes_or_no
from pytest_rf100vl.engine.answer_cache import key_for

from tests.adapters.test_served_scores import scripted
from tests.support.coco_reference import precision_ap, pycocotools_eval
from tests.support.model_servers import Received, serve_openai

VQA = re.compile(r'^Does the region \[([^\]]*)\] of this image show a (.*)\? Answer "yes" or "no"\.$')


@pytest.fixture(scope="module")
def sample_split() -> Any:
    from rf100vl_hf.rf100vl.builder import load_rf100vl

    return load_rf100vl("sample", split="test", progress=False)


def asked_score(label: str, classes: list[str]) -> float | None:
    """The stand-in's own score of a box of ``label``: none for the first class, else by class."""
    index = classes.index(label)
    return None if index == 0 else round(0.2 + 0.15 * (index % 5), 2)


def test_yes_or_no_reads_the_first_word() -> None:
    assert [yes_or_no(text) for text in ("Yes.", " no, it is a dog", "YES", "maybe", "", "Not sure")] == \
        [1.0, 0.0, 1.0, None, None, None]


@pytest.mark.parametrize("source", ["ask", "vqa"])  # "one": test_served_scores.py
def test_each_score_source_scores_what_pycocotools_gives_its_scores(pytester: pytest.Pytester, sample_split: Any,
                                                                   source: str) -> None:
    import faster_coco_eval  # noqa: F401  (imported before the in-process run, which unloads what it imports)

    import rf100vl_hf.metrics  # noqa: F401
    from rf100vl_hf.metadata import read_metadata

    classes, category_ids = read_metadata(sample_split)["classes"], read_metadata(sample_split)["category_ids"]
    boxes_answer, predictions, truth = scripted(sample_split, "qwen3")
    questions: list[str] = []

    def answer(received: Received) -> str:
        questions.append(received.question)
        asked = VQA.match(received.question)
        if asked:  # the first class is there, the others are not
            return "Yes." if asked.group(2) == classes[0] else "No"
        boxes = json.loads(boxes_answer(received))
        for box in boxes:
            if asked_score(box["label"], classes) is not None:
                box["score"] = asked_score(box["label"], classes)
        return json.dumps(boxes)

    names = {category: name for name, category in zip(classes, category_ids)}
    for prediction in predictions:
        name = names[prediction["category_id"]]
        prediction["score"] = {"one": 1.0, "ask": asked_score(name, classes) or 0.0,
                               "vqa": float(name == classes[0])}[source]
    reference = 100 * precision_ap(pycocotools_eval(truth, predictions))
    with serve_openai(answer=answer) as server:
        pytester.runpytest_inprocess(
            "--rf100vl-model", "openai:stand-in-vl", "--rf100vl-dataset", "sample", "--rf100vl-device", "cpu",
            "--benchmark-disable", "--override-ini", "rf100vl_cache=off", "-p", "no:cacheprovider",
            "--rf100vl-adapter-option", f"openai.base_url={server.url}",
            "--rf100vl-adapter-option", "openai.coordinates=qwen3", "--rf100vl-adapter-option", f"scores={source}",
        ).assert_outcomes(passed=1)
    (row,) = [json.loads(line) for line in
              (pytester.path / ".rf100vl" / "results" / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert row["ap"] == pytest.approx(reference, abs=1e-9)
    assert row["score_source"] == source and json.loads(row["adapter_options"])["scores"] == source
    detections = [q for q in questions if not VQA.match(q)]
    assert len(detections) == row["n_images"]
    assert all(q.endswith(ASK_SCORES) == (source == "ask") for q in detections)
    rescored = len(questions) - len(detections)
    assert rescored == (len(predictions) if source == "vqa" else 0)
    assert row["api_requests"] == len(questions)  # each yes/no question is a request like any other
    counts = json.loads(row["answer_counts"]) if isinstance(row["answer_counts"], str) else row["answer_counts"]
    assert counts.get("vqa_questions", 0) == rescored
    first_class = sum(names[p["category_id"]] == classes[0] for p in predictions)
    assert counts.get("unscored_boxes", 0) == (first_class if source == "ask" else 0)


def test_the_score_source_keys_the_answer_cache_and_the_row_identity() -> None:
    image = Image.new("RGB", (64, 48), "gray")
    with serve_openai(answer=lambda received: "[]") as server:
        built = {source: create("openai:stand-in-vl", base_url=server.url, scores=source)
                 for source in ("one", "ask", "vqa")}
        for adapter in built.values():
            adapter.set_task(DetectionTask("pets", ["cat", "dog"]))
        keys = {key_for(adapter, image) for adapter in built.values()}
        identities = {json.dumps(type(a).identity_options(a.options), sort_keys=True) for a in built.values()}
        assert len(keys) == 3 and len(identities) == 3
        assert built["vqa"].predict([ImageItem(image, 0, "0.png")])[0].scores.size == 0  # no box: no question
        assert len(server.received) == 1
        with pytest.raises(ValueError, match=r"option scores='maybe' \(use one of one, ask, vqa\)"):
            create("openai:stand-in-vl", base_url=server.url, scores="maybe")


def test_asked_scores_are_clipped_and_a_missing_one_is_zero_and_counted() -> None:
    reply = json.dumps([{"bbox_2d": [0.1, 0.1, 0.5, 0.5], "label": "cat", "score": 1.7},
                        {"bbox_2d": [0.2, 0.2, 0.6, 0.6], "label": "cat", "confidence": "0.25"},
                        {"bbox_2d": [0.3, 0.3, 0.7, 0.7], "label": "dog"},
                        {"bbox_2d": [0.3, 0.3, 0.7, 0.7], "label": "dog", "score": -2}])
    with serve_openai(answer=lambda received: reply) as server:
        adapter = create("openai:stand-in-vl", base_url=server.url, scores="ask", family="generic")
        adapter.set_task(DetectionTask("pets", ["cat", "dog"]))
        (found,) = adapter.predict([ImageItem(Image.new("RGB", (100, 100)), 0, "0.png")])
    np.testing.assert_allclose(found.scores, [1.0, 0.25, 0.0, 0.0])
    assert adapter.answer_counts()["unscored_boxes"] == 1
    assert adapter.pair_columns()["score_source"] == "ask"


# ---------------------------------------------------------------- prompt files (option prompt_file)

DETPO_FILE = {"cat": "A small feline, refined.", "dog": "[{'dog': 'Any dog, refined.'}]"}  # DetPO's layout


def test_a_prompt_file_gives_the_instructions_and_its_hash_the_row_identity(tmp_path) -> None:
    folder = tmp_path / "Qwen3-VL-8B-Instruct"
    folder.mkdir()
    (folder / "all_refined_class_instructions_pets.json").write_text(json.dumps(DETPO_FILE), encoding="utf-8")
    (folder / "all_refined_class_instructions_other.json").write_text("{}", encoding="utf-8")
    readme = "# Object Classes\n\n## cat\n\nA cat.\n"
    with serve_openai(answer=lambda received: "[]") as server:
        plain = create("openai:Qwen/Qwen3-VL-8B-Instruct", base_url=server.url)
        filed = create("openai:Qwen/Qwen3-VL-8B-Instruct", base_url=server.url, prompt_file=str(folder))
        for adapter in (plain, filed):
            adapter.set_task(DetectionTask("pets", ["cat", "dog"], prompt="instructions",
                                           instructions={"cat": "A cat."}, readme=readme))
            adapter.predict([ImageItem(Image.new("RGB", (64, 48)), 0, "0.png")])
        sent_plain, sent_filed = (received.question for received in server.received)
    assert sent_plain.endswith("accuracy:\n" + readme + "\n")  # the multi-class prompt: the file as written
    assert sent_filed.endswith("accuracy:\ncat: A small feline, refined.\ndog: [{'dog': 'Any dog, refined.'}]\n")
    identity = type(filed).identity_options(filed.options)["prompt_file"]
    assert identity.startswith(f"{folder}#sha256:")
    columns = filed.pair_columns()
    assert columns["prompt_file"].endswith("all_refined_class_instructions_pets.json")
    assert columns["prompt_file_sha256"].startswith("sha256:") and plain.pair_columns()["prompt_file"] is None
    (folder / "all_refined_class_instructions_other.json").write_text('{"x": "y"}', encoding="utf-8")
    assert type(filed).identity_options(filed.options)["prompt_file"] != identity  # the folder's content


def test_a_bad_prompt_file_is_one_line_naming_the_file_and_the_key(tmp_path) -> None:
    from rf100vl_hf.errors import DataError

    bad = tmp_path / "pets.json"
    bad.write_text(json.dumps({"cat": "ok", "horse": "not a class"}), encoding="utf-8")
    task = DetectionTask("pets", ["cat", "dog"], prompt="instructions", instructions={"dog": "Any dog."})
    with serve_openai(answer=lambda received: "[]") as server:
        adapter = create("openai:stand-in-vl", base_url=server.url, prompt_file=str(bad))
        with pytest.raises(DataError, match=rf"^{bad}: horse: is not a class of the dataset \(cat, dog\)$"):
            adapter.set_task(task)
        bad.write_text(json.dumps({"cat": "A cat from the file."}), encoding="utf-8")
        with pytest.warns(UserWarning, match="no instructions for 'dog'; those classes keep the dataset's"):
            adapter.set_task(task)
        assert adapter.answer_counts()["prompt_file_missing_classes"] == 1
        with pytest.raises(ValueError, match="prompt mode 'names' does not send"):
            adapter.set_task(DetectionTask("pets", ["cat", "dog"]))
        with pytest.raises(DataError, match="prompt_file: no such file"):
            type(adapter).identity_options({**adapter.options, "prompt_file": str(tmp_path / "missing.json")})


def test_a_vqa_question_is_in_the_transcript_and_read_back_as_the_boxs_score() -> None:
    from rf100vl_hf.results.draw import reply_text

    def answer(received: Received) -> str:
        if VQA.match(received.question):
            return "no"
        return json.dumps([{"bbox_2d": [0.1, 0.2, 0.5, 0.6], "label": "cat"}])

    with serve_openai(answer=answer) as server:
        adapter = create("openai:stand-in-vl", base_url=server.url, scores="vqa", family="generic")
        adapter.set_task(DetectionTask("pets", ["cat", "dog"]))
        (found,) = adapter.predict([ImageItem(Image.new("RGB", (100, 50)), 0, "0.png")])
    assert found.scores.tolist() == [0.0]
    asked, rescored = found.transcript
    assert rescored == {"question": "vqa", "sent": [
        "system:none", 'Does the region [0.1, 0.2, 0.5, 0.6] of this image show a cat? Answer "yes" or "no".'], "reply": "no",
        "score": 0.0}
    text = reply_text({"image_id": 0, "file_name": "0.png", "transcript": found.transcript, "detections": [{}]})
    assert "--- question 2\nsent:\n  system:none\n  Does the region" in text and "reply:\n  no\nbox score: 0\n" in text
    assert adapter.answer_counts()["vqa_questions"] == 1
