"""Several sessions evaluated in one native pass (ModelRunner.eval_batch): each
session's logits are bit-identical to evaluating it alone, whatever it shares the pass
with (decode rows of other sessions, another session's prefill chunk)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.adapters.compute.reference import open_reference_runner
from ds4.domain.errors import Ds4Error
from ds4.ports.compute import ModelRunner

CTX = 512


@pytest.fixture(scope="module")
def streams() -> list[list[int]]:
    rng = np.random.default_rng(21)
    return [[int(t) for t in rng.integers(0, 129_280, 200)] for _ in range(3)]


def alone(runner: ModelRunner, prompt: list[int], steps: list[int]) -> np.ndarray:
    s = runner.new_session(CTX)
    s.prefill(prompt)
    return np.stack([s.eval(t) for t in steps])


@pytest.mark.parametrize("numerics", ["exact", "ds4"])
def test_batched_decode_equals_each_session_alone(
    tiny_all_kinds: Path, streams: list[list[int]], numerics: str
) -> None:
    """Three sessions at different lengths (7, 60, 130 tokens: before and after the
    window wraps and compressed rows appear) decode 70 steps together."""
    runner = open_cpu_runner(str(tiny_all_kinds), numerics=numerics)
    starts = [7, 60, 130]
    sessions = [runner.new_session(CTX) for _ in starts]
    for s, stream, n in zip(sessions, streams, starts, strict=True):
        s.prefill(stream[:n])
    got: list[list[np.ndarray]] = [[] for _ in starts]
    for step in range(70):
        out = runner.eval_batch(
            sessions, [[stream[n + step]] for stream, n in zip(streams, starts, strict=True)]
        )
        for rows, logits in zip(got, out, strict=True):
            rows.append(logits.copy())
    for rows, stream, n in zip(got, streams, starts, strict=True):
        want = alone(runner, stream[:n], stream[n : n + 70])
        assert np.array_equal(np.stack(rows), want)


def test_a_prefill_chunk_shares_the_pass_with_decode_rows(
    tiny_all_kinds: Path, streams: list[list[int]]
) -> None:
    runner = open_cpu_runner(str(tiny_all_kinds), numerics="exact")
    a, b = runner.new_session(CTX), runner.new_session(CTX)
    a.prefill(streams[0][:40])
    b.prefill(streams[1][:3])
    la, lb = runner.eval_batch([a, b], [streams[0][40:41], streams[1][3:90]])
    assert list(b.tokens) == streams[1][:90]
    assert np.array_equal(la, alone(runner, streams[0][:40], streams[0][40:41])[-1])
    ref = runner.new_session(CTX)
    assert np.array_equal(lb, ref.prefill(streams[1][:90]))
    # the sessions go on exactly as if they had been alone all along
    assert np.array_equal(b.eval(streams[1][90]), ref.eval(streams[1][90]))


def test_bad_batches_change_no_session(tiny_q2: Path, streams: list[list[int]]) -> None:
    runner = open_cpu_runner(str(tiny_q2), numerics="ds4")
    other = open_cpu_runner(str(tiny_q2), numerics="ds4")
    a, b = runner.new_session(CTX), runner.new_session(CTX)
    a.prefill(streams[0][:5])
    before = a.payload()
    for sessions, tokens, message in (
        ([a, a], [[1], [2]], "appears twice"),
        ([a, other.new_session(CTX)], [[1], [2]], "its own model runner"),
        ([a, b], [[1], []], "at least one token"),
        ([a, b], [[1], [10**9]], "outside the vocabulary"),
        ([a], [[1], [2]], "1 sessions but 2 token lists"),
    ):
        with pytest.raises(Ds4Error, match=message):
            runner.eval_batch(sessions, tokens)
        assert a.payload() == before and list(b.tokens) == []


def test_the_reference_runner_batches_one_session_at_a_time(
    tiny_q2: Path, streams: list[list[int]]
) -> None:
    runner = open_reference_runner(str(tiny_q2), numerics="ds4")
    a, b = runner.new_session(64), runner.new_session(64)
    a.prefill(streams[0][:6])
    la, lb = runner.eval_batch([a, b], [streams[0][6:7], streams[1][:4]])
    assert np.array_equal(la, alone(runner, streams[0][:6], streams[0][6:7])[-1])
    assert np.array_equal(lb, runner.new_session(64).prefill(streams[1][:4]))
