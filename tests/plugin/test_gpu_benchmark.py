"""The GPU benchmark (``benchmarks/test_gpu_throughput.py``) runs only where a GPU is lent, so it
must not rot in between: its full-size models are valid configs of the real sizes, and the
whole measurement runs end to end on the CPU with the tiny models."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmarks.gpu_models import BUILDERS

PARAMETERS_MILLIONS = {"owlv2": (125, 160), "grounding-dino": (165, 180), "omdet-turbo": (80, 130),
                       "rt-detrv2": (40, 45), "florence-2": (185, 235)}
"""Parameters (millions) of the real checkpoints' architectures (OWLv2 B/16 155, Grounding DINO
tiny 172, RT-DETRv2 R50 43, Florence-2 base 232), less the word embeddings the offline
tokenizers' small vocabularies save (25 M for OWLv2's CLIP text tower, 39 M for Florence-2's BART)."""


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_each_full_size_model_is_the_real_architecture_at_its_real_size(name: str) -> None:
    model_class, config, _ = BUILDERS[name]()
    with torch.device("meta"):  # shapes only: nothing is allocated or initialised
        model = model_class(config)
    millions = sum(parameter.numel() for parameter in model.parameters()) / 1e6
    low, high = PARAMETERS_MILLIONS[name]
    assert low <= millions <= high, f"{name}: {millions:.0f} M parameters"


def test_the_benchmark_runs_end_to_end_on_the_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RF100VL_GPU_BENCH_DEVICE", "cpu")
    monkeypatch.setenv("RF100VL_BENCH_OUT", str(tmp_path))
    from benchmarks import test_gpu_throughput as benchmark

    benchmark.test_the_plugin_feeds_each_model_at_least_its_target_share_of_its_forward(
        pytest.TempPathFactory(tmp_path / "models", retention_count=1, retention_policy="none", trace=lambda *a: None,
                               _ispytest=True))
    printed = capsys.readouterr().out
    assert "| owlv2 | float32 | 4 |" in printed and "| florence-2 | float32 | 4 |" in printed
    import json

    figures = json.loads((tmp_path / "gpu_throughput.json").read_text(encoding="utf-8"))
    assert {row["model"] for row in figures["rows"]} == set(BUILDERS)
    assert all(row["ratio"] > 0 for row in figures["rows"])
