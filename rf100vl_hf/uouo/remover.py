"""Background removal for the curation: rembg sessions (ONNX through onnxruntime), cut-outs from masks.

A remover is named (``docs/uouo.md``, "Curation"):

- a rembg session of :data:`REMOVERS`: the default ``isnet-general-use`` (Apache-2.0), ``u2net``,
  ``birefnet-general``; ``bria-rmbg`` (rembg's BRIA RMBG-2.0) and ``bria-rmbg-1.4`` (the paper's
  BRIA RMBG-1.4, downloaded from the Hub) are non-commercial, and their licence is printed and
  recorded with every cut-out. rembg downloads a session's weights at first use;
- a local ``.onnx`` file in the layout of rembg's ``u2net_custom`` session (input
  1x3x320x320, ImageNet-normalised; the first output's channel 0 is the mask). rembg loads such
  a file only from inside its models folder (``U2NET_HOME``, else ``REMBG_HOME``), so the file
  is copied there under its content hash;
- ``tiny``: a seeded random two-layer network written as such a file, offline (tests and smoke
  runs: its masks mean nothing).

A cut-out is the image with the mask as its alpha, every alpha at or below the alpha threshold
cleared, cropped to the mask's box: what ``rf100vl-hf uouo prepare`` reads. A mask that is
empty, too small for a cut-out (:data:`rf100vl_hf.uouo.sources.MIN_ALPHA_SIDE`), covering
nearly the whole image (at least :data:`NEAR_FULL` of it: the background was not removed), of
the wrong size, or NaN (rembg divides by the prediction's range) drops its image, counted with
the reason.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xxhash
from PIL import Image

from rf100vl_hf.errors import DataError, Rf100vlError, UnknownNameError, needs_extra, unknown
from rf100vl_hf.network import bounded
from rf100vl_hf.uouo.defaults import TINY_REMOVER
from rf100vl_hf.uouo.sources import MIN_ALPHA_PIXELS, MIN_ALPHA_SIDE, alpha_box

NEAR_FULL = 0.95
"""A mask covering this fraction of its image (or more) removed no background."""
NON_COMMERCIAL = "non-commercial use only"


@dataclass(frozen=True)
class Remover:
    """A background remover: ``session`` is rembg's session name, ``model_file`` the ONNX file of a
    ``u2net_custom`` session; ``licence`` a Hub licence id, ``licence_note`` what a user must know."""

    name: str
    session: str
    licence: str
    licence_note: str = ""
    model_file: Path | None = None

    @property
    def non_commercial(self) -> bool:
        return NON_COMMERCIAL in self.licence_note

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "session": self.session, "licence": self.licence, "licence_note": self.licence_note}


BRIA_NOTE = (f"BRIA's licence: {NON_COMMERCIAL}; commercial use of the model (and of what it makes) needs an "
             "agreement with BRIA AI")
REMOVERS: dict[str, Remover] = {
    "isnet-general-use": Remover("isnet-general-use", "isnet-general-use", "apache-2.0"),
    "u2net": Remover("u2net", "u2net", "apache-2.0"),
    "birefnet-general": Remover("birefnet-general", "birefnet-general", "mit"),
    "bria-rmbg": Remover("bria-rmbg", "bria-rmbg", "cc-by-nc-4.0", f"BRIA RMBG-2.0, {BRIA_NOTE}"),
    "bria-rmbg-1.4": Remover("bria-rmbg-1.4", "bria-rmbg-1.4", "other", f"BRIA RMBG-1.4 (the paper's), {BRIA_NOTE}"),
}
BRIA_14_REPO, BRIA_14_FILE = "briaai/RMBG-1.4", "onnx/model.onnx"
TINY_SIDE = 320


def write_tiny_remover(path: Path, seed: int = 0) -> Path:
    """A seeded random ``u2net_custom`` ONNX network (3x3 conv, ReLU, 1x1 conv, sigmoid) at ``path``."""
    with needs_extra("the tiny remover"):
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    first = numpy_helper.from_array(rng.normal(0, 0.5, (4, 3, 3, 3)).astype(np.float32), "w1")
    second = numpy_helper.from_array(rng.normal(0, 0.5, (1, 4, 1, 1)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("Conv", ["input.1", "w1"], ["h"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Conv", ["r", "w2"], ["logits"]),
        helper.make_node("Sigmoid", ["logits"], ["mask"]),
    ]
    shape = [1, 3, TINY_SIDE, TINY_SIDE]
    graph = helper.make_graph(
        nodes, "tiny-remover", [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, TINY_SIDE, TINY_SIDE])], [first, second],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by every onnxruntime of the last years
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)
    return path


def rembg_models_folder() -> Path:
    """Where rembg accepts a custom model file: ``U2NET_HOME``, else ``REMBG_HOME``, else rembg's default."""
    with needs_extra("background removal"):
        from rembg.sessions.base import BaseSession
    return Path(BaseSession.rembg_home())


def _install_custom(source: Path) -> Path:
    """``source`` copied (once, by content hash) into rembg's models folder, where ``u2net_custom`` reads it."""
    hasher = xxhash.xxh3_128()
    with source.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            hasher.update(block)
    target = rembg_models_folder() / "models" / "u2net_custom" / f"{hasher.hexdigest()}.onnx"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(source, staging)
        os.replace(staging, target)
    return target


def resolve_remover(name: str, work: Path, seed: int = 0) -> Remover:
    """The remover ``name`` means (see the module docstring); a tiny one is written under ``work``."""
    if name == TINY_REMOVER:
        path = write_tiny_remover(work / f"tiny-remover-seed{seed}.onnx", seed)
        return Remover(TINY_REMOVER, "u2net_custom", "apache-2.0",
                       "seeded random weights: a smoke run, masks mean nothing", _install_custom(path))
    if name.lower().endswith(".onnx"):
        path = Path(name)
        if not path.is_file():
            raise DataError(path, "remover", "no such ONNX file")
        return Remover(path.name, "u2net_custom", "unknown", "a local ONNX file: its licence is its author's",
                       _install_custom(path))
    if name not in REMOVERS:
        raise UnknownNameError(f"{unknown('remover', name, [*REMOVERS, TINY_REMOVER])}; or a local .onnx file")
    return REMOVERS[name]


def _bria_14_session(sess_opts: Any) -> Any:
    """rembg has BRIA RMBG-2.0 as ``bria-rmbg``; RMBG-1.4 (the paper's) takes 1024x1024 inputs
    normalised as ``x - 0.5``, and its file comes from the Hub."""
    from huggingface_hub import hf_hub_download
    from rembg.sessions.bria_rmbg import BriaRmBgSession

    class BriaRmbg14(BriaRmBgSession):
        def normalize(self, img: Any, mean: Any, std: Any, size: Any, *args: Any, **kwargs: Any) -> Any:
            return super().normalize(img, (0.5, 0.5, 0.5), (1.0, 1.0, 1.0), size)

        @classmethod
        def download_models(cls, *args: Any, **kwargs: Any) -> str:
            from huggingface_hub import constants

            with bounded(constants.ENDPOINT, f"downloading {BRIA_14_REPO}/{BRIA_14_FILE}"):
                return hf_hub_download(BRIA_14_REPO, BRIA_14_FILE)

    return BriaRmbg14("bria-rmbg-1.4", sess_opts)


def new_session(remover: Remover, threads: int | None = None) -> Any:
    """rembg's session for ``remover``; ``threads`` limits onnxruntime's threads (1 in each of
    ``num_proc`` worker processes; by default onnxruntime's own, every core)."""
    with needs_extra("background removal"):
        import onnxruntime
        from rembg import new_session as rembg_session
    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = options.inter_op_num_threads = threads
    try:
        if remover.session == "bria-rmbg-1.4":
            return _bria_14_session(options)
        if remover.model_file is not None:
            return rembg_session("u2net_custom", sess_opts=options, model_path=str(remover.model_file))
        return rembg_session(remover.session, sess_opts=options)
    except Rf100vlError:
        raise
    except Exception as exc:  # a download that failed, an ONNX file onnxruntime refuses
        message = " ".join(str(exc).split())[:300]
        raise RemoverError(f"remover {remover.name!r} could not be loaded ({type(exc).__name__}: {message}); offline, "
                           f"use --remover FILE.onnx or --remover {TINY_REMOVER}") from None


class RemoverError(Rf100vlError):
    """A remover's model could not be loaded (not downloadable now, or an ONNX file onnxruntime refuses)."""


@dataclass(frozen=True)
class CutoutResult:
    """One image's removal: the cut-out (``None`` when dropped), its box in the image, and why it was dropped."""

    cutout: Image.Image | None
    box: tuple[int, int, int, int] | None
    coverage: float
    reason: str = ""


def predict_mask(session: Any, image: Image.Image) -> tuple[np.ndarray | None, str]:
    """The remover's mask of ``image`` as uint8, or ``None`` and why (NaN, wrong size)."""
    try:
        with np.errstate(invalid="raise", divide="raise"):
            masks = session.predict(image)
    except FloatingPointError:
        return None, "the remover's mask is NaN (its prediction is constant or not a number)"
    mask = masks[0] if masks else None
    if mask is None or mask.size != image.size:
        got = "no mask" if mask is None else f"a {mask.size[0]}x{mask.size[1]} mask"
        return None, f"the remover returned {got} for a {image.size[0]}x{image.size[1]} image"
    return np.asarray(mask.convert("L")), ""


def cut_out(image: Image.Image, mask: np.ndarray, alpha_threshold: int) -> CutoutResult:
    """The RGBA cut-out of ``image`` under ``mask``, cropped to the mask's box, or why there is none.
    A cut-out opaque to its edges gets a one-pixel transparent margin, so it reads as a cut-out."""
    alpha = np.where(mask > alpha_threshold, mask, 0).astype(np.uint8)
    inside = int((alpha > 0).sum())
    coverage = inside / alpha.size
    box = alpha_box(alpha)
    if box is None:
        return CutoutResult(None, None, 0.0, "empty mask: the remover found no object")
    if coverage >= NEAR_FULL:
        return CutoutResult(None, box, coverage, f"the mask covers {coverage:.0%} of the image: no background removed")
    width, height = box[2] - box[0], box[3] - box[1]
    if min(width, height) < MIN_ALPHA_SIDE or inside < MIN_ALPHA_PIXELS:
        return CutoutResult(None, box, coverage, f"the object is too small ({width}x{height} box, {inside} pixels)")
    rgba = image.convert("RGBA")
    rgba.putalpha(Image.fromarray(alpha))
    crop = rgba.crop(box)
    if bool((np.asarray(crop.getchannel("A")) == 255).all()):
        framed = Image.new("RGBA", (crop.width + 2, crop.height + 2), (0, 0, 0, 0))
        framed.paste(crop, (1, 1))
        crop = framed
    return CutoutResult(crop, box, coverage)
