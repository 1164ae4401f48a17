"""Tiny models for the cpu-vs-reference checks, and the reference's greedy runs on them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


def make_tiny(out: Path, quant: str, *extra: str) -> Path:
    """`ds4 gguf tiny` into out (default preset tiny-2layer; extra flags override)."""
    preset = [] if "--preset" in extra else ["--preset", "tiny-2layer"]
    result = subprocess.run(
        [sys.executable, "-m", "ds4", "gguf", "tiny", "--out", str(out), "--quant", quant,
         *preset, *extra, "--quiet"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return out


@pytest.fixture(scope="session")
def tiny_q2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ds4's q2 layout: Q8_0 projections and head, IQ2_XXS/Q2_K experts, F16 HC/router."""
    return make_tiny(tmp_path_factory.mktemp("cpu_q2") / "q2.gguf", "q2")


@pytest.fixture(scope="session")
def tiny_all_kinds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six layers: dense, ratio 4 + indexer (hash and top-k routed), ratio 128."""
    out = tmp_path_factory.mktemp("all_kinds") / "tiny.gguf"
    return make_tiny(out, "q2", "--preset", "tiny", "--seed", "11")


@pytest.fixture(scope="session")
def tiny_f32(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny(tmp_path_factory.mktemp("cpu_f32") / "f32.gguf", "f32")


@pytest.fixture(scope="session")
def prompt() -> list[int]:
    return [int(t) for t in np.random.default_rng(7).integers(0, 129_280, 24)]
