"""URLs as rows, logs and errors may show them: credentials, query and fragment gone."""

from __future__ import annotations

import pytest

from rf100vl_hf.redact import public_url, public_value


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("https://user:s3cret@api.example.com:8443/v1?key=AIza123#frag", "https://api.example.com:8443/v1"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("http://[::1]:9000/v1?token=x", "http://[::1]:9000/v1"),
        ("https://dashscope-intl.aliyuncs.com/compatible-mode/v1", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"),
    ],
)
def test_a_url_loses_its_credentials_and_query(given: str, shown: str) -> None:
    assert public_url(given) == shown
    assert "s3cret" not in public_url(given) and "AIza" not in public_url(given)


def test_values_that_are_not_urls_pass_unchanged() -> None:
    assert public_value("qwen2.5") == "qwen2.5"
    assert public_value(8) == 8
    assert public_value("C:/models/x") == "C:/models/x"


def test_command_line_words_with_urls_lose_their_credentials() -> None:
    from rf100vl_hf.redact import public_argument

    assert public_argument("openai.base_url=https://u:pw@host/v1?key=k") == "openai.base_url=https://host/v1"
    assert public_argument("https://u:pw@host/v1") == "https://host/v1"
    assert public_argument("--rf100vl-model") == "--rf100vl-model"


# --------------------------------------------------------------------------- the session's scrubber


def test_a_secret_is_masked_in_every_form_it_is_written_in() -> None:
    from rf100vl_hf.redact import Scrubber

    scrubber = Scrubber()
    scrubber.remember("sk-a/b+c==\n")  # a key as $(cat keyfile) of a CRLF file leaves it
    for written in ("sk-a/b+c==", "sk-a%2Fb%2Bc%3D%3D", "sk-a/b%2Bc%3D%3D", '"sk-a/b+c==\\n"', "'sk-a/b+c==\\n'"):
        shown = scrubber.scrub(f"the server said {written} back")
        assert "sk-a" not in shown and "***" in shown, written
    assert scrubber.scrub("nothing secret here") == "nothing secret here"


@pytest.mark.parametrize("written", [
    "qk%2Dlive%2D7788",  # each '-' encoded, though it need not be (a server echoes the form it was sent)
    "%71%6b-live-7788",  # any character, hex in either case
    "qk-live%2d7788",
    "cWstbGl2ZS03Nzg4",  # base64
])
def test_a_secret_is_masked_percent_encoded_any_way_and_in_base64(written: str) -> None:
    from rf100vl_hf.redact import Scrubber

    scrubber = Scrubber()
    scrubber.remember("qk-live-7788")
    assert scrubber.scrub(f"400: bad request ?k={written}&page=2") == "400: bad request ?k=***&page=2"
    assert scrubber.scrub("7788 live, 100% qk") == "7788 live, 100% qk"


def test_a_urls_credentials_and_key_parameters_are_masked_wherever_the_url_is() -> None:
    import base64

    from rf100vl_hf.redact import Scrubber

    scrubber = Scrubber()
    scrubber.remember_url("http://robot:PA%40SS-99@host:8000/v1?api-key=QK-1234&api-version=2024-02-01")
    basic = base64.b64encode(b"robot:PA@SS-99").decode()
    text = scrubber.scrub(f"failed: PA@SS-99 / PA%40SS-99 / Authorization: Basic {basic} / QK-1234 on 2024-02-01")
    assert all(secret not in text for secret in ("PA@SS", "PA%40SS", basic, "QK-1234")) and "2024-02-01" in text
    unknown = Scrubber()  # told nothing: the patterns alone
    assert unknown.scrub("GET https://u:pw@example.org/x?token=abc123&sig=zz9&page=2 failed") == (
        "GET https://***:***@example.org/x?token=***&sig=***&page=2 failed")
    assert unknown.scrub("headers: Authorization: Bearer sk-live-1234567890") == "headers: Authorization: Bearer ***"
    assert unknown.scrub("use basic instructions; a bearer of news") == "use basic instructions; a bearer of news"


@pytest.mark.parametrize("word", [
    "--rf100vl-adapter-option=openai.base_url=http://user:PA%40SS-77@host/v1?api-key=QK-5678",
    "rf100vl_adapter_option=openai.base_url=http://user:PA%40SS-77@host/v1?api-key=QK-5678",
    "-orf100vl_adapter_option=base_url=http://user:PA%40SS-77@host/v1?api-key=QK-5678",
    "http://user:PA%40SS-77@host/v1?api-key=QK-5678",
])
def test_a_command_line_word_loses_credentials_in_every_spelling(word: str) -> None:
    from rf100vl_hf.redact import public_argument

    shown = public_argument(word)
    assert "PA%40SS" not in shown and "QK-5678" not in shown and "user" not in shown
    assert shown.endswith("http://host/v1")


def test_a_url_urllib_cannot_read_still_loses_its_credentials() -> None:
    assert public_url("http://u:secret-pw@[::1/v1?key=k") == "http://[::1/v1"


def test_a_secret_found_later_is_asked_for_once_and_masked_from_the_first_text_scrubbed() -> None:
    import threading

    from rf100vl_hf.redact import Scrubber

    scrubber = Scrubber()
    asked: list[str] = []
    started, release = threading.Event(), threading.Event()

    def slow_token() -> list[str | None]:  # as the Hub token: slow to find, scrubbing while it is found
        asked.append(scrubber.scrub("looking for hf_live_7788"))
        started.set()
        release.wait(5)
        return ["hf_live_7788", None]

    scrubber.remember_from(slow_token)
    assert asked == []  # not asked until a text is scrubbed
    finder = threading.Thread(target=scrubber.ask_sources)
    finder.start()
    started.wait(5)
    shown: list[str] = []
    other = threading.Thread(target=lambda: shown.append(scrubber.scrub("token hf_live_7788")))
    other.start()  # waits for the token: it must not print it meanwhile
    other.join(0.2)
    assert shown == []
    release.set()
    finder.join(5)
    other.join(5)
    assert shown == ["token ***"] and asked == ["looking for hf_live_7788"]  # asked once
    scrubber.ask_sources()
    assert scrubber.scrub("hf_live_7788") == "***" and len(asked) == 1

    def failing() -> list[str | None]:
        asked.append("failed")
        raise RuntimeError("no token service")

    scrubber.remember_from(failing)
    with pytest.raises(RuntimeError):
        scrubber.scrub("text")
    assert scrubber.scrub("text") == "text" and asked.count("failed") == 1  # not asked again
