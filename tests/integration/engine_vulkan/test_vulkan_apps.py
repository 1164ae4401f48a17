"""`ds4 server` and `ds4 bench` with --backend vulkan on the demo model, as a user runs
them (subprocesses, the openai SDK on loopback); the cli has its own test beside this."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import openai
from tests.integration.server.server_process import server_process

ROOT = Path(__file__).resolve().parents[3]
DEMO = str(ROOT / "models/demo.gguf")


def _chat(backend: str) -> tuple[str, int]:
    args = ["-m", DEMO, "--backend", backend, "--numerics", "fp32"]
    with server_process(args, timeout=300) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="deepseek-chat",  # thinking off, so temperature 0 is greedy
            messages=[{"role": "user", "content": "Chi era Renzo?"}],
            max_tokens=5,
            temperature=0,
            timeout=300,
        )
    assert reply.usage is not None
    return reply.choices[0].message.content or "", reply.usage.completion_tokens


def test_server_answers_like_the_reference_backend(vulkan_ok: None) -> None:
    text, n = _chat("vulkan")
    assert n == 5
    assert text
    assert (text, n) == _chat("reference")


def test_bench_reports_one_submission_and_no_host_fallbacks(
    vulkan_ok: None, tmp_path: Path
) -> None:
    prompt = tmp_path / "prompt.txt"
    novel = (ROOT / "data/promessi_sposi.txt").read_text(encoding="utf-8")
    prompt.write_text(novel[:2000], encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "ds4", "bench", "-m", DEMO, "--backend", "vulkan",
         "--prompt-file", str(prompt), "--ctx-start", "32", "--ctx-max", "32",
         "--gen-tokens", "2"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout + result.stderr
    rows = [line for line in out.splitlines() if line.startswith("32,")]
    assert len(rows) == 1 and rows[0].split(",")[3] == "2"
    assert "1 submission(s), host fallbacks: none" in out


def test_server_refuses_exact_numerics_on_vulkan(vulkan_ok: None) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ds4", "server", "-m", DEMO, "--backend", "vulkan",
         "--numerics", "exact", "--port", "1"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "exact" in result.stderr
