"""Adapters for the tests of resuming, the answer cache, sharding and pytest-xdist, registered
through ``pytest_rf100vl_make_adapter``. The tests copy this file as the ``conftest.py`` of
the pytest runs they start, so it must import only installed packages.

``counter:NAME`` answers like a slow text model whose answers can be cached: each image it
is asked about is logged as a line ``NAME dataset image_id pid`` to ``$SCALE_LOG``; it sleeps
``$SCALE_SLEEP`` seconds a batch, and it kills its own process (SIGKILL, like the OOM
killer) when asked its ``$SCALE_KILL_AT``-th image (counting from 1 across the process).
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np

from pytest_rf100vl.adapters.base import Adapter, Detections

ASKED = [0]


class Counter(Adapter):
    name = "counter"
    repeatable = False  # the log counts the images asked for answers; timing rounds would add to it

    def answer_key_parts(self, query=None):
        # the dataset is part of what it is sent: the tests' datasets share their images
        return ("uouo", query.box_prompt) if query else ("rf100vl", self.task.dataset, *self.task.classes)

    def predict(self, batch):
        time.sleep(float(os.environ.get("SCALE_SLEEP", "0")))
        out = []
        for item in batch:
            ASKED[0] += 1
            if ASKED[0] == int(os.environ.get("SCALE_KILL_AT", "0")):
                os.kill(os.getpid(), signal.SIGKILL)
            with open(os.environ["SCALE_LOG"], "a", encoding="utf-8") as log:
                log.write(f"{self.checkpoint} {self.task.dataset} {item.image_id} {os.getpid()}\n")
            # a box whose size depends on the image and the model: scores differ between pairs
            side = 20.0 + item.image_id % 5 * 10 + len(self.checkpoint or "")
            out.append(Detections(np.array([[5.0, 5.0, 5.0 + side, 5.0 + side]]), np.array([0.9]), np.array([0])))
        return out


def pytest_rf100vl_make_adapter(config, spec, device, dtype, options):
    name, checkpoint = spec.name, spec.checkpoint
    if name == "counter":
        return Counter(checkpoint, device=device, dtype=dtype, **options)
    return None
