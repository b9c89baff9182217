"""A split's columns read as Arrow: the rows ``with_format("arrow")`` gives, selections applied."""

from __future__ import annotations

import datasets
import pytest

from rf100vl_hf.arrow import arrow_columns


@pytest.fixture(scope="module")
def split() -> datasets.Dataset:
    features = datasets.Features({"image": datasets.Image(), "image_id": datasets.Value("int64"),
                                  "boxes": datasets.List(datasets.Value("float64"))})
    rows = [{"image": {"bytes": bytes([i]), "path": f"{i}.jpg"}, "image_id": 10 + i, "boxes": [float(i)] * i}
            for i in range(6)]
    return datasets.Dataset.from_list(rows, features=features)


@pytest.mark.parametrize("chosen", [None, [4, 1], [], range(3)], ids=["all", "reordered", "none", "first-3"])
def test_gives_the_rows_of_the_selection_in_its_order(split: datasets.Dataset, chosen: list[int] | None) -> None:
    dataset = split if chosen is None else split.select(chosen)
    columns = ["image_id", "boxes", "image"]
    table = arrow_columns(dataset, columns)
    assert table.equals(dataset.with_format("arrow", columns=columns)[:].select(columns))
    assert table.column("image_id").to_pylist() == [10 + i for i in (range(6) if chosen is None else chosen)]
    assert [image["path"] for image in table.column("image").to_pylist()] == [f"{i - 10}.jpg" for i in
                                                                               table.column("image_id").to_pylist()]
