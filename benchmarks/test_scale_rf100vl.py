"""The whole benchmark at its real size: every step of a full RF100-VL run against the obvious
alternative, on the synthetic RF100-VL of ``benchmarks/synthetic_rf100vl.py`` (the catalogue's
100 datasets, heavy-tailed sizes and boxes, tiny JPEGs), in one run.

- ``rf100vl-hf prepare`` of all 100, cold, against the JSON and image bytes put into Arrow with
  datasets' own API (``Dataset.from_generator``); then the same ``prepare`` again with nothing
  changed (target: at most 0.1x of cold, start-up included; ``rf100vl-hf --help`` measured
  beside it as the start-up; neither datasets nor pyarrow imported), again with one file
  touched (that export alone read again), and ``prepare --verify`` (every file re-read).
- ``load_dataset("rf100vl", NAME, split="test")`` of each dataset against reading its Arrow
  file directly (``Dataset.from_file``), alternating rounds in one fresh process (target:
  at most 2x); beside them datasets' cache builder given the build's folder (what the bare call
  does once it has found the build), which tells the finding of the build from the reading.
- The oracle, then the replay of its predictions, over the 100 test splits with pytest, against
  a hand loop with the same backend (faster-coco-eval over each test split's Arrow file):
  target at most 2.5x the hand loop plus 50 ms a pair, start-up excluded (the wall time of the
  same command with ``--collect-only``, stated); peak memory (the process's maximum resident
  set) at most 1 GiB; no timing rounds (``throughput_rounds`` 1 in every row).
- ``-n 2`` against one process on the 2 models x 100 datasets (the oracle and the replay),
  target at least 1.6x (throughput, i.e. serial wall over ``-n 2`` wall), with each command's
  fixed part (the same command with no pair selected) and the speed-up past it: the floor that
  the controller's and the workers' start-up set at a small scale (``docs/scale.md``); and each
  run phase by phase (``benchmarks/timeline.py``): its start-up to the first pair, the pairs,
  and the last pair's end to its exit, with the pairs' own speed-up.
- A rerun of the finished matrix against its first run (target: at most 0.05x plus start-up:
  the wall time of the same command with ``--collect-only``), alternating rounds with that
  start-up and with pytest running as many no-op tests (pytest's own cost per test, the floor),
  with the rows it adds to ``results.jsonl`` (none) and whether the summary's tables changed.
- UOUO nearest categories (``CategoryNeighbours``, route ``auto``) from 100 to 10,000 categories
  of 26 CLIP-like embeddings (25,864 at full scale) against comparing every pair of mean
  embeddings: no cliff, at most 5 s at 2,048, and the measured agreement with exact MMD
  (``benchmarks/test_uouo_speed.py`` runs all five sizes at any scale).

The scale is ``RF100VL_BENCH_SCALE`` (default 0.2: 32,830 images, a few minutes on 2 cores;
1 is the real size). ``RF100VL_BENCH_DATA=DIR`` keeps the synthetic exports between runs.
Every figure is printed as it is measured, and the table again at the end.

    pytest benchmarks/test_scale_rf100vl.py -s
    RF100VL_BENCH_SCALE=1 pytest benchmarks/test_scale_rf100vl.py -s
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from benchmarks.synthetic_rf100vl import DatasetPlan, write_synthetic
from benchmarks.timeline import phases

SCALE = float(os.environ.get("RF100VL_BENCH_SCALE", "0.2"))
ROUNDS = int(os.environ.get("RF100VL_BENCH_ROUNDS", "3"))
ROOT = Path(__file__).resolve().parents[1]
TABLE: list[tuple[str, str, str, str, str]] = []
"""(step, this project, the alternative, ratio, target) of each figure, printed at the end."""

ALTERNATIVE_PREPARE = r"""
import json, sys
from pathlib import Path
import datasets

data, out = Path(sys.argv[1]), Path(sys.argv[2])
for name in sys.argv[3].split(","):
    for split in ("train", "valid", "test"):
        folder = data / name / split
        coco = json.loads((folder / "_annotations.coco.json").read_text())
        names = [c["name"] for c in coco["categories"]]
        features = datasets.Features({
            "image": datasets.Image(), "image_id": datasets.Value("int64"), "file_name": datasets.Value("string"),
            "width": datasets.Value("int32"), "height": datasets.Value("int32"),
            "objects": {"bbox": datasets.List(datasets.List(datasets.Value("float64"), length=4)),
                        "category": datasets.List(datasets.ClassLabel(names=names))},
        })
        boxes = {}
        for a in coco["annotations"]:
            boxes.setdefault(a["image_id"], []).append(a)

        def rows():
            for image in coco["images"]:
                mine = boxes.get(image["id"], [])
                yield {"image": {"bytes": (folder / image["file_name"]).read_bytes(), "path": None},
                       "image_id": image["id"], "file_name": image["file_name"], "width": image["width"],
                       "height": image["height"],
                       "objects": {"bbox": [a["bbox"] for a in mine], "category": [a["category_id"] for a in mine]}}

        datasets.Dataset.from_generator(rows, features=features, cache_dir=str(out)).save_to_disk(
            str(out / "saved" / name / split))
"""

LOADS = r"""
import glob, json, sys, time
from pathlib import Path
import datasets
from datasets.packaged_modules.cache.cache import Cache

datasets.disable_progress_bars()
datasets.logging.set_verbosity_error()  # the bare call's warning per call ("Using the latest cached version")
cache, names, rounds = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
files = {}
for name in names:
    (files[name],) = glob.glob(f"{cache}/rf100vl/{name}/*/*/rf100vl-test*.arrow")


def found(name):
    build = Path(files[name]).parent
    return Cache(cache_dir=cache, dataset_name="rf100vl", config_name=name, version=build.parent.name,
                 hash=build.name).as_dataset(split="test")


timings = {"ours": [], "found": [], "direct": []}
for _ in range(rounds):  # alternating rounds
    counts = []
    for key, load in (("ours", lambda name: datasets.load_dataset("rf100vl", name, split="test")), ("found", found),
                      ("direct", lambda name: datasets.Dataset.from_file(files[name]))):
        start = time.perf_counter()
        counts.append(sum(len(load(name)) for name in names))
        timings[key].append(time.perf_counter() - start)
    assert len(set(counts)) == 1, counts
print(json.dumps({**timings, "rows": counts[0]}))
"""

HAND_LOOP = r"""
import glob, json, sys, time
import numpy as np
import datasets
from faster_coco_eval import COCO, COCOeval_faster

cache, names = sys.argv[1], sys.argv[2].split(",")
start = time.perf_counter()
aps = {}
for name in names:
    (path,) = glob.glob(f"{cache}/rf100vl/{name}/*/*/rf100vl-test*.arrow")
    table = datasets.Dataset.from_file(path).select_columns(["image_id", "width", "height", "objects"])
    images, annotations, results = [], [], []
    for row in table:
        images.append({"id": row["image_id"], "width": row["width"], "height": row["height"]})
        for box, label in zip(row["objects"]["bbox"], row["objects"]["category"]):
            record = {"id": len(annotations) + 1, "image_id": row["image_id"], "category_id": label, "bbox": box,
                      "area": box[2] * box[3], "iscrowd": 0}
            annotations.append(record)
            results.append({"image_id": row["image_id"], "category_id": label, "bbox": box, "score": 1.0})
    classes = table.features["objects"]["category"].feature.names
    coco = COCO()
    coco.dataset = {"images": images, "annotations": annotations,
                    "categories": [{"id": i, "name": n} for i, n in enumerate(classes)]}
    coco.createIndex()
    evaluator = COCOeval_faster(coco, coco.loadRes(results), "bbox", print_function=lambda *args: None)
    evaluator.params.maxDets = [1, 10, 500]
    evaluator.evaluate()
    evaluator.accumulate()
    precision = evaluator.eval["precision"][:, :, :, 0, -1]
    aps[name] = float(np.mean(precision[precision > -1])) if (precision > -1).any() else float("nan")
print(json.dumps({"seconds": time.perf_counter() - start, "aps": aps}))
"""


@dataclass
class Run:
    """A finished command: its wall time, its peak resident memory, its output and its CPU time
    (user and system: steadier than the wall time on a shared machine)."""

    seconds: float
    peak_mib: float
    output: str
    cpu_seconds: float = 0.0
    phases: tuple[float, float, float] | None = None
    """With a timeline: (start-up, the tests, the end) in seconds (:func:`benchmarks.timeline.phases`)."""


@dataclass
class World:
    """The synthetic benchmark on disk and the folders every step shares."""

    data: Path
    cache: Path
    work: Path
    plans: list[DatasetPlan]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [plan.name for plan in self.plans]

    @property
    def test_images(self) -> int:
        return sum(plan.splits["test"] for plan in self.plans)


def run(command: list[str], world: World, exits: tuple[int, ...] = (0,), timeline: Path | None = None) -> Run:
    """Run ``command`` in a fresh process, which must end with one of ``exits``; its wall time
    and its peak resident set (``wait4``: the process's own, or its largest child's, such as an
    xdist worker); with ``timeline``, a pytest command also tells its start-up, its tests and
    its end apart (``benchmarks/timeline.py``)."""
    env = world.env if timeline is None else {**world.env, "RF100VL_TIMELINE": str(timeline)}
    command = command if timeline is None else [*command, "-p", "benchmarks.timeline"]
    began = time.time()
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=world.work, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if process.returncode not in exits:
        raise AssertionError(f"{' '.join(command[:8])}... exited {process.returncode}:\n{output[-4000:]}")
    return Run(seconds, usage.ru_maxrss / 1024, output, usage.ru_utime + usage.ru_stime,
               phases(timeline, began, began + seconds) if timeline else None)


def report(step: str, ours: str, alternative: str, ratio: str, target: str) -> None:
    TABLE.append((step, ours, alternative, ratio, target))
    print(f"\n{step}: {ours} | {alternative} | {ratio} (target {target})")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    kept = os.environ.get("RF100VL_BENCH_DATA")
    data = Path(kept) / f"scale-{SCALE}" if kept else tmp_path_factory.mktemp("synthetic")
    start = time.perf_counter()
    plans = write_synthetic(data, SCALE)
    work = tmp_path_factory.mktemp("scale-run")
    env = {**os.environ, "HF_DATASETS_CACHE": str(work / "cache"), "HF_HUB_OFFLINE": "1",
           "RF100VL_DATA_DIR": str(data), "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}
    print(f"\nsynthetic RF100-VL at scale {SCALE}: {len(plans)} datasets, {sum(p.images for p in plans):,} images "
          f"({sum(p.splits['test'] for p in plans):,} test), written or found in {time.perf_counter() - start:.1f} s")
    yield World(data, work / "cache", work, plans, env)
    print(f"\n\nThe whole benchmark at scale {SCALE} ({sum(p.images for p in plans):,} images), "
          f"{os.cpu_count()} cores:\n")
    print("| step | this project | the obvious alternative | ratio | target |\n| --- | --- | --- | ---: | --- |")
    for row in TABLE:
        print("| " + " | ".join(row) + " |")


PREPARE = """
import sys
from rf100vl_hf.cli import main
code = main()
print("imported:", sorted({"datasets", "pyarrow"} & set(sys.modules)))
sys.exit(code)
"""


HELP = "import sys; from rf100vl_hf.cli import main; sys.exit(main(['--help']))"


def prepare(world: World, *extra: str) -> Run:
    return run([sys.executable, "-c", PREPARE, "prepare", f"--data-dir={world.data}", f"--cache-dir={world.cache}",
                *extra, "--", *world.names], world)


def test_prepare_cold_again_and_verified(world: World) -> None:
    cold = prepare(world)
    alternative = run([sys.executable, "-c", ALTERNATIVE_PREPARE, str(world.data), str(world.work / "alternative"),
                       ",".join(world.names)], world)
    report("prepare of all 100, cold", f"{cold.seconds:.1f} s, {cold.peak_mib:.0f} MiB",
           f"json + image bytes into Arrow with datasets' API: {alternative.seconds:.1f} s, "
           f"{alternative.peak_mib:.0f} MiB", f"{cold.seconds / alternative.seconds:.2f}x", "-")
    again, startup = [], []
    for _ in range(ROUNDS):  # alternating: the rerun, and the start-up it cannot avoid (rf100vl-hf --help)
        again.append(prepare(world))
        startup.append(run([sys.executable, "-c", HELP], world).seconds)
    assert all(f"{name}: reused" in again[-1].output for name in world.names)
    assert "imported: []" in again[-1].output  # found by stat in light code: neither datasets nor pyarrow
    seconds, floor = statistics.median(r.seconds for r in again), statistics.median(startup)
    report("the same prepare again, nothing changed", f"{seconds:.2f} s (median of {ROUNDS}), of which {floor:.2f} s "
           "start-up; datasets not imported", "-", f"{seconds / cold.seconds:.3f}x of cold", "<= 0.1x")
    touched = world.data / world.names[0] / "test" / "_annotations.coco.json"
    os.utime(touched)  # a newer mtime, the same bytes: that export is read again, and its build found by content
    once = prepare(world)
    read_again = [name for name in world.names if f"{name}: prepared" in once.output]
    assert read_again == [world.names[0]], read_again
    report("the same prepare with one file touched", f"{once.seconds:.2f} s; {world.names[0]} read again", "-",
           f"{once.seconds / cold.seconds:.3f}x of cold", "-")
    verified = prepare(world, "--verify")
    report("prepare --verify (every file re-read)", f"{verified.seconds:.1f} s", "-",
           f"{verified.seconds / cold.seconds:.2f}x of cold", "-")
    assert seconds <= 0.1 * cold.seconds


def test_load_dataset_against_arrow_read_directly(world: World) -> None:
    done = run([sys.executable, "-c", LOADS, str(world.cache), ",".join(world.names), str(ROUNDS)], world)
    figures = json.loads(done.output.strip().splitlines()[-1])
    assert figures["rows"] == world.test_images
    ours, found, direct = (statistics.median(figures[key]) for key in ("ours", "found", "direct"))
    report("load_dataset('rf100vl', NAME, split='test') x 100", f"{ours:.2f} s (median of {ROUNDS}); "
           f"datasets' cache builder given the build's folder: {found:.2f} s ({found / direct:.1f}x)",
           f"Arrow files read directly: {direct:.2f} s", f"{ours / direct:.1f}x", "<= 2x")


def pytest_command(world: World, results: str, models: list[str], *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--benchmark-disable",
            *(arg for model in models for arg in ("--rf100vl-model", model)),
            f"--rf100vl-dataset={','.join(world.names)}", f"--rf100vl-data-option=data-dir={world.data}",
            "--rf100vl-device", "cpu", f"--rf100vl-results={world.work / results}", *extra]


def rows_of(world: World, results: str) -> list[dict]:
    return [json.loads(line) for line in (world.work / results / "results.jsonl").read_text().splitlines() if line]


def test_oracle_and_replay_against_a_hand_loop(world: World) -> None:
    hand = run([sys.executable, "-c", HAND_LOOP, str(world.cache), ",".join(world.names)], world)
    loop = json.loads(hand.output.strip().splitlines()[-1])
    startup = run(pytest_command(world, "startup", ["oracle"], "--collect-only"), world).seconds
    oracle = run(pytest_command(world, "oracle", ["oracle"]), world)
    replay_spec = f"predictions:{world.work / 'oracle' / 'predictions' / 'oracle'}"
    replay = run(pytest_command(world, "replay", [replay_spec]), world)
    pairs = len(world.names)
    for name, done in (("oracle", oracle), ("replay of its predictions", replay)):
        rows = rows_of(world, name.split()[0])
        assert len(rows) == pairs and {row["ap"] for row in rows} == {100.0} and {
            row["throughput_rounds"] for row in rows} == {1}
        budget = 2.5 * loop["seconds"] + 0.05 * pairs
        report(f"{name} over the 100 test splits ({world.test_images:,} images)",
               f"{done.seconds:.1f} s, {done.peak_mib:.0f} MiB peak; {done.seconds - startup:.1f} s after "
               f"{startup:.1f} s of start-up", f"hand loop with faster-coco-eval: {loop['seconds']:.1f} s",
               f"{(done.seconds - startup) / loop['seconds']:.1f}x", f"<= 2.5x + 50 ms a pair = {budget:.1f} s; "
               f"<= 1024 MiB")


def test_two_workers_against_one_process(world: World) -> None:
    """The speed-up, and its floor: each command's fixed part (the same command with every pair
    deselected, which pytest ends with exit status 5: under ``-n 2`` the controller's start-up,
    then the workers' in parallel, and their exit; ``--collect-only`` would start no worker) is
    measured beside it, so the speed-up of the pairs themselves is printed too."""
    replay_spec = f"predictions:{world.work / 'oracle' / 'predictions' / 'oracle'}"
    models = ["oracle", replay_spec]
    serial, workers, serial_startup, workers_startup = [], [], [], []
    serial_phases, workers_phases = [], []
    for index in range(ROUNDS):  # alternating rounds: one run of a command varies more than the ratio sought
        done = run(pytest_command(world, f"serial-{index}", models, "--rf100vl-rerun"), world,
                   timeline=world.work / f"serial-{index}.timeline")
        serial.append(done.seconds)
        serial_phases.append(done.phases)
        done = run(pytest_command(world, f"workers-{index}", models, "--rf100vl-rerun", "-n", "2"), world,
                   timeline=world.work / f"workers-{index}.timeline")
        workers.append(done.seconds)
        workers_phases.append(done.phases)
        serial_startup.append(run(pytest_command(world, "startup", models, "-k", "no_such_pair"), world,
                                  (0, 5)).seconds)
        workers_startup.append(run(pytest_command(world, "startup", models, "-k", "no_such_pair", "-n", "2"),
                                   world, (0, 5)).seconds)
    assert len(rows_of(world, "workers-0")) == 2 * len(world.names)
    one, two = statistics.median(serial), statistics.median(workers)
    one_start, two_start = statistics.median(serial_startup), statistics.median(workers_startup)
    report("2 models x 100 datasets, -n 2 against serial", f"-n 2: {two:.1f} s ({two_start:.1f} s with no pair)",
           f"serial: {one:.1f} s ({one_start:.1f} s with no pair)",
           f"{one / two:.2f}x the speed; {(one - one_start) / (two - two_start):.2f}x past the fixed part", ">= 1.6x")
    (up_1, pairs_1, end_1), (up_2, pairs_2, end_2) = (
        [statistics.median(phase) for phase in zip(*found)] for found in (serial_phases, workers_phases))
    report("the same, phase by phase (medians)", f"-n 2: start-up to the first pair {up_2:.1f} s, the pairs "
           f"{pairs_2:.1f} s, the last pair's end to the exit {end_2:.1f} s", f"serial: {up_1:.1f} s, {pairs_1:.1f} s, "
           f"{end_1:.1f} s", f"the pairs {pairs_1 / pairs_2:.2f}x", "-")


NO_OP_TESTS = """
import pytest

@pytest.mark.parametrize("index", range({count}))
def test_nothing(index):
    pass
"""


def test_rerun_of_a_finished_matrix(world: World) -> None:
    """Run alone (``-k rerun``), it runs the oracle first for the predictions the replay reads."""
    oracle = world.work / "oracle" / "predictions" / "oracle"
    if not oracle.is_dir():
        run(pytest_command(world, "oracle", ["oracle"]), world)
    models = ["oracle", f"predictions:{oracle}"]
    first = run(pytest_command(world, "rerun", models), world)
    before = rows_of(world, "rerun")
    summary = (world.work / "rerun" / "summary.md").read_text()
    pairs = len(before)
    no_ops = world.work / "no_ops" / "test_no_ops.py"
    no_ops.parent.mkdir(exist_ok=True)
    no_ops.write_text(NO_OP_TESTS.format(count=pairs))
    plain = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(no_ops)]
    again, startup, floor = [], [], []
    for _ in range(ROUNDS):  # alternating: the rerun, its start-up and collection, pytest's own cost of as many tests
        again.append(run(pytest_command(world, "rerun", models), world))
        startup.append(run(pytest_command(world, "startup", models, "--collect-only"), world))
        floor.append(float(re.findall(r" in ([0-9.]+)s", run(plain, world).output)[-1]))  # pytest's own session time
    added = len(rows_of(world, "rerun")) - pairs
    unchanged = _tables(summary) == _tables((world.work / "rerun" / "summary.md").read_text())
    seconds, start = (statistics.median(r.seconds for r in runs) for runs in (again, startup))
    cpu = statistics.median(r.cpu_seconds for r in again) - statistics.median(r.cpu_seconds for r in startup)
    tests = statistics.median(floor)
    report("rerun of a finished matrix (oracle + replay)",
           f"{seconds:.1f} s ({seconds - start:.2f} s after {start:.1f} s of start-up and collection, of which "
           f"{tests:.2f} s is pytest running {pairs} no-op tests; {cpu:.2f} s of CPU past start-up; median of "
           f"{ROUNDS}); {added} rows added; summary's tables {'unchanged' if unchanged else 'changed'}",
           f"first run: {first.seconds:.1f} s", f"{(seconds - start) / first.seconds:.3f}x (CPU past start-up: "
           f"{cpu / first.cpu_seconds:.3f}x of the first run's)", "<= 0.05x + start-up; no rows added")
    assert added == 0 and unchanged


def _tables(summary: str) -> list[str]:
    return [line for line in summary.splitlines() if line.startswith("| ") and "run" not in line.lower()]


def test_uouo_neighbours_grow_with_no_cliff() -> None:
    from benchmarks.test_uouo_speed import CATEGORIES, MAX_SECONDS, checked_seconds, neighbour_timings

    load = os.getloadavg()[0]
    timings = neighbour_timings((100, 1_000, 2_048, 10_000) + ((CATEGORIES,) if SCALE >= 1 else ()))
    checked = [checked_seconds(t, load) for t in timings]
    last = timings[-1]
    report("UOUO nearest categories (auto)", "; ".join(f"{t.categories:,}: {t.seconds:.2f} s" for t in timings),
           f"every pair at {last.categories:,}: {last.every_pair_seconds:.2f} s",
           f"{last.every_pair_seconds / last.seconds:.1f}x; agreement with exact MMD "
           f"{min(t.agreement for t in timings):.1%} at least",
           "monotone; <= 5 s at 2,048; <= 15 s at 25,864; agreement >= 95%")
    assert checked == sorted(checked)
    assert all(seconds <= MAX_SECONDS.get(t.categories, float("inf")) for t, seconds in zip(timings, checked))
