"""The benchmarks' metrics, usable without pytest: COCO box AP at maxDets=500 (RF100-VL),
the paper's domain means, and UOUO grounding scores."""

from rf100vl_hf.metrics.aggregate import ALL, DomainMean, domain_means
from rf100vl_hf.metrics.coco import BACKENDS, MAX_DETS, CocoScores, coco_ground_truth, evaluate
from rf100vl_hf.metrics.grounding import QUADRANTS, GroundingScores, GroundingTarget, quadrant_of, score_grounding

__all__ = [
    "ALL",
    "BACKENDS",
    "MAX_DETS",
    "QUADRANTS",
    "CocoScores",
    "DomainMean",
    "GroundingScores",
    "GroundingTarget",
    "coco_ground_truth",
    "domain_means",
    "evaluate",
    "quadrant_of",
    "score_grounding",
]
