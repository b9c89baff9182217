"""The README's set-up block: the two commands stay exactly the ones CI runs (``.ci/run``), and a
CPU-only machine is told to install PyTorch's CPU build before the first of them, not after it
has installed CUDA's."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu"


def set_up_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## Set-up\n")
    return text[start:text.index("\n## ", start + 1)]


def test_the_set_up_block_is_what_ci_runs_and_the_cpu_choice_comes_first() -> None:
    ci = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if line.startswith(("pip ", "pytest"))]
    assert ci == ['pip install -e ".[test]" && pytest --rf100vl-model owlv2:tiny --rf100vl-dataset sample', "pytest -n auto"]
    section = set_up_section()
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    commands = "\n".join(ci) + "\n"
    assert commands in blocks, "the set-up block must hold exactly CI's two commands"
    first_command = section.index(commands)
    assert CPU_INDEX in section[:first_command], "the CPU-only choice must come before the first command"
    assert "CI" in section[:first_command]  # and say that CI installs from PyPI
