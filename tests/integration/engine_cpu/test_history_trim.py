"""Bounded per-token history: sessions forget rewind history older than their window,
without changing a single logit, and rewinds below it fall back to a recompute."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute.cpu import CpuRunner, open_cpu_runner
from ds4.adapters.compute.cpu.sequence_state import CpuState
from ds4.adapters.compute.reference import ReferenceRunner, open_reference_runner
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error

_lib = _native_cpu.lib

N = 600
HISTORY = 40


@pytest.fixture(scope="module")
def tokens() -> list[int]:
    return [int(t) for t in np.random.default_rng(9).integers(0, 129_280, N)]


def session(path: Path, history: int, backend: str = "cpu") -> EngineSession:
    runner = (
        open_cpu_runner(str(path), numerics="ds4")
        if backend == "cpu"
        else open_reference_runner(str(path), numerics="ds4")
    )
    assert isinstance(runner, CpuRunner | ReferenceRunner)
    made = runner.new_session(1024, rewind_history=history)
    assert isinstance(made, EngineSession)
    return made


def kept(live: EngineSession) -> tuple[int, int]:
    """(most per-token compressor input rows any layer keeps, lowest raw-row base)."""
    state = live.state
    assert isinstance(state, CpuState)
    layers = range(state.n_layer)
    inputs = [_lib.DS4_SEQ_ATTN_KV, _lib.DS4_SEQ_INDEX_KV]
    most = max(state.kept_rows(il, which)[0].shape[0] for il in layers for which in inputs)
    return most, min(state.kept_rows(il, _lib.DS4_SEQ_RAW)[1] for il in layers)


@pytest.mark.parametrize("backend", ["cpu", pytest.param("reference", marks=pytest.mark.slow)])
def test_trimmed_history_changes_no_logit(
    tiny_all_kinds: Path, tiny_q2: Path, tokens: list[int], backend: str
) -> None:
    """cpu: 600 tokens on every layer kind with 40 tokens of history; reference (slow):
    140 on the two-layer model (window 16, ratio 4 + indexer)."""
    model = tiny_all_kinds if backend == "cpu" else tiny_q2
    full, short = session(model, 10_000, backend), session(model, HISTORY, backend)
    n = N if backend == "cpu" else 140
    chunks = [tokens[:100], *[[t] for t in tokens[100:n]]]
    for chunk in chunks:
        assert np.array_equal(full.prefill(chunk, all_logits=True),
                              short.prefill(chunk, all_logits=True))  # fmt: skip
    assert full.payload() == short.payload()
    if backend == "cpu":  # 600 tokens: the kept history stopped growing
        most, raw_base = kept(short)
        assert most <= 2 * (128 + 64)  # widest frontier + trim slack, doubled (amortised)
        assert raw_base > 0


def test_rewinds_within_and_beyond_the_history(tiny_all_kinds: Path, tokens: list[int]) -> None:
    short = session(tiny_all_kinds, HISTORY)
    whole = short.prefill(tokens[:100], all_logits=True)
    whole = np.concatenate([whole, [short.eval(t) for t in tokens[100:300]]])
    assert kept(short)[1] >= 100  # trimmed while decoding
    near = 290
    assert short.rewind_floor(near) == near
    short.rewind(near)
    assert np.array_equal(short.logits(), whole[near - 1])
    assert short.rewind_floor(90) == 0  # its rows are gone: only a recompute gets there
    with pytest.raises(Ds4Error, match="cannot rewind exactly"):
        short.rewind(90)


def test_a_restore_point_is_forgotten_once_trimmed_away(
    tiny_all_kinds: Path, tokens: list[int]
) -> None:
    live = session(tiny_all_kinds, HISTORY)
    live.prefill(tokens[:150])
    restored = session(tiny_all_kinds, HISTORY)
    restored.load_payload(live.payload())
    assert restored.rewind_floor(150) == 150
    for t in tokens[150:400]:
        restored.eval(t)
    want = session(tiny_all_kinds, 10_000)
    assert np.array_equal(restored.logits(), want.prefill(tokens[:400]))
    assert restored.rewind_floor(150) == 0
