"""An HF-style checkpoint whose indexer heads are 64 wide (not Flash's 128).

fp32 numerics run it on --backend cpu and agree with --backend reference; ds4/exact
numerics (whose indexer QAT is a 128-point Hadamard) are refused when the model opens,
in one line, by both backends.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tools.oracle.schedules import SCHEDULES
from tools.oracle.tiny_hf import build_model, save_hf

from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.adapters.compute.reference import open_reference_runner
from ds4.adapters.gguf.model_files import load_model
from ds4.domain.errors import Ds4Error

# Layers ratio 8, 4 (indexer, top-k 4) and 0; 96-wide heads with 32 RoPE dims keep the
# non-RoPE part a whole FP8 block, so only the indexer width rules ds4 numerics out.
SCHEDULE = dataclasses.replace(
    SCHEDULES["compressed_first"], name="index64", index_head_dim=64, head_dim=96,
    rope_head_dim=32,
)  # fmt: skip
N_TOKENS = 40  # 10 compressed rows by the end: the indexer keeps 4 of them


@pytest.fixture(scope="module")
def index64(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("index64")
    model, _ = build_model(SCHEDULE, SCHEDULE.seed)
    save_hf(model, out / "hf")
    gguf = out / "index64.gguf"
    result = subprocess.run(
        [sys.executable, "-m", "ds4", "gguf", "convert", "--hf", str(out / "hf"),
         "--out", str(gguf), "--quant", "f32", "--quiet"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return gguf


def test_the_model_has_64_wide_indexer_heads_and_selects(index64: Path) -> None:
    _, hp = load_model(str(index64))
    assert hp.indexer_head_dim == 64 and hp.head_dim == 96 and hp.n_rot == 32
    assert hp.indexer_top_k < N_TOKENS // 4  # more compressed rows than the indexer keeps


def test_fp32_cpu_agrees_with_the_reference(index64: Path) -> None:
    tokens = [int(t) for t in np.random.default_rng(3).integers(0, 129_280, N_TOKENS)]
    want = open_reference_runner(str(index64), numerics="fp32").new_session(N_TOKENS)
    got = open_cpu_runner(str(index64), numerics="fp32").new_session(N_TOKENS)
    a = want.prefill(tokens[:-4], all_logits=True)
    b = got.prefill(tokens[:-4], all_logits=True)
    a = np.concatenate([a, np.stack([want.eval(t) for t in tokens[-4:]])])
    b = np.concatenate([b, np.stack([got.eval(t) for t in tokens[-4:]])])
    assert np.abs(b - a).max() <= 1e-5 * max(1.0, float(np.abs(a).max()))


@pytest.mark.parametrize(
    ("backend", "numerics"), [("cpu", "ds4"), ("cpu", "exact"), ("reference", "ds4")]
)
def test_ds4_numerics_are_refused_at_open(index64: Path, backend: str, numerics: str) -> None:
    opener = open_cpu_runner if backend == "cpu" else open_reference_runner
    with pytest.raises(Ds4Error) as err:
        opener(str(index64), numerics=numerics)
    message = str(err.value)
    assert "\n" not in message
    assert message == (
        f"indexer head dim 64: --numerics {numerics} needs 128 (its indexer QAT is a "
        "128-point Hadamard); use --numerics fp32"
    )
