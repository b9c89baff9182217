"""A long run is not silent: preparing, embedding, building mosaics and each pair's inference
show live lines through pytest's terminal reporter (updating in place on a terminal, at most
every few seconds elsewhere), and the library's INFO log lines are shown as they happen."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_rf100vl.session.live import PLAIN_INTERVAL_S, LiveProgress


def test_the_oracle_on_sample_and_uouo_mmd_shows_live_progress(
    pytester: pytest.Pytester, uouo: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    # Fresh caches, so this run prepares the sample and builds the mosaics itself.
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")
    monkeypatch.setenv("RF100VL_HF_HOME", str(tmp_path / "home"))
    result = pytester.runpytest_inprocess(
        "--rf100vl-model", "oracle", "--rf100vl-dataset", "sample,uouo-mmd", "--uouo-option", "num-proc=2", *uouo
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "rf100vl: preparing sample: reading the export and writing the Arrow cache",
            "rf100vl: sample test: 8/8 in * s (*/s)",
            "rf100vl: prepared sample in * s (*)",
            "rf100vl: oracle on sample: 8/8 in * s (*/s)",
            "rf100vl .*",
            "rf100vl: uouo-mmd: building 8 mosaics from uouo-sample (8 categories, 32 cut-outs)",
            "rf100vl: embedding cut-outs with *: 32/32 in * s (*/s)",
            "rf100vl: uouo-mmd: composing 8 mosaics in 2 process(es)",
            "rf100vl: uouo-mmd: composed 8 mosaics in * s (* mosaics/s, 2 process(es))",
            "rf100vl: oracle on uouo-mmd: 8/8 in * s (*/s)",
            "rf100vl .*",
        ]
    )


class FakeReporter:
    """What the live lines use of pytest's terminal reporter, recording what is written."""

    def __init__(self, tty: bool):
        self.tty = tty
        self.lines: list[str] = []  # finished lines
        self.current = ""  # the line being written

    def isatty(self) -> bool:
        return self.tty

    def ensure_newline(self) -> None:
        if self.current:
            self.line("")

    def write_line(self, text: str) -> None:
        self.ensure_newline()
        self.lines.append(text)

    def rewrite(self, text: str, **markup: Any) -> None:
        self.current = text

    def line(self, text: str) -> None:
        self.lines.append(self.current + text)
        self.current = ""


def _live(tty: bool) -> tuple[LiveProgress, FakeReporter, list[float]]:
    reporter = FakeReporter(tty)
    plugins = {"terminalreporter": reporter}
    config = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=plugins.get))
    now = [100.0]
    return LiveProgress(config, clock=lambda: now[0]), reporter, now  # type: ignore[arg-type]


def test_a_plain_log_gets_a_line_at_most_every_few_seconds_and_one_at_the_end() -> None:
    live, reporter, now = _live(tty=False)
    live.advance("owlv2 on bees", 0, 100)
    for done in range(1, 101):
        now[0] += 0.2  # 20 s in all: 5 images/s
        live.advance("owlv2 on bees", done, 100)
    intermediate, final = reporter.lines[:-1], reporter.lines[-1]
    assert 3 <= len(intermediate) <= 20 / PLAIN_INTERVAL_S
    assert intermediate[0] == "rf100vl: owlv2 on bees: 25/100 (5.0/s, ETA 15.0 s)"
    assert final == "rf100vl: owlv2 on bees: 100/100 in 20.0 s (5.0/s)"


def test_a_terminal_line_updates_in_place_and_a_log_line_does_not_overwrite_it() -> None:
    live, reporter, now = _live(tty=True)
    live.advance("embedding cut-outs", 0, 10)
    now[0] += 1.0
    live.advance("embedding cut-outs", 4, 10)
    assert reporter.current == "rf100vl: embedding cut-outs: 4/10 (4.0/s, ETA 1.5 s)"
    assert reporter.lines == []
    live.message("uouo-mmd: composing 8 mosaics in 2 process(es)")
    now[0] += 1.5
    live.advance("embedding cut-outs", 10, 10)
    assert reporter.lines == [
        "rf100vl: embedding cut-outs: 4/10 (4.0/s, ETA 1.5 s)",
        "rf100vl: uouo-mmd: composing 8 mosaics in 2 process(es)",
        "rf100vl: embedding cut-outs: 10/10 in 2.5 s (4.0/s)",
    ]


def _chat_model_on(images: int, live: LiveProgress, now: list[float], classes: int = 5, seconds: float = 0.4) -> None:
    """What a chat model's pair draws: a bar over the images and, inside it, one over the classes
    asked about each image (``seconds`` each)."""
    from rf100vl_hf.progress import follow, progress_bar

    with follow(live.advance), progress_bar(total=images, desc="qwen on bees", disable=True) as bar:
        for _ in range(images):
            for _ in progress_bar(range(classes), desc="qwen classes", disable=True):
                now[0] += seconds
            bar.update(1)


def test_a_bar_inside_a_bar_keeps_the_outer_rate_and_prints_no_line_per_image() -> None:
    live, reporter, now = _live(tty=False)
    _chat_model_on(4, live, now)  # 2 s per image
    assert reporter.lines == ["rf100vl: qwen on bees: 3/4 (0.5/s, ETA 2.0 s)",
                              "rf100vl: qwen on bees: 4/4 in 8.0 s (0.5/s)"]


def test_on_a_terminal_the_inner_bar_is_shown_after_the_outer_one() -> None:
    live, reporter, now = _live(tty=True)
    seen: list[str] = []
    live.show = lambda line: seen.append(line)  # type: ignore[method-assign]
    _chat_model_on(2, live, now, classes=3, seconds=1.0)
    assert "qwen on bees: 1/2 (0.2/s, ETA 5.0 s); qwen classes: 2/3" in seen  # 5 s in: 3 s, then 2 of 3 classes
    assert not [line for line in reporter.lines if "classes" in line]


def test_followed_bars_leave_no_thread_nor_exit_handler_per_bar() -> None:
    """tqdm starts a monitor thread (and registers its exit at exit) per bar class: one class of
    followed bars, not one per bar, or a run of N pairs ends with N threads to join."""
    import atexit
    import threading

    from rf100vl_hf.progress import follow, progress_bar

    seen: list[tuple[str, float]] = []

    def bars(count: int) -> None:
        with follow(lambda description, done, total, depth: seen.append((description, done))):
            for index in range(count):
                with progress_bar(total=2, desc=f"pair {index}", disable=True) as bar:
                    bar.update(2)

    bars(1)
    threads, handlers = threading.active_count(), atexit._ncallbacks()
    bars(20)
    assert (threading.active_count(), atexit._ncallbacks()) == (threads, handlers)
    assert ("pair 19", 2) in seen
