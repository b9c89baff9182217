"""Progress and logging in one place.

The library logs through the ``rf100vl_hf`` logger and draws bars with huggingface_hub's
tqdm, so ``HF_HUB_DISABLE_PROGRESS_BARS=1`` silences them as it silences the Hub's own.
A caller that shows progress its own way (the pytest plugin's live line, where captured
stderr would hide a bar) follows every bar drawn inside ``with follow(callback):``.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator
from typing import Any

logger = logging.getLogger("rf100vl_hf")

Follower = Callable[[str, float, float | None], None]
"""``callback(description, done, total)``, called as a bar advances (``total`` may be unknown)."""

_FOLLOWER: contextvars.ContextVar[Follower | None] = contextvars.ContextVar("rf100vl_progress", default=None)


@contextlib.contextmanager
def follow(callback: Follower) -> Iterator[None]:
    """Call ``callback`` as every progress bar drawn inside the block advances."""
    token = _FOLLOWER.set(callback)
    try:
        yield
    finally:
        _FOLLOWER.reset(token)


def progress_bar(*args: Any, **kwargs: Any) -> Any:
    """A huggingface_hub tqdm bar (``tqdm``'s arguments) that also reports to the follower, if any."""
    from huggingface_hub.utils import tqdm

    follower = _FOLLOWER.get()
    if follower is None:
        return tqdm(*args, **kwargs)

    # A disabled tqdm (``disable=True``, HF_HUB_DISABLE_PROGRESS_BARS) counts nothing and has
    # no ``desc``, so the followed bar keeps its own count: the follower sees every bar.
    description = kwargs.get("desc") or (args[1] if len(args) > 1 else None) or ""

    class Followed(tqdm):  # type: ignore[misc, valid-type]
        followed: float = 0

        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            follower(description, 0, self.total)  # the step starts now (its rate counts from here)

        def update(self, n: float | None = 1) -> bool | None:
            shown = super().update(n)
            self.followed += 1 if n is None else n
            follower(description, self.followed, self.total)
            return shown

        def __iter__(self) -> Iterator[Any]:
            for done, item in enumerate(super().__iter__(), start=1):
                yield item
                follower(description, done, self.total)

    return Followed(*args, **kwargs)
