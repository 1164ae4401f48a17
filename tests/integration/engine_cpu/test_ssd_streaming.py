"""--ssd-streaming on the cpu backend (docs/ssd-streaming.md): routed experts through
the budgeted native cache give bit-identical logits to the mapped run, whatever the
budget (down to one expert) and policy; the native cache's hits match the pure policy
replay; the profile is written and preloaded; bad flags are refused by name."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from ds4.adapters.compute.cpu import CpuRunner, cpu_runner, open_cpu_runner
from ds4.adapters.gguf.model_files import load_model
from ds4.domain.errors import Ds4Error
from ds4.domain.expert_cache import CacheSpec, StreamingOptions, replay

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "models" / "demo.gguf"


def _run(
    path: Path, numerics: str, prompt: list[int], streaming: StreamingOptions | None
) -> tuple[CpuRunner, npt.NDArray[np.float32]]:
    # the cache serves GGUF bytes: the mapped run to match keeps the GGUF layout (ADR 0067)
    runner = open_cpu_runner(
        str(path), numerics=numerics, threads=2, streaming=streaming, repack_experts="off"
    )
    session = runner.new_session(len(prompt) + 8)
    out = [session.prefill(prompt, all_logits=True)]
    token = int(out[0][-1].argmax())
    for _ in range(4):
        logits = session.eval(token).reshape(1, -1)
        out.append(logits)
        token = int(logits.argmax())
    return runner, np.concatenate(out)


def _bits(a: npt.NDArray[np.float32]) -> npt.NDArray[np.uint32]:
    return np.ascontiguousarray(a).view(np.uint32)


ALL = 1 << 20  # more than any tiny model has: every expert fits


@pytest.mark.parametrize(
    ("model", "numerics", "budgets"),
    [
        # q2 types: the fused Q8_K expert kernels (one token and grouped prefill)
        (
            "tiny_all_kinds",
            "ds4",
            [
                (1, "decayed", 0),
                (3, "lru", 0),
                (5, "decayed", 2),
                (ALL, "lru", 0),
                (1, "decayed", 6),
                (3, "decayed", 6),
                (ALL, "decayed", 6),
            ],
        ),
        ("tiny_all_kinds", "exact", [(1, "lru", 1)]),
        # F32 experts: the generic per-slot matmul path
        ("tiny_f32", "fp32", [(1, "decayed", 0), (2, "lru", 2)]),
    ],
)
def test_streaming_is_bit_identical_to_the_mapped_run(
    model: str,
    numerics: str,
    budgets: list[tuple[int, str, int]],
    prompt: list[int],
    request: pytest.FixtureRequest,
) -> None:
    path: Path = request.getfixturevalue(model)
    _, want = _run(path, numerics, prompt, None)
    for experts, policy, readahead in budgets:  # read-ahead changes timing, never bytes
        options = StreamingOptions(
            cache=CacheSpec(experts=experts), policy=policy, readahead=readahead
        )
        runner, got = _run(path, numerics, prompt, options)
        assert np.array_equal(_bits(got), _bits(want)), (experts, policy, readahead)
        stats = runner.expert_cache_stats()
        assert stats is not None and stats.accesses > 0
        assert stats.slots == min(experts, runner.hparams.n_layer * runner.hparams.n_expert)
        assert stats.hits + stats.misses == stats.accesses
        assert stats.bytes_read > 0 and stats.resident <= stats.slots
        if experts == 1:
            assert stats.hits < stats.accesses  # a budget of one must evict


def test_read_ahead_predicts_from_the_next_router_and_loads_ahead(
    tiny_all_kinds: Path, prompt: list[int]
) -> None:
    """Read-ahead on: every layer after the first gets a prediction per token, the
    predictions are counted against what the layer then used, and predicted experts
    that were missing get loaded by the background thread (bytes stay the file's: the
    bit-identity test above covers that)."""
    options = StreamingOptions(cache=CacheSpec(experts=4), readahead=6)
    runner = open_cpu_runner(str(tiny_all_kinds), threads=2, streaming=options)
    assert runner.streaming is not None
    session = runner.new_session(len(prompt) + 12)
    logits = session.prefill(prompt)
    before = runner.streaming.stats()
    steps = 8
    for _ in range(steps):
        logits = session.eval(int(logits.argmax()))
    st = runner.streaming.stats().since(before)
    hp = runner.hparams
    # one token per step: each later layer predicts n_used experts and then uses n_used
    assert st.predicted == steps * (hp.n_layer - 1) * hp.n_expert_used
    assert st.predicted_layer_used == st.predicted
    assert 0 < st.predicted_correct <= st.predicted
    # how many get loaded depends on thread timing; none is used that was not loaded
    assert st.readahead_used <= st.readahead_loaded
    off = open_cpu_runner(str(tiny_all_kinds), threads=2,
                          streaming=StreamingOptions(cache=CacheSpec(experts=4)))  # fmt: skip
    assert off.streaming is not None
    session = off.new_session(len(prompt) + 12)
    logits = session.prefill(prompt)
    logits = session.eval(int(logits.argmax()))
    assert off.streaming.stats().predicted == 0  # read-ahead off: no predictions made


@pytest.mark.parametrize("policy", ["lru", "decayed"])
def test_native_hits_equal_the_policy_replay(policy: str, tiny_all_kinds: Path,
                                             prompt: list[int]) -> None:  # fmt: skip
    options = StreamingOptions(cache=CacheSpec(experts=7), policy=policy, half_life=32.0)
    runner = open_cpu_runner(str(tiny_all_kinds), threads=2, streaming=options)
    assert runner.streaming is not None
    stop = runner.streaming.record_trace(1 << 16)
    session = runner.new_session(len(prompt) + 8)
    logits = session.prefill(prompt)
    for _ in range(6):
        logits = session.eval(int(logits.argmax()))
    trace = stop()
    stats = runner.streaming.stats()
    assert len(trace) == stats.accesses
    assert replay(trace, 7, policy, 32.0).hits == stats.hits


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ds4", "cli", "-m", str(DEMO), "--temp", "0", "-n", "6",
         "-p", "Once upon a time", *args],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip


def test_cli_profile_is_written_then_preloaded(tmp_path: Path) -> None:
    profile = tmp_path / "experts.json"
    plain = _cli()
    assert plain.returncode == 0, plain.stderr
    flags = ["--ssd-streaming", "--ssd-streaming-cold", "--ssd-streaming-cache-experts", "6",
             "--expert-profile", str(profile), "--ssd-streaming-preload-experts", "6"]  # fmt: skip
    first = _cli(*flags)
    assert first.returncode == 0, first.stderr
    assert first.stdout == plain.stdout
    assert "ssd streaming: 6 expert slots" in first.stderr
    counts = json.loads(profile.read_text())["counts"]
    assert sum(map(sum, counts)) > 0
    second = _cli(*flags)
    assert second.stdout == plain.stdout
    assert "preloaded 6 experts" in second.stderr
    assert sum(map(sum, json.loads(profile.read_text())["counts"])) > sum(map(sum, counts))


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--ssd-streaming", "--ssd-streaming-cache-experts", "0"], "1..16777216"),
        (["--ssd-streaming", "--ssd-streaming-cache-experts", "lots"], "not N (experts)"),
        (["--ssd-streaming-cold"], "--ssd-streaming-cold needs --ssd-streaming"),
        (["--ssd-streaming", "--backend", "reference"], "needs --backend cpu"),
        (["--ssd-streaming", "--ssd-streaming-preload-experts", "4"], "needs --expert-profile"),
        (["--ssd-streaming", "--simulate-used-memory", "-1"], "--simulate-used-memory"),
    ],
)
def test_bad_flags_are_refused(flags: list[str], says: str) -> None:
    result = _cli(*flags)
    assert result.returncode != 0
    assert says in result.stderr
    assert "Traceback" not in result.stderr


def test_a_foreign_profile_is_refused(tmp_path: Path) -> None:
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"format": "ds4-expert-profile", "version": 1,
                                   "n_layer": 9, "n_expert": 2, "counts": []}))  # fmt: skip
    result = _cli("--ssd-streaming", "--expert-profile", str(profile))
    assert result.returncode != 0
    assert "written for 9 layers x 2 experts" in result.stderr


def test_buffered_reads_and_the_automatic_budget(tiny_all_kinds: Path, prompt: list[int]) -> None:
    """Without O_DIRECT (pread + FADV_DONTNEED) the bytes are the same; a simulated full
    memory leaves the automatic budget at its floor of one expert, said at start."""
    _, want = _run(tiny_all_kinds, "ds4", prompt, None)
    lines: list[str] = []
    options = StreamingOptions(direct=False, simulate_used_bytes=1 << 50)
    model, hp = load_model(str(tiny_all_kinds))
    runner = cpu_runner(model, hp, threads=2, streaming=options, log=lines.append)
    session = runner.new_session(len(prompt) + 8)
    out = [session.prefill(prompt, all_logits=True)]
    token = int(out[0][-1].argmax())
    for _ in range(4):
        out.append(session.eval(token).reshape(1, -1))
        token = int(out[-1].argmax())
    assert np.array_equal(_bits(np.concatenate(out)), _bits(want))
    assert "ssd streaming: 1 expert slots" in lines[0] and "(auto: " in lines[0]
    assert "reads pread + FADV_DONTNEED" in lines[0]


def test_mlock_locks_or_names_the_limit(tiny_all_kinds: Path) -> None:
    """--ssd-streaming-mlock: locked (root, or a limit that large) or a Ds4Error naming
    `ulimit -l`, never a silent half-lock."""
    lines: list[str] = []
    model, hp = load_model(str(tiny_all_kinds))
    options = StreamingOptions(cache=CacheSpec(experts=2), lock=True)
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    can_lock = os.geteuid() == 0 or soft == resource.RLIM_INFINITY or soft >= model.file_size
    if can_lock:
        cpu_runner(model, hp, threads=1, streaming=options, log=lines.append)
        assert "locked in memory" in lines[0]
    else:
        with pytest.raises(Ds4Error, match=r"ulimit -l"):
            cpu_runner(model, hp, threads=1, streaming=options, log=lines.append)
