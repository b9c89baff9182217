"""The served adapters against a hostile server (``tests/support/hostile_servers.py``): a body
or headers dribbled a byte at a time, a body that stops coming and an endless chunked body end
at the adapter's ``timeout``; a huge or endless fast body ends at the body cap; the pair's own deadline
(``pair_timeout``) stops its requests; absurd back-off settings are refused; and a key the
server echoes back, in any form, reaches nothing the plugin writes.

Each case takes a second or two: deadlines here are 1 s."""

from __future__ import annotations

import json
import logging
import time
import traceback
import warnings
from urllib.parse import quote

import pytest

from pytest_rf100vl.adapters.base import DetectionTask
from pytest_rf100vl.adapters.registry import create
from pytest_rf100vl.adapters.remote import RequestFailed

from tests.adapters.served import stored_item
from tests.support.deadline import within
from tests.support.hostile_servers import HostileServer, serve_hostile

KEY = "sk-hostile/7f3a+b9==\n"
"""A key as ``export KEY=$(cat keyfile)`` with a CRLF file leaves it: a trailing newline, and
characters that percent-encoding changes."""
KEY_VARIABLE = "RF100VL_HOSTILE_KEY"
STRIPPED = KEY.strip()
KEY_FORMS = (STRIPPED, quote(STRIPPED, safe=""), json.dumps(KEY)[1:-1])
"""The key as written by hand in every form a leak could take: stripped, percent-encoded, JSON-escaped."""
ECHOED = (KEY, quote(STRIPPED, safe=""), repr(KEY))
"""What the echoing server sends back besides the credential it was presented."""
APIS = ("openai", "gemini")


def adapter_for(api: str, server: HostileServer, **options: object):
    url = server.openai_url if api == "openai" else server.origin
    model = "stand-in-vl" if api == "openai" else "gemini-2.0-flash"
    return create(f"{api}:{model}", **{"base_url": url, "family": "generic", "retry_base_delay": 0.01,
                                       "retry_max_delay": 0.05, **options})


def ask(adapter) -> object:
    adapter.set_task(DetectionTask("pets", ["cat", "dog"], prompt="names"))
    return adapter.predict([stored_item((64, 48))])


def leaked(text: str) -> list[str]:
    return [form for form in KEY_FORMS if form in text]


@pytest.fixture(autouse=True)
def _hostile_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KEY_VARIABLE, KEY)


# --------------------------------------------------------------------------- deadlines


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("behaviour", ["dribble_body", "dribble_headers", "endless_slow"])
def test_a_server_that_dribbles_is_given_up_at_the_timeout(api: str, behaviour: str) -> None:
    with serve_hostile(behaviour) as server:
        adapter = adapter_for(api, server, timeout=1.0, max_retries=0)
        started = time.monotonic()
        with pytest.raises(RequestFailed, match=r"no answer within timeout=1 s"):
            within(12, lambda: ask(adapter))
        assert time.monotonic() - started < 2.5
        assert adapter.pair_columns()["api_failed_requests"] == 1


@pytest.mark.parametrize("api", APIS)
def test_a_server_that_falls_silent_mid_body_is_cut_at_the_deadline_not_a_read_timeout_later(api: str) -> None:
    # its last byte comes at 0.8 s: a read time-out of 1 s from then would end the request at 1.8 s
    with serve_hostile("stall_body", stall_after=0.8) as server:
        adapter = adapter_for(api, server, timeout=1.0, max_retries=0)
        started = time.monotonic()
        with pytest.raises(RequestFailed, match=r"no answer within timeout=1 s"):
            within(12, lambda: ask(adapter))
        assert time.monotonic() - started < 1.5


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("behaviour", ["huge", "endless_fast"])
def test_a_body_over_the_cap_is_not_read_to_its_end(api: str, behaviour: str) -> None:
    with serve_hostile(behaviour) as server:
        adapter = adapter_for(api, server, timeout=10.0, max_retries=0)
        started = time.monotonic()
        with pytest.raises(RequestFailed, match=r"the response body is longer than 16777216 bytes"):
            within(12, lambda: ask(adapter))
        assert time.monotonic() - started < 5


def test_each_retry_has_a_deadline_of_its_own_and_the_pair_one_over_all() -> None:
    with serve_hostile("dribble_body") as server:
        adapter = adapter_for("openai", server, timeout=1.0, max_retries=1)
        started = time.monotonic()
        with pytest.raises(RequestFailed, match=r"no answer within timeout=1 s \(gave up after 2 attempts\)"):
            within(12, lambda: ask(adapter))
        assert 2.0 <= time.monotonic() - started < 3.5
        paired = adapter_for("openai", server, timeout=1.0, max_retries=10, pair_timeout=1.5)
        paired.start_pair()
        started = time.monotonic()
        with pytest.raises(RequestFailed, match=r"pair_timeout=1.5 s"):
            within(12, lambda: ask(paired))
        with pytest.raises(RequestFailed, match=r"pair_timeout=1.5 s reached: request not sent"):
            ask(paired)  # the next image of the pair is not even sent
        assert time.monotonic() - started < 2.5
        sent = len(server.requests)
        paired.start_pair()  # the next pair has its own deadline
        with pytest.raises(RequestFailed):
            within(12, lambda: ask(paired))
        assert len(server.requests) > sent


@pytest.mark.parametrize("options", [{"retry_max_delay": 1e12}, {"retry_base_delay": 1e9}, {"timeout": 1e9},
                                     {"pair_timeout": -1}, {"max_retries": 10**6}])
def test_absurd_timing_options_are_refused_naming_the_option(options: dict[str, float]) -> None:
    with serve_hostile("retry_after") as server, pytest.raises(ValueError, match=f"option {next(iter(options))}="):
        adapter_for("openai", server, **options)


def test_a_far_retry_after_fails_the_question_at_once() -> None:
    with serve_hostile("retry_after", retry_after="1000000000") as server:
        adapter = adapter_for("openai", server, retry_max_delay=600, max_retries=3)
        started = time.monotonic()
        with pytest.raises(RequestFailed, match="more than retry_max_delay=600"):
            within(12, lambda: ask(adapter))
        assert time.monotonic() - started < 2 and len(server.requests) == 1


# --------------------------------------------------------------------------- secrets


@pytest.mark.parametrize("api", APIS)
def test_a_key_the_server_echoes_in_its_answer_reaches_nothing(
    api: str, caplog: pytest.LogCaptureFixture
) -> None:
    with serve_hostile("echo", echo=ECHOED) as server, caplog.at_level(logging.DEBUG):
        adapter = adapter_for(api, server, api_key_env=KEY_VARIABLE)
        adapter.start_pair()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            (found,) = ask(adapter)
        assert server.requests[0].credential == STRIPPED  # the server was sent the key, stripped
    shown = json.dumps([adapter.describe(), adapter.answer_counts(), adapter.pair_columns(),
                        [str(w.message) for w in caught], caplog.text], default=str)
    assert len(found.scores) == 0 and "***" in shown  # every box's label was a secret: no class
    assert leaked(shown) == []


@pytest.mark.parametrize("api", APIS)
def test_a_key_the_server_echoes_in_an_error_reaches_no_message(api: str) -> None:
    with serve_hostile("echo_error", echo=ECHOED) as server:
        adapter = adapter_for(api, server, api_key_env=KEY_VARIABLE)
        with pytest.raises(RequestFailed, match="HTTP 400") as failed:
            ask(adapter)
    assert leaked(str(failed.value) + "".join(traceback.format_exception(failed.value))) == []


def test_credentials_in_the_base_url_reach_no_message_in_any_form() -> None:
    password, query_key = "PA@SS-w0rd-91", "QK-55aa-77bb"
    with serve_hostile("echo_error", echo=(password, query_key)) as server:
        url = server.openai_url.replace("http://", f"http://robot:{quote(password, safe='')}@") + f"?api-key={query_key}"
        adapter = create("openai:stand-in-vl", base_url=url, family="generic")
        with pytest.raises(RequestFailed, match="HTTP 400") as failed:
            ask(adapter)
        headers = server.requests[0].headers
    assert headers["authorization"].startswith("Basic ")  # the client sent the URL's user and password
    from pytest_rf100vl.engine.columns import options_column

    recorded = options_column(adapter.identity_options(adapter.options))  # what a row records of them
    text = str(failed.value) + json.dumps([adapter.describe(), adapter.pair_columns(), recorded], default=str)
    assert all(secret not in text for secret in (password, quote(password, safe=""), query_key,
                                                headers["authorization"][6:]))


def test_a_key_given_as_api_key_env_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    given = "AKIA7EXAMPLEKEY4242QQ"  # capitals and digits: it could pass for a variable's name
    for name in (given, "sk-proj-Zq81-mistake"):
        with pytest.raises(ValueError, match="must name an environment variable") as refused:
            create("openai:gpt-4o", api_key_env=name)
        assert name not in str(refused.value)
    monkeypatch.setenv("MY_KEY", "sk-set-and-fine")
    assert create("openai:gpt-4o", api_key_env="MY_KEY").describe()["api_key_env"] == "MY_KEY"
    with pytest.raises(ValueError, match="no API key for https://api.openai.com/v1: set UNSET_KEY_NAME"):
        create("openai:gpt-4o", api_key_env="UNSET_KEY_NAME")  # an unset name is named
