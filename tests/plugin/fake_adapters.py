"""Adapters with known, bad or hostile behaviour, registered through the plugin's
``pytest_rf100vl_make_adapter`` hook. The tests copy this file as the ``conftest.py`` of
the pytest runs they start, so it must import only installed packages."""

from __future__ import annotations

import numpy as np

from pytest_rf100vl.adapters.base import Adapter, Detections, GroundingAnswer


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


class Talker(Adapter):
    """A text model on UOUO: its box is always the bottom-right cell; it is asked the quadrant
    and replies with its ``reply`` option, which reads as a quadrant only when it is one
    of the four words; it raises on mosaic 3."""

    name = "talker"
    tasks = ("uouo",)
    option_defaults = {"reply": "somewhere near the middle"}
    asked = True

    def __init__(self, checkpoint=None, device="cpu", dtype="float32", **options):
        self.check_options(options)
        super().__init__(checkpoint, device, dtype, **{**self.option_defaults, **options})

    def predict(self, batch):
        raise NotImplementedError("UOUO only")

    def ground(self, batch, queries):
        answers = []
        for item in batch:
            if item.image_id == 3:
                raise RuntimeError("lost for words on mosaic 3")
            box = (item.image.width / 2, item.image.height / 2, float(item.image.width), float(item.image.height))
            raw = {"box": str(list(box))}
            if not self.asked:
                answers.append(GroundingAnswer(box, None, raw))
                continue
            reply = self.options["reply"]
            word = reply if reply in ("top-left", "top-right", "bottom-left", "bottom-right") else None
            answers.append(GroundingAnswer(box, word, {**raw, "quadrant": reply}))
        return answers


class Pointer(Talker):
    """The same box as the talker, but never asked the quadrant (like a detector)."""

    name = "pointer"
    asked = False


FAKES = {cls.name: cls for cls in (Nothing, Messy, InterruptOnSecond, Talker, Pointer)}


def pytest_rf100vl_make_adapter(config, spec, device, dtype, options):
    name, checkpoint = spec.name, spec.checkpoint
    if name in FAKES:
        return FAKES[name](checkpoint, device=device, dtype=dtype, **options)
    return None
