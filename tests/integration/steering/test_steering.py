"""Directional steering on the cpu and reference backends (docs/steering.md): at scale 1
a steered sublayer's output (captured as it enters HC post) has no component along its
layer's direction; at scale 0 the logits are those without steering, bit for bit; and
`ds4 cli` / `ds4 steer` use it end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ds4.apps.bootstrap import load_engine
from ds4.apps.options import EngineOptions
from ds4.domain.steering.directions import Steering
from ds4.ports.compute import Steerable

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "models" / "demo.gguf"
PROMPT = "«Ditemi la verità,» domandò Lucia, «"
CONFIGS = [("cpu", "ds4"), ("cpu", "exact"), ("reference", "ds4")]


def directions(n_layer: int, n_embd: int) -> np.ndarray:
    d = np.random.default_rng(8).standard_normal((n_layer, n_embd)).astype(np.float32)
    out: np.ndarray = d / np.linalg.norm(d, axis=1, keepdims=True)
    return out


@pytest.mark.parametrize(("backend", "numerics"), CONFIGS)
@pytest.mark.parametrize("component", ["ffn_out", "attn_out"])
def test_scale_one_leaves_no_component_along_the_direction(
    backend: str, numerics: str, component: str
) -> None:
    engine = load_engine(EngineOptions(str(DEMO), backend=backend, numerics=numerics, threads=2))
    runner, hp = engine.runner, engine.runner.hparams
    assert isinstance(runner, Steerable)
    ids = engine.tokenizer.encode(PROMPT)
    v = directions(hp.n_layer, hp.n_embd)
    runner.capture("ffn_out" if component == "ffn_out" else "attn_out")
    runner.new_session(64).prefill(ids)
    before = runner.captured()
    attn, ffn = (1.0, 0.0) if component == "attn_out" else (0.0, 1.0)
    runner.steer(Steering(v, attn, ffn))
    runner.new_session(64).prefill(ids)
    after = runner.captured()
    runner.capture(None)
    runner.steer(None)
    along_before = np.abs(np.sum(before * v, axis=1))
    along_after = np.abs(np.sum(after * v, axis=1))
    assert np.all(along_before > 1e-3)  # there was something to remove
    assert np.all(along_after <= 1e-5 * np.linalg.norm(after, axis=1) + 1e-6)


@pytest.mark.parametrize(("backend", "numerics"), CONFIGS)
def test_scale_zero_changes_nothing_bit_for_bit(backend: str, numerics: str) -> None:
    engine = load_engine(EngineOptions(str(DEMO), backend=backend, numerics=numerics, threads=2))
    runner, hp = engine.runner, engine.runner.hparams
    assert isinstance(runner, Steerable)
    ids = engine.tokenizer.encode(PROMPT)
    plain = runner.new_session(64).prefill(ids, all_logits=True)
    runner.steer(Steering(directions(hp.n_layer, hp.n_embd), 0.0, 0.0))
    zero = runner.new_session(64).prefill(ids, all_logits=True)
    runner.steer(Steering(directions(hp.n_layer, hp.n_embd), 0.0, 1.0))
    steered = runner.new_session(64).prefill(ids, all_logits=True)
    runner.steer(None)
    assert np.array_equal(zero, plain)
    assert not np.array_equal(steered, plain)  # a non-zero scale does act


def ds4(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ds4", *map(str, args)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_cli_flags_log_refuse_and_steer(tmp_path: Path) -> None:
    hp = load_engine(EngineOptions(str(DEMO), backend="cpu")).runner.hparams
    path = tmp_path / "d.f32"
    path.write_bytes(directions(hp.n_layer, hp.n_embd).astype("<f4").tobytes())
    common: list[str | Path] = ["cli", "-m", DEMO, "--nothink", "--temp", "0", "-p", PROMPT]
    common += ["-n", "12", "-t", "2"]
    plain = ds4(*common)
    steered = ds4(*common, "--dir-steering-file", path, "--dir-steering-ffn", "-3")
    assert plain.returncode == 0 and steered.returncode == 0, steered.stderr
    assert f"ds4: directional steering enabled: {path} attn=0 ffn=-3" in steered.stderr
    assert steered.stdout != plain.stdout
    no_file = ds4(*common, "--dir-steering-attn", "1")
    assert no_file.returncode == 2 and "needs --dir-steering-file" in no_file.stderr
    short = tmp_path / "short.f32"
    short.write_bytes(b"\0" * 12)
    wrong = ds4(*common, "--dir-steering-file", short)
    assert wrong.returncode == 2
    assert f"{short} has size 12 bytes, expected {hp.n_layer * hp.n_embd * 4} bytes" in (
        wrong.stderr
    )


def test_steer_build_and_sweep(tmp_path: Path) -> None:
    examples = ROOT / "examples" / "steering"
    out = tmp_path / "dir.json"
    built = ds4("steer", "build", "-m", DEMO, "--good-file", examples / "dialogue.txt",
                "--bad-file", examples / "narration.txt", "--out", out, "--ctx", "128",
                "-t", "2", "--quiet")  # fmt: skip
    assert built.returncode == 0, built.stderr
    d = np.fromfile(out.with_suffix(".f32"), dtype="<f4").reshape(4, 128)
    assert np.allclose(np.linalg.norm(d, axis=1), 1, atol=1e-5)
    assert '"format": "ds4-directional-steering-v1"' in out.read_text()
    # the shipped example was built the same way from the same prompts; the cpu kernel
    # set this CPU picks (AVX2, AVX-512) moves the last digits, not the direction
    shipped = np.fromfile(examples / "dialogue.f32", dtype="<f4").reshape(4, 128)
    assert np.all(np.sum(d * shipped, axis=1) > 0.999)
    prompts = tmp_path / "p.txt"
    prompts.write_text("Renzo guardò Lucia e\n", encoding="utf-8")
    swept = ds4("steer", "sweep", "-m", DEMO, "--direction", out.with_suffix(".f32"),
                "--prompts", prompts, "--scales=-1,0,2", "--tokens", "8", "--ctx", "256",
                "--nothink", "-t", "2")  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    lines = swept.stdout.splitlines()
    assert lines[0] == "PROMPT: Renzo guardò Lucia e"
    assert [ln for ln in lines if ln.startswith("FFN scale:")] == [
        "FFN scale: -1", "FFN scale: 0", "FFN scale: 2",
    ]  # fmt: skip
