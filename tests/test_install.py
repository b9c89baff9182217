"""The base install: the datasets and the metric work with none of the extras' packages.

A real bare install needs the network, so the test runs a child Python in which every module of
an installed distribution that the base requirements do not pull in is marked missing in
``sys.modules``: ``import`` raises ``ModuleNotFoundError`` and ``importlib.util.find_spec``
answers ``None``, exactly as if it were absent (torch, transformers, pytest, openai, matplotlib, ...). The base
requirements are read from the installed package's metadata, so a heavy dependency added to
them fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
BASE = {"datasets", "huggingface-hub", "pyarrow", "pillow", "pycocotools", "faster-coco-eval", "hotcoco"}
"""What the base install is for (the datasets and the metric); the rest of its list is theirs."""
HEAVY = {"torch", "transformers", "pytest", "openai", "google-genai", "open-clip-torch", "matplotlib", "scipy"}

ABSENT = r"""
import json, sys

for module in json.loads(sys.argv[1]):  # what import (and importlib.util.find_spec) sees for a missing package
    sys.modules[module] = None
"""

BASE_USE = ABSENT + r"""
import contextlib, io
import datasets
from rf100vl_hf.cli import main
from rf100vl_hf.metrics import coco_ground_truth, evaluate

try:
    main(["prepare", "sample"])
except SystemExit as stop:
    assert not stop.code, stop.code
ds = datasets.load_dataset("rf100vl", "sample", split="test")
truth = coco_ground_truth(ds)
boxes = [dict(image_id=a["image_id"], category_id=a["category_id"], bbox=a["bbox"], score=1.0)
         for a in truth["annotations"]]


def said(argv):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = main(argv)
    return f"{code}: {stderr.getvalue()}"


models, mosaics = said(["models"]), said(["uouo", "prepare", "--config", "random"])
aps = [evaluate(truth, boxes, backend=backend).ap for backend in ("hotcoco", "faster-coco-eval", "pycocotools")]
print(json.dumps({"rows": len(ds), "boxes": len(boxes), "aps": aps, "models": models, "mosaics": mosaics}))
"""

EVERY_MODULE = ABSENT + r"""
import importlib

failed = {}
for name in json.loads(sys.argv[2]):
    try:
        importlib.import_module(name)
    except Exception as error:
        failed[name] = f"{type(error).__name__}: {error}"
print(json.dumps(failed))
"""


SERVED_USE = ABSENT + r"""
import pytest

sys.exit(pytest.main(["-p", "pytest_rf100vl.plugin", "-p", "pytest_benchmark.plugin", "-p", "xdist.plugin",
                      "-p", "no:cacheprovider", *sys.argv[2:]]))
"""


def _requirements(*extras: str) -> list[Requirement]:
    """The installed package's requirements for a plain install (no extras) or for ``extras``."""
    requirements = [Requirement(spec) for spec in metadata.distribution("rf100vl-hf").requires or []]
    return [r for r in requirements if _wanted(r, extras)]


def _wanted(requirement: Requirement, extras: tuple[str, ...] | set[str]) -> bool:
    return requirement.marker is None or any(requirement.marker.evaluate({"extra": e}) for e in ("", *extras))


def _closure(requirements: list[Requirement]) -> set[str]:
    """Every distribution that installing ``requirements`` installs, following installed metadata
    (extras included, the package's own ``rf100vl-hf[plugin]`` too)."""
    seen: set[tuple[str, str]] = set()
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        wanted = {(name, extra) for extra in ("", *requirement.extras)} - seen
        if not wanted:
            continue
        seen |= wanted
        try:
            specs = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue
        todo.extend(r for r in map(Requirement, specs) if _wanted(r, requirement.extras))
    return {name for name, _ in seen}


def _absent_modules(installed: set[str]) -> list[str]:
    """Top-level modules that only distributions outside ``installed`` provide."""
    return sorted(
        module
        for module, distributions in metadata.packages_distributions().items()
        if not {canonicalize_name(d) for d in distributions} & (installed | {"rf100vl-hf"})
    )


def _run(script: str, absent: list[str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a child Python where ``absent`` modules are missing, with caches in ``tmp_path``."""
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        HF_DATASETS_CACHE=str(tmp_path / "arrow"),
        RF100VL_HF_HOME=str(tmp_path / "home"),
        PYTHONPATH=str(ROOT),
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",  # other installed plugins may need what is absent
    )
    return subprocess.run([sys.executable, "-c", script, json.dumps(absent), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_base_requirements_are_the_datasets_and_the_metric_alone() -> None:
    assert BASE <= {canonicalize_name(r.name) for r in _requirements()}
    assert not _closure(_requirements()) & HEAVY
    assert {"torch", "transformers", "pytest"} <= _closure(_requirements("models"))
    assert not _closure(_requirements("served")) & {"torch", "transformers", "open-clip-torch"}


def test_load_dataset_and_the_metric_work_from_a_bare_base_install_and_the_rest_names_its_extra(tmp_path: Path) -> None:
    absent = _absent_modules(_closure(_requirements()))
    assert {"torch", "transformers", "pytest", "openai"} <= set(absent)
    result = _run(BASE_USE, absent, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["rows"] > 0 and out["boxes"] > 0
    assert out["aps"][0] == out["aps"][2] and out["aps"][1] == pytest.approx(out["aps"][2], abs=1e-12) and out["aps"][0] > 0.5
    assert out["models"].startswith("2: rf100vl-hf: error: the 'models' command needs pytest, which the [plugin] "
                                    'extra installs: pip install "rf100vl-hf[plugin]"'), out["models"]
    assert out["mosaics"].startswith("2: ") and (  # after the progress bar of reading the cut-outs
        "rf100vl-hf: error: building UOUO mosaics (CLIP embeddings, MMD) needs torch, which the [models] extra "
        'installs: pip install "rf100vl-hf[models]"\n') in out["mosaics"], out["mosaics"]


def library_modules() -> list[str]:
    """Every module of the library, found by walking its folders (a new module is in without a word here)."""
    package = ROOT / "rf100vl_hf"
    return sorted(".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                  for path in package.rglob("*.py"))


def test_every_module_of_the_library_imports_from_a_bare_base_install(tmp_path: Path) -> None:
    """What needs an extra's package (torch for fine-tuning and MMD, matplotlib for plots...)
    imports it where it is used, so ``import rf100vl_hf.<any module>`` works in the base install."""
    absent = _absent_modules(_closure(_requirements()))
    modules = library_modules()
    assert {"rf100vl_hf.training.loop", "rf100vl_hf.uouo.mmd", "rf100vl_hf.results.plots"} <= set(modules)
    assert len(modules) > 80 and {"torch", "matplotlib", "pytest", "open_clip", "xgboost"} <= set(absent)
    result = _run(EVERY_MODULE, absent, tmp_path, json.dumps(modules))
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {}


def test_the_served_install_runs_the_matrix_without_torch_and_a_local_model_names_its_extra(tmp_path: Path) -> None:
    absent = _absent_modules(_closure(_requirements("served")))
    assert {"torch", "transformers", "open_clip"} <= set(absent) and "openai" not in absent
    results = tmp_path / "results"
    args = ["--rf100vl-dataset", "sample", f"--rf100vl-results={results}", "-q"]
    served = _run(SERVED_USE, absent, tmp_path, "--rf100vl-model", "oracle", *args)
    assert served.returncode == 0, served.stdout[-3000:] + served.stderr[-3000:]
    assert "| oracle | sample |" in served.stdout and list(results.glob("*.parquet"))
    local = _run(SERVED_USE, absent, tmp_path, "--rf100vl-model", "owlv2:tiny", *args)
    assert local.returncode == 1 and ("model adapter 'owlv2' needs torch, which the [models] extra installs: "
                                      'pip install "rf100vl-hf[models]"') in local.stdout, local.stdout[-3000:]
