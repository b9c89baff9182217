"""Route b: an exported repository folder loads with ``load_dataset(folder, config)`` unchanged."""

from __future__ import annotations

import datasets
import pytest

from rf100vl_hf.metadata import read_metadata
from rf100vl_hf.rf100vl.builder import load_rf100vl

from tests.hub.source import actual_rows, assert_derived_from_train, classes, expected_rows


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_source_splits_come_back_unchanged(exported, split):
    loaded = datasets.load_dataset(str(exported.repo), exported.name, split=split)
    assert actual_rows(loaded) == expected_rows(exported.export, split)
    assert loaded.features["objects"]["category"].feature.names == classes(exported.export)


def test_every_split_equals_the_arrow_cache(exported):
    """Derived splits too: the parquet route gives what the builder's own cache holds."""
    cached = load_rf100vl(exported.name, data_dir=exported.data_dir, progress=False)
    loaded = datasets.load_dataset(str(exported.repo), exported.name)
    assert list(loaded) == list(cached)
    for split in cached:
        assert actual_rows(loaded[split]) == actual_rows(cached[split]), split
    meta = read_metadata(loaded)
    assert_derived_from_train(actual_rows(loaded[meta["fewshot"]["split"]]), exported.export)
    assert_derived_from_train(actual_rows(loaded[meta["semisup"]["split"]]), exported.export)


def test_metadata_survives_the_parquet_route(exported):
    loaded = datasets.load_dataset(str(exported.repo), exported.name, split="test")
    meta = read_metadata(loaded)
    assert meta["name"] == exported.name
    assert meta["classes"] == classes(exported.export)
    assert meta == read_metadata(load_rf100vl(exported.name, split="test", data_dir=exported.data_dir, progress=False))
