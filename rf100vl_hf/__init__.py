"""RF100-VL and UOUO as Hugging Face datasets.

- :mod:`rf100vl_hf.rf100vl`: the catalogue, the Roboflow export reader, the splits and the
  ``rf100vl`` builder (``rf100vl.builder.load_rf100vl``);
- :mod:`rf100vl_hf.uouo`: cut-outs, CLIP embeddings, MMD and the ``uouo`` builder (``load_uouo``);
- :mod:`rf100vl_hf.metrics`: COCO AP at maxDets=500, domain means, grounding scores;
- :mod:`rf100vl_hf.hub`: Hub-ready export, dataset card and push.

Importing this package imports nothing heavy; each module loads what it needs.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rf100vl-hf")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
