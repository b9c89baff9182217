"""Build the UOUO Hub dataset repository from a folder of object cut-outs, and optionally push it.

    python loading_scripts/uouo.py --source-dir ~/uouo-cutouts --out ./uouo-hub --push my-org/uouo

The options are those of ``rf100vl-hf uouo export`` (``--help`` explains them); all the work
is done by the package.
"""

from __future__ import annotations

import sys
from typing import Sequence

from rf100vl_hf import cli


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(["uouo", "export", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
