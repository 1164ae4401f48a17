"""`ds4 cli --mtp` end to end on the demo model: the same greedy text with and without
the MTP head, an acceptance line, and clear refusals of files that are not its MTP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DEMO, DEMO_MTP = ROOT / "models" / "demo.gguf", ROOT / "models" / "demo-mtp.gguf"
PROMPT = "«No, no,» disse Agnese: «ne ho ancora più del bisogno per me"


def ds4(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ds4", *map(str, args)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_greedy_text_is_the_same_with_mtp() -> None:
    common: list[str | Path] = [
        "cli",
        "-m",
        DEMO,
        "--temp",
        "0",
        "--nothink",
        "-p",
        PROMPT,
        "-n",
        "48",
        "-t",
        "2",
    ]
    plain = ds4(*common)
    fast = ds4(*common, "--mtp", DEMO_MTP, "--mtp-draft", "2")
    assert plain.returncode == 0 and fast.returncode == 0, fast.stderr
    assert fast.stdout == plain.stdout and plain.stdout.strip()
    assert "ds4: mtp:" in fast.stderr and "drafted tokens accepted" in fast.stderr
    assert "ds4: mtp:" not in plain.stderr


@pytest.fixture(scope="module")
def tiny_mtp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli_mtp")
    made = ds4("gguf", "tiny", "--out", out / "t.gguf", "--mtp-out", out / "t-mtp.gguf",
               "--preset", "tiny-2layer", "--quant", "q2", "--quiet")  # fmt: skip
    assert made.returncode == 0, made.stderr
    return out / "t-mtp.gguf"


def test_files_that_are_not_the_models_mtp_are_refused(tiny_mtp: Path) -> None:
    main_model = ds4("cli", "-m", DEMO, "--mtp", DEMO, "-p", "hi", "-n", "2")
    assert main_model.returncode == 2 and "Traceback" not in main_model.stderr
    assert f"--mtp {DEMO}: not an MTP file" in main_model.stderr
    other = ds4("cli", "-m", DEMO, "--mtp", tiny_mtp, "-p", "hi", "-n", "2")
    assert other.returncode == 2 and "Traceback" not in other.stderr
    assert "n_embd: mtp 256, model 128" in other.stderr


@pytest.mark.parametrize("mode", [["-p", "ciao"], ["--dump-tokens", "-p", "ciao"]])
def test_the_mtp_file_as_the_model_names_it_and_points_to_mtp(mode: list[str]) -> None:
    done = ds4("cli", "-m", DEMO_MTP, *mode)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"ds4: error: {DEMO_MTP} is an MTP draft file (mtp.* tensors only), not a main "
        f"model: pass it as --mtp {DEMO_MTP} next to the main model's -m\n"
    )
