"""A plugin run writes no secret anywhere: not in ``results.jsonl``, ``results.parquet``,
``summary.md``, the predictions and their ``.about.json``, the answer cache, nor on the
terminal, whether the run answers or fails, however the secret was given (credentials in
``base_url`` on the command line in each of its spellings or in the ini file, a key with a
trailing newline, a key given as ``api_key_env``) and whatever a hostile server echoes back."""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support.hostile_servers import serve_hostile
from tests.support.model_servers import serve_openai

PASSWORD = "PA@SS-w0rd-91"
QUERY_KEY = "QK-55aa-77bb"
KEY = "sk-plugin/8c2e+d7==\n"
"""A key with a trailing newline and characters percent-encoding changes."""
KEY_VARIABLE = "RF100VL_SECRETS_TEST_KEY"
STRIPPED = KEY.strip()
ENCODED_QUERY_KEY = QUERY_KEY.replace("-", "%2D")
"""The query key encoded more than it must be: a client sends it so, and a server echoes that."""
BASE64_KEY = base64.b64encode(STRIPPED.encode()).decode()
FORMS = (PASSWORD, quote(PASSWORD, safe=""), QUERY_KEY, ENCODED_QUERY_KEY, STRIPPED, quote(STRIPPED, safe=""),
         json.dumps(KEY)[1:-1], BASE64_KEY)
"""Each secret as written by hand in each form a leak could take."""
RUN = ("--rf100vl-model", "openai:stand-in-vl", "--rf100vl-dataset", "sample", "--rf100vl-device", "cpu",
       "--benchmark-disable", "--rf100vl-limit", "2", "-p", "no:cacheprovider")


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KEY_VARIABLE, KEY)


@pytest.fixture(scope="module", autouse=True)
def _client_loaded() -> None:
    """What the runs import, loaded before any in-process run (which unloads what it imported,
    and an extension module cannot be loaded twice): the scorer's and the client's modules."""
    import faster_coco_eval  # noqa: F401
    import scipy.io  # noqa: F401  (datasets' builders import it the first time one is built)

    from pytest_rf100vl.adapters.base import DetectionTask
    from pytest_rf100vl.adapters.registry import create

    from tests.adapters.served import stored_item

    with serve_openai() as server:
        adapter = create("openai:stand-in-vl", base_url=server.url)
        adapter.set_task(DetectionTask("pets", ["cat"], prompt="names"))
        adapter.predict([stored_item((32, 24))])


def secret_url(origin: str, query: bool = True) -> str:
    """``origin``'s ``/v1`` with a user, a percent-encoded password and (``query``) a key in the
    query (which the openai client cannot send on: with it, requests only fail)."""
    with_password = origin.replace("http://", f"http://robot:{quote(PASSWORD, safe='')}@") + "/v1"
    return with_password + (f"?api-key={QUERY_KEY}" if query else "")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def written(*roots: Path) -> str:
    """Every byte under ``roots``, as text, and the values of every parquet file (whose pages may be compressed)."""
    import pyarrow.parquet as pq

    texts = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                texts.append(path.read_bytes().decode("utf-8", "replace"))
                if path.suffix == ".parquet":
                    texts.append(json.dumps(pq.read_table(path).to_pylist(), default=str))
    return "\n".join(texts)


def leaks(pytester: pytest.Pytester, *outputs: pytest.RunResult) -> list[str]:
    """The forms of the secrets found in the results folder, the answer cache or the output."""
    everything = written(pytester.path / ".rf100vl") + "".join(run.stdout.str() + run.stderr.str() for run in outputs)
    return [form for form in FORMS if form in everything]


def rows(pytester: pytest.Pytester) -> list[dict]:
    path = pytester.path / ".rf100vl" / "results" / "results.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("spelling", ["equals", "space", "-o", "ini"])
@pytest.mark.parametrize("server", ["answering", "refused"])
def test_credentials_in_the_base_url_are_written_nowhere(pytester: pytest.Pytester, spelling: str,
                                                          server: str) -> None:
    with serve_openai() as stand_in:
        origin = stand_in.origin if server == "answering" else f"http://127.0.0.1:{closed_port()}"
        option = f"openai.base_url={secret_url(origin, query=server == 'refused')}"
        no_retry = "openai.max_retries=0"
        given = {"equals": [f"--rf100vl-adapter-option={option}", f"--rf100vl-adapter-option={no_retry}"],
                 "space": ["--rf100vl-adapter-option", option, "--rf100vl-adapter-option", no_retry],
                 "-o": ["-o", f"rf100vl_adapter_option={option}\n{no_retry}"], "ini": []}[spelling]
        if spelling == "ini":
            pytester.makeini(f"[pytest]\nrf100vl_adapter_option =\n    {option}\n    {no_retry}\n")
        run = pytester.runpytest_inprocess(*RUN, *given)
        asked = len(stand_in.received)
    (row,) = rows(pytester)
    assert row["failed_images"] == (0 if server == "answering" else 2)
    assert asked == (2 if server == "answering" else 0)
    assert row["api_base_url"] == f"{origin}/v1"
    assert leaks(pytester, run) == []


def test_a_key_with_a_trailing_newline_that_a_server_echoes_is_written_nowhere(pytester: pytest.Pytester) -> None:
    with serve_openai() as stand_in:
        stand_in.key = "sk-the-right-one"  # a 401 that echoes the key it was given
        run = pytester.runpytest_inprocess(*RUN, f"--rf100vl-adapter-option=openai.base_url={stand_in.url}",
                                           f"--rf100vl-adapter-option=openai.api_key_env={KEY_VARIABLE}")
        assert stand_in.received[0].headers["authorization"] == f"Bearer {STRIPPED}"
    (row,) = rows(pytester)
    assert row["failed_images"] == 2 and "Incorrect API key provided: ***" in row["first_error"]
    assert leaks(pytester, run) == []


@pytest.mark.parametrize("behaviour", ["echo", "echo_error"])
def test_what_a_hostile_server_echoes_is_written_nowhere(pytester: pytest.Pytester, tmp_path: Path,
                                                         behaviour: str) -> None:
    echoed = (KEY, quote(STRIPPED, safe=""), repr(KEY), PASSWORD, QUERY_KEY, ENCODED_QUERY_KEY, BASE64_KEY)
    with serve_hostile(behaviour, echo=echoed) as server:
        run = pytester.runpytest_inprocess(
            *RUN, f"--rf100vl-adapter-option=openai.base_url={secret_url(server.origin)}",
            "--rf100vl-adapter-option", f"openai.api_key_env={KEY_VARIABLE}",
            "--rf100vl-adapter-option", "openai.family=generic", "--rf100vl-adapter-option", "openai.max_retries=0",
            f"--override-ini=rf100vl_cache={pytester.path / '.rf100vl' / 'elsewhere'}")
        assert len(server.requests) == 2
    (row,) = rows(pytester)
    about = json.loads(next((pytester.path / ".rf100vl").rglob("*.about.json")).read_text(encoding="utf-8"))
    if behaviour == "echo":  # each box labelled with a secret: recorded as unknown labels, masked
        assert row["failed_images"] == 0 and row["n_predictions"] == 0
        # the URL's user and password go as basic authorization: no key to echo, the echoed ones masked
        assert set(about["unknown_labels"]) == {"no credential", "***", repr("***\n")}
        assert (pytester.path / ".rf100vl" / "elsewhere" / "answers.sqlite").is_file()
    else:
        assert row["failed_images"] == 2 and "***" in row["first_error"]
    assert leaks(pytester, run) == []


@pytest.mark.parametrize("given", ["sk-proj-Zq81-mistake", "AKIA7EXAMPLEKEY4242QQ"])
def test_a_key_given_as_api_key_env_is_written_nowhere(pytester: pytest.Pytester, given: str) -> None:
    run = pytester.runpytest_inprocess(*RUN, f"--rf100vl-adapter-option=openai.api_key_env={given}")
    output = run.stdout.str() + run.stderr.str()
    assert "must name an environment variable" in output
    assert given not in output + written(pytester.path / ".rf100vl")


HUB_TOKEN = "hf_plugin_SeCrEt_9911"
HUB_ECHO = """
import os


def pytest_rf100vl_result_row(config, pair, row):
    return {"hub_said": "401 for " + os.environ["HF_TOKEN"]}  # as a model download's error may repeat it
"""


def test_the_hub_token_is_written_nowhere(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session knows HF_TOKEN from its start, whether or not it pushes anything."""
    monkeypatch.setenv("HF_TOKEN", HUB_TOKEN)
    pytester.makeconftest(HUB_ECHO)
    run = pytester.runpytest_inprocess("--rf100vl-model", "oracle", *RUN[2:])
    run.assert_outcomes(passed=1)
    (row,) = rows(pytester)
    assert row["hub_said"] == "401 for ***"
    assert HUB_TOKEN not in written(pytester.path / ".rf100vl") + run.stdout.str() + run.stderr.str()
