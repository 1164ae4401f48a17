"""FP8/FP4 rounding and the Hadamard rotation (docs/reference/model.md §2, §2.5)."""

from __future__ import annotations

import numpy as np

from ds4.domain.engine_math.lowprec import e2m1_round, e4m3_round, fp4_sim, fp8_kv_sim, hadamard128


def f32(*v: float) -> np.ndarray:
    return np.array(v, dtype=np.float32)


def test_e2m1_midpoints_tie_to_even_index() -> None:
    # docs/reference/model.md §2.5: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4
    got = e2m1_round(f32(0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -5.0, 9.0, 0.3))
    assert got.tolist() == [0, 1, 1, 2, 2, 4, 4, -4, 6, 0.5]


def test_e4m3_ties_to_even_mantissa_and_saturates() -> None:
    # 1 + 1/16 is halfway between 1 (m=0) and 1.125 (m=1) -> 1; 1 + 3/16 -> 1.25 (m=2)
    # 232 is halfway between 224 (m=6) and 240 (m=7) -> 224; beyond 448 saturates.
    got = e4m3_round(f32(1.0625, 1.1875, 232.0, 500.0, -500.0, 2.0**-10, 1.5 * 2.0**-9))
    assert got.tolist() == [1.0, 1.25, 224.0, 448.0, -448.0, 0.0, 2.0**-8]


def test_every_e4m3_value_is_a_fixed_point() -> None:
    codes = np.arange(127)
    e, m = codes >> 3, codes & 7
    values = np.where(e == 0, m * 2.0**-9, (1 + m / 8) * 2.0 ** (e - 7)).astype(np.float32)
    assert np.array_equal(e4m3_round(values), values)


def test_fp8_kv_sim_is_idempotent_and_spares_the_rope_tail() -> None:
    rng = np.random.default_rng(0)
    row = rng.normal(size=512).astype(np.float32) * 3
    once = fp8_kv_sim(row, 448)
    assert np.array_equal(fp8_kv_sim(once, 448), once)
    assert np.array_equal(once[448:], row[448:])
    assert not np.array_equal(once[:448], row[:448])
    # each 64-block: values are e4m3 values times a power of two scale
    block = once[:64]
    scale = 2.0 ** np.ceil(np.log2(np.abs(row[:64]).max() / 448))
    assert np.array_equal(e4m3_round(block / scale) * scale, block)


def test_fp4_sim_uses_a_power_of_two_scale_per_32_block() -> None:
    v = np.zeros(64, dtype=np.float32)
    v[0], v[1] = 12.0, 5.0  # amax 12 -> scale 2: 12/2 = 6, 5/2 = 2.5 -> 2 -> 4
    v[32] = 0.75  # amax 0.75 -> scale 2^ceil(log2(0.125)) = 0.125: 6 -> 0.75
    out = fp4_sim(v)
    assert out[0] == 12.0 and out[1] == 4.0 and out[32] == 0.75


def test_hadamard_is_orthonormal_and_an_involution() -> None:
    e0 = np.zeros(128, dtype=np.float32)
    e0[0] = 1
    assert np.allclose(hadamard128(e0), 1 / np.sqrt(128))
    e3 = np.zeros(128, dtype=np.float32)
    e3[3] = 1
    signs = np.array([(-1) ** bin(i & 3).count("1") for i in range(128)])
    assert np.allclose(hadamard128(e3), signs / np.sqrt(128))
    x = np.random.default_rng(1).normal(size=(3, 128)).astype(np.float32)
    assert np.allclose(hadamard128(hadamard128(x)), x, atol=1e-5)
