"""Progress and logging in one place.

The library logs through the ``rf100vl_hf`` logger and draws bars with huggingface_hub's
tqdm, so ``HF_HUB_DISABLE_PROGRESS_BARS=1`` silences them as it silences the Hub's own.
A caller that shows progress its own way (the pytest plugin's live line, where captured
stderr would hide a bar) follows every bar drawn inside ``with follow(callback):``, told how
deep each bar is: a bar drawn while another is open (a chat model's bar over the classes it
asks about, inside the bar over a pair's images) is depth 1, and is no new step of the outer one.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("rf100vl_hf")

Follower = Callable[[str, float, float | None, int], None]
"""``callback(description, done, total, depth)``, called as a bar advances (``total`` may be
unknown; ``depth``: how many followed bars were open when this one started)."""


@dataclass
class _Following:
    callback: Follower
    open: list[Any] = field(default_factory=list)  # the followed bars not yet closed, outermost first


_FOLLOWER: contextvars.ContextVar[_Following | None] = contextvars.ContextVar("rf100vl_progress", default=None)


@contextlib.contextmanager
def follow(callback: Follower) -> Iterator[None]:
    """Call ``callback`` as every progress bar drawn inside the block advances."""
    token = _FOLLOWER.set(_Following(callback))
    try:
        yield
    finally:
        _FOLLOWER.reset(token)


def progress_bar(*args: Any, **kwargs: Any) -> Any:
    """A huggingface_hub tqdm bar (``tqdm``'s arguments) that also reports to the follower, if any."""
    from huggingface_hub.utils import tqdm

    following = _FOLLOWER.get()
    if following is None:
        return tqdm(*args, **kwargs)
    # A disabled tqdm (``disable=True``, HF_HUB_DISABLE_PROGRESS_BARS) counts nothing and has
    # no ``desc``, so the followed bar keeps its own count: the follower sees every bar.
    description = kwargs.get("desc") or (args[1] if len(args) > 1 else None) or ""
    return _followed_bar()(*args, following=following, description=description, **kwargs)


@functools.cache
def _followed_bar() -> type:
    """The class of followed bars, made once: tqdm starts a monitor thread per class (and
    registers its exit to run at exit), so a class made per bar left a thread and an exit
    handler behind for every bar, one per pair of a run."""
    from huggingface_hub.utils import tqdm

    class Followed(tqdm):  # type: ignore[misc, valid-type]
        followed: float = 0
        depth: int = 0

        def __init__(self, *args: Any, following: _Following, description: str, **kwargs: Any):
            self.following, self.description = following, description
            super().__init__(*args, **kwargs)
            self.depth = len(following.open)
            following.open.append(self)
            following.callback(description, 0, self.total, self.depth)  # the step starts now (its rate counts from here)

        def update(self, n: float | None = 1) -> bool | None:
            shown = super().update(n)
            self.followed += 1 if n is None else n
            self.following.callback(self.description, self.followed, self.total, self.depth)
            return shown

        def __iter__(self) -> Iterator[Any]:
            try:
                for done, item in enumerate(super().__iter__(), start=1):
                    yield item
                    self.following.callback(self.description, done, self.total, self.depth)
            finally:  # a disabled bar is not closed by tqdm at the end of its iterable
                self._leave()

        def close(self) -> None:
            self._leave()
            super().close()

        def _leave(self) -> None:
            open_bars = self.following.open
            open_bars[:] = [bar for bar in open_bars if bar is not self]  # tqdm's == compares positions

    return Followed
