"""The dataset card: YAML that parses and lists what a loader needs, and a body that says what RF100-VL is."""

from __future__ import annotations

import re
from importlib import resources
from string import Template

import pytest
import yaml

from rf100vl_hf.errors import DataError
from rf100vl_hf.hub.card import StaleConfigWarning, name_repository, read_card, write_card
from rf100vl_hf.hub.rf100vl_card import export_rf100vl, hub_license
from rf100vl_hf.rf100vl.builder import CITATION
from rf100vl_hf.sample import INSTRUCTIONS

from tests.hub.source import SPLIT_FOLDERS, classes, expected_rows


def _front_matter(repo):
    text = (repo / "README.md").read_text(encoding="utf-8")
    match = re.match(r"^---\n(.*?)\n---\n(.*)$", text, flags=re.DOTALL)
    assert match, "README.md has no YAML front matter"
    return yaml.safe_load(match.group(1)), match.group(2)


OWN_LICENCES = {  # what each export's README.roboflow.txt states, as the Hub's card metadata says it
    "sample": {"license": "cc0-1.0"},
    "microcontroller": {"license": "mit"},
    "chess-pieces": {
        "license": "other",
        "license_name": "public-domain",
        "license_link": "https://public.roboflow.ai/object-detection/chess-full",
    },
}


def test_yaml_lists_configs_splits_features_and_licence(exported):
    data, _ = _front_matter(exported.repo)
    assert OWN_LICENCES[exported.name]["license"] in (
        data["license"] if isinstance(data["license"], list) else [data["license"]]
    )
    assert data["task_categories"] == ["object-detection"]
    assert data["pretty_name"] == "RF100-VL"
    assert "rf100vl" in data["tags"]
    config = next(c for c in data["configs"] if c["config_name"] == exported.name)
    splits = [item["split"] for item in config["data_files"]]
    assert splits[:3] == list(SPLIT_FOLDERS) and {"fewshot_10", "semisup_10"} <= set(splits)
    for item in config["data_files"]:
        assert sorted(exported.repo.glob(item["path"])), f"{item['path']} matches no shard"
    info = next(i for i in data["dataset_info"] if i["config_name"] == exported.name)
    assert [f["name"] for f in info["features"]] == ["image", "image_id", "file_name", "width", "height", "objects"]
    objects = next(f for f in info["features"] if f["name"] == "objects")
    category = next(f for f in objects["struct"] if f["name"] == "category")
    assert list(category["list"]["class_label"]["names"].values()) == classes(exported.export)
    counts = {s["name"]: s["num_examples"] for s in info["splits"]}
    assert {s: counts[s] for s in SPLIT_FOLDERS} == {s: len(expected_rows(exported.export, s)) for s in SPLIT_FOLDERS}
    assert info["description"].startswith("rf100vl-hf metadata: ")


def test_body_has_the_table_the_instructions_the_protocol_and_the_citation(sample_repo):
    _, body = _front_matter(sample_repo)
    assert 'load_dataset("ORG/NAME", "sample", split="fewshot_10")' in body
    row = next(line for line in body.splitlines() if line.startswith("| `sample` |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:6] == ["`sample`", "custom", "3", "24", "8", "8"]
    assert cells[-2:] == ["generated (federated)", "CC0 1.0"]
    assert "A filled red disc, of any size, on a noisy background." in INSTRUCTIONS
    assert "A filled red disc, of any size, on a noisy background." in body
    assert "- Draw a tight box around the whole disc." in body
    for fact in ("maxDets = [1, 10, 500]", "Category 0", "renumbered from 1", "federated"):
        assert fact in body
    assert CITATION in body


def _copy(repo, target):
    for path in repo.rglob("*"):
        if path.is_file():
            (target / path.relative_to(repo)).parent.mkdir(parents=True, exist_ok=True)
            (target / path.relative_to(repo)).write_bytes(path.read_bytes())
    return target


def test_read_card_gives_back_what_was_written(sample_repo, tmp_path):
    configs = read_card(sample_repo)
    assert [c.name for c in configs] == ["sample"]
    copy = _copy(sample_repo, tmp_path / "repo")
    write_card(copy, configs, {"license": "apache-2.0"}, "# body")
    assert read_card(copy) == configs


def test_control_characters_in_a_card_are_escaped_in_the_body_and_round_trip_in_the_yaml(sample_repo, tmp_path):
    """Text from metadata read back from an earlier card reaches the body; the YAML header quotes
    what it carries. Neither may act on a terminal that shows the card."""
    copy = _copy(sample_repo, tmp_path / "repo")
    hostile = "bees\x1b[2J\x1b]0;owned\x07\x00\u202e"
    write_card(copy, read_card(sample_repo), {"license": "apache-2.0", "pretty_name": hostile},
               f"# body\n\nInstructions:\t{hostile}\n")
    front, body = _front_matter(copy)
    assert front["pretty_name"] == hostile
    assert body.strip() == "# body\n\nInstructions:\tbees\\x1b[2J\\x1b]0;owned\\x07\\x00\\u202e"
    yaml_text = (copy / "README.md").read_text(encoding="utf-8").split("\n---\n")[0]
    assert not any(char in yaml_text for char in "\x1b\x07\x00")


def test_a_config_that_lost_its_shards_is_left_out_with_a_warning(sample_repo, tmp_path):
    copy = _copy(sample_repo, tmp_path / "repo")
    for shard in copy.glob("sample/test-*.parquet"):
        shard.unlink()
    with pytest.warns(StaleConfigWarning, match="'sample' has lost shards"):
        assert read_card(copy) == []


def test_a_card_without_data_files_is_an_error_naming_the_field(tmp_path):
    (tmp_path / "README.md").write_text("---\nconfigs:\n- config_name: a\ndataset_info:\n- config_name: a\n---\n")
    with pytest.raises(DataError, match=r"README.md: configs\[a\]"):
        read_card(tmp_path)


def test_write_card_refuses_to_overwrite_the_config_fields(sample_repo, tmp_path):
    with pytest.raises(ValueError, match="configs"):
        write_card(tmp_path, read_card(sample_repo), {"configs": []}, "# body")


def _licence_fields(data):
    return {k: v for k, v in data.items() if k.startswith("license")}


@pytest.mark.parametrize("name", ["microcontroller", "chess-pieces"])
def test_a_real_datasets_card_carries_its_own_licence(name, shared_data, tmp_path):
    repo = export_rf100vl([name], tmp_path / "repo", data_dir=shared_data)
    data, body = _front_matter(repo)
    assert _licence_fields(data) == OWN_LICENCES[name]
    stated = {"microcontroller": "MIT", "chess-pieces": "Public Domain"}[name]
    row = next(line for line in body.splitlines() if line.startswith(f"| `{name}` |"))
    assert row.rstrip(" |").endswith(stated)


def test_a_card_of_several_datasets_lists_every_licence(real_repo):
    data, _ = _front_matter(real_repo)
    assert _licence_fields(data) == {
        "license": ["mit", "other"],
        "license_name": "public-domain",
        "license_link": OWN_LICENCES["chess-pieces"]["license_link"],
    }


@pytest.mark.parametrize(
    "stated, expected",
    [
        ("MIT", ("mit", None, None)),
        ("CC BY 4.0", ("cc-by-4.0", None, None)),
        ("BY-NC-SA 4.0", ("cc-by-nc-sa-4.0", None, None)),
        ("CC BY-NC 4.0", ("cc-by-nc-4.0", None, None)),
        ("CC0 1.0", ("cc0-1.0", None, None)),
        ("ODbL v1.0", ("odbl", None, None)),
        ("Apache License 2.0", ("apache-2.0", None, None)),
        ("cc-by-sa-4.0", ("cc-by-sa-4.0", None, None)),
        ("Public Domain", ("other", "public-domain", "https://example.org/ds")),
        ("Private", ("other", "private", "https://example.org/ds")),
        (None, ("unknown", None, None)),
        ("  ", ("unknown", None, None)),
    ],
)
def test_a_stated_licence_becomes_the_hubs_id_or_other_with_a_name_and_link(stated, expected):
    assert hub_license(stated, "https://example.org/ds") == expected


def test_the_generic_notes_name_no_class_of_any_dataset(real_repo):
    _, body = _front_matter(real_repo)
    notes = body.split("## Protocol notes", 1)[1].split("## Annotator instructions", 1)[0]
    names = [name for config in read_card(real_repo) for name in config.features["objects"]["category"].feature.names]
    assert names and not [name for name in names if name.lower() in notes.lower()]


@pytest.mark.parametrize("card_name", ["rf100vl_card", "uouo_card"])
def test_a_push_names_its_repository_in_either_benchmarks_card(card_name, tmp_path):
    card = resources.files("rf100vl_hf.hub").joinpath(f"templates/{card_name}.md")
    template = Template(card.read_text(encoding="utf-8"))
    (tmp_path / "README.md").write_text(template.safe_substitute(repo="ORG/NAME", example="x", fewshot_split="s"))
    assert name_repository(tmp_path, "me/data") and not name_repository(tmp_path, "me/data")
    text = (tmp_path / "README.md").read_text()
    assert 'ds = load_dataset("me/data", "x", split=' in text and "ORG/NAME" not in text
