"""The generic registry of named classes: an unknown name lists every name registered."""

from __future__ import annotations

import pytest

from rf100vl_hf.errors import UnknownNameError

from pytest_rf100vl.core.registry import Registry

NAMES = [f"model-{letter}" for letter in "abcdefghijklmno"]  # more than any cut-off of a long list


@pytest.fixture
def registry() -> Registry[object]:
    return Registry("model adapter", "rf100vl.tests-no-such-group", object, {name: "builtins:object" for name in NAMES})


def test_an_unknown_name_lists_every_registered_name(registry: Registry[object]) -> None:
    with pytest.raises(UnknownNameError) as caught:
        registry.load("zzz")
    assert str(caught.value) == f"unknown model adapter 'zzz'; available: {', '.join(NAMES)}"


def test_a_near_name_puts_the_closest_first(registry: Registry[object]) -> None:
    with pytest.raises(UnknownNameError) as caught:
        registry.load("model-zz")
    message = str(caught.value)
    assert message.startswith("unknown model adapter 'model-zz'; closest: model-")
    assert message.endswith(f"; available: {', '.join(NAMES)}")
    assert registry.load("model-o") is object
