"""Which tests a run collects: pair ids, selection by name, domain, subset and -k, the
user's own tests, ini options, and usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rf100vl_hf import catalog

from tests.plugin.helpers import link


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line]


def matrix_ids(model: str, datasets: list[str]) -> list[str]:
    return [f"rf100vl::test_detection[{model}-{name}]" for name in datasets]


def test_a_pair_collects_in_an_empty_folder(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--rf100vl-model", "owlv2", "--rf100vl-dataset", "bees", "--co", "-q")
    assert result.ret == pytest.ExitCode.OK
    assert collected(result) == ["rf100vl::test_detection[owlv2-bees]"]


def test_models_and_datasets_make_a_model_major_matrix_and_k_selects(pytester: pytest.Pytester) -> None:
    args = ["--rf100vl-model", "oracle", "--rf100vl-model", "owlv2:tiny", "--rf100vl-dataset", "bees,sample"]
    result = pytester.runpytest_inprocess(*args, "--co", "-q")
    assert collected(result) == matrix_ids("oracle", ["bees", "sample"]) + matrix_ids("owlv2:tiny", ["bees", "sample"])
    result = pytester.runpytest_inprocess(*args, "--co", "-q", "-k", "owlv2 and sample")
    assert collected(result) == matrix_ids("owlv2:tiny", ["sample"])


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--rf100vl-dataset", "domain:Sports"], [e.basename for e in catalog.select("Sports")]),
        (["--rf100vl-dataset", "rf20vl:domain:sport"], ["actions", "lacrosse-object-detection"]),
        (["--rf100vl-dataset", "rf20vl"], [e.basename for e in catalog.select(subset="rf20vl")]),
        (["--rf100vl-dataset", "sample", "--rf100vl-dataset", "rf20vl:domain:Medical,rf20vl:domain:Sports"],
         ["sample", "dentalai", "x-ray-id", "actions", "lacrosse-object-detection"]),
        (["--rf100vl-dataset", "domain:Sports,rf20vl"],  # two groups: their union, each in catalogue order
         [e.basename for e in catalog.select("Sports")]
         + [e.basename for e in catalog.select(subset="rf20vl") if e.domain != "Sports"]),
        ([], [e.basename for e in catalog.entries()]),
    ],
    ids=["domain", "domain-alias-and-subset", "subset", "names-then-domains", "union", "everything"],
)
def test_selection_by_domain_and_subset(pytester: pytest.Pytester, options: list[str], expected: list[str]) -> None:
    result = pytester.runpytest_inprocess("--rf100vl-model", "oracle", *options, "--co", "-q")
    assert collected(result) == matrix_ids("oracle", expected)


def test_custom_domain_selects_the_other_exports_of_the_data_dir(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    for name in ("bees", "my-shapes", "more-shapes"):
        link(data_dir, name, small_sample)
    result = pytester.runpytest_inprocess(
        "--rf100vl-model", "oracle", "--rf100vl-dataset", "domain:custom", f"--rf100vl-data-option=data-dir={data_dir}", "--co", "-q"
    )
    assert collected(result) == matrix_ids("oracle", ["more-shapes", "my-shapes"])


def test_only_the_matrix_runs_unless_test_paths_are_named(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine="def test_mine(): pass")
    matrix = ["--rf100vl-model", "oracle", "--rf100vl-dataset", "sample", "--co", "-q"]
    assert collected(pytester.runpytest_inprocess(*matrix)) == matrix_ids("oracle", ["sample"])
    both = collected(pytester.runpytest_inprocess(*matrix, "test_mine.py"))
    assert both == ["test_mine.py::test_mine"] + matrix_ids("oracle", ["sample"])
    assert collected(pytester.runpytest_inprocess("--co", "-q")) == ["test_mine.py::test_mine"]


def test_user_tests_with_the_fixtures_are_parametrized_over_the_matrix(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_mine="""
        def test_pair(rf100vl_pair, rf100vl_config):
            assert rf100vl_pair.spec in rf100vl_config.matrix.models
        """
    )
    result = pytester.runpytest_inprocess(
        "--rf100vl-model", "oracle", "--rf100vl-model", "nothing", "--rf100vl-dataset", "sample,bees", "test_mine.py",
        "--co", "-q",
    )
    assert [line for line in collected(result) if line.startswith("test_mine")] == [
        "test_mine.py::test_pair[oracle-sample]",
        "test_mine.py::test_pair[oracle-bees]",
        "test_mine.py::test_pair[nothing-sample]",
        "test_mine.py::test_pair[nothing-bees]",
    ]
    result = pytester.runpytest_inprocess("test_mine.py", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no rf100vl matrix: pass --rf100vl-model*"])


def test_ini_options_are_equivalent_to_the_command_line(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        """
        [pytest]
        rf100vl_model =
            oracle
            owlv2
        rf100vl_dataset = sample
        """
    )
    result = pytester.runpytest_inprocess("--co", "-q")
    assert collected(result) == matrix_ids("oracle", ["sample"]) + matrix_ids("owlv2", ["sample"])
    result = pytester.runpytest_inprocess("--rf100vl-dataset", "bees", "--co", "-q")
    assert collected(result) == matrix_ids("oracle", ["bees"]) + matrix_ids("owlv2", ["bees"])


def test_help_lists_the_option_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--help")
    result.stdout.fnmatch_lines(["rf100vl: benchmark (model x dataset) pairs*", "*--rf100vl-model=SPEC*"])
    for name in ("dataset", "split", "data-option", "device", "dtype", "batch-size", "prompt", "results", "protocol"):
        assert f"--rf100vl-{name}" in result.stdout.str()
    for key in ("data-dir", "fewshot-dir", "reference", "tolerance"):  # the keys of the dict option
        assert key in result.stdout.str()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--rf100vl-model", "oracle", "--rf100vl-dataset", "bess"], "*unknown dataset 'bess'; closest: bees*"),
        (["--rf100vl-model", "oracle", "--rf100vl-dataset", "domain:Aeriall"], "*unknown domain 'Aeriall'; closest: Aerial*"),
        (["--rf100vl-dataset", "bees"], "*--rf100vl-model is required*"),
        (["--rf100vl-model", "oracle", "--rf100vl-prompt", "poem"], "*--rf100vl-prompt: 'poem' is not one of names*"),
        (["--rf100vl-model", "oracle", "--rf100vl-batch-size", "0"], "*--rf100vl-batch-size: must be at least 1*"),
        (["--rf100vl-model", "oracle", "--rf100vl-device", "gpu"], "*--rf100vl-device: unknown device 'gpu' (use auto*"),
    ],
    ids=["dataset", "domain", "no-model", "prompt", "batch-size", "device"],
)
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, options: list[str], message: str) -> None:
    result = pytester.runpytest_inprocess(*options, "--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_matrix_run_in_which_no_pair_ran_exits_non_zero_saying_why(
    pytester: pytest.Pytester, data_dir: "Path"
) -> None:
    args = ("--rf100vl-model", "oracle", "--rf100vl-dataset", "bees,actions", f"--rf100vl-data-option=data-dir={data_dir}",
            "-p", "no:cacheprovider")
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(skipped=2)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["*rf100vl: no pair ran: 2 dataset(s) not on disk (actions, bees): exit status 5*"])
    allowed = pytester.runpytest_inprocess(*args, "--override-ini=rf100vl_allow_empty=true")
    allowed.assert_outcomes(skipped=2)
    assert allowed.ret == pytest.ExitCode.OK


@pytest.mark.parametrize("option", ["--rf100vl-results", "--rf100vl-config"])
def test_a_path_option_never_moves_the_rootdir_in_either_form(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, option: str
) -> None:
    outside = tmp_path_factory.mktemp("elsewhere")
    target = outside / "run.yaml" if option == "--rf100vl-config" else outside
    if option == "--rf100vl-config":
        target.write_text("loop: {device: cpu}\n", encoding="utf-8")
    pytester.makeini("[pytest]\n")
    base = ("--rf100vl-model", "oracle", "--rf100vl-dataset", "sample", "--co", "-p", "no:cacheprovider")
    joined = pytester.runpytest_inprocess(*base, f"{option}={target}")
    assert joined.ret == pytest.ExitCode.OK
    joined.stdout.fnmatch_lines([f"rootdir: {pytester.path}*"])
    apart = pytester.runpytest_inprocess(*base, option, str(target))
    assert apart.ret == pytest.ExitCode.USAGE_ERROR  # pytest would take the path for the rootdir: refused, saying how
    apart.stderr.fnmatch_lines([f"*{option} {target}: pytest took the path for a test path*write {option}={target}*"])
    assert not (outside / ".pytest_cache").exists()
