"""The disk KV cache with the reference engine on a tiny random model: real DSV4
payloads survive a restart, and the restored state decodes exactly like a cold one."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.integration.server.live_server import live_server

from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.domain.kvcache.policy import KvCacheOptions

OPTS = KvCacheOptions(
    budget_bytes=0, min_tokens=16, boundary_trim_tokens=0, boundary_align_tokens=16,
    continued_interval_tokens=0,
)  # fmt: skip
SYSTEM = "You are a terse assistant. Answer in one short sentence. " * 2


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kvref") / "tiny.gguf"
    made = subprocess.run(
        [sys.executable, "-m", "ds4", "gguf", "tiny", "--quant", "f32", "--preset",
         "tiny-2layer", "--out", str(out), "--quiet"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    return out


def ask(tmp: Path, model: Path, kv_dir: Path | None, messages: list[dict[str, str]],
        trace: io.StringIO) -> dict[str, Any]:  # fmt: skip
    body = {"messages": messages, "max_tokens": 6, "think": False, "temperature": 0}
    kv: dict[str, Any] = {"kv_disk_dir": str(kv_dir), "kv_cache": OPTS} if kv_dir else {}
    with live_server(tmp, ["unused"], trace=trace, backend="reference", model=str(model),
                     ctx=512, **kv) as live:  # fmt: skip
        response = httpx.post(live.base + "/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


@pytest.mark.slow  # three server starts on the reference engine (~25 s on 2 cores)
def test_restart_restores_a_real_payload_and_decodes_like_a_cold_prefill(
    tiny_model: Path, tmp_path: Path
) -> None:
    kv_dir = tmp_path / "kv"
    first_messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"}]
    first = ask(tmp_path, tiny_model, kv_dir, first_messages, io.StringIO())
    answer = first["choices"][0]["message"]["content"]
    files = list(DiskKVStore(kv_dir).entries())
    assert files and all(e.header.quant_bits == 2 for e in files)

    messages = [*first_messages, {"role": "assistant", "content": answer},
                {"role": "user", "content": "More"}]  # fmt: skip
    trace = io.StringIO()
    resumed = ask(tmp_path, tiny_model, kv_dir, messages, trace)
    cold = ask(tmp_path, tiny_model, None, messages, io.StringIO())
    assert "source=disk-text" in trace.getvalue()
    reused = resumed["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert reused > 0 and cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    evaluated = re.findall(r"evaluated=(\d+)", trace.getvalue())
    assert evaluated == [str(resumed["usage"]["prompt_tokens"] - reused)]
    assert resumed["choices"][0]["message"]["content"] == cold["choices"][0]["message"]["content"]
