"""RoPE angles and YaRN ramp (docs/reference/model.md §2, §2.4)."""

from __future__ import annotations

import numpy as np

from ds4.domain.engine_math.layers import RopeParams, Yarn, apply_rope, rope_angles, yarn_ramp

FLASH_YARN = Yarn(factor=16, orig_ctx=65536, beta_fast=32, beta_slow=1)


def test_flash_ramp_is_15_to_25() -> None:
    ramp = yarn_ramp(64, 160000.0, FLASH_YARN)
    assert np.all(ramp[:16] == 1) and np.all(ramp[25:] == 0)
    assert np.allclose(ramp[16:25], [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], atol=1e-6)


def test_tiny_ramp_goes_from_0_to_2() -> None:
    ramp = yarn_ramp(16, 160000.0, Yarn(16, 64, 32, 1))
    assert ramp.tolist() == [1.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_iterated_angles_use_the_spec_ts() -> None:
    dense = rope_angles(np.array([1]), RopeParams(64, 10000.0, None), iterated=True)[0]
    assert dense[1] == np.float32(0.7498942)
    comp = rope_angles(np.array([1]), RopeParams(64, 160000.0, FLASH_YARN), iterated=True)[0]
    assert comp[1] == np.float32(0.68765604)
    # pair 30 is pure interpolation: th_ex / 16
    ts = np.float32(0.68765604)
    th = np.float32(1)
    for _ in range(30):
        th = np.float32(th * ts)
    assert comp[30] == np.float32(th * np.float32(1 / 16))


def test_iterated_and_direct_angles_agree_at_small_positions() -> None:
    rp = RopeParams(64, 160000.0, FLASH_YARN)
    pos = np.arange(0, 300)
    a = rope_angles(pos, rp, iterated=True)
    b = rope_angles(pos, rp, iterated=False)
    assert np.allclose(a, b, rtol=1e-5, atol=1e-5)


def test_rope_rotates_adjacent_pairs_of_the_tail_only() -> None:
    x = np.arange(8, dtype=np.float32).reshape(1, 8) + 1
    angles = np.array([[np.pi / 2, 0.0]], dtype=np.float32)
    out = apply_rope(x, angles, 4)
    assert np.array_equal(out[0, :4], x[0, :4])
    # pair (5, 6) rotated by 90 degrees -> (-6, 5); pair (7, 8) unchanged
    assert np.allclose(out[0, 4:], [-6, 5, 7, 8], atol=1e-6)
    back = apply_rope(out, angles, 4, inverse=True)
    assert np.allclose(back, x, atol=1e-6)
