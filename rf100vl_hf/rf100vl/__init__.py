"""RF100-VL as a dataset: :mod:`.request` (what a user asks of a dataset), :mod:`.sources`
(where exports are), :mod:`.reader` (validating a Roboflow COCO export), :mod:`.splits`
(few-shot and semi-supervised), :mod:`.instructions` (annotator instructions) and
:mod:`.builder` (the ``rf100vl`` datasets builder and ``load_rf100vl``). The catalogue of the
100 datasets is :mod:`rf100vl_hf.catalog`; the Hub repository, :mod:`rf100vl_hf.hub.rf100vl_card`.

Kept free of imports so that light modules (the catalogue) load without ``datasets``.
"""
