"""RF100-VL: :mod:`.catalog` (the 100 datasets), :mod:`.sources` (where exports are),
:mod:`.reader` (validating a Roboflow COCO export), :mod:`.splits` (few-shot and
semi-supervised), :mod:`.instructions` (annotator instructions), :mod:`.builder` (the
``rf100vl`` datasets builder and ``load_rf100vl``) and :mod:`.hub_card` (the Hub repository).

Kept free of imports so that light modules (the catalogue) load without ``datasets``.
"""
