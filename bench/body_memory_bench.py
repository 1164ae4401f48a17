"""Peak server memory for one large POST body (issue 14 item 8).

Starts `ds4 server --backend scripted` from a source tree in a fresh interpreter,
reads its peak RSS (VmHWM) once it answers /health, posts one JSON body of about
--mib MiB to /v1/chat/completions (a single user message of ASCII text, or --unicode
text) and reads VmHWM again; the growth over the body size is the memory multiple.
Linux only (/proc). Run: .venv/bin/python bench/body_memory_bench.py [--src DIR]
    [--mib 60] [--unicode] [--parallel 1]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "src"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


def post(url: str, body: bytes, results: list[str]) -> None:
    request = urllib.request.Request(
        url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            results.append(str(response.status))
    except urllib.error.HTTPError as error:
        results.append(f"{error.code} {error.read()[:120]!r}")
    except OSError as error:
        results.append(f"{type(error).__name__}: {error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=HERE, help="the tree's src/ directory")
    parser.add_argument("--mib", type=float, default=60.0, help="body size in MiB")
    parser.add_argument("--unicode", action="store_true", help="non-ASCII text ('é' * n)")
    parser.add_argument("--parallel", type=int, default=1, help="bodies posted at once")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="server flags")
    args = parser.parse_args()
    size = int(args.mib * 1024 * 1024)
    text = "é" * (size // 2) if args.unicode else "x" * size
    payload = {"messages": [{"role": "user", "content": text}]}
    body = json.dumps(payload, ensure_ascii=False).encode()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text('["</think>ok"]')
        port = free_port()
        env = {**os.environ, "PYTHONPATH": str(args.src)}
        command = [sys.executable, "-m", "ds4", "server", "--backend", "scripted",
                   "--script", str(script), "--port", str(port), *args.extra]  # fmt: skip
        proc = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, proc)
            before = peak_rss(proc.pid)
            results: list[str] = []
            threads = [
                threading.Thread(target=post, args=(url, body, results))
                for _ in range(args.parallel)
            ]
            start = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            seconds = time.perf_counter() - start
            after = peak_rss(proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)
    growth = after - before
    print(f"body {len(body) / 2**20:.1f} MiB x{args.parallel}: answers {results}")
    print(f"peak RSS {before / 2**20:.0f} MiB idle -> {after / 2**20:.0f} MiB "
          f"(+{growth / 2**20:.0f} MiB, {growth / (len(body) * args.parallel):.1f}x the "
          f"bodies) in {seconds:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
