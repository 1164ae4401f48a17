"""--dist-activation-bits and the per-hop telemetry with the workers in this process: 32
bits stays bit-identical to one process, 16 and 8 change only the transport (logits
close, payload bytes per token per boundary equal to the documented formula, as the
start line and every trace line print them); each trace line parses, one per hop of
every pass, and the server's /metrics histograms count the same hops and bytes."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.integration.distributed.sessions import CTX
from tests.support.inproc_stages import InProcessStages

from ds4.adapters.compute.ray import RayRunner, ray_runner
from ds4.adapters.gguf.reader import GGUFFile
from ds4.adapters.http.metrics import ServerMetrics
from ds4.apps import backends
from ds4.domain.dist_transport import parse_trace_line
from ds4.domain.distributed import parse_target
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ModelRunner

Demo = tuple[GGUFFile, DeepSeekV4HParams]
PIECE = 8


def split(demo: Demo, bits: int, log: list[str], trace: list[str]) -> RayRunner:
    return ray_runner(
        *demo, target=parse_target("local:2"), numerics="exact", threads=1, piece=PIECE,
        activation_bits=bits, log=log.append, trace=trace.append, make_stages=InProcessStages,
    )  # fmt: skip


def documented_bytes(hp: DeepSeekV4HParams, bits: int) -> int:
    """docs/distributed.md: n_hc*n_embd*4 (32), *2 (16), n_hc*(n_embd+4) (8)."""
    return {32: hp.n_hc * hp.n_embd * 4, 16: hp.n_hc * hp.n_embd * 2,
            8: hp.n_hc * (hp.n_embd + 4)}[bits]  # fmt: skip


def run(runner: ModelRunner, prompt: list[int], steps: int = 3) -> np.ndarray:
    session = runner.new_session(CTX)
    rows = [session.prefill(prompt, all_logits=True)]
    for t in (17, 23, 5)[:steps]:
        rows.append(session.eval(t).reshape(1, -1))
    return np.concatenate(rows)


@pytest.mark.parametrize("bits", [32, 16, 8])
def test_the_bytes_printed_equal_the_formula_and_the_trace_parses(
    demo: Demo, local_exact: ModelRunner, prompt: list[int], bits: int
) -> None:
    log: list[str] = []
    trace: list[str] = []
    runner = split(demo, bits, log, trace)
    hp = demo[1]
    per_token = documented_bytes(hp, bits)
    assert f"at {bits} bits: {per_token} B per token" in log[-1]

    got, want = run(runner, prompt), run(local_exact, prompt)
    if bits == 32:
        assert np.array_equal(got, want)
    else:  # only the transport changed: close, not equal
        assert not np.array_equal(got, want)
        assert np.abs(got - want).max() < 1.0
        assert np.mean(got.argmax(-1) == want.argmax(-1)) >= 0.9

    records = [parse_trace_line(line) for line in trace]
    pieces = -(-len(prompt) // PIECE)
    passes = sorted({int(r["pass"]) for r in records})
    assert len(passes) == pieces + 3  # every prefill piece, then each decoded token
    for r in records:
        tokens = int(r["tokens"])
        if r["to"] == "coordinator":  # the way back, with the output
            assert int(r["hop"]) == 2 and int(r["bytes_in"]) == tokens * per_token
            assert int(r["bytes_out"]) == 0
        else:
            assert r["to"] in ("layers:0-1", "layers:2-3")
            assert int(r["bytes_in"]) == int(r["bytes_out"]) == tokens * per_token
        for name in ("eval_ms", "wait_ms", "transfer_ms"):
            assert float(r[name]) >= 0.0
    hops = Counter((r["op"], r["hop"]) for r in records)
    # all_logits: every prefill piece comes back; decode passes return their output
    assert hops == {
        **{("prefill", str(h)): pieces for h in range(3)},
        **{("decode", str(h)): 3 for h in range(3)},
    }
    prefill = [r for r in records if r["op"] == "prefill" and r["hop"] == "0"]
    assert [int(r["piece"]) for r in prefill] == list(range(pieces))
    assert [int(r["pos"]) for r in prefill] == list(range(0, len(prompt), PIECE))
    assert sum(int(r["tokens"]) for r in prefill) == len(prompt)


def test_the_metrics_histograms_count_the_traced_hops(demo: Demo, prompt: list[int]) -> None:
    trace: list[str] = []
    runner = split(demo, 16, [], trace)
    feed = backends.hop_feed(runner)
    assert feed is not None
    metrics = ServerMetrics(queue_depth=lambda: 0, active_sessions=lambda: 0, hops=feed)
    run(runner, prompt[:20], steps=2)
    records = [parse_trace_line(line) for line in trace]
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    for to in ("0-1", "2-3", "coordinator"):
        mine = [r for r in records if r["to"].removeprefix("layers:") == to]
        for op in ("prefill", "decode"):
            these = [r for r in mine if r["op"] == op]
            assert these
            for metric in ("eval", "wait", "transfer"):
                assert value(f"ds4_dist_{metric}_seconds_count", to=to, op=op) == len(these)
            seconds = sum(float(r["eval_ms"]) for r in these) / 1e3
            assert value("ds4_dist_eval_seconds_sum", to=to, op=op) == pytest.approx(
                seconds, abs=1e-5 * len(these)
            )
            got_in = value("ds4_dist_hop_bytes_sum", to=to, op=op, direction="in")
            assert got_in == sum(int(r["bytes_in"]) for r in these)


def test_other_runners_feed_no_hops(local_exact: ModelRunner) -> None:
    assert backends.hop_feed(local_exact) is None


def test_the_values_transport_carries_the_same_packed_rows(demo: Demo, prompt: list[int]) -> None:
    """With `values` the coordinator fetches each range's packed output and sends it on
    as it is: the logits equal the `refs` transport's at the same bits."""
    runs = []
    for transport in ("refs", "values"):
        runner = ray_runner(
            *demo, target=parse_target("local:2"), numerics="exact", threads=1, piece=PIECE,
            activation_bits=8, transport=transport, make_stages=InProcessStages,
        )  # fmt: skip
        runs.append(run(runner, prompt[:20], steps=2))
    assert np.array_equal(runs[0], runs[1])
