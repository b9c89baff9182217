"""Adapters with known, bad or hostile behaviour, registered through the plugin's
``pytest_rf100vl_make_adapter`` hook. The tests copy this file as the ``conftest.py`` of
the pytest runs they start, so it must import only installed packages."""

from __future__ import annotations

import numpy as np

from pytest_rf100vl.adapters.base import Adapter, Detections


class Nothing(Adapter):
    """Never finds anything: AP 0 on every dataset."""

    name = "nothing"

    def predict(self, batch):
        return [Detections.empty() for _ in batch]


class Messy(Adapter):
    """A different kind of bad output for each image id of the sample's test split."""

    name = "messy"

    def predict(self, batch):
        return [self._one(item) for item in batch]

    def _one(self, item):
        width, height = item.image.size
        good = [10.0, 10.0, 60.0, 60.0]
        if item.image_id == 0:  # one NaN box, one infinite score, one label outside the classes
            boxes = np.array([good, [np.nan, 1, 2, 3], good, good])
            return Detections(boxes, np.array([0.9, 0.8, np.inf, 0.5]), np.array([0, 0, 1, 99]))
        if item.image_id == 1:  # two boxes reaching outside the image
            boxes = np.array([[-20.0, -5.0, 30.0, 40.0], [width - 10.0, 5.0, width + 50.0, height + 9.0]])
            return Detections(boxes, np.array([0.7, 0.6]), np.array([0, 1]))
        if item.image_id == 2:  # 1200 boxes: only the best 500 can count
            rng = np.random.default_rng(0)
            corners = rng.uniform(0, 100, size=(1200, 2))
            boxes = np.concatenate([corners, corners + 20], axis=1)
            return Detections(boxes, rng.uniform(size=1200), np.zeros(1200, dtype=np.int64))
        if item.image_id == 3:
            return Detections.empty()
        if item.image_id == 4:
            raise RuntimeError("boom on image 4")
        return Detections(np.array([good]), np.array([0.5]), np.array([2]))


class InterruptOnSecond(Adapter):
    """Finds nothing on the first dataset it is given, then stops the run like Ctrl-C (one
    instance must see both datasets: the plugin loads a model once for all its datasets)."""

    name = "interrupt"

    def set_task(self, task):
        super().set_task(task)
        self.datasets = getattr(self, "datasets", 0) + 1

    def predict(self, batch):
        if self.datasets > 1:
            raise KeyboardInterrupt
        return [Detections.empty() for _ in batch]


FAKES = {cls.name: cls for cls in (Nothing, Messy, InterruptOnSecond)}


def pytest_rf100vl_make_adapter(config, spec, device, dtype):
    name, _, checkpoint = spec.partition(":")
    if name in FAKES:
        return FAKES[name](checkpoint or None, device=device, dtype=dtype)
    return None
