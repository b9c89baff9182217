"""Hub repositories exported once per session: the generated sample, and two real exports.

The exporter is imported inside the fixtures: pytest loads this file before the suite's
``pytest_configure`` makes the session offline, and importing ``datasets`` here would fix
huggingface_hub's offline setting before that.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

REAL = ("microcontroller", "chess-pieces")


@dataclass(frozen=True)
class Exported:
    """A config in an exported repository folder, and the export on disk it was built from."""

    name: str
    repo: Path  # the repository folder (parquet shards and README.md)
    data_dir: Path  # the folder holding the source export
    key: str  # which session export holds it: "sample" or "real"

    @property
    def export(self) -> Path:
        return self.data_dir / self.name


@pytest.fixture(scope="session")
def sample_repo(sample_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rf100vl_hf.hub.rf100vl_card import export_rf100vl  # not at import: see the module docstring

    return export_rf100vl(["sample"], tmp_path_factory.mktemp("hub-sample") / "repo", data_dir=sample_root)


@pytest.fixture(scope="session")
def real_repo(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rf100vl_hf.hub.rf100vl_card import export_rf100vl

    return export_rf100vl(list(REAL), tmp_path_factory.mktemp("hub-real") / "repo", data_dir=shared_data)


@pytest.fixture(params=["sample", *REAL])
def exported(request: pytest.FixtureRequest) -> Exported:
    """Each dataset of the round trip, exported (the real ones skip without the shared data)."""
    if request.param == "sample":
        return Exported("sample", request.getfixturevalue("sample_repo"), request.getfixturevalue("sample_root"), "sample")
    return Exported(request.param, request.getfixturevalue("real_repo"), request.getfixturevalue("shared_data"), "real")
