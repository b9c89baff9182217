"""Build the RF100-VL Hub dataset repository from Roboflow exports on disk, and optionally push it.

    python loading_scripts/rf100vl.py --data-dir ~/rf100-vl --fewshot-dir ~/rf100-vl-fsod \\
        --out ./rf100vl-hub --push my-org/rf100vl

The options are those of ``rf100vl-hf export`` (``--help`` explains them); all the work is
done by the package.
"""

from __future__ import annotations

import sys
from typing import Sequence

from rf100vl_hf import cli


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(["export", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
