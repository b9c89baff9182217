"""The curation (``rf100vl-hf uouo curate``) on a generated raw collection: objects on textured
backgrounds, planted outliers, bad files and labels (``tests/support/raw_collection.py``)."""

from __future__ import annotations

import json
import sqlite3
import struct
import sys
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy.stats import percentileofscore

from rf100vl_hf.cli import main
from rf100vl_hf.errors import DataError, MissingExtraError, UnknownNameError
from rf100vl_hf.uouo import classifier, labelling, remover
from rf100vl_hf.uouo.builder import uouo_builder
from rf100vl_hf.uouo.curate import CurateOptions, LicenceWarning, Verdict, _remove_chunk, curate, remove_backgrounds
from rf100vl_hf.uouo.embeddings import ClipEmbedder
from rf100vl_hf.uouo.features import FEATURES, category_features
from rf100vl_hf.uouo.rawimages import read_raw
from rf100vl_hf.uouo.sources import read_source
from tests.support.raw_collection import CATEGORIES, RawCollectionFiles, write_raw_collection, write_saturation_remover

SMALL_GRID = {"max_depth": [2], "n_estimators": [20], "learning_rate": [0.3]}


def _huge_png(path: Path, side: int = 10_000) -> None:
    """A PNG whose header claims ``side`` x ``side`` pixels (100 megapixels) and holds no pixel data."""
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + header
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(header)) + chunk
                     + struct.pack(">I", zlib.crc32(chunk)) + b"\0\0\0\0IEND\xaeB`\x82")


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> RawCollectionFiles:
    root = tmp_path_factory.mktemp("raw") / "collection"
    files = write_raw_collection(root)
    (root / "empty").mkdir()
    (root / "single").mkdir()
    Image.new("RGB", (64, 64), "red").save(root / "single" / "only.png")
    _huge_png(root / CATEGORIES[0] / "huge.png")
    return files


@pytest.fixture(scope="module")
def options(tmp_path_factory: pytest.TempPathFactory, raw: RawCollectionFiles, tiny_clip: str) -> CurateOptions:
    work = tmp_path_factory.mktemp("curate-inputs")
    return CurateOptions(
        labels=raw.write_labels(work / "labels.csv"), clip_model=tiny_clip, clip_pretrained=None,
        remover=str(write_saturation_remover(work / "saturation.onnx")), grid=SMALL_GRID,
        embedding_cache=work / "embeddings.sqlite", progress=False,
    )


@pytest.fixture(scope="module")
def curated(tmp_path_factory: pytest.TempPathFactory, raw: RawCollectionFiles, options: CurateOptions) -> Path:
    out = tmp_path_factory.mktemp("curated") / "out"
    result = curate(raw.root, out, options)
    assert not result.stopped and result.scores is not None
    return out


def _manifest(out: Path) -> dict[str, dict]:
    lines = (out / "curation" / "manifest.jsonl").read_text().splitlines()
    return {record["path"]: record for record in map(json.loads, lines)}


def test_features_equal_a_hand_computation_of_section_3() -> None:
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(5, 4))
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    embeddings[4] = embeddings[3]  # a tie in average similarity is counted half
    text = rng.normal(size=4)
    text /= np.linalg.norm(text)
    gram = [[float(np.dot(a, b)) for b in embeddings] for a in embeddings]
    average = [sum(gram[i][j] for j in range(5) if j != i) / 4 for i in range(5)]
    expected = [
        [average[i], float(np.dot(embeddings[i], text)), percentileofscore(average, average[i], kind="mean"),
         float(np.mean(average)), float(np.var(average))]
        for i in range(5)
    ]
    np.testing.assert_allclose(category_features(embeddings, text), expected, rtol=1e-12, atol=1e-12)
    assert FEATURES == ("avg_similarity", "text_similarity", "percentile", "category_mean", "category_variance")


def test_planted_outliers_are_filtered_when_the_features_are_informative() -> None:
    """Embeddings where a category's images gather round its direction and outliers do not: trained
    on three categories' labels, the classifier finds the outliers of three others."""
    rng = np.random.default_rng(1)

    def category(good: int = 10, outliers: int = 3) -> tuple[np.ndarray, np.ndarray]:
        centre = rng.normal(size=32)
        vectors = np.concatenate([centre + rng.normal(scale=0.3, size=(good, 32)), rng.normal(size=(outliers, 32))])
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        text = centre + rng.normal(scale=0.3, size=32)
        features = category_features(vectors, text / np.linalg.norm(text))
        return features, np.array([1] * good + [0] * outliers)

    train = [category() for _ in range(3)]
    model, scores = classifier.train(np.concatenate([f for f, _ in train]), np.concatenate([y for _, y in train]),
                                     Path("labels.csv"), SMALL_GRID)
    assert scores.accuracy >= 0.9 and scores.labelled == 39 and scores.good == 30
    for features, truth in (category() for _ in range(3)):
        kept = classifier.probability_good(model, features) >= classifier.THRESHOLD
        assert kept.tolist() == truth.astype(bool).tolist()


def test_bad_files_are_dropped_by_name_and_counted(curated: Path, raw: RawCollectionFiles) -> None:
    manifest = _manifest(curated)
    files = [p for p in raw.root.rglob("*") if p.is_file()]
    assert len(manifest) == len(files)  # one line per source file
    reasons = {path: manifest[path]["reason"] for path in [*raw.bad_files, *raw.duplicates]}
    assert "no image format recognises it" in reasons["star/notes.txt"]
    assert "cannot be decoded" in reasons["star/truncated.jpg"]
    assert reasons["star/animated.gif"] == "animated: 2 frames"
    assert reasons["star/star_00_copy.jpg"] == "duplicate of star/star_00.jpg"
    assert {manifest[path]["stage"] for path in reasons} == {"read"}
    assert manifest["star/huge.png"]["reason"].startswith("huge: over 89478485 pixels")
    assert manifest["single/only.png"]["stage"] == "category"
    assert "1 readable images; at least 5" in manifest["single/only.png"]["reason"]
    for outlier in raw.outliers:
        assert (manifest[outlier]["decision"], manifest[outlier]["reason"]) == ("dropped", "labelled bad")


def test_cutouts_alpha_matches_the_objects(curated: Path, raw: RawCollectionFiles) -> None:
    kept = [record for record in _manifest(curated).values() if record["decision"] == "kept"]
    assert len(kept) == 6 * len(CATEGORIES)
    for record in kept:
        cutout = Image.open(curated / record["cutout"])
        assert cutout.mode == "RGBA"
        x0, y0, x1, y1 = record["box"]
        assert cutout.size == (x1 - x0, y1 - y0)
        placed = np.zeros_like(raw.alphas[record["path"]])
        placed[y0:y1, x0:x1] = np.asarray(cutout.getchannel("A"))
        truth, found = raw.alphas[record["path"]] > 127, placed > 127
        assert (truth & found).sum() / (truth | found).sum() > 0.95, record["path"]
        assert record["remover"] == "saturation.onnx" and record["licence"]["id"] == "unknown"
        assert set(record["features"]) == set(FEATURES) and record["label"] == "good"


def test_the_report_has_appendix_a_and_the_four_scores(curated: Path) -> None:
    report = (curated / "curation" / "report.md").read_text()
    assert "| categories in | 7 | 27,926 |" in report  # five drawn categories, the empty and the single one
    assert "| categories kept | 5 (71.4%) | 25,864 (92.6%) |" in report
    assert "| images per kept category: minimum | 6 | 5 |" in report
    for name, paper in classifier.PAPER_SCORES.items():
        assert f"| {name if name == 'accuracy' else 'macro ' + name} | " in report and f"| {paper:.4f} |" in report
    meta = json.loads((curated / "curation" / classifier.META_FILE).read_text())
    assert meta["features"] == list(FEATURES) and meta["scores"]["params"] == {k: v[0] for k, v in SMALL_GRID.items()}


def test_the_output_builds_uouo_mosaics_without_embedding_again(
    curated: Path, options: CurateOptions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = read_source(curated, progress=False)
    assert source.categories == sorted(CATEGORIES) and len(source.cutouts()) == 30
    assert source.licence.note == "cut-outs made with saturation.onnx: a local ONNX file: its licence is its author's"
    monkeypatch.setattr(ClipEmbedder, "encode", lambda self, images: pytest.fail("embedded again"))
    builder = uouo_builder("mmd", curated, cache_dir=tmp_path, clip_model=options.clip_model, clip_pretrained=None,
                           num_mosaics=4, embedding_cache=str(options.embedding_cache), progress=False)
    builder.download_and_prepare()
    mosaics = builder.as_dataset(split="test")
    assert len(mosaics) == 4 and {c for row in mosaics for c in row["objects"]["category"]} <= set(CATEGORIES)


def test_a_second_run_redoes_nothing_and_an_interrupted_removal_resumes(
    curated: Path, raw: RawCollectionFiles, options: CurateOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = curated / "curation" / "removal.jsonl"
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:-7]) + "\n" + lines[-7][:20])  # cut short mid-line
    calls: list[int] = []
    original = remover.predict_mask
    monkeypatch.setattr("rf100vl_hf.uouo.curate.predict_mask", lambda *a: calls.append(1) or original(*a))
    monkeypatch.setattr(ClipEmbedder, "encode", lambda self, images: pytest.fail("embedded again"))
    curate(raw.root, curated, options)
    assert len(calls) == 7
    records = journal.read_text().splitlines()
    assert len(records) == len(lines) + 1 and records[len(lines) - 7] == lines[-7][:20]  # the torn line is left
    assert all(json.loads(line)["key"] for line in records[len(lines) - 6 :])
    assert sum(r["decision"] == "kept" for r in _manifest(curated).values()) == 30


def test_bad_labels_are_one_line_errors(raw: RawCollectionFiles, options: CurateOptions, tmp_path: Path) -> None:
    unknown = tmp_path / "unknown.csv"
    unknown.write_text("path,label\nstar/star_01.jpg,good\nstar/missing.jpg,bad\n")
    with pytest.raises(DataError, match=r"unknown.csv: line 3: path: 'star/missing.jpg' is no image of the raw"):
        curate(raw.root, tmp_path / "a", replace(options, labels=unknown))
    one_class = tmp_path / "good.csv"
    one_class.write_text("path,label\n" + "".join(f"star/star_0{n}.jpg,good\n" for n in range(6)))
    with pytest.raises(DataError, match=r"good.csv: label: 0 images labelled bad; 5-fold cross-validation needs"):
        curate(raw.root, tmp_path / "b", replace(options, labels=one_class))
    with pytest.raises(DataError, match=r"out: is inside the raw folder"):
        curate(raw.root, raw.root / "out", options)
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("path,label\nstar/star_01.jpg,maybe\n")
    with pytest.raises(DataError, match=r"wrong.csv: line 2: label: must be good or bad, got 'maybe'"):
        curate(raw.root, tmp_path / "c", replace(options, labels=wrong))


def test_a_remover_that_returns_nan_or_wrong_sized_masks_drops_the_image(tmp_path: Path) -> None:
    constant = remover.resolve_remover(str(write_saturation_remover(tmp_path / "flat.onnx", steepness=0)), tmp_path)
    image = Image.new("RGB", (50, 40), "grey")
    mask, reason = remover.predict_mask(remover.new_session(constant), image)
    assert mask is None and reason.startswith("the remover's mask is NaN")

    class Shrinking:
        def predict(self, img: Image.Image) -> list[Image.Image]:
            return [Image.new("L", (10, 10))]

    assert remover.predict_mask(Shrinking(), image) == (None, "the remover returned a 10x10 mask for a 50x40 image")
    full = remover.cut_out(image, np.full((40, 50), 255, np.uint8), 8)
    assert full.cutout is None and full.reason == "the mask covers 100% of the image: no background removed"
    assert remover.cut_out(image, np.full((40, 50), 5, np.uint8), 8).reason == "empty mask: the remover found no object"


def test_the_tiny_remover_is_built_offline(tmp_path: Path) -> None:
    tiny = remover.resolve_remover("tiny", tmp_path, seed=3)
    assert tiny.model_file is not None and tiny.model_file.is_relative_to(remover.rembg_models_folder())
    mask, reason = remover.predict_mask(remover.new_session(tiny), Image.new("RGB", (70, 30), "teal"))
    assert reason == "" and mask.shape == (30, 70)
    assert remover.REMOVERS["bria-rmbg-1.4"].non_commercial and not remover.REMOVERS["isnet-general-use"].non_commercial
    with pytest.raises(UnknownNameError, match=r"unknown remover 'isnet-general'; closest: isnet-general-use"):
        remover.resolve_remover("isnet-general", tmp_path)


def test_the_command_stops_with_a_labelling_sheet_then_runs_the_percentile_rule(
    raw: RawCollectionFiles, options: CurateOptions, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    common = [str(raw.root), "--out", str(out), "--option", f"clip-model={options.clip_model}", "--option", "clip-pretrained=none",
              "--option", f"remover={str(options.remover)}"]
    assert main(["uouo", "curate", *common]) == 0
    said = capsys.readouterr().out.strip()
    assert said.startswith("no labels: wrote the feature table") and "\n" not in said
    sheets = sorted(p.name for p in (out / "curation" / "labelling").iterdir())
    assert sheets == sorted([*(f"{c}.jpg" for c in CATEGORIES), "labels.csv"])
    assert Image.open(out / "curation" / "labelling" / "star.jpg").width == 8 * 160
    assert main(["uouo", "curate", *common, "--option", "percentile-rule=10"]) == 0
    assert "kept 5 of 7 categories" in capsys.readouterr().out
    report = (out / "curation" / "report.md").read_text()
    assert "Percentile rule (not the paper's method)" in report
    assert main(["uouo", "curate", *common, "--option", "percentile-rule=10", "--labels", str(options.labels)]) == 2
    assert "percentile-rule (not the paper's method) replaces the classifier" in capsys.readouterr().err


def test_a_missing_extra_names_its_pip_install(
    raw: RawCollectionFiles, options: CurateOptions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "xgboost", None)
    installs = r'needs xgboost, which the \[curate\] extra installs: pip install "rf100vl-hf\[curate\]"'
    with pytest.raises(MissingExtraError, match=installs):
        classifier.train(np.zeros((10, 5)), np.array([0, 1] * 5), Path("labels.csv"))
    monkeypatch.setitem(sys.modules, "torch", None)  # a module of the models extra, which curate brings too
    assert main(["uouo", "curate", str(raw.root), "--out", str(tmp_path), "--option", f"clip-model={options.clip_model}",
                 "--option", f"remover={str(options.remover)}", "--option", "percentile-rule=10"]) == 2
    assert capsys.readouterr().err.endswith('rf100vl-hf uouo curate needs torch, which the [curate] extra installs: '
                                            'pip install "rf100vl-hf[curate]"\n')


def test_the_embedding_cache_holds_raw_images_and_cutouts(curated: Path, options: CurateOptions) -> None:
    with sqlite3.connect(options.embedding_cache) as db:
        models = dict(db.execute("SELECT model, COUNT(*) FROM embeddings GROUP BY model").fetchall())
    assert models[f"{options.clip_model}|raw-rgb-1"] == 5 * 8  # every distinct readable image of a usable category
    assert sum(count for model, count in models.items() if "|square-on-background" in model) == 30


def test_a_non_commercial_remover_is_warned_and_recorded(
    raw: RawCollectionFiles, options: CurateOptions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BRIA RMBG-1.4's licence, with the tiny remover standing in for its weights (no download)."""
    bria = replace(remover.REMOVERS["bria-rmbg-1.4"], session="u2net_custom",
                   model_file=remover.resolve_remover("tiny", tmp_path).model_file)
    monkeypatch.setattr("rf100vl_hf.uouo.curate.resolve_remover", lambda *args: bria)
    with pytest.warns(LicenceWarning, match="remover bria-rmbg-1.4: BRIA RMBG-1.4 .*non-commercial use only"):
        curate(raw.root, tmp_path / "out", replace(options, labels=None, percentile_rule=10))
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["license_note"].startswith(
        "cut-outs made with bria-rmbg-1.4: BRIA RMBG-1.4 (the paper's), BRIA's licence: non-commercial use only")
    tried = [r for r in _manifest(tmp_path / "out").values() if r["remover"]]
    assert tried and all(r["licence"] == {"id": "other", "note": bria.licence_note} for r in tried)
    assert "non-commercial use only" in (tmp_path / "out" / "curation" / "report.md").read_text()


def test_removal_in_two_processes_writes_what_one_process_writes(
    raw: RawCollectionFiles, options: CurateOptions, tmp_path: Path
) -> None:
    images = read_raw(raw.root, progress=False).images[CATEGORIES[1]]
    saturation = remover.resolve_remover(str(options.remover), tmp_path)
    for num_proc in (1, 2):
        verdicts = [Verdict(image, np.zeros(len(FEATURES))) for image in images]
        remove_backgrounds(verdicts, tmp_path / f"out-{num_proc}", saturation, replace(options, num_proc=num_proc))
        assert all(v.removed and v.kept for v in verdicts)
    one, two = ([p.read_bytes() for p in sorted((tmp_path / f"out-{n}" / "cutouts").rglob("*.png"))] for n in (1, 2))
    assert len(one) == len(images) == 8 and one == two


def test_a_large_category_gets_several_contact_sheets(
    raw: RawCollectionFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(labelling, "PAGE", 3)
    images = {"star": read_raw(raw.root, progress=False).images["star"]}
    features = np.zeros((len(images["star"]), len(FEATURES)))
    features[:, 0] = np.arange(len(images["star"]))[::-1]  # the last image has the lowest average similarity
    sheet = labelling.write_labelling(tmp_path, images, {"star": features})
    assert sorted(p.name for p in tmp_path.glob("*.jpg")) == ["star-page2.jpg", "star-page3.jpg", "star.jpg"]
    one_row = (labelling.COLUMNS * labelling.THUMB, 2 * labelling.LABEL_BAND + labelling.THUMB)
    assert Image.open(tmp_path / "star.jpg").size == Image.open(tmp_path / "star-page3.jpg").size == one_row
    rows = sheet.read_text().splitlines()
    assert rows[1].startswith(f"{images['star'][-1].source_id},star,1,")


def test_an_image_changed_since_it_was_read_is_dropped_not_raised(raw: RawCollectionFiles, tmp_path: Path) -> None:
    image = read_raw(raw.root, progress=False).images["ring"][0]
    moved = replace(image, path=tmp_path / "gone.jpg")
    records = _remove_chunk([(moved, "cutouts/ring/x.png")], tmp_path, 8, 1024, "key")
    assert records[0]["cutout"] is None and records[0]["reason"].startswith("cannot be read any more: ")
    assert records[0]["reason"].endswith("gone.jpg: file: cannot be read (No such file or directory)")


def test_a_saved_classifier_is_applied_to_another_run(
    curated: Path, raw: RawCollectionFiles, options: CurateOptions, tmp_path: Path
) -> None:
    saved = curated / "curation" / classifier.MODEL_FILE
    result = curate(raw.root, tmp_path / "shard", replace(options, labels=None, classifier_file=saved))
    assert result.scores is None and not result.stopped
    lines = [r for r in _manifest(tmp_path / "shard").values() if r["features"] is not None]
    model = classifier.load(saved)
    for line in lines:
        p_good = classifier.probability_good(model, np.array([[line["features"][name] for name in FEATURES]]))[0]
        assert line["p_good"] == pytest.approx(float(p_good)) and line["label"] is None
        assert (line["stage"] == "classifier") == (p_good < classifier.THRESHOLD)
    assert "A saved classifier was applied" in (tmp_path / "shard" / "curation" / "report.md").read_text()
    meta = saved.with_name(classifier.META_FILE)
    (tmp_path / classifier.META_FILE).write_text(meta.read_text().replace("percentile", "rank"))
    (tmp_path / classifier.MODEL_FILE).write_bytes(saved.read_bytes())
    with pytest.raises(DataError, match=r"classifier-meta.json: features: are \['avg_similarity', 'text_similarity', 'rank'"):
        classifier.load(tmp_path / classifier.MODEL_FILE)
