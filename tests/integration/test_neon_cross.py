"""NEON kernels against the scalar kernels, cross-compiled for aarch64 and run under qemu.

tools/cross/neon_check.sh builds native/cpu with aarch64-linux-gnu-gcc and runs
tools/cross/neon_check.c under qemu-aarch64 twice (a CPU with SDOT and a Cortex-A53
without): quantized types must be bit-identical to scalar, F32/F16/BF16 within
1e-5 * sum |w_i x_i| per row, and ds4_cpu_matmul with NEON/AUTO on 1 and 3 threads must
agree. Needs: apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "cross" / "neon_check.sh"
MISSING = [tool for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64") if not shutil.which(tool)]


@pytest.mark.skipif(
    bool(MISSING),
    reason=f"{' and '.join(MISSING)} not installed (apt-get install -y gcc-aarch64-linux-gnu "
    "libc6-dev-arm64-cross qemu-user)",
)
def test_neon_kernels_match_scalar_under_qemu(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert report.count("PASSED: 0 failing check(s)") == 2, report
    assert "AUTO -> neon_sdot table" in report and "AUTO -> neon table" in report, report
