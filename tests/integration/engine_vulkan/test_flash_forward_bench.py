"""bench/vulkan_flash_forward_bench.py as a user runs it: a Flash-shaped file written,
opened with the vulkan backend, prefilled and decoded; its report lines and clean-up."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "vulkan_flash_forward_bench.py"


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=600,
        check=False, cwd=ROOT, env=env,
    )  # fmt: skip


def number(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    assert found is not None, f"no line matching {pattern!r} in:\n{text}"
    return float(found.group(1))


@pytest.mark.slow
def test_tiny_flash_forward_is_one_submission_per_step_without_host_fallbacks(
    tmp_path: Path, vulkan_ok: None
) -> None:
    done = run_bench("--layers", "1", "--prompt-tokens", "4", "--decode-tokens", "2",
                     "--vocab", "1024", "--experts", "16", "--copy-mb", "16",
                     "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "1 layer(s) (dense hash)" in out
    assert number(r"device copy bandwidth: ([\d.]+) GB/s", out) > 0
    assert number(r"prefill: 4 tokens in [\d.]+ s = ([\d.]+) t/s", out) > 0
    assert re.search(r"prefill: .*submissions: 1; host fallbacks: none", out)
    ms = number(r"decode: 2 tokens, ([\d.]+) ms/token", out)
    assert number(r"= ([\d.]+) t/s \(best step", out) == pytest.approx(1000 / ms, rel=0.02)
    assert re.search(r"decode: .*submissions per step: 1; host fallbacks: none", out)
    nbytes = number(r"decode weight bytes per token: ([\d.]+) GB", out)
    # one Flash layer's attention + shared expert + 6 experts is ~0.19 GB; 16 of them ~0.11
    assert 0.15 < nbytes < 0.25
    gbs = number(r"decode bandwidth: ([\d.]+) GB/s", out)
    assert gbs == pytest.approx(nbytes / (ms / 1000), rel=0.05, abs=2e-3)
    assert list(tmp_path.iterdir()) == []  # the model file is removed without --keep


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--layers", "0"], "--layers must be in 1..43"),
        (["--vocab", "100"], "--vocab must be in"),
        (["--experts", "5"], "--experts must be in 6..256"),
        (["--decode-tokens", "0"], "--decode-tokens must be in 1..1024"),
        (["--out", "/nonexistent/dir"], "not a writable directory"),
    ],
)
def test_bad_flags_are_named_without_a_traceback(flags: list[str], message: str) -> None:
    done = run_bench(*flags)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
