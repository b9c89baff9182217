"""--rf100vl-adapter-option: options reach the adapters they are meant for (registry-built and
hook-built), and an option an adapter does not accept is a clear error before anything loads."""

from __future__ import annotations

import json

import pytest

from tests.plugin.helpers import results


def test_an_option_reaches_a_registry_adapter(pytester: pytest.Pytester, uouo: list[str]) -> None:
    result = pytester.runpytest_inprocess(
        "--rf100vl-model", "clip-quadrant:tiny", "--rf100vl-model", "oracle", "--rf100vl-dataset", "uouo-random",
        *uouo, "--rf100vl-adapter-option", "clip-quadrant.template=a drawing of a {}", "--benchmark-disable",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["rf100vl: adapter options: clip-quadrant.template=a drawing of a {}"])
    clip, oracle = results(pytester.path / ".rf100vl" / "results")
    assert json.loads(clip["adapter_options"]) == {"template": "a drawing of a {}"}
    assert json.loads(oracle["adapter_options"]) == {}  # the option was for clip-quadrant only


def test_options_reach_a_hook_made_adapter_as_strings_and_change_its_answers(
    fakes: pytest.Pytester, uouo: list[str], uouo_rows
) -> None:
    fakes.makeini("[pytest]\nrf100vl_adapter_option = reply=bottom-left\n")
    result = fakes.runpytest_inprocess(
        "--rf100vl-model", "talker", "--rf100vl-dataset", "uouo-random", *uouo, "--benchmark-disable",
        "--override-ini", "rf100vl_max_failed_fraction=0.2",  # the talker raises on one mosaic of 8
    )
    result.assert_outcomes(passed=1)
    (row,) = results(fakes.path / ".rf100vl" / "results")
    assert json.loads(row["adapter_options"]) == {"reply": "bottom-left"}
    quadrants = list(uouo_rows("random")["target_quadrant"])
    expected = sum(q == "bottom-left" for i, q in enumerate(quadrants) if i != 3) / len(quadrants)  # 3 raises
    assert expected > 0 and row["accuracy"] == pytest.approx(expected)
    assert row["quadrant_parse_failures"] == 1


def test_an_option_a_hook_made_adapter_refuses_fails_its_pairs_with_the_reason(
    fakes: pytest.Pytester, uouo: list[str]
) -> None:
    result = fakes.runpytest_inprocess(
        "--rf100vl-model", "talker", "--rf100vl-dataset", "uouo-random", *uouo, "--rf100vl-adapter-option", "mood=calm"
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*model talker: TypeError: adapter 'talker' got unknown option(s) mood (accepted: reply)*"]
    )
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(
    ("models", "option", "message"),
    [
        (["clip-quadrant:tiny"], "per_class=true",
         "ERROR: --rf100vl-adapter-option: adapter 'clip-quadrant' got unknown option(s) per_class (accepted: "
         "template); NAME.KEY=VALUE sets an option for one model only"),
        (["clip-quadrant:tiny", "oracle"], "template=a {}",
         "ERROR: --rf100vl-adapter-option: adapter 'oracle' got unknown option(s) template (accepted: none);*"),
        (["oracle"], "owlv2.score_threshold=0.1",
         "ERROR: --rf100vl-adapter-option 'owlv2.score_threshold=0.1': no model named 'owlv2' in this run "
         "(models: oracle)"),
        (["oracle"], "score_threshold", "ERROR: --rf100vl-adapter-option: expected [[]NAME.[]]KEY=VALUE, got*"),
    ],
    ids=["unknown", "unknown-to-one-model", "no-such-model", "no-value"],
)
def test_a_bad_option_is_a_usage_error_before_any_model_loads(
    pytester: pytest.Pytester, models: list[str], option: str, message: str
) -> None:
    specs = [arg for model in models for arg in ("--rf100vl-model", model)]
    result = pytester.runpytest_inprocess(
        *specs, "--rf100vl-dataset", "uouo-mmd", "--rf100vl-adapter-option", option, "--co"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_help_lists_the_new_options(pytester: pytest.Pytester) -> None:
    out = pytester.runpytest_inprocess("--help").stdout.str()
    for flag in ("--rf100vl-adapter-option", "--uouo-option", "--rf100vl-data-option"):
        assert flag in out
    for key in ("source", "num-mosaics", "seed", "clip-model", "clip-pretrained"):  # the keys of --uouo-option
        assert key in out[out.index("--uouo-option"):]


@pytest.mark.parametrize(("option", "words"), [
    ("openai.retry_max_delay=1e12", "option retry_max_delay=1000000000000.0 must be a number at least 0 and at most 600"),
    ("openai.timeout=1e9", "option timeout=1000000000.0 must be a number above 0 and at most 3600"),
    ("openai.pair_timeout=0", "option pair_timeout=0.0 must be a number above 0"),
])
def test_an_absurd_timing_option_is_a_usage_error_naming_it(pytester: pytest.Pytester, option: str,
                                                           words: str) -> None:
    result = pytester.runpytest("--rf100vl-model", "openai:m", "--rf100vl-dataset", "sample",
                                "--rf100vl-adapter-option", option, "--rf100vl-adapter-option",
                                "openai.base_url=http://127.0.0.1:9/v1", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--rf100vl-adapter-option: adapter 'openai': {words}" in result.stderr.str()
