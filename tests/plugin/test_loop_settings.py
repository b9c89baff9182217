"""The knobs a GPU user expects, recorded in every row and in the summary: the batch size used
(``auto`` resolved), the attention implementation transformers ran, and ``torch.compile`` with
its compile time kept out of the throughput."""

from __future__ import annotations

import pytest

from tests.plugin.helpers import results

QUICK = ("--rf100vl-model", "owlv2:tiny", "--rf100vl-dataset", "sample", "--benchmark-disable",
         "--override-ini", "rf100vl_cache=off")


def test_auto_batch_size_and_attention_are_recorded_as_run(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*QUICK, "--rf100vl-batch-size", "auto", "--override-ini", "rf100vl_attention=eager",
                                           timeout=300)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["rf100vl: device auto, dtype float32, batch size auto, attention eager; *",
                                 "Ran on cpu (float32, batch 1 (auto), eager attention) *"])
    (row,) = results(pytester.path / ".rf100vl" / "results")
    assert (row["batch_size"], row["batch_size_requested"], row["attention"]) == (1, "auto", "eager")
    assert (row["compiled"], row["compile_s"]) == (False, None)


def test_an_attention_the_model_cannot_run_fails_its_pairs_saying_so(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*QUICK, "--override-ini", "rf100vl_attention=no-such-kernel", timeout=300)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*Owlv2ForObjectDetection could not be loaded with attention 'no-such-kernel'*"])


def test_a_compiled_detector_scores_as_the_eager_one_and_reports_its_compile_time(pytester: pytest.Pytester) -> None:
    eager = pytester.runpytest_subprocess(*QUICK, "--rf100vl-results=eager", timeout=300)
    eager.assert_outcomes(passed=1)
    compiled = pytester.runpytest_subprocess(*QUICK, "--rf100vl-results=compiled", "--override-ini=rf100vl_compile=true", timeout=600)
    compiled.assert_outcomes(passed=1)
    compiled.stdout.fnmatch_lines(["Ran on cpu (float32, batch 1, sdpa attention, compiled) *"])
    (plain,) = results(pytester.path / "eager")
    (row,) = results(pytester.path / "compiled")
    assert (plain["compiled"], row["compiled"]) == (False, True)
    assert row["compile_s"] > 1.0 > (plain["compile_s"] or 0.0)  # compiling takes seconds; the eager model none
    assert row["warmup_s"] >= row["compile_s"]
    assert row["ap"] == pytest.approx(plain["ap"], abs=0.5)
