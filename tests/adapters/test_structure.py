"""The shape of the adapter classes (``docs/architecture.md``, "Where new things go"): no built-in
adapter is more than three classes below ``Adapter`` (a model's behaviour comes from parts it
composes, not from a long chain of bases), no class has two bases that are both adapters, and
every built-in's class says what its entry in the registry's table says."""

from __future__ import annotations

from abc import ABC
from typing import Generic, Protocol, TypeVar

import pytest

from pytest_rf100vl.adapters import registry
from pytest_rf100vl.adapters.base import Adapter

MAX_DEPTH = 3
NOT_COUNTED = {object, ABC, Generic}
"""Classes of an adapter's method resolution order that carry no adapter behaviour (nor do
``Protocol`` classes); any other class below ``Adapter``, a mixin included, counts."""


def depth(cls: type) -> int:
    """How many classes of ``cls``'s method resolution order are below ``Adapter``."""
    return sum(1 for owner in cls.__mro__ if owner not in Adapter.__mro__ and owner not in NOT_COUNTED
               and not getattr(owner, "_is_protocol", False))


def diamonds(cls: type) -> list[str]:
    """The classes of ``cls``'s method resolution order with two or more bases that are adapters."""
    return [owner.__name__ for owner in cls.__mro__
            if sum(isinstance(base, type) and issubclass(base, Adapter) for base in owner.__bases__) > 1]


def problems(cls: type) -> list[str]:
    """What is wrong with the shape of adapter class ``cls`` (empty: nothing)."""
    found = [f"{cls.__name__} is {depth(cls)} classes below Adapter (at most {MAX_DEPTH})"] \
        if depth(cls) > MAX_DEPTH else []
    return found + [f"{owner} has two adapter bases" for owner in diamonds(cls)]


@pytest.mark.parametrize("name", sorted(registry.BUILTIN))
def test_every_built_in_is_at_most_three_classes_below_adapter_without_a_diamond(name: str) -> None:
    assert problems(registry.adapter_class(name)) == []


@pytest.mark.parametrize("name", sorted(registry.BUILTIN))
def test_every_built_in_class_says_what_its_table_entry_says(name: str) -> None:
    entry, cls = registry.BUILTIN[name], registry.adapter_class(name)
    assert isinstance(entry, registry.Listing)
    assert (cls.name, cls.default_checkpoint, tuple(cls.prompt_modes), tuple(cls.tasks)) == (
        name, entry.default_checkpoint, entry.prompt_modes, entry.tasks)


T = TypeVar("T")


class Speaks(Protocol):
    def speak(self) -> str: ...


class One(Adapter):
    def predict(self, batch):  # type: ignore[no-untyped-def]
        return []


class Two(One, Generic[T]):
    pass


class Three(Two[int], Speaks):
    def speak(self) -> str:
        return "three"


class Four(Three):
    pass


class Mixin:
    pass


class MixedIn(Mixin, Two[int]):
    pass


class Other(Adapter):
    def predict(self, batch):  # type: ignore[no-untyped-def]
        return []


class Both(One, Other):
    pass


def test_the_check_counts_every_class_below_adapter_but_generic_and_protocols() -> None:
    assert [depth(cls) for cls in (One, Two, Three, Four, MixedIn)] == [1, 2, 3, 4, 4]
    assert problems(Three) == []
    assert problems(Four) == ["Four is 4 classes below Adapter (at most 3)"]
    assert problems(MixedIn) == ["MixedIn is 4 classes below Adapter (at most 3)"]  # a mixin is a class of the chain


def test_the_check_finds_a_diamond_wherever_it_is_in_the_chain() -> None:
    class Below(Both):
        pass

    assert problems(Both) == ["Both has two adapter bases"]
    assert problems(Below) == ["Below is 4 classes below Adapter (at most 3)", "Both has two adapter bases"]
    assert diamonds(MixedIn) == []  # one adapter base and a plain mixin is no diamond
