"""Steering directions: the file format, the scale rules, the projection and how a
direction is built from captures."""

from __future__ import annotations

import numpy as np
import pytest

from ds4.domain.errors import Ds4Error
from ds4.domain.steering.build import build_directions, prompt_lines
from ds4.domain.steering.directions import directions_from_bytes, steer_rows, steering_scales


def test_a_direction_file_is_n_layer_rows_of_n_embd_f32() -> None:
    rows = np.arange(8, dtype="<f4").reshape(2, 4)
    assert np.array_equal(directions_from_bytes(rows.tobytes(), "d.f32", 2, 4), rows)
    with pytest.raises(Ds4Error, match=r"d\.f32 has size 28 bytes, expected 32 bytes"):
        directions_from_bytes(rows.tobytes()[:-4], "d.f32", 2, 4)
    bad = rows.copy()
    bad[1, 2] = np.nan
    with pytest.raises(Ds4Error, match="NaN or infinite"):
        directions_from_bytes(bad.tobytes(), "d.f32", 2, 4)


def test_scale_rules() -> None:
    assert steering_scales(True, None, None) == (0.0, 1.0)  # ffn 1 by default with a file
    assert steering_scales(True, 0.5, None) == (0.5, 0.0)  # a scale given: the other is 0
    assert steering_scales(True, None, -2.0) == (0.0, -2.0)
    assert steering_scales(False, None, None) == (0.0, 0.0)
    assert steering_scales(False, 0.0, 0.0) == (0.0, 0.0)
    with pytest.raises(Ds4Error, match="directional steering needs --dir-steering-file"):
        steering_scales(False, None, 1.0)
    with pytest.raises(Ds4Error, match=r"-100\.\.100"):
        steering_scales(True, 101.0, None)


def test_scale_one_leaves_no_component_and_zero_changes_nothing() -> None:
    rng = np.random.default_rng(3)
    y = rng.standard_normal((5, 64)).astype(np.float32) * 3
    v = rng.standard_normal(64).astype(np.float32)
    v /= np.linalg.norm(v)
    out = steer_rows(y, v, 1.0)
    assert np.all(np.abs(out @ v) <= 1e-5 * np.linalg.norm(y, axis=1))
    assert np.array_equal(steer_rows(y, v, 0.0), y)
    twice = steer_rows(y, v, -1.0) @ v  # a negative scale amplifies: 2x the component
    assert np.allclose(twice, 2 * (y @ v), rtol=1e-5)


def test_directions_are_unit_and_orthogonal_to_the_contrast_mean() -> None:
    rng = np.random.default_rng(4)
    good = [rng.standard_normal((3, 16)).astype(np.float32) + 2 for _ in range(5)]
    bad = [rng.standard_normal((3, 16)).astype(np.float32) for _ in range(7)]
    d = build_directions(good, bad)
    assert d.shape == (3, 16)
    assert np.allclose(np.linalg.norm(d, axis=1), 1, atol=1e-6)
    bad_mean = np.mean(bad[:5], axis=0)
    assert np.all(np.abs(np.sum(d * bad_mean, axis=1)) < 1e-5 * np.linalg.norm(bad_mean, axis=1))
    plain = build_directions(good, bad, orthogonalize=False)
    want = np.mean(good, axis=0) - bad_mean
    assert np.allclose(plain, want / np.linalg.norm(want, axis=1, keepdims=True), atol=1e-6)
    paired = build_directions(good, bad, pair_normalize=True, orthogonalize=False)
    assert np.allclose(np.linalg.norm(paired, axis=1), 1, atol=1e-6)
    with pytest.raises(Ds4Error, match="do not differ"):
        build_directions(good[:1], good[:1])


def test_prompt_files_skip_comments_and_blank_lines() -> None:
    assert prompt_lines("# c\n\n a \n#x\nb\n", "p") == ["a", "b"]
    with pytest.raises(Ds4Error, match="p: no prompts"):
        prompt_lines("# only\n", "p")
