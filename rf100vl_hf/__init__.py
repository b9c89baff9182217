"""RF100-VL and UOUO as Hugging Face datasets.

- base modules: :mod:`rf100vl_hf.catalog` (the 100 datasets), :mod:`rf100vl_hf.errors`, boxes,
  images, ids, paths, the scoring protocols...;
- :mod:`rf100vl_hf.metrics`: COCO AP at maxDets=500, domain means, grounding scores;
  :mod:`rf100vl_hf.training`: fine-tuning recipes, the loop and the weights store;
- :mod:`rf100vl_hf.rf100vl`: the Roboflow export reader, the splits and the ``rf100vl`` builder
  (``rf100vl.builder.load_rf100vl``); :mod:`rf100vl_hf.uouo`: cut-outs, CLIP embeddings, MMD and
  the ``uouo`` builder (``load_uouo``);
- :mod:`rf100vl_hf.results`: results rows, their schema, tables, summaries and figures;
- :mod:`rf100vl_hf.hub`: Hub-ready export, dataset cards, push, the results repository;
- :mod:`rf100vl_hf.cli`: the ``rf100vl-hf`` command line.

Each layer imports only those listed before it (``docs/architecture.md``). Importing this
package imports nothing heavy; each module loads what it needs, and what only an extra
installs (torch, pytest, ...) is imported where it is used.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rf100vl-hf")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
