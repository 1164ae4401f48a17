"""Q8_0 / Q8_K activation quantization on the device == the engine's host quantizers, bit for
bit (codes, f32 scales, Q8_K block sums), and written where the ds4-numerics products
read them."""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import weight_rows

from ds4.adapters.compute.vulkan.runtime import Recorder, VulkanRuntime
from ds4.adapters.compute.vulkan.weights import (
    activation_buffers,
    kernel_tables,
    matmul_q8,
    quantize,
    record_matmul_q8,
    record_quantize_for,
    upload_weights,
)
from ds4.domain.engine_math import quant_dots as host
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType


def _inputs(kind: str, n_tok: int, cols: int, block: int) -> np.ndarray:
    rng = np.random.default_rng(cols + n_tok)
    if kind == "random":
        # magnitudes over many binades, so the scale divisions meet many roundings
        mag = np.exp2(rng.integers(-60, 60, (n_tok, cols // block, 1)))
        return (rng.standard_normal((n_tok, cols)).reshape(n_tok, -1, block) * mag).reshape(
            n_tok, cols).astype(np.float32)  # fmt: skip
    if kind == "zero":
        x = rng.standard_normal((n_tok, cols)).astype(np.float32)
        x[:, :block] = 0.0  # a whole zero block next to ordinary ones
        x[-1, block : 2 * block] = -0.0 if cols >= 2 * block else x[-1, block : 2 * block]
        return x
    if kind == "ties":
        # amax 127 gives d = 1 and inv = 1 (Q8_0); mx = -127 gives iscale = 1 (Q8_K), so
        # k + 0.5 lands exactly on a rounding tie: half to even, as rint does.
        halves = (rng.integers(-126, 126, (n_tok, cols)) + 0.5).astype(np.float32)
        halves.reshape(n_tok, -1, block)[..., 0] = -127.0
        return halves
    if kind == "huge":
        x = (rng.standard_normal((n_tok, cols)) * 1e37).astype(np.float32)
        x.reshape(n_tok, -1, block)[..., 3] = np.float32(3.0e38)
        x.reshape(n_tok, -1, block)[..., 5] = np.float32(-3.0e38)  # |equal|: the first wins
        return x
    raise AssertionError(kind)


def _assert_same(got: host.QuantizedActivation, want: host.QuantizedActivation) -> None:
    assert np.array_equal(got.codes, want.codes.reshape(got.codes.shape))
    assert np.array_equal(got.scales.view(np.uint32), want.scales.view(np.uint32))
    if want.bsums is not None:
        assert got.bsums is not None
        assert np.array_equal(got.bsums, want.bsums.reshape(got.bsums.shape))


@pytest.mark.parametrize("kind", ["random", "zero", "ties", "huge"])
@pytest.mark.parametrize("shape", [(1, 32), (3, 96), (9, 4096)])
def test_q8_0_is_bit_identical(vk: VulkanRuntime, kind: str, shape: tuple[int, int]) -> None:
    x = _inputs(kind, *shape, 32)
    _assert_same(quantize(x, 32, rt=vk), host.quantize_q8_0(x))


@pytest.mark.parametrize("kind", ["random", "zero", "ties", "huge"])
@pytest.mark.parametrize("shape", [(1, 256), (2, 768), (9, 4096)])
def test_q8_k_is_bit_identical(vk: VulkanRuntime, kind: str, shape: tuple[int, int]) -> None:
    x = _inputs(kind, *shape, 256)
    _assert_same(quantize(x, 256, rt=vk), host.quantize_q8_k(x))


def test_scale_division_rounds_like_the_host_over_many_values(vk: VulkanRuntime) -> None:
    # Many single blocks of one value: d = amax/127 and iscale = -127/mx over random
    # significands and exponents, including subnormal-free tiny and huge ones.
    rng = np.random.default_rng(5)
    vals = (rng.uniform(1, 2, 4096) * np.exp2(rng.integers(-118, 127, 4096))).astype(np.float32)
    vals *= np.where(rng.random(4096) < 0.5, -1, 1).astype(np.float32)
    x0 = np.zeros((4096, 32), np.float32)
    x0[:, 7] = vals
    _assert_same(quantize(x0, 32, rt=vk), host.quantize_q8_0(x0))
    xk = np.zeros((4096, 256), np.float32)
    xk[:, 100] = vals
    xk[:, 101] = vals * np.float32(0.37)
    _assert_same(quantize(xk, 256, rt=vk), host.quantize_q8_k(xk))


def test_bad_shapes_are_refused(vk: VulkanRuntime) -> None:
    with pytest.raises(Ds4Error, match="whole blocks"):
        quantize(np.ones((2, 48), np.float32), 32, rt=vk)
    with pytest.raises(Ds4Error, match="whole blocks"):
        quantize(np.ones((2, 128), np.float32), 256, rt=vk)
    with pytest.raises(Ds4Error, match="n_tok, cols"):
        quantize(np.ones(64, np.float32), 32, rt=vk)


@pytest.mark.parametrize("ggml_type", [GGMLType.Q8_0, GGMLType.Q2_K, GGMLType.IQ2_XXS])
def test_quantize_then_product_in_one_submission(vk: VulkanRuntime, ggml_type: GGMLType) -> None:
    n_tok, rows, cols = 3, 37, 512
    x = np.random.default_rng(2).standard_normal((n_tok, cols)).astype(np.float32)
    w = upload_weights(weight_rows(ggml_type, rows, cols, seed=3), ggml_type, cols, rt=vk)
    want = matmul_q8(w, x)  # host quantizer feeding the same product kernel
    xb = vk.host_buffer(x.nbytes)
    xb.write(x)
    acts = activation_buffers(w, n_tok)
    out = vk.host_buffer(want.nbytes)
    tables = kernel_tables(vk, w)

    def record(rec: Recorder) -> None:
        record_quantize_for(rec, w, xb, acts, n_tok)
        rec.barrier()
        record_matmul_q8(rec, w, acts, n_tok, tables)
        rec.barrier()
        rec.copy(acts[2], out, want.nbytes)

    vk.run(record)
    got = out.read(np.float32, want.size).reshape(want.shape)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    for buf in [xb, out, *acts]:
        buf.release()
    w.release()
