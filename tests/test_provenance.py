"""What a row needs to be cited alone: Python, CPU, GPUs and the package's git commit."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import pytest

from rf100vl_hf import provenance

from pytest_rf100vl.engine.columns import provenance_columns

REPO = Path(__file__).resolve().parents[1]


def test_rows_name_the_python_the_cpu_and_the_gpus() -> None:
    columns = provenance_columns()
    assert columns.python_version == platform.python_version()
    assert columns.cpu_model and columns.cpu_model != "unknown"
    torch = pytest.importorskip("torch")
    expected = (torch.cuda.get_device_name(0), torch.cuda.device_count()) if torch.cuda.is_available() else (None, 0)
    assert (columns.gpu_name, columns.gpu_count) == expected


def test_a_clone_gives_its_commit_and_says_when_it_has_uncommitted_changes() -> None:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("the package does not run from a git clone here")
    commit = provenance.package_commit()
    assert commit is not None and commit.removesuffix("+dirty") == head.stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no",
                            "--", "rf100vl_hf", "pytest_rf100vl"], capture_output=True, text=True).stdout.strip()
    assert commit.endswith("+dirty") == bool(dirty)


def test_package_versions_are_read_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    read: list[str] = []
    monkeypatch.setattr(importlib.metadata, "version", lambda package: read.append(package) or "1.0")
    provenance._versions.cache_clear()
    first = provenance.versions(("numpy", "absent"))
    first["numpy"] = "changed by a caller"
    assert provenance.versions(("numpy", "absent")) == {"numpy": "1.0", "absent": "1.0"}
    assert read == ["numpy", "absent"]
    provenance._versions.cache_clear()
