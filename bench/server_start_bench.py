"""`ds4 server` start-up time: a baseline source tree against this one, runs alternating.

Each run is a fresh interpreter with PYTHONPATH set to one tree's src/. Two measures:
- build: importing the tree's server root (`bootstrap_server`, or `build_server` in
  trees from before it) and building the server graph: model file open + validation,
  tokenizer, runner, KV model tag (the disk cache is on), worker, HTTP app;
- http: `python -m ds4 server -m MODEL --kv-disk-dir D` until GET /v1/models answers
  (interpreter start, imports, build and uvicorn start).
Runs go A B A B ..., so a busy machine slows both trees alike; medians are printed.
Run: .venv/bin/python bench/server_start_bench.py --base /work/main/src
         [--model /tmp/ds4-demo/tiny.gguf] [--runs 5] [--backend cpu]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "src"

BUILD = r"""
import sys, tempfile, time
start = time.perf_counter()
try:
    from ds4.apps.server_bootstrap import bootstrap_server as build
    from ds4.apps.options import ServerOptions
except ImportError:  # a tree from before the composition root
    from ds4.apps.server_app import ServerOptions, build_server as build
with tempfile.TemporaryDirectory() as kv:
    build(ServerOptions(model=sys.argv[1], backend=sys.argv[2], ctx=4096, kv_disk_dir=kv))
    print(time.perf_counter() - start)
"""


def build_seconds(src: Path, model: str, backend: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", BUILD, model, backend], env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return float(done.stdout.split()[-1])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_seconds(src: Path, model: str, backend: str) -> float:
    """From process start until /v1/models answers 200."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    port = free_port()
    kv = tempfile.TemporaryDirectory()
    start = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "ds4", "server", "-m", model, "--backend", backend,
         "--port", str(port), "-c", "4096", "--kv-disk-dir", kv.name],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        while True:
            if server.poll() is not None:
                err = server.stderr.read().decode() if server.stderr is not None else ""
                raise RuntimeError(f"server exited: {err[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
                    if r.status == 200:
                        return time.perf_counter() - start
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.01)
    finally:
        server.terminate()
        server.wait(30)
        kv.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, type=Path, help="baseline tree's src/")
    parser.add_argument("--model", default="/tmp/ds4-demo/tiny.gguf")
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not Path(args.model).is_file():  # the default demo model, made once
        Path(args.model).parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(HERE)}
        make = [sys.executable, "-m", "ds4", "gguf", "tiny", "--out", args.model, "--quiet"]
        subprocess.run(make, env=env, check=True)
    trees = {"base": args.base.resolve(), "this": HERE}
    times: dict[tuple[str, str], list[float]] = {}
    for run in range(args.runs):
        for name, src in trees.items():
            for kind, measure in (("build", build_seconds), ("http", http_seconds)):
                seconds = measure(src, args.model, args.backend)
                times.setdefault((name, kind), []).append(seconds)
                print(f"run {run + 1} {name:4} {kind:5} {seconds:6.3f} s", flush=True)
    size = Path(args.model).stat().st_size / 2**20
    print(f"\n{args.model} ({size:.0f} MiB), backend {args.backend}, medians of {args.runs}:")
    for kind in ("build", "http"):
        base = statistics.median(times[("base", kind)])
        this = statistics.median(times[("this", kind)])
        print(f"  {kind:5} base {base:6.3f} s   this {this:6.3f} s   saved {base - this:+.3f} s")


if __name__ == "__main__":
    main()
