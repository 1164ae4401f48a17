"""The distributed backend on a real local Ray cluster (one per module: Ray takes
seconds to start on two cores): workers are separate processes, the split model equals
the single-process cpu backend bit for bit under exact numerics, and a worker process
killed mid-decode fails that step cleanly and is replaced for the next one."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from tests.integration.distributed.sessions import CTX, assert_same_session, greedy

from ds4.adapters.compute.ray import RayRunner, ray_runner
from ds4.adapters.compute.ray.pipeline import WorkerLostError
from ds4.adapters.compute.ray.runner import RayStages, connect, ray_available
from ds4.adapters.gguf.reader import GGUFFile
from ds4.domain.distributed import DistributedTarget, parse_target
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ModelRunner

pytestmark = pytest.mark.skipif(
    not ray_available(), reason="Ray is not installed (pip install 'ds4[distributed]')"
)

Demo = tuple[GGUFFile, DeepSeekV4HParams]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A local Ray cluster with room for three workers and a 100 MiB object store."""
    import ray

    connect(DistributedTarget(None, 3), object_store_bytes=100 << 20)
    yield ray
    ray.shutdown()


def split(demo: Demo, target: str, **options: Any) -> RayRunner:
    return ray_runner(*demo, target=parse_target(target), numerics="exact", threads=1, **options)


def worker_pids(runner: RayRunner) -> list[int]:
    stages = runner.pipeline.stages
    assert isinstance(stages, RayStages)
    return [int(info["pid"]) for info in stages.info]


def test_a_local_cluster_equals_the_cpu_backend_bit_for_bit(
    cluster: Any, demo: Demo, local_exact: ModelRunner, prompt: list[int]
) -> None:
    runner = split(demo, "local:2", piece=8)  # 45 prompt tokens: 6 pieces pipelined
    pids = worker_pids(runner)
    assert len(set(pids)) == 2 and os.getpid() not in pids
    one, many = local_exact.new_session(CTX), runner.new_session(CTX)
    want = one.prefill(prompt, all_logits=True)
    assert np.array_equal(many.prefill(prompt, all_logits=True), want)
    want_tokens, want_logits = greedy(one, 16)
    got_tokens, got_logits = greedy(many, 16)
    assert got_tokens == want_tokens and np.array_equal(got_logits, want_logits)

    one.rewind(52)
    many.rewind(52)
    assert_same_session(one, many)
    restored = runner.new_session(CTX)
    restored.load_payload(one.payload())
    assert np.array_equal(restored.eval(11), one.eval(11))
    mark = many.checkpoint()
    many.eval(3)
    many.restore(mark)
    assert np.array_equal(many.eval(11), restored.logits())
    assert_same_session(one, many)
    assert runner.pipeline.replays == 0


@pytest.mark.slow
def test_three_workers_passing_values_through_the_coordinator(
    cluster: Any, demo: Demo, local_exact: ModelRunner, prompt: list[int]
) -> None:
    runner = split(demo, "local:3", layer_split="0-1,2-2,3-3", transport="values", piece=16)
    one, many = local_exact.new_session(CTX), runner.new_session(CTX)
    assert np.array_equal(one.prefill(prompt), many.prefill(prompt))
    want_tokens, want_logits = greedy(one, 6)
    got_tokens, got_logits = greedy(many, 6)
    assert got_tokens == want_tokens and np.array_equal(got_logits, want_logits)


def test_a_worker_killed_mid_decode_fails_that_step_and_is_replaced(
    cluster: Any, demo: Demo, local_exact: ModelRunner, prompt: list[int]
) -> None:
    runner = split(demo, "local:2")
    one, many = local_exact.new_session(CTX), runner.new_session(CTX)
    one.prefill(prompt)
    many.prefill(prompt)
    tokens, _ = greedy(one, 6)
    for t in tokens[:3]:
        many.eval(t)
    killed = worker_pids(runner)[1]
    os.kill(killed, signal.SIGKILL)
    with pytest.raises(WorkerLostError, match="layers 2-3 was lost"):
        many.eval(tokens[3])
    assert list(many.tokens) == [*prompt, *tokens[:3]]
    for t in tokens[3:]:
        many.eval(t)  # re-placed, the session replayed, then the step
    assert_same_session(one, many)
    assert worker_pids(runner)[1] != killed and runner.pipeline.replays == 1
