"""Build the UOUO Hub dataset repository from a folder of object cut-outs, and optionally push it.

Run ``python loading_scripts/uouo.py --help``. All the work is done by
``rf100vl_hf.uouo.hub_card.export_uouo`` and ``rf100vl_hf.hub.push_repository``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from rf100vl_hf import paths
from rf100vl_hf.errors import Rf100vlError
from rf100vl_hf.hub import push_repository
from rf100vl_hf.uouo.builder import DEFAULT_NUM_MOSAICS
from rf100vl_hf.uouo.embeddings import DEFAULT_MODEL, DEFAULT_PRETRAINED
from rf100vl_hf.uouo.hub_card import export_uouo
from rf100vl_hf.uouo.mmd import DEFAULT_SIGMA, ROUTES
from rf100vl_hf.uouo.plan import MODES

DESCRIPTION = """\
Build the Hugging Face Hub repository of UOUO: mosaics of four uncommon objects, each asked
"where is the <category>" (a box) and "which quadrant" (one of four words). Config `random`
draws four categories at random; config `mmd` puts an anchor beside its three nearest
categories by MMD over CLIP image embeddings (the hard mosaics). Each config's test split
is written as parquet shards, with a README.md that states the spec, the prompts, the
metrics and the paper's Table 1. Check the result locally with
  load_dataset("OUT", "mmd", split="test")
then push it with --push (or push the folder later).

Re-running into the same --out rebuilds the named configs and keeps the others; the folder
is replaced only when the whole export succeeded. Cut-out embeddings are cached, so a
rebuild does not embed again.
"""

EPILOG = f"""\
the cut-outs:
  --source-dir, else ${paths.UOUO_SOURCE_ENV}, else <cache home>/uouo-source, else the
  package's embedded sample (8 drawn categories x 4 images). One folder per category of
  RGBA images, or of image + <stem>.mask.png pairs; a manifest.json may rename folders
  ({{"categories": {{"folder": "Name"}}}}) or list the cut-outs ({{"items": [...]}}).

pushing:
  needs a token with write access: `hf auth login`, or HF_TOKEN in the environment. The
  pushed repository holds exactly the folder: remote files it lacks are deleted in the
  same commit (the Hub's history keeps them).

examples:
  python loading_scripts/uouo.py --source-dir ~/uouo-cutouts --out ./uouo-hub --license cc-by-4.0
  python loading_scripts/uouo.py --config mmd --num-mosaics 1000 --out ./uouo-hub --push my-org/uouo
"""


def _pretrained(value: str) -> str | None:
    return None if value.lower() == "none" else value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="uouo.py", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--source-dir", type=Path, help="folder of cut-outs, one sub-folder per category")
    parser.add_argument("--config", action="append", dest="configs", choices=MODES,
                        help="a config to build (repeatable); default: all of them")
    parser.add_argument("--out", type=Path, required=True, help="the repository folder to write (created or updated)")
    parser.add_argument("--num-mosaics", type=int, default=DEFAULT_NUM_MOSAICS, help="mosaics per config (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the mosaics (default %(default)s)")
    parser.add_argument("--sigma", type=float, default=DEFAULT_SIGMA, help="RBF kernel width of the MMD (default %(default)s)")
    parser.add_argument("--route", choices=ROUTES, default="auto",
                        help="nearest categories: exact MMD, mean embeddings, or auto by category count (default %(default)s)")
    parser.add_argument("--clip-model", default=DEFAULT_MODEL, help="open_clip model name (default %(default)s)")
    parser.add_argument("--clip-pretrained", default=DEFAULT_PRETRAINED, type=_pretrained,
                        help="open_clip pretrained tag or weights file; 'none' for a seeded random init (default %(default)s)")
    parser.add_argument("--device", help="where to embed and compute MMD (default: cuda when available, else cpu)")
    parser.add_argument("--license", default="other", help="the source images' licence, as a Hub licence id (default %(default)s)")
    parser.add_argument("--push", metavar="ORG/NAME", help="push the folder to this Hub dataset repository")
    parser.add_argument("--private", action="store_true", help="create the pushed repository as private")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        out = export_uouo(
            args.out, args.source_dir, tuple(args.configs or MODES), repo_id=args.push, license=args.license,
            clip_model=args.clip_model, clip_pretrained=args.clip_pretrained, device=args.device,
            num_mosaics=args.num_mosaics, seed=args.seed, sigma=args.sigma, route=args.route,
        )
        print(f"wrote {out}")
        if args.push:
            print(f"pushed: {push_repository(out, args.push, private=args.private)}")
    except Rf100vlError as exc:
        print(f"uouo.py: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
