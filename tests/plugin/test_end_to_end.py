"""The plugin in fresh interpreters: a run that does not use it imports nothing heavy, and the
README's main job (a tiny random OWLv2 on the embedded sample) works offline, labelled as a
smoke run, with its throughput in pytest-benchmark's JSON."""

from __future__ import annotations

import json

import pytest


def test_a_run_without_matrix_options_imports_no_heavy_module(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_light="""
        import sys

        def test_light(request):
            assert request.config.pluginmanager.has_plugin("rf100vl")
            heavy = [name for name in ("torch", "transformers", "datasets", "pyarrow") if name in sys.modules]
            assert heavy == []
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "rf100vl summary" not in result.stdout.str()


def test_a_tiny_owlv2_on_the_embedded_sample_is_a_labelled_smoke_run(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--rf100vl-model", "owlv2:tiny", "--rf100vl-dataset", "sample", "--benchmark-json", "benchmark.json", "-v",
        "--benchmark-max-time=60", timeout=300,
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "rf100vl::test_detection[[]owlv2:tiny-sample[]] PASSED*",
            "*SMOKE RUN (random weights: scores are meaningless)*",
            "Ran on cpu (float32, batch 1, sdpa attention) [[]CPU *[]]; torch *, transformers *, datasets *, hotcoco *, faster-coco-eval *, pycocotools *, rf100vl-hf *, python *",
            "| sample | custom | *",
        ]
    )
    (benchmark,) = json.loads((pytester.path / "benchmark.json").read_text(encoding="utf-8"))["benchmarks"]
    info = benchmark["extra_info"]
    # 8 images take well under --benchmark-max-time: the split was run again, up to 10 rounds,
    # whose spread the row gives; pytest-benchmark's table holds the same rounds, in seconds per
    # image, so its median is the summary's one throughput figure inverted
    assert info["throughput_rounds"] == benchmark["stats"]["rounds"] == 10
    assert 1 / benchmark["stats"]["median"] == pytest.approx(info["images_per_s"], rel=1e-9)
    assert 1 / benchmark["stats"]["max"] == pytest.approx(info["images_per_s_min"], rel=1e-9)
    summary = (pytester.path / ".rf100vl" / "results" / "summary.md").read_text(encoding="utf-8")
    assert f"| owlv2:tiny (smoke) | sample | {info['images_per_s']:.2f} |" in summary
    assert info["images_per_s_min"] < info["images_per_s_max"]
    assert info["images_per_s_min"] <= info["images_per_s"] <= info["images_per_s_max"]
    assert info["images_per_s"] > 0 and info["n_images"] == 8
    assert (info["model"], info["checkpoint"], info["device"], info["dtype"], info["batch_size"], info["smoke"]) == (
        "owlv2", "tiny", "cpu", "float32", 1, True
    )
    assert info["latency_image_p95_ms"] >= info["latency_image_p50_ms"] > 0
    assert info["model_revision"] and info["dataset_fingerprint"]
    assert info["peak_gpu_memory_mb"] is None
