"""Snapshot semantics across backends: both write the shared DSV4 payload layout, so
payloads move both ways and restore-then-decode continues exactly; in-memory
checkpoints return to the exact state."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.support.strict_reference import use_strict_reference

from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.adapters.compute.reference import open_reference_runner
from ds4.domain.errors import Ds4Error
from ds4.ports.compute import ComputeSession, ModelRunner

CTX = 48


@pytest.fixture(scope="module")
def reference(tiny_q2: Path) -> ModelRunner:
    return open_reference_runner(str(tiny_q2), numerics="ds4")


def continue_with(session: ComputeSession, tokens: list[int]) -> np.ndarray:
    return np.stack([session.eval(t) for t in tokens])


def test_exact_payloads_are_interchangeable_with_the_strict_reference(
    tiny_q2: Path, reference: ModelRunner, prompt: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_strict_reference(monkeypatch)
    cpu = open_cpu_runner(str(tiny_q2), numerics="exact")
    head, tail = prompt[:21], prompt[21:]
    live_cpu, live_ref = cpu.new_session(CTX), reference.new_session(CTX)
    live_cpu.prefill(head)
    live_ref.prefill(head)
    cpu_payload, ref_payload = live_cpu.payload(), live_ref.payload()
    assert cpu_payload == ref_payload

    ref_from_cpu, cpu_from_ref = reference.new_session(CTX), cpu.new_session(CTX)
    ref_from_cpu.load_payload(cpu_payload)
    cpu_from_ref.load_payload(ref_payload)
    want = continue_with(live_cpu, tail)
    assert np.array_equal(continue_with(ref_from_cpu, tail), want)
    assert np.array_equal(continue_with(cpu_from_ref, tail), want)


def test_simd_payload_restores_exactly(
    tiny_q2: Path, reference: ModelRunner, prompt: list[int]
) -> None:
    cpu = open_cpu_runner(str(tiny_q2), numerics="ds4")
    live = cpu.new_session(CTX)
    live.prefill(prompt[:18])
    data = live.payload()

    in_reference = reference.new_session(CTX)  # the reference reads the cpu's payload ...
    in_reference.load_payload(data)
    assert list(in_reference.tokens) == prompt[:18]
    assert np.array_equal(in_reference.logits(), live.logits())
    assert in_reference.payload() == data  # ... and writes back the same bytes

    restored = cpu.new_session(CTX)
    restored.load_payload(data)
    assert np.array_equal(continue_with(restored, prompt[18:]), continue_with(live, prompt[18:]))


def test_rewind_and_chunking_are_exact_on_the_cpu_backend(tiny_q2: Path, prompt: list[int]) -> None:
    cpu = open_cpu_runner(str(tiny_q2), numerics="ds4")
    one_pass = cpu.new_session(CTX).prefill(prompt, all_logits=True)
    chunked = cpu.new_session(CTX).prefill(prompt, chunk=5, all_logits=True)
    stepped = cpu.new_session(CTX)
    by_token = np.stack([stepped.eval(t) for t in prompt])
    assert np.array_equal(chunked, one_pass)
    assert np.array_equal(by_token, one_pass)
    stepped.rewind(10)
    assert np.array_equal(stepped.logits(), one_pass[9])
    assert np.array_equal(stepped.eval(prompt[10]), one_pass[10])


def test_threads_do_not_change_results_and_bad_settings_are_errors(
    tiny_q2: Path, prompt: list[int]
) -> None:
    one = open_cpu_runner(str(tiny_q2), threads=1).new_session(CTX)
    two = open_cpu_runner(str(tiny_q2), threads=2).new_session(CTX)
    assert np.array_equal(one.prefill(prompt[:8]), two.prefill(prompt[:8]))
    assert np.array_equal(one.eval(prompt[8]), two.eval(prompt[8]))
    with pytest.raises(Ds4Error, match="threads"):
        open_cpu_runner(str(tiny_q2), threads=0)
    with pytest.raises(Ds4Error, match="not available"):
        open_cpu_runner(str(tiny_q2), impl="neon")
    with pytest.raises(Ds4Error, match="cannot open"):
        open_cpu_runner(str(tiny_q2) + ".missing")


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_in_memory_checkpoints_return_to_the_exact_state(
    tiny_q2: Path, reference: ModelRunner, prompt: list[int], backend: str
) -> None:
    """A checkpoint keeps the whole state, history included: decoding after a restore
    repeats the same logits, rewind floors are unchanged, and a sibling session of the
    same runner can take it."""
    runner = open_cpu_runner(str(tiny_q2), numerics="ds4") if backend == "cpu" else reference
    live = runner.new_session(CTX)
    live.prefill(prompt[:14])
    cp = live.checkpoint()
    assert cp.nbytes > 0 and list(cp.tokens) == prompt[:14]
    floors = [live.rewind_floor(m) for m in range(15)]
    assert [cp.rewind_floor(m) for m in range(15)] == floors  # compared without a restore
    first = continue_with(live, prompt[14:20])
    live.restore(cp)
    assert [live.rewind_floor(m) for m in range(15)] == floors
    assert np.array_equal(continue_with(live, prompt[14:20]), first)
    sibling = runner.new_session(CTX)
    sibling.restore(cp)
    assert np.array_equal(continue_with(sibling, prompt[14:20]), first)
    live.rewind(live.rewind_floor(16))  # rewinding after a restore stays exact
    assert list(live.tokens) == prompt[: len(live.tokens)]
    with pytest.raises(Ds4Error, match="another model runner"):
        open_cpu_runner(str(tiny_q2), numerics="ds4").new_session(CTX).restore(cp)


def test_a_native_checkpoint_holds_the_rows_in_use_not_the_spare_room(
    tiny_q2: Path, prompt: list[int]
) -> None:
    """Row arrays grow by doubling; a copy kept in memory takes only what is used (its
    bytes count against the server's checkpoint budget) and grows again when restored."""
    live = open_cpu_runner(str(tiny_q2), numerics="ds4").new_session(CTX)
    live.prefill(prompt[:10])  # 10 rows: the arrays have room for 16
    cp = live.checkpoint()
    assert cp.nbytes < live.state.nbytes
    first = continue_with(live, prompt[10:24])
    live.restore(cp)
    assert np.array_equal(continue_with(live, prompt[10:24]), first)
