"""RT-DETRv2, a closed-set real-time DETR, for the semi- and fully supervised regimes (and
few-shot fine-tuning as a baseline), trained through transformers' own RT-DETR loss.

Why RT-DETRv2: it is in transformers (Apache-2.0 code and COCO weights, kept up by the
library), it trains with the library's loss (Hungarian matching, varifocal, L1 and GIoU,
denoising queries), its COCO-pretrained R18 checkpoint is small enough for one GPU per
dataset, and it converges in few steps where vanilla DETR does not. The DETRs benchmarked on
RF100-VL since (D-FINE, DEIMv2, LW-DETR, RF-DETR) have adapters of their own beside it, on
the same base (:mod:`~pytest_rf100vl.adapters.closed_set_detr`).

Recipes (the project's own, not the RT-DETRv2 authors' schedule):

- ``detr-finetune`` (every regime): AdamW, learning rate 1e-4, batch 8, 50 epochs, gradient
  norm clipped at 0.1; ``federated=true`` masks each image's classification loss to the
  classes annotated in it (:mod:`rf100vl_hf.training.federated`).
- ``stac`` (semi-supervised): a teacher trained on the labelled split labels the rest of
  train, kept above the confidence that maximises its F1 on validation
  (:mod:`rf100vl_hf.training.stac`); a student, from the checkpoint again, trains on both.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from transformers import RTDetrImageProcessor, RTDetrResNetConfig, RTDetrV2Config

from rf100vl_hf.training.recipe import Recipe

from pytest_rf100vl.adapters.closed_set_detr import ClosedSetDetr, finetune_recipes
from pytest_rf100vl.adapters.registry import listed


class RTDetrV2Adapter(ClosedSetDetr):
    """RT-DETRv2; default checkpoint ``PekingU/rtdetr_v2_r18vd`` (COCO)."""

    name = "rt-detrv2"
    default_checkpoint, prompt_modes, tasks = listed(name)
    architecture = "RTDetrV2ForObjectDetection"
    since = "5.0.0"
    class_heads = ("model.enc_score_head", "model.decoder.class_embed")
    backbone = ("model.backbone.model",)
    recipes: ClassVar[dict[str, Recipe]] = finetune_recipes(epochs=50, batch_size=8, learning_rate=1e-4)

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """A one-block-per-stage ResNet, a 32-wide encoder and a two-layer decoder with 20
        queries, on 64x64 input: about 0.37 M parameters, trainable in seconds on a CPU."""
        backbone = RTDetrResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 64], depths=[1, 1, 1, 1],
                                      layer_type="basic", out_features=["stage2", "stage3", "stage4"])
        config = RTDetrV2Config(
            backbone_config=backbone, use_pretrained_backbone=False, num_labels=2, encoder_hidden_dim=32,
            encoder_in_channels=[32, 64, 64], feat_strides=[8, 16, 32], encoder_ffn_dim=64,
            encoder_attention_heads=2, d_model=32, num_queries=20, decoder_in_channels=[32, 32, 32],
            decoder_ffn_dim=64, decoder_layers=2, decoder_attention_heads=2, num_denoising=10,
            decoder_n_points=2, freeze_backbone_batch_norms=False, anchor_image_size=[64, 64],
        )
        cls.resolve_class()(config).save_pretrained(folder)
        RTDetrImageProcessor(size={"height": 64, "width": 64}).save_pretrained(folder)
