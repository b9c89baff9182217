"""Full-size models with random weights, built offline from their configs, for the GPU
benchmark (``test_gpu_throughput.py``): the real architectures at the real checkpoints' input
sizes, so a forward costs what a trained model's does. Each is saved with its processor and
loaded through the adapters' normal ``from_pretrained(path)`` route."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

Parts = tuple[Any, Any, Any]
"""A model's class, its config and its processor."""

FULL_SIZE: dict[str, str] = {
    "owlv2": "OWLv2 B/16 at 960 pixels (google/owlv2-base-patch16-ensemble's sizes)",
    "grounding-dino": "Grounding DINO with a Swin-T backbone and a BERT-base text encoder (grounding-dino-tiny's sizes)",
    "omdet-turbo": "OmDet-Turbo with a timm Swin-T backbone at 640 pixels (omdet-turbo-swin-tiny-hf's sizes)",
    "rt-detrv2": "RT-DETRv2 with a ResNet-50 backbone at 640 pixels",
    "florence-2": "Florence-2 base: DaViT and a 6+6-layer, 768-wide BART at 768 pixels",
}


def _owlv2() -> Parts:
    from transformers import Owlv2Config, Owlv2ForObjectDetection, Owlv2ImageProcessor, Owlv2Processor

    from pytest_rf100vl.adapters.hf import tiny_clip_tokenizer

    tokenizer = tiny_clip_tokenizer(16)
    config = Owlv2Config(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=512, intermediate_size=2048, num_hidden_layers=12,
                         num_attention_heads=8, max_position_embeddings=16, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id),
        vision_config=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                           image_size=960, patch_size=16),
        projection_dim=512,
    )
    image_processor = Owlv2ImageProcessor(size={"height": 960, "width": 960})
    return Owlv2ForObjectDetection, config, Owlv2Processor(image_processor=image_processor, tokenizer=tokenizer)


def _grounding_dino() -> Parts:
    from transformers import (
        BertConfig,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessor,
        GroundingDinoProcessor,
    )

    from pytest_rf100vl.adapters.grounding_dino import tiny_bert_tokenizer

    tokenizer = tiny_bert_tokenizer()
    config = GroundingDinoConfig(text_config=BertConfig(vocab_size=30522, max_position_embeddings=512))
    return GroundingDinoForObjectDetection, config, GroundingDinoProcessor(
        image_processor=GroundingDinoImageProcessor(), tokenizer=tokenizer)


def _omdet_turbo() -> Parts:
    from transformers import (
        CLIPTextConfig,
        DetrImageProcessor,
        OmDetTurboConfig,
        OmDetTurboForObjectDetection,
        OmDetTurboProcessor,
    )

    from pytest_rf100vl.adapters.hf import tiny_clip_tokenizer

    tokenizer = tiny_clip_tokenizer(77)
    config = OmDetTurboConfig(text_config=CLIPTextConfig(
        vocab_size=len(tokenizer), max_position_embeddings=77, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id))
    image_processor = DetrImageProcessor(size={"height": 640, "width": 640})
    return OmDetTurboForObjectDetection, config, OmDetTurboProcessor(image_processor=image_processor,
                                                                     tokenizer=tokenizer)


def _rt_detrv2() -> Parts:
    from transformers import RTDetrImageProcessor, RTDetrV2Config, RTDetrV2ForObjectDetection

    classes = [f"class-{i}" for i in range(5)]
    config = RTDetrV2Config(use_pretrained_backbone=False, num_labels=len(classes), id2label=dict(enumerate(classes)),
                            label2id={name: i for i, name in enumerate(classes)})
    return RTDetrV2ForObjectDetection, config, RTDetrImageProcessor(size={"height": 640, "width": 640})


def _florence_2() -> Parts:
    from transformers import CLIPImageProcessor, Florence2Config, Florence2ForConditionalGeneration, Florence2Processor

    from pytest_rf100vl.adapters.florence2 import POST_PROCESSOR_CONFIG, byte_tokenizer

    tokenizer = byte_tokenizer()
    config = Florence2Config(
        text_config=dict(model_type="bart", vocab_size=len(tokenizer), d_model=768, encoder_layers=6, decoder_layers=6,
                         encoder_attention_heads=12, decoder_attention_heads=12, encoder_ffn_dim=3072,
                         decoder_ffn_dim=3072, max_position_embeddings=1024, bos_token_id=0, pad_token_id=1,
                         eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2),
        vision_config=dict(projection_dim=768),
        image_token_id=tokenizer.image_token_id,
    )
    image_processor = CLIPImageProcessor(size={"height": 768, "width": 768}, do_center_crop=False,
                                         image_seq_length=577)
    return Florence2ForConditionalGeneration, config, Florence2Processor(
        image_processor=image_processor, tokenizer=tokenizer, post_processor_config=POST_PROCESSOR_CONFIG)


BUILDERS: dict[str, Callable[[], Parts]] = {
    "owlv2": _owlv2, "grounding-dino": _grounding_dino, "omdet-turbo": _omdet_turbo, "rt-detrv2": _rt_detrv2,
    "florence-2": _florence_2,
}


def full_size(name: str, root: Path) -> Path:
    """The folder of model ``name`` at full size under ``root``, built once (seeded)."""
    from pytest_rf100vl.adapters.hf import build_once

    def build(folder: Path) -> None:
        model_class, config, processor = BUILDERS[name]()
        model_class(config).save_pretrained(folder)
        processor.save_pretrained(folder)

    return build_once(root / name, build)

