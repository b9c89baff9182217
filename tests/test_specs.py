"""A spec stays a spec: ``NAME[:CHECKPOINT_OR_PATH]`` is split in one place,
:meth:`rf100vl_hf.specs.ModelSpec.parse`, and passed on typed."""

from __future__ import annotations

import ast
from pathlib import Path

from rf100vl_hf.specs import ModelSpec

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rf100vl_hf", "pytest_rf100vl")
SPLITS = {"partition", "rpartition", "split", "rsplit", "index", "find"}
NOT_SPECS = {
    ("rf100vl_hf/devices.py", "device"),  # cuda:1
    ("pytest_rf100vl/adapters/rfdetr_extra.py", "device"),
    ("rf100vl_hf/catalog.py", "value.strip()"),  # a dataset group, [rf20vl:]domain:NAME
    ("rf100vl_hf/provenance.py", "line"),  # a package's METADATA line
    ("rf100vl_hf/cli/results.py", "t.title"),  # a per-class table's "dataset: metric" title
    ("rf100vl_hf/hub/eval_status.py", "task"),  # a Hub evaluation task, "dataset:split"
    ("pytest_rf100vl/core/registry.py", "table[name]"),  # module:Class
    ("pytest_rf100vl/commands/models.py", "target"),  # module:Class
}
"""The colon splits of the packages that are not of a spec: what each splits is named beside it."""


def sources() -> dict[str, str]:
    """File (relative to the repository) -> its text, for every module of both packages."""
    return {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
            for package in PACKAGES for path in (ROOT / package).rglob("*.py")}


def colon_splits(files: dict[str, str]) -> list[tuple[str, str]]:
    """(file, what is split) for each ``x.partition(":")``, ``x.split(":")``... of ``files``, in order."""
    found = []
    for name, text in files.items():
        for node in ast.walk(ast.parse(text)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SPLITS
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == ":"):
                found.append((name, ast.unparse(node.func.value)))
    return found


def test_a_spec_is_split_once_in_the_code() -> None:
    splits = colon_splits(sources())
    assert NOT_SPECS <= set(splits), "a colon split named here is gone: drop it from NOT_SPECS"
    assert [split for split in splits if split not in NOT_SPECS] == [("rf100vl_hf/specs.py", "text")]


def test_the_counter_finds_a_hand_split_spec() -> None:
    assert colon_splits({"a.py": 'name = row["spec"].partition(":")[0]\nparts = text.split(",")',
                         "b.py": 'name = spec[: spec.index(":")]\nchosen = spec.split(":")[1]'}) == [
        ("a.py", "row['spec']"), ("b.py", "spec"), ("b.py", "spec")]


def test_only_the_first_colon_separates_and_blanks_are_trimmed() -> None:
    assert ModelSpec.parse(" predictions : C:\\runs\\p.json ") == ModelSpec(
        "predictions : C:\\runs\\p.json", "predictions", "C:\\runs\\p.json")
    assert ModelSpec.parse("owlv2:") == ModelSpec("owlv2:", "owlv2", None)
    assert str(ModelSpec.parse("owlv2:tiny").with_options({"a": "1"})) == "owlv2:tiny"
    assert ModelSpec.parse("owlv2:tiny").with_options({"a": "1"}).option_values == {"a": "1"}
