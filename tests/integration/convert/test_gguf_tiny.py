"""`ds4 gguf tiny`: deterministic, valid, every layer kind, the real tokenizer."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ds4.adapters.gguf.reader import GGUFFile
from ds4.adapters.quant.numpy_codec import NumpyDequantizer
from ds4.domain.gguf.ggml_types import GGMLType


def ds4(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ds4", *args], capture_output=True, text=True)


def make(path: Path, *flags: str) -> Path:
    result = ds4("gguf", "tiny", "--out", str(path), "--quiet", *flags)
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture(scope="module")
def tiny_q2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make(tmp_path_factory.mktemp("tiny") / "tiny.gguf", "--seed", "3")


def test_tiny_q2_validates_with_every_layer_kind(tiny_q2: Path) -> None:
    result = ds4("gguf", "inspect", str(tiny_q2), "--json")
    assert result.returncode == 0, result.stdout
    report = json.loads(result.stdout)
    kinds = {(r["compress_ratio"], r["indexer"], r["routing"]) for r in report["layers"]}
    assert kinds == {(0, False, "hash"), (4, True, "hash"), (128, False, "top-k"),
                     (4, True, "top-k")}  # fmt: skip
    assert report["provenance"]["ds4.convert.seed"] == 3
    assert report["tokenizer"]["vocab_size"] == report["hparams"]["n_vocab"]
    types = {t["name"]: t["type"] for r in report["layers"] for t in r["tensors"]}
    assert types["blk.4.ffn_gate_exps.weight"] == "IQ2_XXS"
    assert types["blk.4.ffn_down_exps.weight"] == "Q2_K"


def test_tiny_weights_are_sane(tiny_q2: Path) -> None:
    with GGUFFile(tiny_q2) as f:
        deq = NumpyDequantizer()
        q_a = deq.dequantize(f.raw("blk.0.attn_q_a.weight"), GGMLType.Q8_0)
        x = np.random.default_rng(0).standard_normal(q_a.shape[1], dtype=np.float32)
        assert 0.5 < float(np.std(q_a @ x)) < 2.0  # unit input stays near unit scale
        norm = f.raw("blk.0.attn_norm.weight").view("<f4")
        assert abs(float(norm.mean()) - 1.0) < 0.05
        ids = f.raw("blk.0.ffn_gate_tid2eid.weight").view("<i4")
        assert ids.shape == (129280, 2)
        assert (ids[:, 0] != ids[:, 1]).all() and ids.min() >= 0 and ids.max() < 8


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    flags = ("--preset", "tiny-2layer", "--quant", "q8")
    a = make(tmp_path / "a.gguf", "--seed", "5", *flags)
    b = make(tmp_path / "b.gguf", "--seed", "5", *flags)
    c = make(tmp_path / "c.gguf", "--seed", "6", *flags)
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b, c)]
    assert digest[0] == digest[1] != digest[2]


def test_preset_that_cannot_fit_is_a_clear_error(tmp_path: Path) -> None:
    result = ds4("gguf", "tiny", "--out", str(tmp_path / "x.gguf"), "--quant", "q2-q4",
                 "--q4-last-layers", "99")  # fmt: skip
    assert result.returncode == 2
    assert "--q4-last-layers 99 is outside 0..6" in result.stderr
    assert not (tmp_path / "x.gguf").exists()
