"""DEIMv2 (Huang et al., "Real-Time Object Detection Meets DINOv3", arXiv 2509.20787): D-FINE's
detector with DEIM's dense one-to-one matching and matchability-aware loss, on DINOv3 features
(S to X) or a pruned HGNetv2 (Atto to N). Closed-set, trained through transformers' loss
(``Deimv2ForObjectDetection``, transformers 5.7.0 and later: MAL, L1, GIoU, fine-grained
localisation and decoupled distillation losses, dense one-to-one matching, denoising queries);
default checkpoint ``harshaljanjani/DEIMv2_HGNetv2_N_COCO_Transformers`` (DEIMv2-N on COCO in
transformers' format, the checkpoint transformers' DEIMv2 documentation and tests load until
official ones are uploaded; the ``Intellindust/...`` repositories hold the original format).

Recipe ``detr-finetune`` (every regime; ``stac`` the same for teacher and student) follows
github.com/Intellindust-AI-Lab/DEIMv2 (commit 0fff8d4, 2026-03-24; the repository has no
release), ``configs/deimv2/deimv2_hgnetv2_n_coco.yml`` and the files it includes:

- 32 epochs: the README's fine-tuning schedule ("Customizing Epoch": 20 epochs, plus 12 without
  augmentation, ``no_aug_epoch`` of the N model); batch 32 (``total_batch_size``,
  ``configs/base/dataloader.yml``);
- AdamW, learning rate 8e-4, backbone (HGNetv2, or the DINOv3 ViT of the larger models) 4e-4,
  weight decay 1e-4, gradient norm clipped at 0.1 (``configs/base/optimizer.yml``), a warm-up
  over 2000 steps (``warmup_iter``, ``configs/base/deimv2.yml``; linear here, quadratic there);
- weight average with decay 0.9999 ramped over 1000 steps (``ModelEMA``,
  ``configs/base/optimizer.yml``): the fit's weights are the average;
- horizontal flips (p 0.5) at the resolution 640 (the checkpoint's processor size), with no
  multi-scale training: the N model turns it off (``base_size_repeat: ~``).

Left out: the flat-cosine schedule (the rates flat to epoch 14, then down to half by the end),
Mosaic, MixUp and CopyBlend (the dense one-to-one augmentations, epochs 4-20), the random
photometric distortion, zoom-out and IoU crop, the matcher's change at epoch 18, the
average's restart (``ema_restart_decay``), no weight decay on norms and biases, and automatic
mixed precision (``--rf100vl-train-option mixed_precision=bf16`` for it). The larger models'
recipes (DINOv3 backbones, other rates and multi-scale training) are not these: pass them as
``--rf100vl-train-option`` overrides.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rf100vl_hf.training.recipe import Recipe

from pytest_rf100vl.adapters.closed_set_detr import ClosedSetDetr, finetune_recipes
from pytest_rf100vl.adapters.d_fine import tiny_hgnet_detr
from pytest_rf100vl.adapters.registry import listed

RECIPE = {
    "epochs": 32, "batch_size": 32, "learning_rate": 8e-4, "backbone_learning_rate": 4e-4, "weight_decay": 1e-4,
    "max_grad_norm": 0.1, "warmup_steps": 2000, "ema_decay": 0.9999, "ema_warmup": 1000, "flip": 0.5,
}


class Deimv2Adapter(ClosedSetDetr):
    """DEIMv2; default checkpoint ``harshaljanjani/DEIMv2_HGNetv2_N_COCO_Transformers`` (COCO)."""

    name = "deimv2"
    default_checkpoint, prompt_modes, tasks = listed(name)
    architecture = "Deimv2ForObjectDetection"
    since = "5.7.0"
    class_heads = ("model.enc_score_head", "model.decoder.class_embed")
    backbone = ("model.conv_encoder.model", "model.conv_encoder.backbone")
    recipes: ClassVar[dict[str, Recipe]] = finetune_recipes(**RECIPE)

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """The tiny D-FINE-style detector of :func:`~pytest_rf100vl.adapters.d_fine.tiny_hgnet_detr`
        as DEIMv2: about 0.11 M parameters."""
        from transformers import Deimv2Config, RTDetrImageProcessor

        cls.resolve_class()(tiny_hgnet_detr(Deimv2Config)).save_pretrained(folder)
        RTDetrImageProcessor(size={"height": 64, "width": 64}).save_pretrained(folder)
