"""Issue 14 item 8: a large body costs a small multiple of its size, however many come
at once. Measured on a real `ds4 server` process (its peak RSS, VmHWM); before the fix
one 60 MiB body took 38x its size and 30 s, four at once 3.9 GB
(bench/body_memory_bench.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest
from tests.integration.server.server_process import scripted_args, server_process

MIB = 1 << 20


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_large_bodies_cost_a_bounded_multiple_of_their_size(tmp_path: Path) -> None:
    text = "x" * (32 * MIB)
    body = json.dumps({"messages": [{"role": "user", "content": text}]}).encode()
    with server_process(scripted_args(tmp_path, ["ok"])) as server:
        before = peak_rss(server.proc.pid)
        answers: list[httpx.Response] = []

        def post() -> None:
            answers.append(
                httpx.post(
                    server.url + "/v1/chat/completions",
                    content=body,
                    headers={"Content-Type": "application/json"},
                    timeout=120,
                )
            )

        threads = [threading.Thread(target=post) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        growth = peak_rss(server.proc.pid) - before
    for answer in answers:
        error = answer.json()["error"]
        assert answer.status_code == 400 and error["code"] == "context_length_exceeded"
        assert error["message"].startswith("Prompt has at least ")
    # one body read, parsed and rendered at a time: about 3x one body, not 3 bodies' worth
    assert growth < 4 * len(body), f"peak grew {growth / MIB:.0f} MiB"
