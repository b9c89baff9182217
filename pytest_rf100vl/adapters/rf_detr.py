"""RF-DETR (Robinson et al., "RF-DETR: Neural Architecture Search for Real-Time Detection
Transformers", arXiv 2511.09554): LW-DETR's decoder on a windowed DINOv2 backbone, the DETR its
authors fine-tune on RF100-VL. Closed-set, trained through transformers' loss
(``RfDetrForObjectDetection``, transformers 5.9.0 and later; LW-DETR's IoU-aware BCE, Group
DETR's 13 query groups in training); default checkpoint ``Roboflow/rf-detr-base`` (COCO, the
checkpoint transformers' own RF-DETR classes document).

Recipe ``detr-finetune`` (every regime; ``stac`` the same for teacher and student) follows the
authors' fine-tuning defaults, ``TrainConfig`` of the ``rfdetr`` package 1.4.1
(``rfdetr/config.py``):

- 100 epochs, batch 4 with gradients accumulated over 4 (16 images a step);
- AdamW, learning rate 1e-4, backbone (the DINOv2 encoder) 1.5e-4, weight decay 1e-4,
  gradient norm clipped at 0.1 (``rfdetr/main.py``), no warm-up (``warmup_epochs`` 0) and no
  decay (``lr_drop`` 100 is the last epoch);
- weight average ``ema_decay`` 0.993 with ``ema_tau`` 100 (``ModelEma``, ``rfdetr/util/utils.py``):
  the fit's weights are the average;
- horizontal flips (p 0.5) and multi-scale training: each batch is resized to a square side of
  ``compute_multi_scale_scales`` (``rfdetr/datasets/coco.py``, ``expanded_scales``), for the base
  checkpoint (resolution 560, patch 14, 4 windows a side) the multiples of 56 from 280 to 840,
  0.5 to 1.5 times the resolution (the range this recipe keeps for other checkpoints, whose
  offsets of 5 windows' worth of patches are a narrower share of the resolution); evaluation
  at the checkpoint's processor size (560 for the base checkpoint).

Left out: the layer-wise learning-rate decay of the DINOv2 encoder (``lr_vit_layer_decay`` 0.8 a
block, times ``lr_component_decay`` 0.7 squared, ``get_param_dict``: every encoder rate is below
1.5e-4 there) and the decoder's rate of 0.7 times 1e-4, no weight decay on norms and biases, the
second branch of the training transform (resize to 400-600, random crop of 384-600, then the
square resize), and automatic mixed precision (``--rf100vl-train-option mixed_precision=bf16``
for it).

The federated mask gives masked classes the logit -15 rather than -1e4: the IoU-aware BCE takes
``log(sigmoid)`` itself, which is NaN at a sigmoid of exactly 0
(:data:`rf100vl_hf.training.federated.LOG_SAFE_FILL`).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rf100vl_hf.training.federated import LOG_SAFE_FILL
from rf100vl_hf.training.recipe import Recipe

from pytest_rf100vl.adapters.closed_set_detr import ClosedSetDetr, finetune_recipes
from pytest_rf100vl.adapters.registry import listed

RECIPE = {
    "epochs": 100, "batch_size": 4, "grad_accumulation": 4, "learning_rate": 1e-4, "backbone_learning_rate": 1.5e-4,
    "weight_decay": 1e-4, "max_grad_norm": 0.1, "ema_decay": 0.993, "ema_warmup": 100, "flip": 0.5,
    "min_scale": 0.5, "max_scale": 1.5,
}


class RfDetrAdapter(ClosedSetDetr):
    """RF-DETR; default checkpoint ``Roboflow/rf-detr-base`` (COCO)."""

    name = "rf-detr"
    default_checkpoint, prompt_modes, tasks = listed(name)
    architecture = "RfDetrForObjectDetection"
    since = "5.9.0"
    class_heads = ("class_embed", "model.enc_out_class_embed")
    backbone = ("model.backbone.backbone",)
    federated_fill = LOG_SAFE_FILL
    recipes: ClassVar[dict[str, Recipe]] = finetune_recipes(**RECIPE)

    def size_divisor(self) -> int:
        """The patch times the windows a side: the grid the windowed DINOv2 splits its input into."""
        config = self.model.config.backbone_config
        return int(config.patch_size) * int(config.num_windows)

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """A two-block, 32-wide windowed DINOv2 (4-pixel patches, so that even a 32-pixel
        multi-scale side has more patches than queries; 2 windows a side), a two-layer decoder
        with 20 queries in 2 groups, on 64x64 input: about 70 k parameters."""
        from transformers import RfDetrConfig, RfDetrDinov2Config, RfDetrImageProcessor

        backbone = RfDetrDinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2,
                                      patch_size=4, num_windows=2, image_size=64, out_features=["stage1", "stage2"])
        config = RfDetrConfig(backbone_config=backbone, d_model=32, decoder_ffn_dim=64, decoder_layers=2,
                              decoder_self_attention_heads=2, decoder_cross_attention_heads=2, decoder_n_points=2,
                              num_queries=20, group_detr=2, c2f_num_blocks=1, num_labels=2)
        cls.resolve_class()(config).save_pretrained(folder)
        RfDetrImageProcessor(size={"height": 64, "width": 64}).save_pretrained(folder)
