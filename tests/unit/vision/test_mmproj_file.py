"""The deepseek4v mmproj layout (docs/vision.md §1): our tiny writer's file validates
and loads; bad keys, types, ranges and tensors are each reported, all at once."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from ds4.adapters.gguf.reader import GGUFFile
from ds4.adapters.gguf.vision_files import load_vision
from ds4.apps import wiring
from ds4.apps.gguf_tiny_vision import run_tiny_vision
from ds4.domain.convert.plan import Chunk, PlannedTensor
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.records import MetaValue, TensorInfo, ValueType
from ds4.domain.vision.catalog import validate_vision, vision_tensors
from ds4.domain.vision.hparams import vision_metadata
from ds4.domain.vision.presets import TINY_VISION_SHAPES

HP = TINY_VISION_SHAPES["tiny"]


def _args(out: Path, **kw: object) -> argparse.Namespace:
    base = {"out": str(out), "seed": 0, "preset": "tiny", "text_embd": None, "quant": "f32",
            "no_vit_bias": False}  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


def _directory() -> dict[str, TensorInfo]:
    return {
        s.name: TensorInfo(s.name, s.dims, GGMLType.F32, 0, 0)
        for s in vision_tensors(HP)
        if not s.optional
    }


def test_tiny_file_loads_with_the_preset_shape(tmp_path: Path) -> None:
    run_tiny_vision(_args(tmp_path / "a.gguf"))
    model, hp = load_vision(str(tmp_path / "a.gguf"))
    model.close()
    assert hp == dataclasses.replace(HP, eps=float(np.float32(HP.eps)))  # stored as f32


def test_tiny_writer_is_deterministic_and_seeded(tmp_path: Path) -> None:
    run_tiny_vision(_args(tmp_path / "a.gguf"))
    run_tiny_vision(_args(tmp_path / "b.gguf"))
    run_tiny_vision(_args(tmp_path / "c.gguf", seed=1))
    a, b, c = ((tmp_path / f"{n}.gguf").read_bytes() for n in "abc")
    assert a == b and a != c


def test_f16_and_width_flags(tmp_path: Path) -> None:
    run_tiny_vision(_args(tmp_path / "a.gguf", quant="f16", text_embd=96, no_vit_bias=True))
    with GGUFFile(tmp_path / "a.gguf") as f:
        assert f.tensors["mm.2.weight"].ggml_type is GGMLType.F16
        assert f.tensors["v.image_newline"].dims == (96,)
        assert "v.blk.0.attn_qkv.bias" not in f.tensors
    model, hp = load_vision(str(tmp_path / "a.gguf"))
    model.close()
    assert hp.n_embd_out == 96


def test_catalog_file_is_clean() -> None:
    report = validate_vision(vision_metadata(HP), _directory())
    assert report.ok and report.hparams == HP


def test_every_problem_is_reported_at_once() -> None:
    meta = vision_metadata(HP)
    meta["clip.projector_type"] = MetaValue(ValueType.STRING, "qwen2vl")
    meta["clip.vision.block_count"] = MetaValue(ValueType.INT32, 2)  # must be u32
    meta["clip.vision.patch_size"] = MetaValue(ValueType.UINT32, 100000)
    del meta["clip.vision.image_mean"]
    meta["clip.use_silu"] = MetaValue(ValueType.BOOL, False)
    report = validate_vision(meta, _directory())
    subjects = {p.subject for p in report.problems}
    assert not report.ok and report.hparams is None
    assert {"clip.projector_type", "clip.vision.block_count", "clip.vision.patch_size",
            "clip.vision.image_mean", "clip.use_silu"} <= subjects  # fmt: skip
    assert any("out of range" in p.message for p in report.problems)


def test_heads_must_split_into_quarters() -> None:
    meta = vision_metadata(dataclasses.replace(HP, n_head=3))
    report = validate_vision(meta, _directory())
    assert any("divisible by 4" in p.message for p in report.problems)


def test_tensor_problems() -> None:
    tensors = _directory()
    del tensors["mm.1.bias"]
    tensors["v.blk.0.ffn_up.weight"] = TensorInfo("v.blk.0.ffn_up.weight", (64, 95), GGMLType.F32,
                                                  0, 0)  # fmt: skip
    tensors["v.blk.0.ln1.weight"] = TensorInfo("v.blk.0.ln1.weight", (64,), GGMLType.F16, 0, 0)
    tensors["v.blk.0.attn_q_norm.weight"] = TensorInfo("v.blk.0.attn_q_norm.weight", (16,),
                                                       GGMLType.F32, 0, 0)  # fmt: skip
    report = validate_vision(vision_metadata(HP), tensors)
    text = {str(p) for p in report.problems}
    assert "mm.1.bias: missing" in text
    assert "v.blk.0.ffn_up.weight: dims [64, 95], expected [64, 96]" in text
    assert any(t.startswith("v.blk.0.ln1.weight: type F16") for t in text)
    assert any(t.startswith("v.blk.0.attn_q_norm.weight: unexpected") for t in text)


def test_a_main_model_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "x.gguf"
    path.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 40)
    with pytest.raises(Ds4Error) as err:
        load_vision(str(path))
    assert "\n" not in str(err.value) and "general.architecture: missing" in str(err.value)


def test_the_command_line_writes_a_loadable_file(tmp_path: Path) -> None:
    from ds4.apps.cli import main

    out = tmp_path / "cli.gguf"
    assert main(["gguf", "tiny-vision", "--out", str(out), "--preset", "tiny-1layer",
                 "--text-embd", "32"]) == 0  # fmt: skip
    model, hp = load_vision(str(out))
    model.close()
    assert (hp.n_layer, hp.n_embd_out) == (1, 32)


def test_inspect_reports_an_mmproj_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ds4.apps.cli import main

    out = tmp_path / "v.gguf"
    run_tiny_vision(_args(out))
    capsys.readouterr()
    assert main(["gguf", "inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "vision encoder (projector deepseek4v)" in text and "validation:   OK" in text
    assert main(["gguf", "inspect", "--json", str(out)]) == 0
    assert '"valid": true' in capsys.readouterr().out


def test_inspect_lists_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ds4.apps.cli import main

    meta = vision_metadata(HP)
    meta["clip.vision.projector.scale_factor"] = MetaValue(ValueType.UINT32, 2)  # mm.1 is 3x3
    plans = [PlannedTensor(s.name, s.dims, GGMLType.F32) for s in vision_tensors(HP)]
    out = tmp_path / "bad.gguf"
    wiring.write_model(out, meta, plans, lambda p: [Chunk(np.zeros(p.numpy_shape, np.float32))],
                       wiring.quantizer("numpy"))  # fmt: skip
    assert main(["gguf", "inspect", str(out)]) == 1
    text = capsys.readouterr().out
    assert "INVALID" in text and "mm.1.weight: dims [576, 128], expected [256, 128]" in text


def test_a_truncated_file_is_refused_in_one_line(tmp_path: Path) -> None:
    run_tiny_vision(_args(tmp_path / "a.gguf"))
    data = (tmp_path / "a.gguf").read_bytes()
    (tmp_path / "a.gguf").write_bytes(data[: len(data) // 2])
    with pytest.raises(Ds4Error) as err:
        load_vision(str(tmp_path / "a.gguf"))
    assert "runs past the end" in str(err.value) and "\n" not in str(err.value)
