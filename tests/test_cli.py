"""``rf100vl-hf``: each command on generated data, through ``main`` as the console script calls it."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rf100vl_hf.cli import main


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for command in ("list", "info", "prepare", "export", "push", "sample", "uouo"):
        assert command in text
    assert "RF100VL_DATA_DIR" in text and "HF_DATASETS_CACHE" in text


def test_list_filters_by_domain_and_subset(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["list", "domain:Medical", "--data-dir", str(tmp_path)]) == 0
    assert "13 datasets" in capsys.readouterr().out
    assert main(["list", "rf20vl", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "20 datasets" in out and "soda-bottles" in out and "bees " not in out


def test_list_shows_custom_exports_on_disk(capsys, sample_root: Path, tmp_path: Path) -> None:
    shutil.copytree(sample_root / "sample", tmp_path / "shapes")
    assert main(["list", "--data-dir", str(tmp_path)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("shapes"))
    assert "custom" in line and line.rstrip().endswith("yes")


def test_unknown_name_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["info", "bess", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rf100vl-hf: error: unknown dataset 'bess'") and "bees" in err


def test_a_warning_is_one_clean_line(capsys, tmp_path: Path) -> None:
    from rf100vl_hf.sample import write_sample_export

    write_sample_export(tmp_path / "small", sizes={"train": 8, "valid": 8, "test": 8})  # too few for 10 per class
    assert main(["info", "small", "--data-dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("rf100vl-hf: warning: few-shot split: ") and err.count("\n") == 1
    assert ".py" not in err and "return " not in err  # no source path, no code line


def test_info_of_an_absent_dataset_says_how_to_get_it(capsys, tmp_path: Path) -> None:
    assert main(["info", "bees", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Flora & Fauna" in out and "download_rf100vl" in out and str(tmp_path) in out


def test_info_describes_an_export_on_disk(capsys, sample_root: Path) -> None:
    assert main(["info", "sample", "--data-dir", str(sample_root)]) == 0
    out = capsys.readouterr().out
    assert "classes (3): circle, square, triangle" in out
    assert "few-shot split: generated (circle 10, square 10, triangle 10)" in out
    assert "annotator instructions: 3 of 3 classes" in out


def test_prepare_then_bare_load_dataset(sample_root: Path, tmp_path: Path, capsys) -> None:
    cache = tmp_path / "cache"
    assert main(["prepare", "sample", "--data-dir", str(sample_root), "--cache-dir", str(cache)]) == 0
    assert "load_dataset('rf100vl', 'sample', split='test')" in capsys.readouterr().out
    script = (
        "from datasets import load_dataset;"
        f"print(len(load_dataset('rf100vl', 'sample', split='fewshot_10', cache_dir={str(cache)!r})))"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          env={"HF_HUB_OFFLINE": "1", "PATH": ""}, check=True)
    assert int(done.stdout.strip()) > 0


def test_prepare_of_unchanged_files_reads_none_and_verify_reads_them_all(tmp_path: Path, capsys) -> None:
    from rf100vl_hf.sample import write_sample_export

    export = write_sample_export(tmp_path / "data" / "sample")
    args = ["prepare", "sample", "--data-dir", str(tmp_path / "data"), "--cache-dir", str(tmp_path / "cache")]
    assert main(args) == 0 and "sample: prepared" in capsys.readouterr().out
    # a damaged image with its size and modification time kept: only reading the file can tell
    image = next(export.glob("test/*.jpg"))
    before = image.stat()
    image.write_bytes(image.read_bytes()[:-2] + b"\0\0")  # its JPEG end marker gone
    os.utime(image, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert main(args) == 0 and "sample: reused (no file changed" in capsys.readouterr().out
    assert main([*args, "--verify"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress bars of the re-reading
    assert image.name in last and "image: cannot be decoded" in last


def test_prepare_rebuilds_an_export_one_of_whose_files_changed(tmp_path: Path, capsys) -> None:
    from rf100vl_hf.sample import write_sample_export

    export = write_sample_export(tmp_path / "data" / "sample")
    args = ["prepare", "sample", "--data-dir", str(tmp_path / "data"), "--cache-dir", str(tmp_path / "cache")]
    assert main(args) == 0
    first = capsys.readouterr().out
    image = next(export.glob("test/*.jpg"))
    data, before = bytearray(image.read_bytes()), image.stat()
    data[-3] ^= 0xFF  # another pixel: the same size, a later mtime
    image.write_bytes(bytes(data))
    os.utime(image, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
    assert main(args) == 0
    rebuilt = capsys.readouterr().out
    assert main(args) == 0
    again = capsys.readouterr().out
    assert "sample: prepared" in first and "sample: prepared" in rebuilt and "sample: reused" in again

    def build(out: str) -> str:
        return next(line for line in out.splitlines() if line.startswith("  in "))

    assert build(first) != build(rebuilt) == build(again)


def test_prepare_with_parameters_names_the_config_id(sample_root: Path, tmp_path: Path, capsys) -> None:
    args = ["prepare", "sample", "--data-dir", str(sample_root), "--cache-dir", str(tmp_path), "--option", "fewshot-k=3"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "fewshot_3" in out and "config id 'sample-fewshot_k=3'" in out


def test_prepare_with_the_best_strategy(sample_root: Path, tmp_path: Path, capsys) -> None:
    from rf100vl_hf.metadata import read_metadata
    from rf100vl_hf.rf100vl.builder import load_rf100vl

    args = ["prepare", "sample", "--data-dir", str(sample_root), "--cache-dir", str(tmp_path)]
    assert main([*args, "--option", "fewshot-strategy=best"]) == 0
    out = capsys.readouterr().out
    assert "fewshot_10 (" in out and "config id 'sample-fewshot_strategy=best'" in out
    assert main([*args, "--option", "fewshot-strategy=best", "--option", "fewshot-candidates=3"]) == 0
    capsys.readouterr()
    ds = load_rf100vl("sample", "fewshot_10", sample_root, cache_dir=tmp_path, progress=False,
                      fewshot_strategy="best", fewshot_candidates=3)  # fmt: skip
    made = read_metadata(ds)["fewshot"]
    assert (made["strategy"], made["candidates"]) == ("best", 3)
    assert main([*args, "--option", "fewshot-candidates=3"]) == 2
    assert _one_line_error(capsys).endswith("fewshot_candidates=3 needs fewshot_strategy='best' "
                                            "(the random strategy draws one selection)")


def test_sample_writes_an_export(tmp_path: Path, capsys) -> None:
    assert main(["sample", "--out", str(tmp_path / "s")]) == 0
    assert (tmp_path / "s" / "test" / "_annotations.coco.json").is_file()
    assert (tmp_path / "s" / "README.dataset.txt").is_file()


def test_push_of_a_folder_that_is_not_a_repository(tmp_path: Path, capsys) -> None:
    assert main(["push", str(tmp_path), "--repo-id", "org/x", "--option", "token=t"]) == 2
    assert "README.md: missing" in capsys.readouterr().err


# ----------------------------------------------------------- every failure: one line, exit 2

BAD_ARGUMENTS = [
    (["prepare", "sample", "--option", "fewshot-k=-3"], "--option: fewshot-k: fewshot_k must be an integer of at least 1, not -3"),
    (["prepare", "sample", "--option", "fewshot-k=three"], "--option: fewshot-k: expected an integer, not 'three'"),
    (["prepare", "sample", "--option", "fewshot-seed=1.5"], "--option: fewshot-seed: expected an integer, not '1.5'"),
    (["prepare", "sample", "--option", "fewshot-strategy=worst"], "--option: fewshot-strategy: fewshot_strategy must be 'random' or 'best', not 'worst'"),
    (["prepare", "sample", "--option", "fewshot-candidates=0"],
     "--option: fewshot-candidates: fewshot_candidates must be an integer of at least 1, not 0"),
    (["prepare", "sample", "--option", "semisup-fraction=2"], "--option: semisup-fraction: semisup_fraction must be a number in (0, 1], not 2.0"),
    (["prepare", "sample", "--option", "semisup-fraction=nan"], "semisup_fraction must be a number in (0, 1]"),
    (["prepare", "sample", "--option", "semisup-fraction=0"], "semisup_fraction must be a number in (0, 1]"),
    (["prepare", "sample", "--option", "verify-images=pixels"], "--option: verify-images: 'pixels' is not one of header, full"),
    (["prepare", "sample", "--data-dir", "{missing}"], "--data-dir: expected an existing folder"),
    (["prepare", "sample", "--fewshot-dir", "{file}"], "--fewshot-dir: expected an existing folder"),
    (["prepare"], "the following arguments are required: NAME"),
    (["list", "rf50vl"], "expected all, rf20vl or [rf20vl:]domain:NAME, not 'rf50vl'"),
    (["info", "sample", "--data-dir", "{missing}"], "--data-dir: expected an existing folder"),
    (["push", "{missing}", "--repo-id", "org/x"], "path: expected an existing folder"),
    (["push", "{tmp}", "--repo-id", "not a repo"], "--repo-id: expected a Hub repository id ORG/NAME"),
    (["push", "{tmp}", "--repo-id", "org/x/y"], "--repo-id: expected a Hub repository id ORG/NAME"),
    (["export", "--out", "{tmp}", "--push", "org/../x"], "--push: expected a Hub repository id ORG/NAME"),
    (["prepare", "sample", "--cache-dir", "{file}/cache"], "--cache-dir: expected a folder, or a path where one"),
    (["sample", "--out", "{file}"], "--out: expected a folder, or a path where one can be made"),
    (["sample", "--out", "{tmp}/" + "x" * 300], "--out: expected a folder, or a path where one can be made"),
    (["sample"], None),  # a good invocation in the table's shape, as a control (writes ./sample in tmp)
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["uouo", "prepare", "--option", "num-mosaics=0"], "--option: num-mosaics: expected an integer of at least 1, not '0'"),
    (["uouo", "prepare", "--option", "sigma=-1"], "--option: sigma: expected a positive number, not '-1'"),
    (["uouo", "export", "--out", "{tmp}", "--option", "seed=x"], "--option: seed: expected an integer of at least 0, not 'x'"),
]


@pytest.mark.parametrize("argv, message", BAD_ARGUMENTS, ids=[" ".join(argv) for argv, _ in BAD_ARGUMENTS])
def test_a_bad_argument_is_one_line_and_exit_2(
    argv: list[str], message: str | None, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a folder")
    places = {"missing": str(tmp_path / "missing"), "file": str(tmp_path / "a-file"), "tmp": str(tmp_path)}
    argv = [arg.format(**places) for arg in argv]
    if message is None:
        assert main(argv) == 0
        return
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert len(err.splitlines()) == 1 and err.startswith("rf100vl-hf") and message in err, err


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    """The error line, which ends stderr (progress bars may come before it), and no traceback."""
    err = capsys.readouterr().err
    last = err.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith("rf100vl-hf: error: ") and err.endswith(last + "\n") and "Traceback" not in err, err
    return last


def test_bad_data_is_one_line_naming_the_file_and_exit_2(sample_root: Path, tmp_path: Path, capsys) -> None:
    shutil.copytree(sample_root / "sample", tmp_path / "shapes")
    (tmp_path / "shapes" / "test" / "_annotations.coco.json").write_text("{not json")
    assert main(["prepare", "shapes", "--data-dir", str(tmp_path), "--cache-dir", str(tmp_path / "cache")]) == 2
    err = _one_line_error(capsys)
    assert f"{tmp_path / 'shapes' / 'test' / '_annotations.coco.json'}: json: not valid JSON" in err


def test_a_path_that_cannot_be_written_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "train").write_text("a file where the export's train folder goes")
    assert main(["sample", "--out", str(tmp_path / "out")]) == 2
    assert _one_line_error(capsys) == f"rf100vl-hf: error: {tmp_path / 'out' / 'train'}: File exists"


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "README.md").write_text("---\nlicense: other\n---\n# a repository\n")
    return folder


def test_push_to_a_hub_that_is_down_is_one_line_and_exit_2(hub_server, repository: Path, capsys) -> None:
    with hub_server.down():
        assert main(["push", str(repository), "--repo-id", "org/down", "--option", f"token={hub_server.token}"]) == 2
    err = _one_line_error(capsys)
    assert "org/down" in err


def test_push_answered_with_500_is_one_line_and_exit_2(hub_server, repository: Path, capsys) -> None:
    hub_server.fail("commit", 500)
    try:
        assert main(["push", str(repository), "--repo-id", "org/broken", "--option", f"token={hub_server.token}"]) == 2
    finally:
        hub_server.clear_faults()
    assert "org/broken" in _one_line_error(capsys)


def test_uouo_without_network_ends_before_downloading_naming_the_options(hub_server, tmp_path: Path, capsys,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    downloads: list[str] = []

    def download(repo_id: str, filename: str, **_: object) -> str:
        downloads.append(f"{repo_id}/{filename}")
        raise ConnectionError("refused")

    # open_clip's download, which huggingface_hub retries for about a minute on refused connections
    monkeypatch.setattr("open_clip.pretrained.hf_hub_download", download)
    with hub_server.down():
        code = main(["uouo", "prepare", "--config", "mmd", "--option", "num-mosaics=2", "--option", "device=cpu",
                     "--cache-dir", str(tmp_path / "cache")])
    assert code == 2 and downloads == []
    err = _one_line_error(capsys)
    assert "downloading the CLIP weights 'laion2b_s34b_b79k' of ViT-B-32" in err and "cannot reach" in err
    assert "use --option clip-pretrained=none (seeded random weights" in err and "or --option clip-pretrained=FILE" in err


# ------------------------------------------------------------------------- start-up cost

IMPORTS_OF = r"""
import json, sys
from rf100vl_hf.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
heavy = sorted({name.split(".")[0] for name in sys.modules} & {"torch", "transformers", "open_clip"})
print(json.dumps({"code": code, "heavy": heavy, "datasets": bool({"datasets", "pyarrow"} & set(sys.modules))}))
"""


def _imports_of(argv: list[str], cwd: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", IMPORTS_OF, *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_help_and_prepare_import_no_model_library(sample_root: Path, tmp_path: Path) -> None:
    """``--help`` imports neither datasets nor pyarrow, nor does a ``prepare`` of exports that did
    not change since their build (their build is found by stat); a cold one does."""
    assert _imports_of(["--help"], tmp_path) == {"code": 0, "heavy": [], "datasets": False}
    prepare = ["prepare", "sample", "--data-dir", str(sample_root), "--cache-dir", str(tmp_path / "cache")]
    assert _imports_of(prepare, tmp_path) == {"code": 0, "heavy": [], "datasets": True}
    assert _imports_of(prepare, tmp_path) == {"code": 0, "heavy": [], "datasets": False}


def test_a_full_disk_under_the_arrow_cache_is_one_line_naming_the_folder(
    sample_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from datasets.arrow_writer import ArrowWriter

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as Arrow raises it: no file named

    monkeypatch.setattr(ArrowWriter, "write_table", full)
    cache = tmp_path / "cache"
    assert main(["prepare", "sample", "--data-dir", str(sample_root), "--cache-dir", str(cache)]) == 2
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rf100vl-hf:")]
    assert line.startswith(f"rf100vl-hf: error: {cache}{os.sep}") and line.endswith(": No space left on device"), line
