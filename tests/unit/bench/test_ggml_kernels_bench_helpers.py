"""bench/ggml_kernels_bench.py's pure helpers: the alternating order of the sides, the
per-round ratio, the streamed copies, the "cache" rows and the --types rows."""

from __future__ import annotations

from collections import Counter

import numpy as np
from bench import ggml_kernels_bench as gkb

from ds4.domain.gguf.ggml_types import GGMLType


def test_every_side_runs_first_and_last_equally_often_over_two_n_rounds() -> None:
    for n in (2, 3, 4):
        orders = [gkb.round_order(r, n) for r in range(2 * n)]
        assert all(sorted(o) == list(range(n)) for o in orders)
        assert Counter(o[0] for o in orders) == dict.fromkeys(range(n), 2)
        assert Counter(o[-1] for o in orders) == dict.fromkeys(range(n), 2)


def test_the_ratio_is_the_median_of_the_per_round_speed_ratios() -> None:
    ours = [1.0, 1.0, 1.0]
    other = [2.0, 3.0, 100.0]  # one slow round of the other side does not move it
    assert gkb.median_ratio(ours, other) == 3.0
    assert gkb.median_ratio(other, ours) < 1.0


def test_streamed_copies_cover_the_stream_bytes_and_are_at_least_two() -> None:
    assert gkb.stream_copies(563_000_000, 768 << 20) == 2
    n = gkb.stream_copies(4_456_448, 960 << 20)
    assert n * 4_456_448 >= 960 << 20 > (n - 1) * 4_456_448


def test_cache_rows_are_whole_row_blocks_per_group_within_the_hot_bytes() -> None:
    for row in (*gkb.MIX, gkb.HEAD):
        row_bytes = {GGMLType.Q8_0: 34, GGMLType.IQ2_XXS: 66, GGMLType.Q2_K: 84}[row.kind]
        row_bytes = row.cols // (32 if row.kind is GGMLType.Q8_0 else 256) * row_bytes
        rows = gkb.hot_rows(row, row_bytes)
        assert rows % (32 * row.groups) == 0 and 0 < rows <= row.rows
        assert rows * row_bytes <= gkb.HOT_BYTES


def test_relative_error_is_against_the_reference_scale() -> None:
    ref = np.array([10.0, -20.0, 5.0], np.float32)
    got = np.array([10.0, -20.5, 5.25], np.float32)
    assert gkb.max_rel_err(got, ref) == 0.5 / 20


def test_types_rows_take_the_expert_shapes_and_skip_what_our_side_lacks() -> None:
    notes: list[str] = []
    rows = gkb.extra_rows(["Q4_K", "I8"], "experts", notes)
    assert [(r.name, r.kind, r.cols, r.rows) for r in rows] == [
        ("ffn_gate/up_exps", GGMLType.Q4_K, 4096, 2048),
        ("ffn_down_exps", GGMLType.Q4_K, 2048, 4096),
    ]
    assert len(notes) == 1 and notes[0].startswith("I8: skipped, our side lacks it")
    every = gkb.extra_rows(["Q4_K"], "all", [])
    assert [r.name for r in every] == [r.name for r in gkb.MIX]
