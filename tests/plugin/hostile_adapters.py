"""Adapters that fail as a whole (raise on every image, raise in ``set_task``, call
``sys.exit``), registered through ``pytest_rf100vl_make_adapter``. Tests copy this file as
the ``conftest.py`` of the runs they start, so it imports only installed packages."""

from __future__ import annotations

import sys

from pytest_rf100vl.adapters.base import Adapter, Detections, GroundingAnswer


class Nothing(Adapter):
    """Finds nothing (and answers nothing on UOUO): runs normally."""

    name = "nothing"
    tasks = ("rf100vl", "uouo")

    def predict(self, batch):
        return [Detections.empty() for _ in batch]

    def ground(self, batch, queries):
        return [GroundingAnswer(None, None) for _ in batch]


class Raiser(Nothing):
    """Raises on the images whose id is below its ``first_good`` option (default: every image)."""

    name = "raiser"
    option_defaults = {"first_good": 10**9}

    def predict(self, batch):
        if any(item.image_id < self.options["first_good"] for item in batch):
            raise RuntimeError(f"broken on image {batch[0].image_id}")
        return super().predict(batch)

    def ground(self, batch, queries):
        raise RuntimeError("no answer")


class BadTask(Nothing):
    """Refuses every task."""

    name = "badtask"

    def set_task(self, task):
        raise RuntimeError("cannot take this task")


class Exiter(Nothing):
    """Calls ``sys.exit(3)`` where its ``where`` option says: load, set_task, predict or ground."""

    name = "exiter"
    option_defaults = {"where": "predict"}

    def __init__(self, checkpoint=None, device="cpu", dtype="float32", **options):
        super().__init__(checkpoint, device, dtype, **options)
        self._exit_at("load")

    def _exit_at(self, where):
        if self.options["where"] == where:
            sys.exit(3)

    def set_task(self, task):
        self._exit_at("set_task")
        super().set_task(task)

    def predict(self, batch):
        self._exit_at("predict")
        return super().predict(batch)

    def ground(self, batch, queries):
        self._exit_at("ground")
        return super().ground(batch, queries)


HOSTILE = {cls.name: cls for cls in (Nothing, Raiser, BadTask, Exiter)}


def pytest_rf100vl_make_adapter(config, spec, device, dtype, options):
    name, checkpoint = spec.name, spec.checkpoint
    if name in HOSTILE:
        return HOSTILE[name](checkpoint, device=device, dtype=dtype, **options)
    return None
