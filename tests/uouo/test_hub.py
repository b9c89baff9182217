"""The UOUO Hub repository: local round trip, the card, a push to the stand-in Hub, the loading script."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import datasets
import pytest

from rf100vl_hf.hub.push import push_repository
from rf100vl_hf.hub.uouo_card import card_licence, export_uouo
from rf100vl_hf.metadata import read_metadata
from rf100vl_hf.uouo.builder import load_uouo
from rf100vl_hf.uouo.prompts import QUADRANT_PROMPT

SCRIPT = Path(__file__).resolve().parents[2] / "loading_scripts" / "uouo.py"
COUNT = 5
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")  # huggingface_hub's LFS upload


@pytest.fixture(scope="module")
def repo(iotkits: Path, tiny_clip: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("uouo-hub") / "repo"
    return export_uouo(out, iotkits, clip_model=tiny_clip, clip_pretrained=None, num_mosaics=COUNT, repo_id="org/uouo")


def _rows(ds: datasets.Dataset) -> list[dict]:
    return list(ds.cast_column("image", datasets.Image(decode=False)).map(lambda r: {"image": r["image"]["bytes"]}))


@pytest.fixture(scope="module")
def expected(iotkits: Path, tiny_clip: str) -> dict[str, datasets.Dataset]:
    return {
        mode: load_uouo(mode, source_dir=iotkits, clip_model=tiny_clip, clip_pretrained=None, num_mosaics=COUNT,
                        progress=False)
        for mode in ("random", "mmd")
    }


@pytest.mark.parametrize("mode", ["random", "mmd"])
def test_local_repository_loads_the_same_rows(repo: Path, expected, mode: str) -> None:
    loaded = datasets.load_dataset(str(repo), mode, split="test")
    assert _rows(loaded) == _rows(expected[mode])
    assert read_metadata(loaded) == read_metadata(expected[mode])


def test_card_states_spec_prompts_metrics_and_table1(repo: Path) -> None:
    card = (repo / "README.md").read_text()
    assert "license: cc-by-4.0" in card and "from its `LICENSE.txt`" in card  # the source's own licence file
    assert 'load_dataset("org/uouo", "mmd", split="test")' in card
    for text in (QUADRANT_PROMPT, "quadrant accuracy", "mIoU", "biased estimator", "| gpt-4o | 0.3286 | 0.3472 |"):
        assert text in card
    assert "| `mmd` | 5 | 10 | 50 | iotkits-uouo" in card and "| cc-by-4.0 | tiny-clip-uouo-test (random init) |" in card


def test_push_round_trip(repo: Path, expected, hub_server) -> None:
    url = push_repository(repo, "org/uouo", token=hub_server.token)
    assert url.startswith(f"{hub_server.url}/datasets/org/uouo/commit/")
    loaded = datasets.load_dataset("org/uouo", "mmd", split="test")
    assert _rows(loaded) == _rows(expected["mmd"])
    assert read_metadata(loaded)["clip"]["weights"] == "random-init-seed0"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("uouo_loading_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_script_explains_itself(script, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in ("--source-dir", "--config", "--out", "--option", "num-mosaics:", "seed:", "sigma:", "clip-model:",
                   "--push"):
        assert option in text
    assert "load_dataset" in text and "HF_TOKEN" in text and "UOUO_SOURCE_DIR" in text


def test_script_builds_a_repository(script, iotkits: Path, tiny_clip: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "repo"
    code = script.main(["--source-dir", str(iotkits), "--config", "random", "--option", "num-mosaics=3", "--option", "seed=2",
                        "--option", f"clip-model={tiny_clip}", "--option", "clip-pretrained=none", "--out", str(out)])
    assert code == 0 and f"wrote {out}" in capsys.readouterr().out
    loaded = datasets.load_dataset(str(out), "random", split="test")
    assert len(loaded) == 3 and read_metadata(loaded)["seed"] == 2
    try:  # a usage error: argparse exits, or the command returns the status
        code = script.main(["--source-dir", str(tmp_path / "nowhere"), "--out", str(out)])
    except SystemExit as exit_info:
        code = exit_info.code
    assert code == 2 and "nowhere" in capsys.readouterr().err


def _meta(name: str, licence: dict | None) -> tuple[None, dict]:
    return None, {"source": {"name": name, **({"license": licence} if licence else {})}}


@pytest.mark.parametrize(
    ("sources", "stated", "fields", "says"),
    [
        ([("a", {"id": "cc-by-4.0", "name": "CC BY 4.0", "origin": "README.txt"})], None,
         {"license": "cc-by-4.0"}, "`a`: `cc-by-4.0` (CC BY 4.0, from its `README.txt`)"),
        ([("a", {"id": "unknown", "name": "", "origin": ""})], None, {"license": "unknown"},
         "Check the source's terms"),
        ([("a", None)], None, {"license": "unknown"}, "Unknown: the source states no licence"),  # an older export
        ([("a", {"id": "other", "name": "Lab Licence", "origin": "LICENSE"})], None,
         {"license": "other", "license_name": "Lab Licence"}, "`a`: other (Lab Licence, from its `LICENSE`)"),
        ([("a", {"id": "mit", "name": "MIT License", "origin": "LICENSE"}),
          ("b", {"id": "cc-by-4.0", "name": "CC BY 4.0", "origin": "LICENSE"})], None,
         {"license": "other", "license_name": "CC BY 4.0, MIT License"}, "not one Hub licence id"),
        ([("a", None)], "cc0-1.0", {"license": "cc0-1.0"}, "as stated when this repository was exported"),
        ([("a", {"id": "unknown", "name": "", "origin": "", "note": "made with bria-rmbg: non-commercial use only"})],
         "cc0-1.0", {"license": "cc0-1.0"}, "Restrictions stated by the source: `a`: made with bria-rmbg"),
    ],
)
def test_card_licence_is_the_sources(sources, stated, fields, says) -> None:
    yaml_fields, paragraph = card_licence([_meta(name, licence) for name, licence in sources], stated)
    assert yaml_fields == fields and says in paragraph
