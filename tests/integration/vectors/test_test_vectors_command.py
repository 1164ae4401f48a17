"""`ds4 test-vectors` end to end: the demo model against DeepSeek's official vectors
(it is not DeepSeek's model: clean failures), models against their own recordings
(pass), a perturbed model (fails at the step the perturbation reaches), bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.integration.vectors.conftest import (
    DEMO,
    RECORDED_STEPS,
    SHORT,
    ds4,
    only,
)

from ds4.adapters.gguf.reader import GGUFFile
from ds4.apps.cli import main


def report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    assert data["schema"] == "ds4-test-vectors-report-v1"
    return data


def test_the_demo_model_fails_the_official_short_cases_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = ds4("test-vectors", "-m", DEMO, *only(*SHORT), "--json", out, "--quiet")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "test-vectors: 0/3 cases passed" in done.stdout
    for case in SHORT:
        assert f"FAIL at step 0  {case}: ctx" in done.stdout
    data = report(out)
    assert (data["passed"], data["cases_passed"], data["source"]) == (
        False,
        0,
        "deepseek-official-api",
    )
    italian = data["cases"][0]
    assert (italian["id"], italian["ctx"], italian["first_failing_step"]) == (
        "short_italian_fact",
        16384,
        0,
    )
    assert italian["prompt_tokens"] == italian["recorded_prompt_tokens"] == 21
    step = italian["steps"][0]
    assert step["recorded"]["bytes"] == list(b"Ada") and not step["argmax_ok"]
    # the recorded token is somewhere in the demo model's ranking, far below the top 20
    assert step["recorded_here"]["rank"] > 20 and step["recorded_here"]["logprob"] < -4
    assert step["problems"][0] == "argmax differs"
    assert step["alternatives"][0]["delta"] == pytest.approx(step["recorded_here"]["logprob"])


@pytest.mark.slow
def test_the_demo_model_runs_a_long_official_case() -> None:
    done = ds4("test-vectors", "-m", DEMO, *only("long_code_audit"), "--quiet")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "long_code_audit: ctx 16384, 3844 prompt tokens (recorded 3844)" in done.stdout


@pytest.mark.slow
def test_the_demo_model_runs_every_official_case() -> None:
    done = ds4("test-vectors", "-m", DEMO, "--quiet")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "test-vectors: 0/5 cases passed" in done.stdout
    assert "3353 prompt tokens (recorded 3353)" in done.stdout


def test_the_demo_model_passes_its_own_recording(tmp_path: Path) -> None:
    recorded = tmp_path / "demo"
    made = ds4("test-vectors", "-m", DEMO, "--write-vectors", recorded, *only(*SHORT), "--quiet")
    assert made.returncode == 0, made.stderr[-2000:]
    assert (recorded / "official.vec").is_file() and (recorded / "manifest.json").is_file()
    done = ds4("test-vectors", "-m", DEMO, "--vectors", recorded, "--quiet")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "test-vectors: 3/3 cases passed" in done.stdout


def test_a_model_passes_its_own_fp32_recording_exactly(
    tiny_f32: Path, f32_vectors: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.json"
    done = ds4("test-vectors", "-m", tiny_f32, "--numerics", "fp32", "--vectors", f32_vectors,
               "--json", out, "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    data = report(out)
    assert data["cases_passed"] == 3
    for case in data["cases"]:
        assert len(case["steps"]) == RECORDED_STEPS
        assert case["max_abs_delta"] == 0.0
        # every one of the 20 recorded alternatives was compared, at rank 1..20
        for step in case["steps"]:
            assert [a["local"]["rank"] for a in step["alternatives"]] == list(range(1, 21))


def _first_new_token_step(vectors: Path, case: str) -> tuple[int, list[int]]:
    """A step k >= 1 whose chosen token appears nowhere in steps 0..k-1 (chosen or
    among the 20 alternatives), and that token's bytes."""
    record = json.loads((vectors / "official" / f"{case}.official.json").read_text())
    seen: set[tuple[int, ...]] = set()
    for step in record["steps"]:
        chosen = tuple(step["token"]["bytes"])
        if step["step"] >= 1 and chosen not in seen:
            return step["step"], list(chosen)
        seen |= {tuple(a["token"]["bytes"]) for a in step["top_logprobs"]}
    raise AssertionError("every chosen token appeared before")


def test_a_perturbed_model_fails_exactly_where_the_perturbation_shows(
    tiny_f32: Path, f32_vectors: Path, tmp_path: Path
) -> None:
    """Zero the output-head row of the token chosen at step k: the hidden states are
    untouched and that token is in no earlier top 20, so steps before k still pass and
    step k's argmax changes (its logit drops from the maximum to 0)."""
    case = SHORT[0]
    k, raw = _first_new_token_step(f32_vectors, case)
    record = json.loads((f32_vectors / "official" / f"{case}.official.json").read_text())
    token_id = _token_id(tiny_f32, bytes(raw))
    perturbed = tmp_path / "perturbed.gguf"
    shutil.copyfile(tiny_f32, perturbed)
    model = GGUFFile(str(tiny_f32))
    try:
        info = model.tensors["output.weight"]
        row_bytes = info.nbytes // info.numpy_shape[0]
        offset = info.offset + token_id * row_bytes
    finally:
        model.close()
    with perturbed.open("r+b") as handle:
        handle.seek(offset)
        handle.write(np.zeros(row_bytes // 4, np.float32).tobytes())
    out = tmp_path / "report.json"
    done = ds4("test-vectors", "-m", perturbed, "--numerics", "fp32", "--vectors", f32_vectors,
               "--only", case, "--json", out, "--quiet")  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:]
    steps = report(out)["cases"][0]["steps"]
    assert report(out)["cases"][0]["first_failing_step"] == k
    assert all(s["passed"] for s in steps[:k])
    assert steps[k]["problems"][0] == "argmax differs"
    assert steps[k]["recorded"]["bytes"] == raw == record["steps"][k]["token"]["bytes"]
    assert steps[k]["recorded_here"]["rank"] > 1


def _token_id(model: Path, raw: bytes) -> int:
    from ds4.apps import wiring

    tokenizer = wiring.tokenizer(str(model), gguf_only=True)
    return next(i for i in range(tokenizer.vocab_size) if tokenizer.token_bytes(i) == raw)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--only", "nope"), "no case 'nope' in manifest.json (cases: short_italian_fact,"),
        (("--skip", "nope"), "--skip nope: no such case"),
        (("--only", "short_italian_fact", "--skip", "short_italian_fact"), "leave no case"),
        (("--steps", "3"), "--steps only applies with --write-vectors"),
        (("--write-vectors", "tests/test-vectors"), "is the directory being read"),
        (("--write-vectors", "out", "--json", "r.json"), "--json reports a check"),
        (("--vectors", "."), "no manifest.json (not a test-vector directory)"),
        (("--tolerance", "-1"), "argument --tolerance: -1 is not in 0..1000"),
        (("--steps", "17"), "argument --steps: 17 is not in 1..16"),
        (("--chunk", "0"), "argument --chunk: 0 is not in 1..1048576"),
        (("--vectors", "/nonexistent"), "argument --vectors: /nonexistent does not exist"),
    ],
)
def test_bad_requests_are_one_line_errors_before_any_model_loads(
    args: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["test-vectors", "-m", str(DEMO), *args])
    except SystemExit as exit_:  # argparse's usage errors
        code = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1


def test_help_explains_every_flag_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["test-vectors", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for fragment in (
        "--vectors DIR",
        "tests/test-vectors",
        "(default: 4.0)",
        "(default: 2048)",
        "--write-vectors DIR",
        "Exit status: 0 every case passed, 1 a case failed",
    ):
        assert fragment in text, fragment
