"""``rf100vl-hf models``: every registered adapter with the default checkpoint, prompt modes and
tasks its class has, the built-ins read from the registry's table without importing a model
library, installed ones imported; the command reaches the library's command line through the
``rf100vl.commands`` entry-point group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rf100vl_hf.cli import main

from pytest_rf100vl.adapters import registry
from pytest_rf100vl.commands.models import adapters

THIRD_PARTY = {
    "third_adapter.py": '''
        from pytest_rf100vl.adapters.base import Adapter

        BASE = "org/third"


        class ThirdAdapter(Adapter):
            default_checkpoint = f"{BASE}-base"
            prompt_modes = ("names", "instructions")
            tasks = ("rf100vl",)

            def predict(self, batch):
                return []
    ''',
    "computed_adapter.py": '''
        from pytest_rf100vl.adapters.base import Adapter


        class ComputedAdapter(Adapter):
            default_checkpoint = "org/computed".upper()  # only an import can tell

            def predict(self, batch):
                return []
    ''',
    "thirdparty-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: thirdparty\nVersion: 1.0\n",
    "thirdparty-1.0.dist-info/entry_points.txt": '''
        [rf100vl.adapters]
        third = third_adapter:ThirdAdapter
        computed = computed_adapter:ComputedAdapter
        missing = no_such_module:Nope

        [rf100vl.commands]
        broken = no_such_module:add_parser
        list = third_adapter:ThirdAdapter
    ''',
}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder that installs the package ``thirdparty`` when put on ``PYTHONPATH``."""
    for name, text in THIRD_PARTY.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return tmp_path


def fresh(code: str, site: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter (with ``site`` installed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site or ""), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_every_built_in_is_listed_with_the_attributes_its_class_has() -> None:
    listed = {info.name: info for info in adapters()}
    assert list(listed) == list(registry.BUILTIN)
    for name, info in listed.items():
        cls = registry.adapter_class(name)  # imports the model libraries: the reference
        assert (info.default_checkpoint, info.prompt_modes, info.tasks, info.source, info.problem) == (
            cls.default_checkpoint, tuple(cls.prompt_modes), tuple(cls.tasks), "built-in", None
        ), name
    assert listed["clip-quadrant"].tasks == ("uouo",) and listed["predictions"].tasks == ("rf100vl",)


def test_the_listing_imports_no_model_library_and_starts_fast() -> None:
    code = textwrap.dedent("""
        import sys, time
        start = time.perf_counter()
        from rf100vl_hf.cli import main
        main(["models"])
        heavy = [name for name in ("torch", "transformers", "open_clip", "datasets") if name in sys.modules]
        print("SECONDS", time.perf_counter() - start, "HEAVY", heavy)
    """)
    result = fresh(code)
    assert result.returncode == 0, result.stderr
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["name", "default", "checkpoint", "prompt", "modes", "tasks", "from", "also"]
    owlv2 = next(line for line in lines if line.startswith("owlv2 "))
    assert owlv2.split() == ["owlv2", "google/owlv2-base-patch16-ensemble", "names,", "instructions,", "fewshot",
                             "rf100vl,", "uouo", "built-in", "owlv2:tiny"]
    seconds, heavy = lines[-1].split(" HEAVY ")
    assert heavy == "[]" and float(seconds.split()[1]) < 3.0


def test_installed_adapters_are_listed_with_their_package_and_broken_ones_with_the_reason(site: Path) -> None:
    code = textwrap.dedent("""
        import sys
        from rf100vl_hf.cli import main
        main(["models", "--format", "json"])
        print("IMPORTED", sorted(name for name in ("third_adapter", "computed_adapter") if name in sys.modules))
    """)
    result = fresh(code, site)
    assert result.returncode == 0, result.stderr
    listing, imported = result.stdout.rsplit("IMPORTED ", 1)
    listed = {info["name"]: info for info in json.loads(listing)}
    assert listed["third"] == {"name": "third", "target": "third_adapter:ThirdAdapter", "source": "thirdparty",
                               "default_checkpoint": "org/third-base", "prompt_modes": ["names", "instructions"],
                               "tasks": ["rf100vl"], "problem": None, "spellings": []}
    assert listed["computed"]["default_checkpoint"] == "ORG/COMPUTED"
    assert listed["computed"]["tasks"] == ["rf100vl", "uouo"]  # inherited from Adapter
    assert "ModuleNotFoundError: No module named 'no_such_module'" in listed["missing"]["problem"]
    assert imported.strip() == "['computed_adapter', 'third_adapter']"  # no table entry: imported
    assert "command 'broken' of entry point no_such_module:add_parser (package thirdparty) could not be added" \
        in result.stderr
    assert "command 'list' of entry point third_adapter:ThirdAdapter (package thirdparty) is already a command" \
        in result.stderr


def test_a_name_registered_twice_is_a_one_line_error(site: Path) -> None:
    entry_points = site / "thirdparty-1.0.dist-info" / "entry_points.txt"
    entry_points.write_text(entry_points.read_text(encoding="utf-8").replace("third =", "owlv2 ="), encoding="utf-8")
    result = fresh("from rf100vl_hf.cli import main; raise SystemExit(main(['models']))", site)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith("rf100vl-hf: error: entry points: rf100vl.adapters: model "
                                                     "adapter 'owlv2' is registered twice")


def test_the_table_and_json_agree(capsys: pytest.CaptureFixture[str]) -> None:
    start = time.perf_counter()
    assert main(["models", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert main(["models"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in table[1:]] == [info["name"] for info in listed]
    assert time.perf_counter() - start < 5.0


def test_the_offline_variants_and_the_checkpoints_known_by_name_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    """A newcomer who types ``yolo26`` finds ``yolo:tiny26`` and ``yolo:yolo26n.pt`` here; every
    model built offline shows its ``:tiny``; LLMDet, YOLO-E and YOLO-World have names of their own."""
    assert main(["models", "--format", "json"]) == 0
    listed = {info["name"]: info for info in json.loads(capsys.readouterr().out)}
    assert listed["yolo"]["spellings"] == ["yolo:tiny", "yolo:tiny26", "yolo:yolo11n.pt", "yolo:yolo26n.pt"]
    assert listed["llmdet"]["default_checkpoint"] == "iSEE-Laboratory/llmdet_tiny"
    assert listed["llmdet"]["target"].endswith("grounding_dino:LlmDetAdapter")
    assert listed["yoloe"]["spellings"][:2] == ["yoloe:tiny", "yoloe:yoloe-11l-seg.pt"]
    assert listed["yoloe"]["prompt_modes"] == ["names", "fewshot"]
    assert listed["yolo-world"]["default_checkpoint"] == "yolov8s-worldv2.pt"
    for name in ("owlv2", "grounding-dino", "sam3", "qwen3-vl", "florence-2", "clip-quadrant", "rfdetr"):
        assert f"{name}:tiny" in listed[name]["spellings"]
    for name in ("openai", "gemini", "oracle", "predictions"):  # nothing to build offline
        assert listed[name]["spellings"] == []
    assert main(["models"]) == 0
    yolo = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("yolo "))
    assert yolo.endswith("built-in  yolo:tiny, yolo:tiny26, yolo:yolo11n.pt, yolo:yolo26n.pt")


ODD_ADAPTERS = '''
    from pytest_rf100vl.adapters.base import Adapter


    class NumberModes(Adapter):
        prompt_modes = 5

        def predict(self, batch):
            return []


    class NoTasks(Adapter):
        tasks = None
        default_checkpoint = float("nan")  # only an import can tell

        def predict(self, batch):
            return []


    class OddCheckpoint(Adapter):
        default_checkpoint = ("org", "model")
        prompt_modes = ("names", 3)

        def predict(self, batch):
            return []
'''


def test_adapters_with_attributes_of_the_wrong_kind_are_listed_with_the_reason(site: Path) -> None:
    (site / "odd_adapters.py").write_text(textwrap.dedent(ODD_ADAPTERS).lstrip(), encoding="utf-8")
    points = site / "thirdparty-1.0.dist-info" / "entry_points.txt"
    points.write_text(points.read_text(encoding="utf-8").replace(
        "[rf100vl.adapters]\n",
        "[rf100vl.adapters]\nmodes = odd_adapters:NumberModes\nnotasks = odd_adapters:NoTasks\n"
        "oddckpt = odd_adapters:OddCheckpoint\n"), encoding="utf-8")
    for format in ("json", "table"):
        result = fresh(f"from rf100vl_hf.cli import main; raise SystemExit(main(['models', '--format', '{format}']))",
                       site)
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        if format == "json":
            listed = {info["name"]: info for info in json.loads(result.stdout)}  # valid JSON: no NaN
        else:
            text = result.stdout
    assert listed["modes"]["problem"] == ("odd_adapters:NumberModes: prompt_modes is 5, not a tuple of names")
    assert listed["notasks"]["problem"] == "odd_adapters:NoTasks: default_checkpoint is nan, not a name or None"
    assert listed["oddckpt"]["problem"].startswith("odd_adapters:OddCheckpoint: default_checkpoint is ('org', 'model')")
    assert listed["third"]["problem"] is None  # the good ones are listed as ever
    assert "modes: cannot be read: odd_adapters:NumberModes: prompt_modes is 5, not a tuple of names" in text
