"""``eval.yaml`` against the Hub's specification: the stand-in Hub refuses the files earlier
exports wrote (a ``description`` in every task, tasks naming no config in a repository of many
configs) and lists no leaderboard for an unregistered framework, and accepts what an export
writes now; a push finds the same faults before uploading anything."""

from __future__ import annotations

import shutil

import pytest
import yaml
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from rf100vl_hf.errors import DataError
from rf100vl_hf.hub.eval_yaml import UnregisteredFrameworkWarning
from rf100vl_hf.hub.push import push_repository
from rf100vl_hf.hub.specification import FRAMEWORKS, eval_result_problems, eval_yaml_problems

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")

EARLIER = {  # the eval.yaml exports wrote before: a description per task, and no config
    "name": "RF100-VL",
    "description": "Roboflow100-VL: 100 object-detection datasets in 7 domains.",
    "evaluation_framework": "rf100vl-hf",
    "tasks": [{"id": "all", "description": "Mean AP50:95 (%) over the 100 datasets, maxDets 500", "split": "test"}],
}


@pytest.fixture
def repo(sample_repo, tmp_path):
    """A copy of the exported sample repository (its card lists the config ``sample``)."""
    return shutil.copytree(sample_repo, tmp_path / "repo")


def upload(hub_server, folder, repo_id):
    api = HfApi(token=hub_server.token)
    api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
    return api.upload_folder(repo_id=repo_id, repo_type="dataset", folder_path=folder)


def with_eval_yaml(folder, content):
    (folder / "eval.yaml").write_text(yaml.safe_dump(content, sort_keys=False))
    return folder


@pytest.mark.parametrize(("content", "refusal"), [
    (EARLIER, r"Invalid eval.yaml: tasks\[0\]\.description: not a field of the specification"),
    ({**EARLIER, "tasks": [{"id": "all", "split": "test"}]},
     r"Invalid eval.yaml: tasks\[0\] \(all\): names no config and the repository has no default config \(it has 1 config\(s\)\)"),
    ({**EARLIER, "tasks": [{"id": "all", "config": "bees", "split": "test"}]},
     r"config 'bees' is not a config of the repository"),
    ({**EARLIER, "tasks": [{"id": "sample", "config": "sample", "split": "holdout"}]},
     r"split 'holdout' is not a split of config 'sample'"),
])
def test_the_hub_refuses_an_eval_yaml_that_breaks_the_specification(hub_server, repo, content, refusal):
    with pytest.raises(HfHubHTTPError, match=refusal) as caught:
        upload(hub_server, with_eval_yaml(repo, content), "org/earlier")
    assert caught.value.response.status_code == 400
    with pytest.raises(DataError, match=r"eval.yaml: (eval.yaml|tasks): "):  # a push says so before uploading
        push_repository(repo, "org/earlier", token=hub_server.token)


def test_an_unregistered_framework_is_accepted_but_lists_no_leaderboard_until_registered(hub_server, repo, monkeypatch):
    with pytest.warns(UnregisteredFrameworkWarning, match=r"'rf100vl-hf' is not one of the Hub's evaluation frameworks "
                                                          r"\(as of 2026-08-17\).*'Registering the framework'"):
        push_repository(repo, "org/unregistered", token=hub_server.token)
    api = HfApi()
    with pytest.raises(HfHubHTTPError, match="not a registered evaluation framework") as caught:
        api.get_dataset_leaderboard("org/unregistered")
    assert caught.value.response.status_code == 404
    monkeypatch.setattr(hub_server, "frameworks", hub_server.frameworks | {"rf100vl-hf"})  # the pull request merged
    assert api.get_dataset_leaderboard("org/unregistered") == []  # a benchmark, with no models yet


def test_what_an_export_writes_now_is_accepted(hub_server, repo, monkeypatch):
    monkeypatch.setenv("RF100VL_EVAL_FRAMEWORK", "mmmu")  # any registered id: no warning
    from rf100vl_hf.hub.card import read_card, write_card

    write_card(repo, read_card(repo), {"license": "apache-2.0"}, "# sample")
    content = yaml.safe_load((repo / "eval.yaml").read_text())
    assert content["evaluation_framework"] == "mmmu" and content["tasks"][0]["config"] == "sample"
    push_repository(repo, "org/accepted", token=hub_server.token)
    assert "eval.yaml" in hub_server.files("org/accepted")


def test_the_specification_tables():
    assert len(FRAMEWORKS) == 30 and "inspect-ai" in FRAMEWORKS and "rf100vl-hf" not in FRAMEWORKS
    assert eval_yaml_problems({**EARLIER, "extra": 1, "tasks": []}) == [
        "extra: not a field of the specification (known: name, description, evaluation_framework, tasks)",
        "tasks: must be a non-empty list"]
    assert eval_yaml_problems({**EARLIER, "tasks": [{"id": "a"}, {"id": "a"}]}) == ["tasks: id 'a' is given twice"]
    inspect = {**EARLIER, "evaluation_framework": "inspect-ai", "tasks": [{"id": "hle", "config": "default"}]}
    assert eval_yaml_problems(inspect) == ["tasks[0].field_spec: missing (required)",
                                           "tasks[0].solvers: missing (required)",
                                           "tasks[0].scorers: missing (required)"]
    entry = {"dataset": {"id": "org/bench", "task_id": "all"}, "value": 1.0, "date": "2025-01-15",
             "source": {"name": "logs"}}
    assert eval_result_problems([entry]) == ["[0].source.url: missing (required)"]
    assert eval_result_problems([{**entry, "source": {"url": "x"}, "date": "15/01/2025"}]) == [
        "[0].date: '15/01/2025' is not an ISO-8601 date or datetime"]
    assert eval_result_problems([]) == ["the file: must be a non-empty list of entries"]
