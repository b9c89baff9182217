"""Build the RF100-VL Hub dataset repository from Roboflow exports on disk, and optionally push it.

Run ``python loading_scripts/rf100vl.py --help``. All the work is done by
``rf100vl_hf.rf100vl.hub_card.export_rf100vl`` and ``rf100vl_hf.hub.push_repository``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from rf100vl_hf import paths
from rf100vl_hf.errors import Rf100vlError
from rf100vl_hf.hub import push_repository
from rf100vl_hf.rf100vl.hub_card import datasets_on_disk, export_rf100vl

DESCRIPTION = """\
Build the Hugging Face Hub repository of RF100-VL: one config per dataset, each split as
parquet shards (images embedded as their original bytes), and a README.md whose YAML lists
every config, its splits and features, and whose text has the domain table, the annotator
instructions and the protocol notes. Check the result locally with
  load_dataset("OUT", "<dataset>", split="test")
then push it with --push (or push the folder later).

Re-running into the same --out rebuilds the named datasets and keeps the others; the
folder is replaced only when the whole export succeeded.
"""

EPILOG = f"""\
where the exports are looked for:
  full exports       --data-dir, else ${paths.DATA_DIR_ENV}, else <cache home>/rf100-vl
  few-shot exports   --fewshot-dir, else ${paths.FEWSHOT_DIR_ENV}, else <cache home>/rf100-vl-fsod
  (download them with Roboflow's rf100vl package: download_rf100vl and download_rf100vl_fsod)

pushing:
  needs a token with write access: `hf auth login`, or HF_TOKEN in the environment. The
  pushed repository holds exactly the folder: remote files it lacks are deleted in the
  same commit (the Hub's history keeps them), so push a folder that holds every config.

examples:
  python loading_scripts/rf100vl.py --data-dir ~/rf100-vl --fewshot-dir ~/rf100-vl-fsod --out ./rf100vl-hub
  python loading_scripts/rf100vl.py --dataset bees --dataset actions --out ./rf100vl-hub --push my-org/rf100vl
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rf100vl.py", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, help="folder of the full exports, one sub-folder per dataset")
    parser.add_argument("--fewshot-dir", type=Path, help="folder of the official few-shot exports (optional)")
    parser.add_argument(
        "--dataset", action="append", dest="datasets", metavar="NAME",
        help="a dataset to export (repeatable); default: every dataset found in the data folder",
    )
    parser.add_argument("--out", type=Path, required=True, help="the repository folder to write (created or updated)")
    parser.add_argument("--push", metavar="ORG/NAME", help="push the folder to this Hub dataset repository")
    parser.add_argument("--private", action="store_true", help="create the pushed repository as private")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        names = args.datasets or datasets_on_disk(args.data_dir)
        if not names:
            where = args.data_dir or paths.default_data_dir()
            print(f"rf100vl.py: error: no dataset found in {where}; see --help", file=sys.stderr)
            return 2
        out = export_rf100vl(names, args.out, args.data_dir, args.fewshot_dir, repo_id=args.push)
        print(f"wrote {out}")
        if args.push:
            print(f"pushed: {push_repository(out, args.push, private=args.private)}")
    except Rf100vlError as exc:
        print(f"rf100vl.py: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
