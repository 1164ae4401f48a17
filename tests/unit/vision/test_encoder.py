"""The token block layout and the reference encoder's math (docs/vision.md §3, §4)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from ds4.apps import wiring
from ds4.apps.gguf_tiny_vision import run_tiny_vision
from ds4.domain.errors import Ds4Error
from ds4.domain.vision.encoder import merge_patches, rope_2d
from ds4.domain.vision.layout import BlockLayout, Slot, block_slots, lead_for
from ds4.domain.vision.preprocess import RGBImage

S, E, N, P = Slot.START, Slot.END, Slot.NEWLINE, Slot.PAD


def test_block_of_a_three_by_two_grid() -> None:
    # rows 0 and 1 interleaved column by column, a NEWLINE pair closing them
    assert block_slots(BlockLayout(3, 2, 1)).tolist() == [P, S, 0, 3, 1, 4, 2, 5, N, N, E]


def test_odd_rows_get_a_pad_row_and_odd_pairs_two_trailing_pads() -> None:
    # one grid row: its pair row is all PAD (no NEWLINE); a pair of rows of length 3
    # spans 3 slot pairs, an odd count, so two trailing PADs follow
    assert block_slots(BlockLayout(2, 1, 0)).tolist() == [S, 0, P, 1, P, N, P, P, P, E]
    assert BlockLayout(2, 2, 0).pad_last == 2
    assert block_slots(BlockLayout(2, 2, 0)).tolist() == [S, 0, 2, 1, 3, N, N, P, P, E]
    even = BlockLayout(3, 4, 3)  # row_len 4: no trailing pads
    assert even.pad_last == 0 and even.n_tokens == 3 + 1 + 4 * 4 + 1


def test_lead_puts_start_one_before_a_multiple_of_four() -> None:
    for n_past in range(12):
        assert (n_past + lead_for(n_past) + 1) % 4 == 0
    with pytest.raises(Ds4Error):
        BlockLayout(2, 2, 4)


def test_rope_2d_rotates_by_row_then_column() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 16), dtype=np.float32)
    rows, cols = np.array([0, 0, 5]), np.array([0, 7, 0])
    y = rope_2d(x, rows, cols)
    np.testing.assert_allclose(y[0], x[0], rtol=1e-6)  # position (0, 0): identity
    # a column move leaves the row quarter (pairs 0..3, dims 0..3 and 8..11) alone
    np.testing.assert_allclose(y[1][:, [0, 1, 2, 3, 8, 9, 10, 11]],
                               x[1][:, [0, 1, 2, 3, 8, 9, 10, 11]], rtol=1e-6)  # fmt: skip
    assert not np.allclose(y[2][:, :4], x[2][:, :4])
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)


def test_merge_is_channel_major_over_each_cell() -> None:
    c, px, py, r = 2, 4, 2, 3
    x = np.arange(px * py * c, dtype=np.float32).reshape(py * px, c)
    merged, gw, gh = merge_patches(x, px, py, r)
    assert (gw, gh) == (2, 1) and merged.shape == (2, c * r * r)
    cell0 = merged[0].reshape(c, r, r)  # [channel, dy, dx]
    assert cell0[1, 1, 2] == x[1 * px + 2, 1]
    assert (cell0[:, 2, :] == 0).all()  # rows past the grid are zero
    assert merged[1].reshape(c, r, r)[0, 0, 0] == x[3, 0]
    assert (merged[1].reshape(c, r, r)[:, :, 1:] == 0).all()


def test_reference_encoder_places_sentinels(tmp_path: Path) -> None:
    out = tmp_path / "v.gguf"
    run_tiny_vision(argparse.Namespace(out=str(out), seed=0, preset="tiny-1layer",
                                       text_embd=None, quant="f32", no_vit_bias=False))  # fmt: skip
    encoder = wiring.vision_encoder(str(out), backend="numpy")
    image = np.random.default_rng(1).integers(0, 256, (50, 70, 3), dtype=np.uint8)
    encoded = encoder.encode(RGBImage(image))
    assert (encoded.grid_w, encoded.grid_h) == (3, 2)
    rows, slots = encoded.block(n_past=6)
    assert rows.shape == (1 + 1 + 2 * 4 + 0 + 1, 256) and np.isfinite(rows).all()
    np.testing.assert_array_equal(rows[slots == Slot.START][0], encoded.sentinels.start)
    np.testing.assert_array_equal(rows[slots == Slot.NEWLINE][0], encoded.sentinels.newline)
    np.testing.assert_array_equal(rows[slots == 4][0], encoded.grid[4])
    again, _ = encoder.encode(RGBImage(image)).block(n_past=6)
    np.testing.assert_array_equal(rows, again)
