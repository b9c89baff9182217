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
