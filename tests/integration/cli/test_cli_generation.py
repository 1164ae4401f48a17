"""`ds4 cli` end to end on a tiny random model in the exact layout (reference engine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

VOCAB = 129_280
PROMPT_IDS = [0, 128803, 19923, 14, 2058, 128804, 128822]  # BOS User ... Assistant </think>


def ds4(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ds4", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "tiny.gguf"
    made = ds4("gguf", "tiny", "--quant", "f32", "--preset", "tiny-2layer", "--out", out)
    assert made.returncode == 0, made.stderr
    return out


@pytest.fixture(scope="module")
def ids_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ids") / "ids.json"
    path.write_text(json.dumps(PROMPT_IDS))
    return path


def run_ids(model: Path, ids: Path, tmp: Path, chunk: int) -> tuple[np.ndarray, str]:
    logits = tmp / f"logits-{chunk}.npy"
    done = ds4(
        "cli", "-m", model, "--prompt-tokens", ids, "--dump-logits", logits,
        "-n", "4", "--temp", "0", "--numerics", "fp32", "--chunk", str(chunk),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "generation:" in done.stderr and "t/s" in done.stderr
    return np.load(logits), done.stdout


def test_dump_logits_shape_and_chunk_invariance(
    tiny_model: Path, ids_file: Path, tmp_path: Path
) -> None:
    whole, text_whole = run_ids(tiny_model, ids_file, tmp_path, chunk=64)
    chunked, text_chunked = run_ids(tiny_model, ids_file, tmp_path, chunk=2)
    assert whole.shape == (len(PROMPT_IDS), VOCAB) and whole.dtype == np.float32
    assert np.isfinite(whole).all()
    tolerance = 1e-4 * max(1.0, float(np.abs(whole).max()))
    assert float(np.abs(whole - chunked).max()) <= tolerance
    assert text_whole == text_chunked  # greedy tokens identical across chunk sizes
    assert text_whole.strip()


def test_n_0_dumps_the_prompt_logits_without_generating(
    tiny_model: Path, ids_file: Path, tmp_path: Path
) -> None:
    logits = tmp_path / "prefill.npy"
    done = ds4("cli", "-m", tiny_model, "--prompt-tokens", ids_file, "--dump-logits", logits,
               "-n", "0", "--numerics", "fp32")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert np.load(logits).shape == (len(PROMPT_IDS), VOCAB)
    assert done.stdout == ""  # no reply
    assert "generation: 0.00 t/s" in done.stderr


def test_n_0_is_refused_where_nothing_would_run(tiny_model: Path, ids_file: Path) -> None:
    done = ds4("cli", "-m", tiny_model, "--prompt-tokens", ids_file, "-n", "0",
               "--dump-logprobs", "out.json")  # fmt: skip
    assert done.returncode == 2
    assert "--dump-logprobs needs -n 1 or more" in done.stderr


def test_piped_stdin_is_the_prompt(tiny_model: Path) -> None:
    def cli(stdin: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "ds4", "cli", "-m", str(tiny_model), *args],
            input=stdin, capture_output=True, timeout=600, check=False,
        )  # fmt: skip

    piped = cli(b"Ciao lago", "--dump-tokens", "--json")
    given = cli(b"", "--dump-tokens", "--json", "-p", "Ciao lago")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == given.stdout and json.loads(piped.stdout)
    generated = cli(b"Ciao lago", "--temp", "0", "-n", "3", "--nothink")
    assert generated.returncode == 0, generated.stderr
    assert b"generation:" in generated.stderr
    empty = cli(b"", "-n", "3")
    assert empty.returncode == 2
    assert empty.stderr == (
        b"ds4: error: stdin is empty: give the prompt with -p TEXT, --prompt-file F or on stdin\n"
    )


def test_seeded_sampling_is_reproducible(tiny_model: Path) -> None:
    args = ("cli", "-m", tiny_model, "-p", "Hi", "--nothink", "-n", "5", "--seed", "11")
    first, second = ds4(*args), ds4(*args)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout and first.stdout.strip()


def test_a_reply_the_context_cuts_short_says_so(tiny_model: Path) -> None:
    """A random model never stops: with a small --ctx the context ends the reply, not
    -n, and stderr says so; with -n reached first it does not."""
    base = ("cli", "-m", tiny_model, "-p", "Hi", "--nothink", "--temp", "0", "--ctx", "24")
    cut = ds4(*base)
    assert cut.returncode == 0, cut.stderr
    assert "stopped at the context limit (--ctx 24)" in cut.stderr
    bounded = ds4(*base, "-n", "3")
    assert bounded.returncode == 0 and "context limit" not in bounded.stderr


def test_dump_logprobs_format(tiny_model: Path, ids_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "lp.json"
    done = ds4(
        "cli", "-m", tiny_model, "--prompt-tokens", ids_file, "--dump-logprobs", out,
        "-n", "3", "--logprobs-top-k", "4", "--numerics", "fp32",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert (data["source"], data["prompt_tokens"], data["top_k"]) == ("ds4", 7, 4)
    assert [s["step"] for s in data["steps"]] == [0, 1, 2]
    for step in data["steps"]:
        top = step["top_logprobs"]
        assert len(top) == 4
        assert step["selected"] == top[0]["token"]  # greedy: the best alternative
        assert [t["logit"] for t in top] == sorted((t["logit"] for t in top), reverse=True)
        assert all(t["logprob"] <= 0 for t in top)
        token = top[0]["token"]
        assert 0 <= token["id"] < VOCAB and isinstance(token["bytes"], list)


def test_missing_model_says_how_to_get_one(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = ds4("cli", "-m", tmp_path / "none.gguf", "-p", "hi", env=env)
    assert done.returncode == 2
    assert "no such file" in done.stderr and "ds4 gguf tiny" in done.stderr
    assert "Traceback" not in done.stderr


def test_token_ids_out_of_range_are_rejected(tiny_model: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([0, VOCAB + 5]))
    done = ds4("cli", "-m", tiny_model, "--prompt-tokens", bad)
    assert done.returncode == 2
    assert "out of range" in done.stderr and "Traceback" not in done.stderr


def test_context_too_small_is_rejected(tiny_model: Path, ids_file: Path) -> None:
    done = ds4("cli", "-m", tiny_model, "--prompt-tokens", ids_file, "--ctx", "4")
    assert done.returncode == 2
    assert "--ctx 4" in done.stderr and "Traceback" not in done.stderr


def test_corrupt_model_is_a_clear_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\0" * 64)
    done = ds4("cli", "-m", junk, "-p", "hi")
    assert done.returncode != 0
    assert done.stderr.startswith("ds4: error:") and "Traceback" not in done.stderr
