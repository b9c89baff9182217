"""Display names of models: short where a spec holds a machine's path, never shared by two specs."""

from __future__ import annotations

import pytest

from rf100vl_hf.results import summary
from rf100vl_hf.results.names import display_names, short_name
from rf100vl_hf.results.tables import ap_table
from rf100vl_hf.specs import ModelSpec

from tests.results.factory import detection_row


@pytest.mark.parametrize(("spec", "shown"), [
    ("predictions:/abs/path/oracle", "replay(oracle)"),
    ("predictions:/abs/path/oracle/", "replay(oracle)"),
    ("predictions:runs/owl_bees.json", "replay(owl_bees)"),
    ("predictions:C:\\runs\\oracle", "replay(oracle)"),
    ("owlv2:/models/owlv2-finetuned", "owlv2(owlv2-finetuned)"),
    ("owlv2:~/models/owl", "owlv2(owl)"),
    ("owlv2:google/owlv2-base-patch16", "owlv2:google/owlv2-base-patch16"),  # a Hub id says what it is
    ("owlv2", "owlv2"),
    ("owlv2:tiny", "owlv2:tiny"),
])
def test_short_names(spec: str, shown: str) -> None:
    assert short_name(ModelSpec.parse(spec)) == shown


def test_specs_that_would_share_a_name_keep_their_full_specs() -> None:
    specs = ["predictions:/a/oracle", "predictions:/b/oracle", "predictions:/c/owl"]
    assert display_names(specs) == {"predictions:/a/oracle": "predictions:/a/oracle",
                                    "predictions:/b/oracle": "predictions:/b/oracle",
                                    "predictions:/c/owl": "replay(owl)"}


def test_tables_and_summary_show_display_names_and_keep_the_full_spec() -> None:
    rows = [detection_row("predictions:/runs/2025-05/oracle", "bees", 90.0),
            detection_row("predictions:/other/oracle", "actions", 80.0),
            detection_row("owlv2:/models/owl", "bees", 40.0)]
    assert ap_table(rows).header[2:] == ["predictions:/runs/2025-05/oracle", "predictions:/other/oracle", "owlv2(owl)"]
    text = summary(rows[2:] + rows[:1])
    assert "| bees | Flora & Fauna | 40.0 | 90.0 |" in text and "| owlv2(owl) | replay(oracle) |" in text
    assert "- models: owlv2(owl) is `owlv2:/models/owl`; replay(oracle) is `predictions:/runs/2025-05/oracle`" in text
