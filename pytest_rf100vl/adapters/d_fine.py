"""D-FINE (Peng et al., "D-FINE: Redefine Regression Task in DETRs as Fine-grained Distribution
Refinement", arXiv 2410.13842): RT-DETR's design with boxes regressed as distributions and
self-distilled across decoder layers. Closed-set, trained through transformers' loss
(``DFineForObjectDetection``, transformers 5.0.0 and later: varifocal, L1, GIoU, fine-grained
localisation and decoupled distillation losses, denoising queries); default checkpoint
``ustc-community/dfine-xlarge-coco`` (D-FINE-X on COCO, the checkpoint transformers' own D-FINE
configuration documents).

Recipe ``detr-finetune`` (every regime; ``stac`` the same for teacher and student) follows the
authors' custom-dataset fine-tuning of D-FINE-X, github.com/Peterande/D-FINE (commit 4a1f73a,
2025-04-11; the repository has no release), ``configs/dfine/custom/dfine_hgnetv2_x_custom.yml``
and the files it includes:

- 80 epochs, batch 32 (``total_batch_size``, ``configs/dfine/include/dataloader.yml``);
- AdamW, learning rate 2.5e-4, backbone (HGNetv2) 2.5e-6, weight decay 1.25e-4, gradient norm
  clipped at 0.1, a linear warm-up over 500 steps (``configs/dfine/include/optimizer.yml``;
  its ``MultiStepLR`` milestone, epoch 500, is never reached);
- weight average with decay 0.9999 ramped over 1000 steps (``ModelEMA``,
  ``src/optim/ema.py``): the fit's weights are the average;
- horizontal flips (p 0.5) and multi-scale training: each batch at a square side from 480 to 800
  in steps of 32 (``generate_scales`` of ``BatchImageCollateFunction``, ``src/data/dataloader.py``,
  base 640: 0.75 to 1.25 times the resolution) until epoch 72 (``stop_epoch``), then at 640 for
  the last 8 epochs (``single_scale_epochs``); evaluation at 640, the checkpoint's processor size.

Left out: the random photometric distortion, zoom-out and IoU crop (epochs 1-72), the threefold
weight of the base size among the multi-scale sides (``base_size_repeat`` 3: here every side is
as likely), the average's restart at epoch 72 (``ema_restart_decay`` 0.9998), no weight decay on
the encoder's and decoder's norms, and automatic mixed precision (``use_amp``;
``--rf100vl-train-option mixed_precision=bf16`` for it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from rf100vl_hf.training.recipe import Recipe

from pytest_rf100vl.adapters.closed_set_detr import ClosedSetDetr, finetune_recipes
from pytest_rf100vl.adapters.registry import listed

RECIPE = {
    "epochs": 80, "batch_size": 32, "learning_rate": 2.5e-4, "backbone_learning_rate": 2.5e-6,
    "weight_decay": 1.25e-4, "max_grad_norm": 0.1, "warmup_steps": 500, "ema_decay": 0.9999, "ema_warmup": 1000,
    "flip": 0.5, "min_scale": 0.75, "max_scale": 1.25, "single_scale_epochs": 8,
}


def tiny_hgnet_detr(config_class: Any, **overrides: Any) -> Any:
    """The configuration of a tiny D-FINE-style detector (D-FINE, DEIMv2): a one-block-per-stage
    HGNetv2, a 32-wide hybrid encoder and a two-layer decoder with 20 queries and 10 denoising
    ones, for 64x64 input."""
    from transformers import HGNetV2Config

    backbone = HGNetV2Config(
        stem_channels=[3, 8, 8], stage_in_channels=[8, 16, 32, 32], stage_mid_channels=[8, 8, 16, 16],
        stage_out_channels=[16, 32, 32, 32], stage_num_blocks=[1, 1, 1, 1], stage_downsample=[False, True, True, True],
        stage_light_block=[False, False, True, True], stage_kernel_size=[3, 3, 3, 3], stage_numb_of_layers=[1, 1, 1, 1],
        embeddings_size=8, hidden_sizes=[16, 32, 32, 32], depths=[1, 1, 1, 1],
        out_features=["stage2", "stage3", "stage4"])
    return config_class(
        backbone_config=backbone, num_labels=2, encoder_hidden_dim=32, encoder_in_channels=[32, 32, 32],
        feat_strides=[8, 16, 32], encoder_ffn_dim=64, encoder_attention_heads=2, hidden_expansion=0.5, depth_mult=0.34,
        d_model=32, num_queries=20, decoder_in_channels=[32, 32, 32], decoder_ffn_dim=64, decoder_layers=2,
        decoder_attention_heads=2, decoder_n_points=2, num_denoising=10, freeze_backbone_batch_norms=False,
        **overrides)


class DFineAdapter(ClosedSetDetr):
    """D-FINE; default checkpoint ``ustc-community/dfine-xlarge-coco`` (COCO)."""

    name = "d-fine"
    default_checkpoint, prompt_modes, tasks = listed(name)
    architecture = "DFineForObjectDetection"
    since = "5.0.0"
    class_heads = ("model.enc_score_head", "model.decoder.class_embed")
    backbone = ("model.backbone.model",)
    recipes: ClassVar[dict[str, Recipe]] = finetune_recipes(**RECIPE)

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """The tiny D-FINE of :func:`tiny_hgnet_detr`: about 0.12 M parameters."""
        from transformers import DFineConfig, RTDetrImageProcessor

        cls.resolve_class()(tiny_hgnet_detr(DFineConfig)).save_pretrained(folder)
        RTDetrImageProcessor(size={"height": 64, "width": 64}).save_pretrained(folder)
