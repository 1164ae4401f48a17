"""A model whose float tensors are BF16 (`ds4 gguf tiny --quant bf16`, the type llama.cpp's
converter writes for the embedding, compressor and indexer) loads and computes the same
logits as its exact F32 widening (every BF16 tensor rewritten as the F32 values it
holds): bit-identical on the reference engine in fp32 numerics (both decode to the same
f32 matrices), and on the cpu backend within f32 accumulation-order noise (the BF16 and
F32 dot kernels sum in different orders: max |Δlogit| <= 1e-5 * max |logit| + 1e-6)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.integration.engine_cpu.conftest import make_tiny

from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.adapters.compute.reference import open_reference_runner
from ds4.adapters.gguf.model_files import load_model
from ds4.adapters.gguf.writer import GGUFWriter
from ds4.domain.gguf.ggml_types import GGMLType


def widen_to_f32(src: Path, dst: Path) -> Path:
    """dst: src with every BF16 tensor stored as F32 (the same values, exactly)."""
    model, _ = load_model(str(src))
    writer = GGUFWriter(dst, alignment=model.alignment)
    for key, value in model.metadata.items():
        if key != "general.alignment":
            writer.add_metadata(key, value)
    for name, info in model.tensors.items():
        kind = GGMLType.F32 if info.ggml_type is GGMLType.BF16 else info.ggml_type
        writer.add_tensor(name, info.dims, kind)
    for name, info in model.tensors.items():
        raw = np.ascontiguousarray(model.raw(name))
        if info.ggml_type is GGMLType.BF16:
            raw = (raw.view("<u2").astype(np.uint32) << 16).view(np.uint8)
        writer.write_tensor(name, raw)
    writer.finish()
    model.close()
    return dst


@pytest.fixture(scope="module")
def bf16_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("bf16")
    bf16 = make_tiny(root / "bf16.gguf", "bf16")
    return bf16, widen_to_f32(bf16, root / "widened.gguf")


def test_the_float_tensors_are_bf16(bf16_pair: tuple[Path, Path]) -> None:
    model, _ = load_model(str(bf16_pair[0]))
    kinds = {i.ggml_type for i in model.tensors.values()}
    assert GGMLType.BF16 in kinds and kinds <= {GGMLType.BF16, GGMLType.F32, GGMLType.I32}
    assert model.tensors["token_embd.weight"].ggml_type is GGMLType.BF16
    model.close()


def test_reference_logits_equal_the_f32_widening(
    bf16_pair: tuple[Path, Path], prompt: list[int]
) -> None:
    got, want = (
        open_reference_runner(str(p), numerics="fp32").new_session(len(prompt))
        .prefill(prompt, all_logits=True)
        for p in bf16_pair
    )  # fmt: skip
    assert np.array_equal(got, want)


@pytest.mark.parametrize("numerics", ["fp32", "ds4"])
@pytest.mark.parametrize("impl", ["scalar", "auto"])
def test_cpu_logits_match_the_f32_widening(
    bf16_pair: tuple[Path, Path], prompt: list[int], impl: str, numerics: str
) -> None:
    got, want = (
        open_cpu_runner(str(p), numerics=numerics, impl=impl).new_session(len(prompt))
        .prefill(prompt, all_logits=True)
        for p in bf16_pair
    )  # fmt: skip
    gap = float(np.abs(got - want).max())
    assert gap <= 1e-5 * float(np.abs(want).max()) + 1e-6, gap
    assert np.array_equal(got.argmax(axis=1), want.argmax(axis=1))
