"""Models and vector sets for the test-vectors and score commands: a tiny random model
in f32 and its Q2 copy (same seed, same weights before quantization), and vectors
recorded from the f32 model itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
OFFICIAL = REPO / "tests" / "test-vectors"
DEMO = REPO / "models" / "demo.gguf"
SHORT = ("short_italian_fact", "short_code_completion", "short_reasoning_plain")
RECORDED_STEPS = 8


def ds4(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ds4", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def only(*ids: str) -> list[str]:
    return [arg for case in ids for arg in ("--only", case)]


def tiny(out: Path, quant: str) -> Path:
    made = ds4("gguf", "tiny", "--preset", "tiny-2layer", "--quant", quant, "--seed", "5",
               "--out", out, "--quiet")  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    return out


@pytest.fixture(scope="session")
def tiny_f32(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny(tmp_path_factory.mktemp("vectors_f32") / "f32.gguf", "f32")


@pytest.fixture(scope="session")
def tiny_q2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny(tmp_path_factory.mktemp("vectors_q2") / "q2.gguf", "q2")


@pytest.fixture(scope="session")
def f32_vectors(tiny_f32: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three short official prompts, RECORDED_STEPS greedy steps of the f32 model in
    fp32 numerics, in the official format."""
    out = tmp_path_factory.mktemp("f32_vectors") / "vectors"
    done = ds4("test-vectors", "-m", tiny_f32, "--numerics", "fp32", "--write-vectors", out,
               "--steps", str(RECORDED_STEPS), *only(*SHORT), "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return out
