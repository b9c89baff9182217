"""Hooks the plugin calls, for a ``conftest.py`` or another plugin to implement."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_rf100vl.adapters.base import Adapter


@pytest.hookspec(firstresult=True)
def pytest_rf100vl_make_adapter(
    config: pytest.Config, spec: str, device: str, dtype: str, options: dict[str, str]
) -> "Adapter | None":
    """Build the adapter for ``spec``, or return ``None`` to leave it to the adapter registry.

    ``options`` are the ``--rf100vl-adapter-option`` values for this model (strings; an
    implementation may leave the argument out of its signature). This lets a project try a
    model from its ``conftest.py`` without publishing an entry point in the
    ``rf100vl.adapters`` group. Example::

        import numpy as np

        from pytest_rf100vl.adapters.base import Adapter, Detections

        class Everywhere(Adapter):
            name = "everywhere"

            def predict(self, batch):
                return [Detections(np.array([[0, 0, *item.image.size]]), np.ones(1), np.zeros(1))
                        for item in batch]

        def pytest_rf100vl_make_adapter(config, spec, device, dtype):
            if spec == "everywhere":
                return Everywhere(device=device, dtype=dtype)
    """
