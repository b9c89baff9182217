"""The papers' prompts (``adapters/prompts.py``), written out: every family's question in each
style (the appendix style against Appendix A's texts), the ``generic`` family's spelled-out
coordinates, few-shot turns and their answers, what a conversation's texts (the cache key)
cover, and the refusals. What reaches a server
byte for byte is checked in ``test_openai.py`` and ``test_gemini.py``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from pytest_rf100vl.adapters.base import DetectionTask, FewShotExample
from pytest_rf100vl.adapters.coordinates import BoxConvention
from pytest_rf100vl.adapters.prompts import Conversation, prompt_hash, task_conversations

CLASSES = ["cat", "dog"]
INSTRUCTIONS = {"cat": "A small feline.\nBox the whole body.", "dog": ""}  # dog: none given


def example(seed: int, labels: list[int]) -> FewShotExample:
    pixels = np.random.default_rng(seed).integers(0, 255, (100, 200, 3), dtype=np.uint8)
    boxes = np.array([[20.0, 10.0, 100.0, 50.0], [100.0, 50.0, 200.0, 100.0]])[: len(labels)]
    return FewShotExample(Image.fromarray(pixels), boxes, np.array(labels))


EXAMPLES = (example(1, [0, 1]), example(2, [1]), example(3, [0]), example(4, [0]))


def task(mode: str, examples: tuple[FewShotExample, ...] = EXAMPLES) -> DetectionTask:
    return DetectionTask("pets", CLASSES, prompt=mode, instructions=INSTRUCTIONS,
                         fewshot=examples if "fewshot" in mode else ())


def conversations(mode: str, family: str = "qwen3", style: str = "paper", per_class: bool = False,
                  convention: str = "qwen3", fewshot_images: int | None = None,
                  ) -> list[tuple[Conversation, int | None]]:
    return task_conversations(style, family, task(mode), per_class, BoxConvention(convention), fewshot_images)


@pytest.mark.parametrize(("convention", "frame"), [
    ("normalized", "fractions from 0 to 1 of the image width and height"),
    ("qwen3", "integers from 0 to 1000, relative to the image width and height"),
    ("gemini", "integers from 0 to 1000, relative to the image height and width, as [ymin, xmin, ymax, xmax]"),
    ("pixels", "pixels of the image"),
])
def test_the_generic_family_spells_out_its_coordinates(convention: str, frame: str) -> None:
    ((conversation, index),) = conversations("names", family="generic", convention=convention)
    assert index is None and conversation.system == "You are a helpful assistant capable of object detection."
    assert conversation.text == (
        'Locate all of the following objects: cat, dog in the image and output the coordinates in JSON format like '
        f'{{"bbox_2d":[x1,y1,x2,y2],"label":"class_name"}}, with coordinates in {frame}.')


def test_instructions_go_after_the_question_for_the_classes_that_have_them() -> None:
    ((multi, _),) = conversations("instructions")
    assert multi.text == (
        "Locate all of the following objects: cat, dog in the image and output the coordinates in JSON format."
        "\n\nUse the following annotator instructions to improve detection accuracy:\n"
        "cat: A small feline.\nBox the whole body.\n")
    (cat, _), (dog, _) = conversations("instructions", family="gemini", per_class=True, convention="gemini")
    assert cat.text == ("Detect the 2d bounding boxes of the following objects: cat.\n\n"
                        "Use the following annotator instructions to improve detection accuracy:\n"
                        "cat: A small feline.\nBox the whole body.\n")
    assert dog.text == "Detect the 2d bounding boxes of the following objects: dog."  # none to give


def test_the_cookbook_style_is_one_turn_without_a_system_prompt() -> None:
    ((conversation, _),) = conversations("instructions", style="cookbook")
    assert (conversation.system, conversation.examples) == (None, ())
    assert conversation.text == (
        'Locate every instance that belongs to the following categories: "cat", "dog". Report bbox coordinates in '
        'JSON format, as a list of {"bbox_2d": [x1, y1, x2, y2], "label": "<category>"}, using the category names '
        "exactly as given.\n\nThe annotators labelled these objects following these instructions:\n"
        "- cat: A small feline.\nBox the whole body.")  # a class's instructions stay one paragraph


def test_fewshot_turns_are_answered_with_ground_truth_in_the_familys_numbers() -> None:
    ((qwen, _),) = conversations("fewshot", convention="qwen3")
    assert len(qwen.examples) == 3 and qwen.image_first  # Qwen: three examples, images first
    assert qwen.examples[0].text == ("Locate all of the following objects: cat, dog (each of those is a separate "
                                     "class) in the image and output the coordinates in JSON format.")
    # (20, 10, 100, 50) of 200x100 over 1000: x 100..500, y 100..500; (100, 50, 200, 100): 500..1000
    assert qwen.examples[0].answer.split() == (
        '[ { "label": "cat", "bbox_2d": [ 100, 100, 500, 500 ] }, { "label": "dog", "bbox_2d": [ 500, 500, 1000, 1000'
        ' ] } ]').split()
    ((gemini, _),) = conversations("fewshot", family="gemini", convention="gemini")
    assert len(gemini.examples) == 4 and not gemini.image_first  # Gemini: every example, text first
    # the second example's one box, (20, 10, 100, 50), y first: [100, 100, 500, 500]
    expected = '```json [ { "label": "dog", "box_2d": [ 100, 100, 500, 500 ] } ] ```'
    assert gemini.examples[1].answer.split() == expected.split()


def test_single_class_fewshot_answers_keep_only_that_class() -> None:
    (cat, cat_index), (dog, dog_index) = conversations("fewshot", per_class=True)
    assert (cat_index, dog_index) == (0, 1)
    assert ['"cat"' in e.answer for e in cat.examples] == [True, False, True]
    assert ['"dog"' in e.answer for e in dog.examples] == [True, True, False]
    assert cat.examples[1].answer == "[]"


def test_instructions_with_fewshot_go_with_the_first_example_in_each_familys_words() -> None:
    ((qwen, _),) = conversations("instructions+fewshot")
    assert qwen.examples[0].text.endswith(
        "in JSON format.\n\nUse the following annotator instructions:\ncat: A small feline.\nBox the whole body.\n")
    assert "instructions" not in qwen.examples[1].text + qwen.text
    ((generic, _),) = conversations("instructions+fewshot", family="generic", convention="normalized")
    assert generic.examples[0].text.endswith("\n\nUse the following annotator instructions to improve detection "
                                             "accuracy:\ncat: A small feline.\nBox the whole body.\n")


def test_the_texts_cover_every_text_and_each_example_image() -> None:
    ((conversation, _),) = conversations("fewshot", fewshot_images=2)
    texts = conversation.texts()
    assert texts[0] == "system:You are a helpful assistant capable of object detection."
    assert [t.startswith("example-image:") for t in texts[1:-1:3]] == [True, True] and texts[-1] == conversation.text
    other = (example(9, [0, 1]), *EXAMPLES[1:])  # the same boxes on other pixels
    ((changed, _),) = task_conversations("paper", "qwen3", task("fewshot", other), False, BoxConvention("qwen3"), 2)
    assert changed.texts() != texts and changed.texts()[2:] == texts[2:]
    assert prompt_hash(texts) == prompt_hash(list(texts)) != prompt_hash(changed.texts())
    assert prompt_hash(texts).startswith("sha256:") and len(prompt_hash(texts)) == len("sha256:") + 16


def test_bad_requests_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown prompt style 'fancy'"):
        conversations("names", style="fancy")
    with pytest.raises(ValueError, match="unknown model family 'llama'"):
        conversations("names", family="llama")
    with pytest.raises(ValueError, match="prompt_style=cookbook has no few-shot prompt"):
        conversations("fewshot", style="cookbook")
    with pytest.raises(ValueError, match="prompt mode 'fewshot' on 'pets': the task has no few-shot examples"):
        task_conversations("paper", "qwen3", task("fewshot", ()), False, BoxConvention("qwen3"))


# ---------------------------------------------------------------- the appendix style (the paper's Appendix A)


@pytest.mark.parametrize(("family", "convention", "expected"), [
    ("qwen2.5", "qwen2.5", ["Locate every cat in the image and output the coordinates in JSON format.",
                            "Locate every dog in the image and output the coordinates in JSON format."]),
    ("qwen3", "qwen3", ["Locate every cat in the image and output the coordinates in JSON format.",
                        "Locate every dog in the image and output the coordinates in JSON format."]),
    ("gemini", "gemini", ["Detect all 2d bounding boxes of cat.", "Detect all 2d bounding boxes of dog."]),
])
def test_the_appendix_single_class_questions_are_appendix_as_word_for_word(family: str, convention: str,
                                                                            expected: list[str]) -> None:
    asked = conversations("names", family=family, style="appendix", per_class=True, convention=convention)
    assert [(c.text.encode(), index) for c, index in asked] == [(e.encode(), i) for i, e in enumerate(expected)]


def test_the_appendix_multi_class_gemini_question_has_no_final_full_stop() -> None:
    ((conversation, _),) = conversations("names", family="gemini", style="appendix", convention="gemini")
    assert conversation.text.encode() == b"Detect the 2d bounding boxes of the following objects: cat, dog"
    ((paper, _),) = conversations("names", family="gemini", convention="gemini")
    assert paper.text.encode() == b"Detect the 2d bounding boxes of the following objects: cat, dog."


def test_where_the_appendix_words_nothing_it_falls_back_to_the_paper_style() -> None:
    """Qwen multi-class, the generic family, system prompts and instruction blocks: the scripts' texts."""
    for family, convention, per_class in (("qwen3", "qwen3", False), ("qwen2.5", "qwen2.5", False),
                                          ("generic", "normalized", False), ("generic", "normalized", True)):
        for mode in ("names", "instructions"):
            appendix = conversations(mode, family, "appendix", per_class, convention)
            paper = conversations(mode, family, "paper", per_class, convention)
            assert [(c.system, c.text) for c, _ in appendix] == [(c.system, c.text) for c, _ in paper]
    (cat, _), _ = conversations("instructions", "gemini", "appendix", True, "gemini")
    assert cat.text == ("Detect all 2d bounding boxes of cat.\n\nUse the following annotator instructions to improve "
                        "detection accuracy:\ncat: A small feline.\nBox the whole body.\n")


def test_appendix_fewshot_turns_ask_the_appendix_question_and_multi_class_qwen_the_scripts() -> None:
    (cat, _), _ = conversations("fewshot", family="qwen3", style="appendix", per_class=True)
    assert [e.text for e in cat.examples] == ["Locate every cat in the image and output the coordinates in JSON "
                                              "format."] * 3
    ((multi, _),) = conversations("fewshot", family="qwen3", style="appendix")
    assert multi.examples[0].text == ("Locate all of the following objects: cat, dog (each of those is a separate "
                                      "class) in the image and output the coordinates in JSON format.")
    assert multi.text == ("Locate all of the following objects: cat, dog in the image and output the coordinates "
                          "in JSON format.")


def test_appendix_fewshot_images_for_qwen_are_kept_within_the_appendix_pixels() -> None:
    """4x28x28 to 12800x28x28 pixels: a 40x30 image (1,200 px) is enlarged as smart_resize does
    (scaled up, sides rounded up to multiples of 28: 84x56), its boxes with it; a 200x100 one is
    inside the bounds and sent as it is; Gemini's images are never resized."""
    from pytest_rf100vl.adapters.coordinates import qwen25_resized
    from pytest_rf100vl.adapters.prompts import APPENDIX_QWEN_FEWSHOT_PIXELS

    assert APPENDIX_QWEN_FEWSHOT_PIXELS == (3136, 10035200)
    small = FewShotExample(Image.new("RGB", (40, 30)), np.array([[4.0, 3.0, 20.0, 15.0]]), np.array([0]))
    width, height = qwen25_resized(40, 30, 3136, 10035200)
    assert width * height >= 3136 and (width, height) == (84, 56)
    shown = task_conversations("appendix", "qwen3", task("fewshot", (small, *EXAMPLES[:2])), False,
                               BoxConvention("qwen3"))[0][0]
    assert shown.examples[0].image.size == (84, 56) and shown.examples[1].image.size == (200, 100)
    # the box keeps its place: x 4..20 of 40 is 100..500 of 1000, y 3..15 of 30 is 100..500
    assert json.loads(shown.examples[0].answer)[0]["bbox_2d"] == [100, 100, 500, 500]
    paper = task_conversations("paper", "qwen3", task("fewshot", (small,)), False, BoxConvention("qwen3"))[0][0]
    assert paper.examples[0].image.size == (40, 30)
    gemini = task_conversations("appendix", "gemini", task("fewshot", (small,)), False, BoxConvention("gemini"))[0][0]
    assert gemini.examples[0].image.size == (40, 30)


def test_the_appendix_gemini_output_cap_is_the_gemini_default() -> None:
    from pytest_rf100vl.adapters.gemini import GeminiAdapter
    from pytest_rf100vl.adapters.prompts import APPENDIX_GEMINI_MAX_OUTPUT_TOKENS

    assert GeminiAdapter.option_defaults["max_output_tokens"] == APPENDIX_GEMINI_MAX_OUTPUT_TOKENS == 8192


# ---------------------------------------------------------------- the instructions block and the newer wording

README = "# Object Classes\n\n## cat\n\n### Description\n\nA small feline.\n\n## dog\n\n### Instructions\n\nAny dog.\n"


def test_the_multi_class_prompt_appends_the_readme_as_written_and_single_class_its_line() -> None:
    from dataclasses import replace

    with_readme = replace(task("instructions"), readme=README)
    ((multi, _),) = task_conversations("paper", "qwen2.5", with_readme, False, BoxConvention("qwen2.5"))
    assert multi.text == ("Locate all of the following objects: cat, dog in the image and output the coordinates in "
                          "JSON format.\n\nUse the following annotator instructions to improve detection accuracy:\n"
                          + README + "\n")
    (cat, _), (dog, _) = task_conversations("paper", "qwen2.5", with_readme, True, BoxConvention("qwen2.5"))
    assert cat.text.endswith("accuracy:\ncat: A small feline.\nBox the whole body.\n") and "#" not in cat.text
    assert "annotator" not in dog.text
    combined = replace(task("instructions+fewshot"), readme=README)
    ((first, _),) = task_conversations("paper", "qwen3", combined, False, BoxConvention("qwen3"))
    assert first.examples[0].text.endswith("Use the following annotator instructions:\n" + README + "\n")


def test_the_appendix_fallback_says_what_appendix_a_words() -> None:
    from pytest_rf100vl.adapters.prompts import APPENDIX_FALLBACK

    assert APPENDIX_FALLBACK.startswith("Appendix A words Qwen's single- and multi-class questions, Gemini's two, "
                                        "both system prompts and the instructions block")


def test_the_detpo_appendix_d_style_is_the_newer_wording_of_qwens_multi_class_questions() -> None:
    fmt = (' in the image and output the coordinates in JSON format like '
           '{"bbox_2d": [x1,y1,x2,y2], "label":"class_name"}.')
    ((names, _),) = conversations("names", style="detpo-appendix-d")
    assert names.text == "Locate all of the following objects: cat, dog" + fmt
    ((shots, _),) = conversations("fewshot", style="detpo-appendix-d")
    assert {example.text for example in shots.examples} == {
        "Locate all of the following objects: cat, dog (each of those is a separate class)" + fmt}
    for mode, per_class, family, convention in (("names", True, "qwen3", "qwen3"), ("names", False, "gemini", "gemini"),
                                                ("instructions", True, "gemini", "gemini")):
        appendix = conversations(mode, family, "appendix", per_class, convention)
        newer = conversations(mode, family, "detpo-appendix-d", per_class, convention)
        assert [(c.system, c.text) for c, _ in newer] == [(c.system, c.text) for c, _ in appendix]
