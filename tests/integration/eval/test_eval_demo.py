"""`ds4 eval` on the shipped demo model (docs/demo-model.md): the engine path end to end
with the sample suite. The demo model knows one Italian novel, so it answers nothing;
the point is that every stage runs and reports (scores near zero are expected)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.integration.eval.eval_files import ds4_eval

DEMO = Path(__file__).resolve().parents[3] / "models" / "demo.gguf"

pytestmark = pytest.mark.skipif(not DEMO.exists(), reason="models/demo.gguf is not here")


def check_run(tmp_path: Path, *flags: str) -> dict[str, object]:
    trace, report = tmp_path / "demo.trace", tmp_path / "demo.json"
    result = ds4_eval(
        "-m", str(DEMO), "--plain", "--temp", "0", "--seed", "1", "--trace", str(trace),
        "--json", str(report), *flags, timeout=600,
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr  # 1: some case failed
    assert "Traceback" not in result.stderr
    assert "context auto-sized to" in result.stderr
    assert "#   state      prompt      gen    total given    correct  test" in result.stdout
    data: dict[str, object] = json.loads(report.read_text())
    cases = data["cases"]
    assert isinstance(cases, list) and cases
    assert all(c["state"] in ("PASSED", "FAILED") for c in cases)
    assert all(c["prompt_tokens"] > 0 and c["generated_tokens"] > 0 for c in cases)
    regrade = ds4_eval("--regrade-trace", str(trace))
    assert regrade.returncode == 0, regrade.stdout
    passed = sum(c["state"] == "PASSED" for c in cases)
    assert f"passed={passed} failed={len(cases) - passed} changed=0" in regrade.stdout
    return data


def test_demo_model_first_cases(tmp_path: Path) -> None:
    budgets = ["-n", "256", "--hard-limit-reply-budget", "64", "--soft-limit-reply-budget", "128"]
    data = check_run(tmp_path, "--suite", "all", "--case-sequence", "1,9,14,25", *budgets)
    cases = data["cases"]
    assert isinstance(cases, list)
    kinds = [c["answer_kind"] for c in cases]
    assert kinds == ["INTEGER", "MULTIPLE_CHOICE", "ORDERED_SEQUENCE", "LINE_SET"]


@pytest.mark.slow
def test_demo_model_whole_sample_suite(tmp_path: Path) -> None:
    data = check_run(tmp_path, "--suite", "all")
    assert data["total"] == 29
