"""The curation's good/bad image classifier: XGBoost on the §3 features (UOUO paper §3).

Trained from human labels (a CSV of ``path,label`` rows, ``label`` ``good`` or ``bad``, the
path relative to the raw folder) by a grid search (:data:`PARAM_GRID`) scored by stratified
5-fold cross-validation (scikit-learn's ``GridSearchCV`` and ``StratifiedKFold``, shuffled with
the run's seed). The scores reported are those of the chosen parameters' out-of-fold
predictions over the same folds (accuracy and macro precision, recall and F1), beside the
paper's (:data:`PAPER_SCORES`); the model is then refit on every label, saved in XGBoost's own
JSON format with a sidecar of its features, parameters and scores, and applied to the
unlabelled images: ``p_good >= 0.5`` is kept. A label always wins over the classifier for the
image it labels.

The percentile rule (:func:`percentile_rule`) is not the paper's method: a quick filter for a
collection nobody labelled, marked so wherever it is used.
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rf100vl_hf.errors import DataError, needs_extra, shown
from rf100vl_hf.uouo.features import FEATURES

LABELS = {"good": True, "bad": False}
FOLDS = 5
PARAM_GRID: dict[str, list[Any]] = {
    "max_depth": [2, 3, 4],
    "n_estimators": [50, 100, 200],
    "learning_rate": [0.05, 0.1, 0.3],
}
"""The documented grid (``docs/uouo.md``): tree depth, number of trees, learning rate; 27 points x 5 folds."""
PAPER_SCORES = {"accuracy": 0.8754, "precision": 0.8631, "recall": 0.8353, "f1": 0.8460}
"""UOUO §3: the paper's classifier, cross-validated on its human labels (macro averages)."""
THRESHOLD = 0.5
MODEL_FILE = "classifier.json"
META_FILE = "classifier-meta.json"
PERCENTILE_RULE = "not the paper's method"


@dataclass(frozen=True)
class Scores:
    """Cross-validated scores of the chosen parameters (macro averages over the two classes)."""

    accuracy: float
    precision: float
    recall: float
    f1: float
    labelled: int
    good: int
    params: dict[str, Any]


def read_labels(path: Path, known: set[str], dropped: set[str]) -> dict[str, bool]:
    """``source id -> good`` from a labels CSV; a path that names no file of the raw folder is an error
    naming the row, a blank label an unlabelled row; labels of dropped files (duplicates, no image)
    are left out."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(path, "file", f"cannot be read as CSV ({type(exc).__name__}: {exc})") from None
    if not rows or not {"path", "label"} <= set(rows[0]):
        raise DataError(path, "columns", "needs a header with 'path' and 'label' (the labelling sheet's columns)")
    labels: dict[str, bool] = {}
    for line, row in enumerate(rows, start=2):
        label = (row["label"] or "").strip().lower()
        if not label:
            continue
        if label not in LABELS:
            raise DataError(path, f"line {line}: label", f"must be good or bad, got {shown(row['label'])}")
        source_id = (row["path"] or "").strip().removeprefix("./")
        if source_id in dropped:
            continue
        if source_id not in known:
            raise DataError(path, f"line {line}: path", f"{shown(source_id)} is no image of the raw folder")
        labels[source_id] = LABELS[label]
    return labels


def _check_classes(labels: np.ndarray, where: Path) -> None:
    good = int(labels.sum())
    for name, count in (("good", good), ("bad", len(labels) - good)):
        if count < FOLDS:
            raise DataError(where, "label", f"{count} images labelled {name}; {FOLDS}-fold cross-validation needs at "
                            f"least {FOLDS} of each class")


def train(features: np.ndarray, labels: np.ndarray, where: Path, grid: dict[str, list[Any]] | None = None,
          seed: int = 0, num_proc: int = 1) -> tuple[Any, Scores]:
    """The refit XGBoost classifier and its cross-validated :class:`Scores`."""
    _check_classes(labels, where)
    with needs_extra("the curation classifier"):
        from sklearn.metrics import accuracy_score, precision_recall_fscore_support
        from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_predict
        from xgboost import XGBClassifier

    folds = StratifiedKFold(n_splits=FOLDS, shuffle=True, random_state=seed)
    base = XGBClassifier(random_state=seed, n_jobs=num_proc, tree_method="hist", eval_metric="logloss")
    search = GridSearchCV(base, grid or PARAM_GRID, scoring="f1_macro", cv=folds, refit=True)
    search.fit(features, labels)
    chosen = XGBClassifier(**search.best_estimator_.get_params())
    predicted = cross_val_predict(chosen, features, labels, cv=folds)
    precision, recall, f1, _ = precision_recall_fscore_support(labels, predicted, average="macro", zero_division=0)
    scores = Scores(float(accuracy_score(labels, predicted)), float(precision), float(recall), float(f1),
                    len(labels), int(labels.sum()), dict(search.best_params_))
    return search.best_estimator_, scores


def save(model: Any, scores: Scores | None, folder: Path) -> Path:
    """Write the model (XGBoost JSON) and its sidecar into ``folder``; the model's path."""
    folder.mkdir(parents=True, exist_ok=True)
    model.save_model(folder / MODEL_FILE)
    meta = {"features": list(FEATURES), "threshold": THRESHOLD, "scores": asdict(scores) if scores else None}
    (folder / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return folder / MODEL_FILE


def load(path: Path) -> Any:
    """A classifier saved by :func:`save` (its sidecar must list the same features)."""
    meta_path = path.with_name(META_FILE)
    if not path.is_file():
        raise DataError(path, "file", "not found (a classifier.json written by an earlier curation)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(meta_path, "json", f"cannot be read ({type(exc).__name__}: {exc})") from None
    if meta.get("features") != list(FEATURES):
        raise DataError(meta_path, "features", f"are {shown(meta.get('features'))}, not {list(FEATURES)}")
    with needs_extra("the curation classifier"):
        from xgboost import XGBClassifier
    model = XGBClassifier()
    try:
        model.load_model(path)
    except Exception as exc:  # xgboost raises its own XGBoostError for any unreadable model
        raise DataError(path, "model", f"cannot be loaded ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
    return model


def probability_good(model: Any, features: np.ndarray) -> np.ndarray:
    """The classifier's probability that each image is good."""
    if not len(features):
        return np.zeros(0)
    return model.predict_proba(features)[:, 1]


def percentile_rule(features: np.ndarray, minimum: float) -> np.ndarray:
    """Keep an image whose average-similarity percentile in its category is at least ``minimum``
    (:data:`PERCENTILE_RULE`)."""
    return features[:, FEATURES.index("percentile")] >= minimum
