"""Our reference vision encoder against llama.cpp's (libmtmd, deepseek4v) on tiny random
encoders from `ds4 gguf tiny-vision` (docs/vision.md §6): the same token block layout
(lead pads, START, rows with NEWLINE, PAD rows, END) and embeddings within fp32 noise,
on square, odd-row, upscaled, capped and extreme-aspect images, in one prompt: images
only (no text model), and images after texts of 0 to 4 words (the tiny main model as
mtmd's tokenizer), which puts every lead padding 0..3 to the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ds4.apps import wiring
from ds4.domain.vision.preprocess import RGBImage

from .conftest import Peer

pytestmark = pytest.mark.slow
RUNNER = Path(__file__).with_name("mtmd_run.py")
# Measured: at most 2.9e-6 on rows up to ~3.4 (F32 encoders, the sizes below).
ATOL = 5e-5
# (width, height): exact fit, odd grid rows, upscaled, 10:1 stretched, 1:20 padded,
# capped at 384 tokens, exactly 8:1, just under 8:1, 20:1, 1:233.
SIZES = [(84, 84), (50, 70), (13, 9), (400, 40), (30, 600), (1000, 900), (600, 75),
         (599, 75), (2000, 100), (3, 700)]  # fmt: skip
TEXTS = ["", "a", "a b", "a b c", "a b c d"] * 2  # one before each image


def _mtmd(peer: Peer) -> Path:
    if not (peer.lib / "libmtmd.so").is_file():
        pytest.skip(f"no libmtmd.so in {peer.lib} (cmake --build ... --target llama-mtmd-cli)")
    return peer.lib


def _tiny(tmp_path: Path, *flags: str) -> Path:
    out = tmp_path / "mmproj.gguf"
    cmd = [sys.executable, "-m", "ds4", "gguf", "tiny-vision", "--out", str(out), *flags]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return out


def _theirs(
    peer: Peer,
    mmproj: Path,
    images: list[np.ndarray],
    n_embd: int,
    tmp_path: Path,
    text_model: Path | None,
) -> list[tuple[int, np.ndarray]]:
    """(prompt positions before the image, its block's embeddings) per image."""
    arrays: dict[str, Any] = {f"img{i}": im for i, im in enumerate(images)}
    np.savez(tmp_path / "images.npz", **arrays)
    env = dict(os.environ, LLAMA_CPP_LIB_PATH=str(peer.lib))
    env["DS4_LLAMACPP_BINDING"] = str(peer.binding)
    args = [sys.executable, str(RUNNER), str(mmproj), str(tmp_path / "images.npz"),
            str(tmp_path / "out.npz"), "--n-embd", str(n_embd)]  # fmt: skip
    if text_model is not None:
        args += ["--model", str(text_model), "--texts", json.dumps(TEXTS[: len(images)])]
    result = subprocess.run(
        args, capture_output=True, text=True, errors="replace", env=env, check=False
    )
    assert result.returncode == 0, f"libmtmd failed:\n{result.stderr[-3000:]}"
    data = np.load(tmp_path / "out.npz")
    return [(int(data[f"before{i}"]), data[f"emb{i}"]) for i in range(len(images))]


@pytest.fixture(scope="module")
def text_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny main model (width 256, the tiny encoders' output): mtmd's tokenizer."""
    out = tmp_path_factory.mktemp("text") / "tiny.gguf"
    cmd = [sys.executable, "-m", "ds4", "gguf", "tiny", "--out", str(out), "--preset",
           "tiny-2layer", "--quant", "q8", "--quiet"]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return out


@pytest.mark.parametrize(
    ("flags", "with_text"),
    [((), True), (("--no-vit-bias", "--seed", "7"), False)],
    ids=["bias-after-text", "nobias-images-only"],
)
def test_reference_encoder_equals_llamacpp(
    peer: Peer,
    tmp_path: Path,
    flags: tuple[str, ...],
    with_text: bool,
    request: pytest.FixtureRequest,
) -> None:
    _mtmd(peer)
    mmproj = _tiny(tmp_path, *flags)
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for w, h in SIZES]
    encoder = wiring.vision_encoder(str(mmproj))
    model = request.getfixturevalue("text_model") if with_text else None
    theirs = _theirs(peer, mmproj, images, encoder.hparams.n_embd_out, tmp_path, model)
    worst, leads = 0.0, set()
    for (w, h), image, (n_past, peer_rows) in zip(SIZES, images, theirs, strict=True):
        encoded = encoder.encode(RGBImage(image))
        leads.add(encoded.layout(n_past).lead)
        rows, slots = encoded.block(n_past)
        assert rows.shape == peer_rows.shape, f"{w}x{h}: block {rows.shape} vs {peer_rows.shape}"
        sentinel = slots < 0  # the learned rows are copied: exactly equal where they sit
        np.testing.assert_array_equal(rows[sentinel], peer_rows[sentinel], err_msg=f"{w}x{h}")
        gap = float(np.abs(rows - peer_rows).max())
        assert gap < ATOL, f"{w}x{h}: largest gap {gap}"
        worst = max(worst, gap)
    print(f"largest gap over {len(SIZES)} images: {worst:.3g}, leads {sorted(leads)}")
    # images alone leave every later block a lead of 2 (a block's body is a multiple of
    # 4 long); the texts move it through every value
    assert leads == ({0, 1, 2, 3} if with_text else {2, 3})
