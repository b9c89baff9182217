"""The adapter base class: options given as text take the type of their default."""

from __future__ import annotations

import pytest

from rf100vl_hf.arguments import typed_option

from pytest_rf100vl.adapters.base import Adapter, Detections


class _Options(Adapter):
    name = "options"
    option_defaults = {"threshold": 0.01, "steps": 4, "per_class": False, "limit": None, "template": "a {}"}

    def predict(self, batch):
        return [Detections.empty() for _ in batch]


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("threshold", "0.05", 0.05),
        ("steps", "512", 512),
        ("per_class", "true", True),
        ("per_class", "OFF", False),
        ("limit", "0.3", 0.3),
        ("limit", "none", None),
        ("template", "an image of {}", "an image of {}"),
    ],
)
def test_text_options_take_the_type_of_their_default(key: str, text: str, expected: object) -> None:
    adapter = _Options(**{key: text})
    assert adapter.options[key] == expected and type(adapter.options[key]) is type(expected)


def test_defaults_fill_options_not_given() -> None:
    assert _Options(steps="2").options == {
        "threshold": 0.01, "steps": 2, "per_class": False, "limit": None, "template": "a {}"
    }


def test_values_that_are_not_text_pass_through() -> None:
    assert typed_option("threshold", 0.5, 0.01) == 0.5


@pytest.mark.parametrize(("key", "text"), [("threshold", "low"), ("steps", "1.5"), ("per_class", "maybe")])
def test_text_that_does_not_parse_names_the_option(key: str, text: str) -> None:
    with pytest.raises(ValueError, match=rf"option {key}='{text}'"):
        _Options(**{key: text})


def test_unknown_options_are_refused_with_the_accepted_ones() -> None:
    with pytest.raises(TypeError, match=r"unknown option\(s\) treshold .*accepted: threshold, steps"):
        _Options(treshold="0.1")
