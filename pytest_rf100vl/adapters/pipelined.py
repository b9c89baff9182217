"""The name the detector modules subclass: a transformers detector run as three stages
(:class:`~pytest_rf100vl.adapters.base.Pipelined`) is :class:`~pytest_rf100vl.adapters.hf.HFDetector`,
whose module docstring describes the stages. One class, so that a model family and its variants
(OWLv2 and OWL-ViT, say) stay within three classes of :class:`~pytest_rf100vl.adapters.base.Adapter`."""

from __future__ import annotations

from pytest_rf100vl.adapters.hf import HFDetector, Staged

PipelinedDetector = HFDetector

__all__ = ["PipelinedDetector", "Staged"]
