"""LW-DETR (Chen et al., "LW-DETR: A Transformer Replacement to YOLO for Real-Time Detection",
arXiv 2406.03459): a plain ViT with interleaved window and global attention, a C2f projector and
a three-layer deformable decoder, the DETR of RF100-VL's Table 7 (LW-DETRs, LW-DETRm, fully
supervised). Closed-set, trained through transformers' loss (``LwDetrForObjectDetection``,
transformers 5.0.0 and later; IoU-aware BCE, Group DETR's 13 query groups in training); default
checkpoint ``AnnaZhang/lwdetr_small_60e_coco`` (LW-DETR-small fine-tuned on COCO, the
checkpoint transformers' own LW-DETR classes document; ``lw-detr:AnnaZhang/lwdetr_medium_60e_coco``
for LW-DETRm).

Recipe ``detr-finetune`` (every regime; ``stac`` the same for teacher and student) follows the
authors' COCO fine-tuning of the small model, ``scripts/lwdetr_small_coco_train.sh`` of
github.com/Atten4Vis/LW-DETR (commit d5e6e6c, 2025-02-18; the repository has no release):

- 60 epochs, batch 32 (4 a GPU on 8 GPUs: one optimizer step sees 32 images);
- AdamW, learning rate 1e-4, backbone (the ViT encoder) ``lr_encoder`` 1.5e-4, weight decay
  1e-4, gradient norm clipped at 0.1 (``main.py``), no warm-up and no decay (``lr_drop`` 60 is
  the last epoch);
- weight average (``--use_ema``) with decay 0.9997 and no ramp (``ModelEma``,
  ``util/utils.py``): the fit's weights are the average;
- horizontal flips (p 0.5) and multi-scale training at the square sides 448 to 896 in steps of
  64 (``--square_resize_div_64``, ``datasets/coco.py``), 0.7 to 1.4 times the evaluation size
  640 (the checkpoint's processor size); here one side per batch, where the authors draw one
  per image and pad the batch.

Left out: the layer-wise learning-rate decay of the ViT (``lr_vit_layer_decay`` 0.8 a block) and
``lr_component_decay`` 0.7 (which make the encoder's rates smaller than 1.5e-4 and the
decoder's smaller than 1e-4), no weight decay on norms and biases, the second branch of the
training transform (resize to 400-600, random crop of 384-600, then the square resize), and
automatic mixed precision (``--rf100vl-train-option mixed_precision=bf16`` for it).

The federated mask gives masked classes the logit -15 rather than -1e4: the IoU-aware BCE takes
``log(sigmoid)`` itself, which is NaN at a sigmoid of exactly 0
(:data:`rf100vl_hf.training.federated.LOG_SAFE_FILL`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import ClassVar

from rf100vl_hf.training.federated import LOG_SAFE_FILL
from rf100vl_hf.training.recipe import Recipe

from pytest_rf100vl.adapters.closed_set_detr import ClosedSetDetr, finetune_recipes
from pytest_rf100vl.adapters.registry import listed

RECIPE = {
    "epochs": 60, "batch_size": 32, "learning_rate": 1e-4, "backbone_learning_rate": 1.5e-4, "weight_decay": 1e-4,
    "max_grad_norm": 0.1, "ema_decay": 0.9997, "flip": 0.5, "min_scale": 0.7, "max_scale": 1.4,
}


class LwDetrAdapter(ClosedSetDetr):
    """LW-DETR; default checkpoint ``AnnaZhang/lwdetr_small_60e_coco`` (COCO)."""

    name = "lw-detr"
    default_checkpoint, prompt_modes, tasks = listed(name)
    architecture = "LwDetrForObjectDetection"
    since = "5.0.0"
    class_heads = ("class_embed", "model.enc_out_class_embed")
    backbone = ("model.backbone.backbone",)
    federated_fill = LOG_SAFE_FILL
    recipes: ClassVar[dict[str, Recipe]] = finetune_recipes(**RECIPE)

    def size_divisor(self) -> int:
        """The patch times the windows a side (the ViT counts its windows over the whole grid)."""
        config = self.model.config.backbone_config
        return int(config.patch_size) * math.isqrt(int(config.num_windows))

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """A two-block, 32-wide ViT (8-pixel patches, one windowed block, 2 windows a side), a
        two-layer decoder with 20 queries in 2 groups, on 64x64 input: about 70 k parameters."""
        from transformers import DeformableDetrImageProcessor, LwDetrConfig, LwDetrViTConfig

        backbone = LwDetrViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2,
                                   patch_size=8, num_windows=4, image_size=64, pretrain_image_size=64,
                                   window_block_indices=[0], out_indices=[1, 2])
        config = LwDetrConfig(backbone_config=backbone, projector_scale_factors=[1.0], d_model=32, decoder_ffn_dim=64,
                              decoder_layers=2, decoder_self_attention_heads=2, decoder_cross_attention_heads=2,
                              decoder_n_points=2, num_queries=20, group_detr=2, c2f_num_blocks=1, num_labels=2)
        cls.resolve_class()(config).save_pretrained(folder)
        DeformableDetrImageProcessor(size={"height": 64, "width": 64}).save_pretrained(folder)
