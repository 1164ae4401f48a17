"""Oracle schedules converted to f32 GGUF once per test session, and a tiny q2 model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.oracle_fixtures import make_oracle_fixtures


def ds4(*args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "ds4", *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def converted(fixture_dir: Path) -> Path:
    out = fixture_dir / "model_f32.gguf"
    if not out.exists():
        ds4("gguf", "convert", "--hf", str(fixture_dir / "hf"), "--out", str(out), "--quiet",
            "--quant", "f32")  # fmt: skip
    return out


@pytest.fixture(scope="session")
def oracle_hca128(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_oracle_fixtures(tmp_path_factory.mktemp("oracle_hca128"), "hca128")


@pytest.fixture(scope="session")
def oracle_compressed_first(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_oracle_fixtures(tmp_path_factory.mktemp("oracle_cf"), "compressed_first")


@pytest.fixture(scope="session")
def mixed_gguf(oracle_mixed: Path) -> Path:
    return converted(oracle_mixed)


@pytest.fixture(scope="session")
def schedule_dirs(
    oracle_mixed: Path, oracle_hca128: Path, oracle_compressed_first: Path
) -> dict[str, Path]:
    return {
        "mixed": oracle_mixed,
        "hca128": oracle_hca128,
        "compressed_first": oracle_compressed_first,
    }


@pytest.fixture(scope="session")
def tiny_q2_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 2-layer tiny preset in ds4's q2 layout (IQ2_XXS/Q2_K experts, Q8_0 projections)."""
    out = tmp_path_factory.mktemp("tiny_q2") / "tiny_q2.gguf"
    ds4("gguf", "tiny", "--out", str(out), "--quant", "q2", "--preset", "tiny-2layer")
    return out
