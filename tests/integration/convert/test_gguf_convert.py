"""`ds4 gguf convert` on tiny DeepSeek V4 checkpoints made by the HF oracle tooling."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.support.safetensors_io import write_safetensors

from ds4.adapters.checkpoint import SafetensorsCheckpoint
from ds4.adapters.gguf.reader import GGUFFile
from ds4.adapters.quant.numpy_codec import NumpyDequantizer
from ds4.domain.convert.checkpoint_sources import gguf_target, hub_name
from ds4.domain.gguf.ggml_types import GGMLType


def ds4(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ds4", *args], capture_output=True, text=True)


def convert(src: Path, out: Path, *flags: str) -> Path:
    result = ds4("gguf", "convert", "--hf", str(src), "--out", str(out), "--quiet", *flags)
    assert result.returncode == 0, result.stderr
    return out


def values(f: GGUFFile, name: str) -> np.ndarray:
    info = f.tensors[name]
    if info.ggml_type is GGMLType.I32:
        return f.raw(name).view("<i4").reshape(info.numpy_shape)
    return NumpyDequantizer().dequantize(f.raw(name), info.ggml_type).reshape(info.numpy_shape)


def as_f32(ckpt: SafetensorsCheckpoint, name: str) -> np.ndarray:
    raw, dtype = ckpt.raw(name), ckpt.tensors[name].dtype
    if dtype == "BF16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(np.int32) if dtype.startswith("I") else raw.astype(np.float32)


@pytest.fixture(scope="module")
def converted(oracle_mixed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("conv")
    return {n: convert(oracle_mixed / n, out / f"{n}.gguf", "--quant", "f32")
            for n in ("hf", "official")}  # fmt: skip


def test_both_namings_give_the_same_valid_model(converted: dict[str, Path]) -> None:
    report = json.loads(ds4("gguf", "inspect", str(converted["hf"]), "--json").stdout)
    assert report["valid"], report["problems"]
    assert report["hparams"]["compress_ratios"] == [0, 0, 4, 16, 4]
    assert report["hparams"]["n_hash_layer"] == 3
    assert report["provenance"]["ds4.convert.source"] == "hf:hf"
    with GGUFFile(converted["hf"]) as a, GGUFFile(converted["official"]) as b:
        assert list(a.tensors) == list(b.tensors)
        for name in a.tensors:
            assert a.raw(name).tobytes() == b.raw(name).tobytes(), name


def test_f32_conversion_reproduces_every_hf_weight_exactly(
    oracle_mixed: Path, converted: dict[str, Path]
) -> None:
    ckpt = SafetensorsCheckpoint(oracle_mixed / "hf")
    with GGUFFile(converted["hf"]) as f:
        seen = set()
        for stored in ckpt.tensors:
            target = gguf_target(hub_name(stored))
            assert target is not None, stored
            got = values(f, target.gguf_name)
            if target.expert is not None:
                got = got[target.expert]
            np.testing.assert_array_equal(got, as_f32(ckpt, stored), err_msg=stored)
            seen.add(target.gguf_name)
        assert seen == set(f.tensors)  # nothing in the GGUF that did not come from HF


def test_layout_facts_checked_independently(oracle_mixed: Path, converted: dict[str, Path]) -> None:
    """Spot checks written from docs/oracle/hf_deepseek_v4.md's table, not our mapping code."""
    ckpt = SafetensorsCheckpoint(oracle_mixed / "hf")
    with GGUFFile(converted["hf"]) as f:
        pairs = {
            "output.weight": "head.weight",
            "token_embd.weight": "model.embed_tokens.weight",
            "output_hc_fn.weight": "model.hc_head.hc_fn",
            "blk.1.attn_kv_a_norm.weight": "model.layers.1.attn.norm.weight",
            "blk.2.indexer.proj.weight": "model.layers.2.attn.indexer.weights_proj.weight",
            "blk.3.attn_compressor_ape.weight": "model.layers.3.attn.compressor.ape",
            "blk.4.exp_probs_b.bias": "model.layers.4.ffn.gate.bias",
        }
        for gguf_name, hf in pairs.items():
            np.testing.assert_array_equal(values(f, gguf_name), as_f32(ckpt, hf), gguf_name)
        up = values(f, "blk.3.ffn_up_exps.weight")
        np.testing.assert_array_equal(up[5], as_f32(ckpt, "model.layers.3.ffn.experts.5.w3.weight"))
        ids = values(f, "blk.0.ffn_gate_tid2eid.weight")
        assert ids.dtype == np.int32
        np.testing.assert_array_equal(ids, ckpt.raw("model.layers.0.ffn.gate.tid2eid"))


def test_dump_equals_the_safetensors_tensor(
    oracle_mixed: Path, converted: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "q.npy"
    result = ds4("gguf", "dump", str(converted["official"]), "blk.2.attn_q_b.weight",
                 "--out", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr
    ckpt = SafetensorsCheckpoint(oracle_mixed / "official")
    np.testing.assert_array_equal(np.load(out), as_f32(ckpt, "layers.2.attn.wq_b.weight"))


def test_q8_converts_and_q2_names_the_misfit(oracle_mixed: Path, tmp_path: Path) -> None:
    q8 = convert(oracle_mixed / "hf", tmp_path / "q8.gguf", "--quant", "q8")
    assert ds4("gguf", "inspect", str(q8)).returncode == 0
    result = ds4("gguf", "convert", "--hf", str(oracle_mixed / "hf"), "--out",
                 str(tmp_path / "q2.gguf"), "--quant", "q2")  # fmt: skip
    assert result.returncode == 2
    assert "not a multiple of the IQ2_XXS block (256)" in result.stderr
    assert not (tmp_path / "q2.gguf").exists()


def _official_copy(src: Path, dst: Path) -> dict[str, tuple[str, np.ndarray]]:
    shutil.copytree(src, dst)
    (dst / "model.safetensors").unlink()
    ckpt = SafetensorsCheckpoint(src)
    return {n: (ckpt.tensors[n].dtype, np.array(ckpt.raw(n))) for n in ckpt.tensors}


def test_fp8_fp4_release_format_and_mtp(oracle_mixed: Path, tmp_path: Path) -> None:
    tensors = _official_copy(oracle_mixed / "official", tmp_path / "rel")
    rng = np.random.default_rng(0)
    # Dense FP8: wq_a of layer 0 is (64, 64): one 128x128 tile, scale 2^-3.
    codes = rng.integers(0, 126, (64, 64), dtype=np.uint8) | (
        rng.integers(0, 2, (64, 64), dtype=np.uint8) << 7
    )
    tensors["layers.0.attn.wq_a.weight"] = ("F8_E4M3", codes)
    tensors["layers.0.attn.wq_a.scale"] = ("F8_E8M0", np.array([[124]], dtype=np.uint8))
    # Routed experts FP4: layer 3, expert 1, w2 is (64, 32): 16 bytes a row, 1 scale a row.
    packed = rng.integers(0, 256, (64, 16), dtype=np.uint8)
    tensors["layers.3.ffn.experts.1.w2.weight"] = ("I8", packed.view(np.int8))
    tensors["layers.3.ffn.experts.1.w2.scale"] = ("F8_E8M0", np.full((64, 1), 126, np.uint8))
    # An MTP block: layer 4's tensors (top-k routed, ratio 0 parts only) plus MTP extras.
    for name, (dtype, arr) in list(tensors.items()):
        if name.startswith("layers.4.") and "compressor" not in name and "indexer" not in name:
            tensors["mtp.0." + name[len("layers.4.") :]] = (dtype, arr)
    d = 64
    for extra, shape in {"e_proj.weight": (d, d), "h_proj.weight": (d, d), "enorm.weight": (d,),
                         "hnorm.weight": (d,), "norm.weight": (d,), "hc_head_fn": (4, 4 * d),
                         "hc_head_base": (4,), "hc_head_scale": (1,)}.items():  # fmt: skip
        tensors["mtp.0." + extra] = ("F32", rng.standard_normal(shape).astype(np.float32))
    write_safetensors(tmp_path / "rel" / "model.safetensors", tensors)

    out = convert(tmp_path / "rel", tmp_path / "m.gguf", "--quant", "f32")
    with GGUFFile(out) as f:
        sign = np.where(codes & 0x80, -1.0, 1.0)
        e, m = (codes >> 3) & 15, (codes & 7).astype(np.float64)
        mag = np.where(e == 0, m * 2.0**-9, (1 + m / 8) * 2.0 ** (e - 7.0))
        want = (sign * mag * 2.0**-3).astype(np.float32)  # codes < 126: no NaN code drawn
        np.testing.assert_array_equal(values(f, "blk.0.attn_q_a.weight"), want)
        lo, hi = packed & 15, packed >> 4
        nibbles = np.stack([lo, hi], axis=-1).reshape(64, 32)
        fp4 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6] * 2) * np.repeat([1, -1], 8)
        np.testing.assert_array_equal(
            values(f, "blk.3.ffn_down_exps.weight")[1], (fp4[nibbles] * 0.5).astype(np.float32)
        )
    mtp = tmp_path / "m-mtp.gguf"
    report = json.loads(ds4("gguf", "inspect", str(mtp), "--json").stdout)
    assert report["kind"] == "mtp" and report["valid"], report["problems"]


def test_incomplete_or_foreign_checkpoints_are_named(oracle_mixed: Path, tmp_path: Path) -> None:
    tensors = _official_copy(oracle_mixed / "official", tmp_path / "bad")
    del tensors["layers.2.attn.wkv.weight"]
    del tensors["layers.1.ffn.experts.3.w1.weight"]
    write_safetensors(tmp_path / "bad" / "model.safetensors", tensors)
    args = ("gguf", "convert", "--hf", str(tmp_path / "bad"), "--out", str(tmp_path / "x"),
            "--quant", "f32")  # fmt: skip
    result = ds4(*args)
    assert result.returncode == 2
    assert "blk.2.attn_kv.weight" in result.stderr
    assert "blk.1.ffn_gate_exps.weight (has 7 of 8 experts)" in result.stderr
    tensors["layers.0.attn.mystery.weight"] = ("F32", np.zeros(4, np.float32))
    write_safetensors(tmp_path / "bad" / "model.safetensors", tensors)
    result = ds4(*args)
    assert "unrecognized checkpoint tensors: layers.0.attn.mystery.weight" in result.stderr
    assert "Traceback" not in result.stderr


def test_mxfp4_keeps_the_release_fp4_experts_exactly(oracle_mixed: Path, tmp_path: Path) -> None:
    """--quant mxfp4: an FP4 expert is repacked (its bytes are fp4_as_mxfp4's, its values
    the FP4 source's exactly); float experts are quantized as gguf-py would."""
    from ds4.domain.convert.checkpoint_sources import decode_fp4_groups, fp4_as_mxfp4

    tensors = _official_copy(oracle_mixed / "official", tmp_path / "rel")
    rng = np.random.default_rng(1)
    packed = rng.integers(0, 256, (64, 16), dtype=np.uint8)  # w2 (64, 32): one group a row
    scale = rng.choice(np.array([0, 1, 100, 120, 127, 130], np.uint8), (64, 1))
    tensors["layers.3.ffn.experts.1.w2.weight"] = ("I8", packed.view(np.int8))
    tensors["layers.3.ffn.experts.1.w2.scale"] = ("F8_E8M0", scale)
    write_safetensors(tmp_path / "rel" / "model.safetensors", tensors)
    out = convert(tmp_path / "rel", tmp_path / "m.gguf", "--quant", "mxfp4")
    with GGUFFile(out) as f:
        info = f.tensors["blk.3.ffn_down_exps.weight"]
        assert info.ggml_type is GGMLType.MXFP4
        raw = f.raw("blk.3.ffn_down_exps.weight").reshape(info.numpy_shape[0], 64, -1)
        assert np.array_equal(raw[1], fp4_as_mxfp4(packed, scale, "w2"))
        got = values(f, "blk.3.ffn_down_exps.weight")[1]
        np.testing.assert_array_equal(got, decode_fp4_groups(packed, scale, "w2"))
        assert f.tensors["blk.3.ffn_gate_shexp.weight"].ggml_type is GGMLType.Q8_0
    report = json.loads(ds4("gguf", "inspect", str(out), "--json").stdout)
    assert report["valid"], report["problems"]
