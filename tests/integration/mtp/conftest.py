"""A random tiny model with a random MTP block of the same shape."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_with_mtp(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("tiny_mtp")
    model, mtp = out / "tiny.gguf", out / "tiny-mtp.gguf"
    result = subprocess.run(
        [sys.executable, "-m", "ds4", "gguf", "tiny", "--out", str(model), "--mtp-out", str(mtp),
         "--preset", "tiny-2layer", "--quant", "q2", "--seed", "5", "--quiet"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return model, mtp
