"""The trained-weights store: one folder per fit, keyed by everything the weights depend on.

A fit's folder holds ``key.json`` (what it was trained for), the last finished epoch's
checkpoint ``epoch-NNNN.pt`` while it trains, and once it is done ``weights.pt`` with
``trained.json`` (the :class:`FitRecord`). Every file is written to a temporary name in the
same folder and renamed into place, so a run killed at any moment leaves the previous
epoch's checkpoint whole: the next run resumes from it, and a finished fit is never
repeated (the README's "Data regimes").

A fit holds the folder's lock while it trains (:meth:`TrainedStore.fitting`: a second
process fitting the same weights waits, then finds them), after checking the folder can be
written (a read-only results folder is an error naming it before an epoch is spent) and
removing the temporary files a killed run left. A checkpoint that cannot be resumed from
(truncated, not a checkpoint, another model's) is set aside as ``NAME.unreadable`` with a
:class:`CheckpointWarning`, and the fit starts again (:meth:`TrainedStore.set_aside`).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rf100vl_hf.errors import Rf100vlError

KEY_FILE, RECORD_FILE, WEIGHTS_FILE, LOCK_FILE = "key.json", "trained.json", "weights.pt", "fit.lock"
EPOCH_PREFIX = "epoch-"
EPOCH_FILE = re.compile(r"epoch-(\d{1,9})\.pt")
SET_ASIDE = ".unreadable"


class TrainingError(Rf100vlError):
    """A fit that cannot go on: a loss that is not finite, a store that cannot be written,
    weights that do not fit the model."""


class CheckpointWarning(UserWarning):
    """A checkpoint that could not be resumed from was set aside; the fit starts again."""


def key_digest(key: dict[str, Any]) -> str:
    """The folder name of a fit: a hash of its key, as canonical JSON."""
    text = json.dumps(key, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def epoch_log(path: Path) -> list[dict[str, float]]:
    """A training library's per-epoch CSV log (ultralytics' ``results.csv``, PyTorch Lightning's
    ``metrics.csv``) as numbers, header names stripped and empty cells left out; none when the
    file is absent (no epoch ended)."""
    if not path.is_file():
        return []
    with open(path, encoding="utf-8", newline="") as handle:
        return [{key.strip(): float(value) for key, value in row.items() if value.strip()}
                for row in csv.DictReader(handle)]


@dataclass
class FitRecord:
    """What a fit did: rows carry it (``train_*`` columns)."""

    epochs: int
    steps: int
    train_s: float  # training time, summed over the runs that trained it
    images: int  # training images seen, augmentations and repeats counted
    losses: dict[str, float]  # the last epoch's mean of each loss term (``loss``: the total)
    first_losses: dict[str, float]  # the first epoch's
    history: list[dict[str, float]] = field(default_factory=list)  # each epoch's means
    peak_gpu_memory_mb: float | None = None
    resumed_after_epoch: int | None = None  # the last epoch a killed fit had finished, when it was resumed
    weights_sha256: str | None = None
    details: dict[str, Any] = field(default_factory=dict)  # a recipe's own figures (STAC's threshold...)

    @property
    def images_per_s(self) -> float | None:
        return self.images / self.train_s if self.train_s > 0 else None


class TrainedStore:
    """The folder of one fit (see the module docstring)."""

    def __init__(self, folder: Path, key: dict[str, Any]):
        self.folder = Path(folder)
        self.key = key

    @property
    def weights(self) -> Path:
        return self.folder / WEIGHTS_FILE

    @contextlib.contextmanager
    def fitting(self) -> Iterator[None]:
        """Hold the fit's lock while training (see the module docstring); a folder that cannot
        be written is a :class:`TrainingError` naming it."""
        from filelock import FileLock

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.folder, prefix=".probe."):
                pass
        except OSError as exc:
            raise TrainingError(f"{self.folder}: the trained-weights store cannot be written "
                                f"({exc.strerror or exc}): make the results folder writable, or choose another "
                                "with --rf100vl-results") from None
        with FileLock(str(self.folder / LOCK_FILE)):
            for leftover in self.folder.glob(".*"):  # the temporary files of a run killed mid-write
                if leftover.is_file():
                    leftover.unlink(missing_ok=True)
            yield

    def set_aside(self, path: Path) -> Path:
        """Rename a checkpoint that cannot be used out of the way (kept, for a person to look at)."""
        kept = path.with_name(path.name + SET_ASIDE)
        os.replace(path, kept)
        return kept

    @contextlib.contextmanager
    def atomic(self, name: str) -> Iterator[Path]:
        """A temporary path to write ``name`` to; renamed into place when the block ends without error."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{name}.", dir=self.folder)
        os.close(fd)
        try:
            yield Path(temporary)
            with open(temporary, "rb+") as handle:
                os.fsync(handle.fileno())
            os.replace(temporary, self.folder / name)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)

    def _keyed(self) -> None:
        """Write ``key.json`` once, so a folder always says what it was trained for."""
        if not (self.folder / KEY_FILE).exists():
            self._write_json(KEY_FILE, self.key)

    def _write_json(self, name: str, data: Any) -> None:
        with self.atomic(name) as path:
            path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")

    def record(self) -> FitRecord | None:
        """The finished fit, or ``None`` when there is none (or its weights are gone or changed)."""
        try:
            data = json.loads((self.folder / RECORD_FILE).read_text(encoding="utf-8"))
            record = FitRecord(**data)
        except (OSError, ValueError, TypeError):
            return None
        if not self.weights.is_file() or file_sha256(self.weights) != record.weights_sha256:
            return None
        return record

    def latest_epoch(self) -> tuple[int, Path] | None:
        """The last finished epoch's checkpoint (number from 1, path), if a fit was cut short."""
        found = sorted((int(match[1]), path) for path in (self.folder.glob(f"{EPOCH_PREFIX}*.pt")
                                                           if self.folder.is_dir() else ())
                       if (match := EPOCH_FILE.fullmatch(path.name)) and path.is_file())
        return found[-1] if found else None

    @contextlib.contextmanager
    def epoch_checkpoint(self, epoch: int) -> Iterator[Path]:
        """Where to write epoch ``epoch``'s checkpoint; once it is in place the earlier one is removed."""
        self._keyed()
        with self.atomic(f"{EPOCH_PREFIX}{epoch:04d}.pt") as path:
            yield path
        for older in self.folder.glob(f"{EPOCH_PREFIX}*.pt"):
            match = EPOCH_FILE.fullmatch(older.name)
            if match and int(match[1]) < epoch:
                older.unlink(missing_ok=True)

    def finish(self, record: FitRecord) -> FitRecord:
        """Record a finished fit whose ``weights.pt`` is written; epoch checkpoints are then removed."""
        self._keyed()
        record.weights_sha256 = file_sha256(self.weights)
        self._write_json(RECORD_FILE, asdict(record))
        for checkpoint in self.folder.glob(f"{EPOCH_PREFIX}*.pt"):
            checkpoint.unlink(missing_ok=True)
        return record
