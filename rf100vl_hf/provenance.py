"""What a results row needs to be cited alone: the hardware it ran on and the exact code that
scored it (the package's git commit when it runs from a clone). Read once per process."""

from __future__ import annotations

import functools
import platform
import subprocess
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
CHECKOUT = PACKAGE_DIR.parent
CODE = ("rf100vl_hf", "pytest_rf100vl")
"""The folders of a checkout whose changes change a score."""


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else what ``platform`` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def gpus() -> tuple[str | None, int]:
    """The first GPU's name and how many there are, when torch is loaded and sees CUDA."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None, 0
    return torch.cuda.get_device_name(0), torch.cuda.device_count()


@functools.cache
def package_commit() -> str | None:
    """The git commit of the source checkout the package runs from (``+dirty`` when its code
    has uncommitted changes); ``None`` for an installed copy or when git is not there."""
    if not (CHECKOUT / "pyproject.toml").is_file() or not all((CHECKOUT / name).is_dir() for name in CODE):
        return None  # an installed copy: its version is in the row already

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True, timeout=10)

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", *CODE).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


def python_version() -> str:
    return platform.python_version()


SCORED_WITH = ("torch", "transformers", "datasets", "hotcoco", "faster-coco-eval", "pycocotools", "rf100vl-hf")
"""The packages a score depends on, whose versions every row records."""


def versions(packages: tuple[str, ...] = SCORED_WITH) -> dict[str, str | None]:
    """Installed versions of ``packages`` (read from metadata: nothing is imported), read once
    per process (a package's metadata costs milliseconds to parse, and every row records them)."""
    return dict(_versions(packages))


@functools.cache
def _versions(packages: tuple[str, ...]) -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for package in packages:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found

