"""`--ssd-streaming auto` on the demo model (docs/ssd-streaming.md#automatic): over a
fake memory room (the MemoryRoom port) the load streams when the model does not fit and
maps it when it does, and a streamed run computes the mapped run's logits; as a flag of
`ds4 cli` it says its choice on one line, refuses when nothing fits, and --help explains
it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ds4.apps import backends, bootstrap, wiring
from ds4.apps.options import EngineOptions
from ds4.domain.expert_cache import StreamingOptions
from ds4.domain.memory import GIB, SCRATCH_BYTES, MemoryLimits, kv_bytes

DEMO = Path(__file__).resolve().parents[3] / "models" / "demo.gguf"
CTX = 4096
PROMPT = [int(t) for t in np.random.default_rng(7).integers(100, 6000, 24)]

pytestmark = pytest.mark.skipif(
    not backends.cpu_backend_available(), reason="the native CPU kernels are not built"
)


class FakeRoom:
    def __init__(self, cgroup: int) -> None:
        self.cgroup = cgroup

    def limits(self) -> MemoryLimits:
        return MemoryLimits(available=64 * GIB, cgroup=self.cgroup, physical=64 * GIB)


def load(room: int, monkeypatch: pytest.MonkeyPatch) -> tuple[bootstrap.Engine, list[str]]:
    monkeypatch.setattr(wiring, "memory_room", lambda: FakeRoom(room))
    said: list[str] = []
    options = EngineOptions(
        str(DEMO), backend="cpu", threads=1, streaming=StreamingOptions(auto=True)
    )
    return bootstrap.load_engine(options, ctx=CTX, plan_log=said.append), said


def prefill_logits(engine: bootstrap.Engine) -> np.ndarray:
    session = engine.runner.new_session(CTX)
    return np.asarray(session.prefill(PROMPT, all_logits=True))


def test_a_model_that_fits_is_mapped(monkeypatch: pytest.MonkeyPatch) -> None:
    engine, said = load(8 * GIB, monkeypatch)
    assert backends.expert_cache_stats(engine.runner) is None
    assert said[0].startswith("ssd-streaming auto: off, plain mmap: the model needs ")
    assert said[0].endswith(" of 8.00 GiB available (cgroup limit)")
    assert said[1].startswith("memory plan: weights ")


def test_a_model_that_does_not_fit_streams_and_computes_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mapped, _ = load(8 * GIB, monkeypatch)
    want = prefill_logits(mapped)
    model = mapped.model
    assert model is not None
    sizes = {n: t.nbytes for n, t in model.file.tensors.items()}
    routed = sum(v for n, v in sizes.items() if "_exps." in n)
    # room for everything but half the routed experts
    room = sum(sizes.values()) - routed // 2 + kv_bytes(model.hparams, CTX) + SCRATCH_BYTES
    streamed, said = load(room, monkeypatch)
    stats = backends.expert_cache_stats(streamed.runner)
    assert stats is not None  # the expert cache is in use
    assert said[0].startswith("ssd-streaming auto: on: the model needs ")
    assert "expert cache" in said[0] and "(cgroup limit)" in said[0]
    assert "(non-routed + expert cache)" in said[1]
    np.testing.assert_array_equal(prefill_logits(streamed), want)


def cli(*extra: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "ds4", "cli", "--backend", "cpu", "-m", str(DEMO),
            "-p", "hi", "-n", "2", "--temp", "0", "--ctx", str(CTX), "-t", "1", *extra]  # fmt: skip
    return subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)


def test_the_flag_says_its_choice_on_one_line() -> None:
    run = cli("--ssd-streaming", "auto")
    assert run.returncode == 0, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("ds4: ssd-streaming auto: ")]
    assert len(lines) == 1, run.stderr
    assert "off, plain mmap" in lines[0]  # the demo model fits any machine that runs tests


def test_the_flag_refuses_when_nothing_fits() -> None:
    run = cli("--ssd-streaming", "auto", "--simulate-used-memory", str(1 << 20))
    assert run.returncode != 0
    errors = [ln for ln in run.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1, run.stderr
    assert "does not fit in memory" in errors[0] and "less --simulate-used-memory" in errors[0]
    assert "Traceback" not in run.stderr


def test_a_wrong_value_and_the_help() -> None:
    run = cli("--ssd-streaming", "always")
    assert run.returncode == 2 and "--ssd-streaming takes no value or auto" in run.stderr
    helped = subprocess.run(
        [sys.executable, "-m", "ds4", "cli", "--help"], capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    flat = " ".join(helped.stdout.split())
    assert "`auto`: only when the model does not fit the memory this process can have" in flat
