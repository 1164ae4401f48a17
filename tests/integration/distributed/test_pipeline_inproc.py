"""The distributed backend's coordinator logic with its workers in this process
(tests/support/inproc_stages.py): same bits as the single-process cpu backend for
prefill, decode, rewind, payloads and checkpoints; the prefix-hash invariant makes a
worker that lost or swapped a session refuse, and the session is replayed; a lost
worker fails the request with ComputeUnavailableError and the next one recovers."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from tests.integration.distributed.sessions import CTX, assert_same_session, greedy
from tests.support.inproc_stages import InProcessStages

from ds4.adapters.compute.ray import RayRunner, ray_runner
from ds4.adapters.compute.ray.pipeline import DistributedState, WorkerLostError
from ds4.adapters.compute.ray.runner import Slot, check_memory
from ds4.adapters.compute.ray.stage import LayerStage, StageSpec
from ds4.adapters.gguf.reader import GGUFFile
from ds4.domain.distributed import parse_target
from ds4.domain.errors import ComputeUnavailableError, Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ModelRunner

Demo = tuple[GGUFFile, DeepSeekV4HParams]


@pytest.fixture
def split(demo: Demo) -> Callable[..., RayRunner]:
    def make(target: str = "local:2", layer_split: str = "auto", piece: int = 8) -> RayRunner:
        return ray_runner(
            *demo, target=parse_target(target), layer_split=layer_split, numerics="exact",
            threads=1, piece=piece, make_stages=InProcessStages,
        )  # fmt: skip

    return make


@pytest.fixture(scope="module")
def split2(demo: Demo) -> RayRunner:
    """One two-range runner for the tests that need no other split: each opening of the
    model by a worker costs a second here, so the tests share the workers (sessions
    are independent; counters are read as differences)."""
    return ray_runner(
        *demo, target=parse_target("local:2"), numerics="exact", threads=1, piece=8,
        make_stages=InProcessStages,
    )  # fmt: skip


def stages_of(runner: RayRunner) -> InProcessStages:
    stages = runner.pipeline.stages
    assert isinstance(stages, InProcessStages)
    return stages


def state_of(session: object) -> DistributedState:
    state = session.state  # type: ignore[attr-defined]
    assert isinstance(state, DistributedState)
    return state


def test_prefill_decode_rewind_and_payloads_equal_the_cpu_backend(
    split: Callable[..., RayRunner], local_exact: ModelRunner, prompt: list[int]
) -> None:
    # 45 tokens in pieces of 7 through three ranges
    runner = split(target="local:3", layer_split="0-0,1-2,3-3", piece=7)
    stages = stages_of(runner)
    assert list(stages.ranges) == [range(0, 1), range(1, 3), range(3, 4)]
    one, many = local_exact.new_session(CTX), runner.new_session(CTX)
    want = one.prefill(prompt, all_logits=True)
    stages.events.clear()
    assert np.array_equal(many.prefill(prompt, all_logits=True), want)
    # pipelined: five pieces (the window: 3 ranges + 2) go to every range before the
    # coordinator waits for the first result
    first_get = next(i for i, e in enumerate(stages.events) if e[0] == "get")
    forwards = [("submit", k, "forward") for _ in range(5) for k in range(3)]
    assert stages.events[:first_get] == forwards
    want_tokens, want_logits = greedy(one, 12)
    got_tokens, got_logits = greedy(many, 12)
    assert got_tokens == want_tokens and np.array_equal(got_logits, want_logits)
    assert_same_session(one, many)

    one.rewind(50)
    many.rewind(50)
    assert_same_session(one, many)
    assert np.array_equal(one.eval(17), many.eval(17))

    # payloads move both ways between the split and the single-process backend
    assert runner.new_session(CTX).payload() == local_exact.new_session(CTX).payload()
    into_split, into_local = runner.new_session(CTX), local_exact.new_session(CTX)
    into_split.load_payload(one.payload())
    into_local.load_payload(many.payload())
    assert np.array_equal(into_split.eval(23), one.eval(23))
    assert np.array_equal(into_local.eval(23), many.eval(23))
    assert_same_session(into_split, one)

    # a checkpoint returns to the exact state, also in a sibling session
    mark = many.checkpoint()
    many.eval(5)
    sibling = runner.new_session(CTX)
    sibling.restore(mark)
    many.restore(mark)
    assert np.array_equal(many.eval(31), sibling.eval(31))
    assert np.array_equal(many.logits(), one.eval(31))


def test_rewind_floors_follow_the_bounded_history(
    split2: RayRunner, local_exact: ModelRunner
) -> None:
    """With a short rewind history the workers trim their rows as the local state does,
    so the exact rewind floors (and the logits after a rewind) are the same."""
    runner = split2
    tokens = [int(t) for t in np.random.default_rng(6).integers(100, 6000, 240)]
    one = local_exact.new_session(400, rewind_history=8)  # type: ignore[call-arg]
    many = runner.new_session(400, rewind_history=8)
    one.prefill(tokens, chunk=8)
    many.prefill(tokens, chunk=8)
    floors = [one.rewind_floor(n) for n in range(len(tokens) + 1)]
    assert floors == [many.rewind_floor(n) for n in range(len(tokens) + 1)]
    assert floors[150] < 150 and floors[230] == 230  # the trims really cut floors short
    one.rewind(225)
    many.rewind(225)
    assert_same_session(one, many)


def test_a_worker_that_lost_or_swapped_the_session_refuses_and_it_is_replayed(
    split2: RayRunner, local_exact: ModelRunner, prompt: list[int]
) -> None:
    runner = split2
    stages = stages_of(runner)
    one, many, other = (
        local_exact.new_session(CTX), runner.new_session(CTX), runner.new_session(CTX),
    )  # fmt: skip
    one.prefill(prompt)
    many.prefill(prompt)
    other.prefill(prompt[:30])
    sid, other_sid = state_of(many).sid, state_of(other).sid

    # worker 1 restarted: it holds nothing for the session
    replays = runner.pipeline.replays
    stages.stages[1].free([sid])
    assert np.array_equal(many.eval(7), one.eval(7))
    assert runner.pipeline.replays == replays + 1

    # worker 0 holds another session's state under this id (same length, other tokens)
    state = state_of(other)
    other.prefill([*(t + 1 for t in prompt[30:]), 7])
    n = state.length
    stages.stages[0].clone(other_sid, n, state.hash_at(n), sid)
    assert stages.stages[0].sessions()[sid][0] == len(many.tokens)
    assert np.array_equal(many.eval(9), one.eval(9))
    assert runner.pipeline.replays == replays + 2
    assert_same_session(one, many)


def test_a_lost_worker_fails_the_request_and_the_next_one_recovers(
    split2: RayRunner, local_exact: ModelRunner, prompt: list[int]
) -> None:
    runner = split2
    stages = stages_of(runner)
    one, many = local_exact.new_session(CTX), runner.new_session(CTX)
    one.prefill(prompt)
    many.prefill(prompt)
    tokens, _ = greedy(one, 4)
    for t in tokens[:2]:
        many.eval(t)

    replaced, replays = stages.replaced, runner.pipeline.replays
    stages.kill(1)  # mid-decode
    with pytest.raises(WorkerLostError, match="layers 2-3 was lost") as lost:
        many.eval(tokens[2])
    assert isinstance(lost.value, ComputeUnavailableError)
    assert len(many.tokens) == len(prompt) + 2  # the failed step left no trace

    # the next operation re-places the range and replays the session before it runs
    for t in tokens[2:]:
        many.eval(t)
    assert stages.replaced == replaced + 1 and runner.pipeline.replays == replays + 1
    assert_same_session(one, many)

    # lost in the middle of a pipelined prefill: nothing of it is kept
    extra = prompt[:20]
    stages.kill(0)
    with pytest.raises(WorkerLostError, match="layers 0-1"):
        many.prefill(extra)
    assert len(many.tokens) == len(prompt) + 4
    assert np.array_equal(many.prefill(extra), one.prefill(extra))
    assert_same_session(one, many)


def test_a_restored_session_replays_from_its_payload(
    split2: RayRunner, local_exact: ModelRunner, prompt: list[int]
) -> None:
    """After a payload restore the workers' rows come from the payload, not from the
    tokens: a replay restores the same payload part and evaluates only what followed."""
    runner = split2
    one = local_exact.new_session(CTX)
    one.prefill(prompt)
    many = runner.new_session(CTX)
    many.load_payload(one.payload())
    assert np.array_equal(many.eval(3), one.eval(3))
    stages_of(runner).kill(0)
    with pytest.raises(WorkerLostError):
        many.eval(4)
    assert np.array_equal(many.eval(4), one.eval(4))
    assert_same_session(one, many)


def test_sessions_batched_in_one_pass_equal_their_single_runs(
    split2: RayRunner, local_exact: ModelRunner, prompt: list[int]
) -> None:
    runner = split2
    lone = [local_exact.new_session(CTX) for _ in range(2)]
    pair = [runner.new_session(CTX) for _ in range(2)]
    for sessions in (lone, pair):
        sessions[0].prefill(prompt[:10])
        sessions[1].prefill(prompt[10:25])
    want = local_exact.eval_batch(lone, [[5], [6, 7]])
    got = runner.eval_batch(pair, [[5], [6, 7]])
    assert all(np.array_equal(w, g) for w, g in zip(want, got, strict=True))
    for a, b in zip(lone, pair, strict=True):
        assert_same_session(a, b)


def test_bad_splits_and_a_worker_with_another_model_are_refused(
    split: Callable[..., RayRunner], demo: Demo
) -> None:
    with pytest.raises(Ds4Error, match="names 3 ranges but local:2 starts 2 workers"):
        split(layer_split="0-0,1-2,3-3")
    with pytest.raises(Ds4Error, match="stops at layer 2"):
        split(target="local:1", layer_split="0-2")
    with pytest.raises(Ds4Error, match="5 workers for 4 layers"):
        split(target="local:5")
    model, _ = demo
    spec = StageSpec(model.path, range(0, 2), "exact", "scalar", 1, model_tag=12345)
    stage = LayerStage(spec)
    assert stage.error is not None and "not the coordinator's model file" in stage.error
    with pytest.raises(Ds4Error, match="not the coordinator's model file"):
        stage.history_ok(1, 0, 0, 0, [0])  # every operation answers with the error


def test_a_node_too_small_for_its_ranges_is_refused_by_name(demo: Demo) -> None:
    ranges = [range(0, 2), range(2, 4)]
    roomy = [Slot("a", 1e9, "10.0.0.1"), Slot("b", 1e9, "10.0.0.2")]
    check_memory(*demo, ranges, roomy)
    small = [Slot("a", 1e9, "10.0.0.1"), Slot("b", 2**20, "10.0.0.2")]
    with pytest.raises(
        Ds4Error, match=r"layers 2-3 need 2\.2 MiB of weights but 10\.0\.0\.2 offers 1\.0 MiB"
    ):
        check_memory(*demo, ranges, small)
    # two ranges on one node add up
    shared = [Slot("a", 5 * 2**20, "10.0.0.1")] * 2
    with pytest.raises(
        Ds4Error, match=r"layers 0-1, 2-3 need 6\.2 MiB .* 10\.0\.0\.1 offers 5\.0 MiB"
    ):
        check_memory(*demo, ranges, shared)
