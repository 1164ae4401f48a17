"""llama-quantize's standard presets load in ds4 and run as in llama.cpp (issue 37).

The tiny-k model (every weight row a multiple of 256, so the K-quant presets need no
fallback type) is written as F16 by `ds4 gguf tiny`, quantized by the peer's own
llama-quantize with each preset, then run teacher-forced over the same tokens (a
passage of data/promessi_sposi.txt) by ds4 and by llama.cpp: the logits after every
position are compared. Measured: max |Δlogit| over all positions and the vocabulary,
the median and 90th percentile of the per-position max, and argmax agreement
(docs/performance.md has the table). The noise floor is the F16 source itself run by
both engines over the same positions (a random model has near-ties in its routing, so
the two engines' small differences grow over a long context): each preset must stay
within a margin of it.

One override: the tiny's ratio-128 compressor APE rows are 128 wide (head_dim), which
no K-quant fits, so llama-quantize would fall back to a legacy type there; it is kept
Q8_0 (DeepSeek V4's own rows are 512 wide and need no override)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import ds4.lib as ds4lib
from ds4.adapters.gguf.model_files import load_model
from ds4.domain.gguf.ggml_types import GGMLType

from .conftest import Peer

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
POSITIONS = 480  # within the peer runner's 512-token context
# A preset's median and 90th-percentile per-position gap may exceed the F16 file's by
# this factor plus this offset, and its argmax agreement fall short of F16's by 10%.
GAP_FACTOR, GAP_OFFSET = 1.5, 0.1
# preset -> a type llama-quantize must have written with it (the one the preset is for)
PRESETS = {
    "Q2_K": GGMLType.Q2_K,
    "Q3_K_S": GGMLType.Q3_K,
    "Q3_K_M": GGMLType.Q3_K,
    "Q3_K_L": GGMLType.Q3_K,
    "Q4_K_S": GGMLType.Q4_K,
    "Q4_K_M": GGMLType.Q4_K,
    "Q5_K_S": GGMLType.Q5_K,
    "Q5_K_M": GGMLType.Q5_K,
    "Q6_K": GGMLType.Q6_K,
    "Q8_0": GGMLType.Q8_0,
}


@dataclass(frozen=True)
class Gaps:
    per_position: np.ndarray  # max |delta logit| after each position
    agree: int  # positions with the same argmax

    @property
    def median(self) -> float:
        return float(np.median(self.per_position))

    @property
    def p90(self) -> float:
        return float(np.percentile(self.per_position, 90))


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kquants") / "tiny-k-f16.gguf"
    cmd = [sys.executable, "-m", "ds4", "gguf", "tiny", "--preset", "tiny-k", "--quant", "f16",
           "--out", str(path), "--quiet"]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return path


def quantize(peer: Peer, src: Path, out: Path, preset: str) -> None:
    tool = peer.lib / "llama-quantize"
    if not tool.is_file():
        pytest.skip(f"no llama-quantize in {peer.lib} (tools/peer/build_llamacpp.sh)")
    env = dict(os.environ, LD_LIBRARY_PATH=str(peer.lib))
    cmd = [str(tool), "--tensor-type", "attn_compressor_ape=q8_0", str(src), str(out), preset]
    result = subprocess.run(
        cmd, capture_output=True, text=True, errors="replace", env=env, check=False
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "fallback" not in result.stdout + result.stderr


def prompt(model: Path) -> list[int]:
    text = (ROOT / "data" / "promessi_sposi.txt").read_text(encoding="utf-8")[:6000]
    with ds4lib.open_model(model) as m:
        tokens = [m.special.bos, *m.tokenize(text)][:POSITIONS]
    assert len(tokens) == POSITIONS
    return tokens


def compare(peer: Peer, model: Path, tmp: Path) -> Gaps:
    tokens = prompt(model)
    ours = teacher_forced(model, tokens)
    theirs = peer.run(model, tokens, tmp / "peer.npz").logits
    agree = int((ours.argmax(-1) == theirs.argmax(-1)).sum())
    return Gaps(np.abs(ours - theirs).max(axis=-1), agree)


@pytest.fixture(scope="module")
def noise_floor(peer: Peer, source: Path, tmp_path_factory: pytest.TempPathFactory) -> Gaps:
    return compare(peer, source, tmp_path_factory.mktemp("f16"))


def teacher_forced(model: Path, tokens: list[int]) -> np.ndarray:
    with ds4lib.open_model(model, threads=2) as m:
        session = m.new_session(ctx=POSITIONS + 16)
        rows = []
        for i in range(len(tokens)):
            session.prefill(tokens[: i + 1])
            rows.append(np.array(session.logits()))
        return np.array(rows)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_preset_file_runs_in_ds4_as_in_llamacpp(
    peer: Peer, source: Path, noise_floor: Gaps, tmp_path: Path, preset: str
) -> None:
    model = tmp_path / f"tiny-k-{preset}.gguf"
    quantize(peer, source, model, preset)
    types = {t.ggml_type for t in load_model(str(model))[0].tensors.values()}
    assert PRESETS[preset] in types
    got, f16 = compare(peer, model, tmp_path), noise_floor
    row = [got.per_position.max(), got.median, got.p90, f16.median, f16.p90]
    print(f"| {preset} | " + " | ".join(f"{v:.3f}" for v in row) + f" | {got.agree} |")
    assert got.median <= GAP_FACTOR * f16.median + GAP_OFFSET
    assert got.p90 <= GAP_FACTOR * f16.p90 + GAP_OFFSET
    assert got.agree >= f16.agree - POSITIONS // 10
