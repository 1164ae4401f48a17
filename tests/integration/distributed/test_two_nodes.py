"""Two Ray nodes on one machine (`ray start --head` and `ray start --address`, each with a
resource of its own), the demo model's layer-shard files one per range: the ranges go
to different nodes, the logits equal one process's bit for bit at 32 bits, and killing
one node (its raylet and its workers) mid-stream ends that stream as a lost worker
does; once a node is back the next request answers with the text of before."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest
from tests.integration.server.server_process import free_port, server_process
from tools.demo.files import DEMO

from ds4.adapters.compute.ray.runner import ray_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not ray_available(), reason="Ray is not installed (pip install 'ds4[distributed]')"
    ),
]

DS4 = [sys.executable, "-m", "ds4"]
RAY = str(Path(sys.executable).with_name("ray"))
SRC = str(Path(__file__).resolve().parents[3] / "src")
PROMPT = "Quel ramo del lago di Como"
PLACED = re.compile(r"distributed layers (\d-\d): pid (\d+) on \S+ \(node ([0-9a-f]{8})\)")

# the split model's logits against the single-process cpu backend's, in a process of
# its own (a Ray client: the test process may hold a local Ray instance of other tests)
EXACT_CHECK = """
import sys
import numpy as np
from ds4.adapters.compute.cpu import cpu_runner
from ds4.adapters.compute.ray import ray_runner
from ds4.adapters.gguf.model_files import load_model
from ds4.apps import wiring
from ds4.domain.distributed import parse_target

address, demo, *shards = sys.argv[1:]
opened = wiring.open_model(shards[0], shards=tuple(shards))
split = ray_runner(opened.file, opened.hparams, target=parse_target(address), numerics="exact",
                   threads=1, piece=8)
one = cpu_runner(*load_model(demo), numerics="exact", threads=1)
ids = [int(t) for t in np.random.default_rng(5).integers(100, 6000, 40)]
a, b = one.new_session(128), split.new_session(128)
same = np.array_equal(a.prefill(ids, all_logits=True), b.prefill(ids, all_logits=True))
for t in (17, 23, 5, 99):
    same = same and np.array_equal(a.eval(t), b.eval(t))
for line in split.describe():
    print(line)
print("exact" if same else "differ")
split.close()
"""


def env() -> dict[str, str]:
    # a cluster with token authentication: the nodes and the clients send the token
    return {**os.environ, "PYTHONPATH": SRC, "RAY_AUTH_MODE": "token"}


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 180
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, f"no {what}"
            time.sleep(0.5)


def alive_nodes(gcs: str) -> list[str]:
    done = subprocess.run([RAY, "status", "--address", gcs], capture_output=True, text=True,
                          timeout=120, env=env(), check=False)  # fmt: skip
    active = done.stdout.split("Active:", 1)[-1].split("Pending:", 1)[0]
    return re.findall(r"node_[0-9a-f]+", active)


def wait_nodes(gcs: str, count: int) -> None:
    deadline = time.monotonic() + 240
    while len(alive_nodes(gcs)) != count:
        assert time.monotonic() < deadline, f"the cluster never had {count} live nodes"
        time.sleep(2)


def start_node(gcs: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [RAY, "start", "--block", "--address", gcs, "--num-cpus", "1", "--resources",
         '{"node_b": 1}', "--object-store-memory", str(100 << 20), "--disable-usage-stats"],
        env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


@contextmanager
def two_nodes() -> Iterator[tuple[str, str]]:
    """A head (resource node_a) and a second node (node_b); (gcs address, ray:// address)."""
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths live there
    gcs_port, client_port = free_port(), free_port()
    gcs = f"127.0.0.1:{gcs_port}"
    head = subprocess.Popen(
        [RAY, "start", "--head", "--block", "--port", str(gcs_port), "--ray-client-server-port",
         str(client_port), "--num-cpus", "1", "--resources", '{"node_a": 1}',
         "--object-store-memory", str(100 << 20), "--include-dashboard", "false",
         "--disable-usage-stats", "--temp-dir", temp],
        env=env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    nodes = [head]
    try:
        wait_port(client_port, head, "Ray head")
        nodes.append(start_node(gcs))
        wait_nodes(gcs, 2)
        yield gcs, f"ray://127.0.0.1:{client_port}"
    finally:
        for proc in reversed(nodes):
            stop(proc)
        shutil.rmtree(temp, ignore_errors=True)


def raylet_of(pid: int) -> tuple[int, str]:
    """The raylet a worker process belongs to (its parent), and its command line."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    parent = int(fields[1])
    return parent, Path(f"/proc/{parent}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def kill_node(raylet: int) -> None:
    """SIGKILL a node as a crash would: its raylet and the processes it started."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == raylet:
                children.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue  # a process that ended meanwhile
    for pid in [raylet, *children]:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def body(max_tokens: int, stream: bool) -> dict[str, object]:
    return {"model": "ds4", "max_tokens": max_tokens, "temperature": 0, "stream": stream,
            "messages": [{"role": "user", "content": PROMPT}],
            "thinking": {"type": "disabled"}}  # fmt: skip


def test_two_nodes_run_their_shards_exactly_and_recover_from_a_lost_node(tmp_path: Path) -> None:
    split = subprocess.run(
        [*DS4, "gguf", "split", "--layers", "0-1,2-output", str(DEMO), str(tmp_path / "demo")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert split.returncode == 0, split.stderr[-2000:]
    shards = [str(tmp_path / "demo-layers00-01.gguf"), str(tmp_path / "demo-layers02-output.gguf")]
    with two_nodes() as (gcs, address):
        exact = subprocess.run(
            [sys.executable, "-c", EXACT_CHECK, address, str(DEMO), *shards],
            capture_output=True, text=True, timeout=300, env=env(), check=False,
        )  # fmt: skip
        assert exact.returncode == 0, exact.stderr[-3000:]
        lines = exact.stdout.splitlines()
        assert lines[-1] == "exact"
        nodes = [re.search(r"\(node ([0-9a-f]{8})\)", line) for line in lines[:-1]]
        assert len(nodes) == 2 and all(nodes)
        assert nodes[0].group(1) != nodes[1].group(1)  # type: ignore[union-attr]

        args = ["--distributed", address, "--layer-files", ",".join(shards), "-t", "2",
                "--ctx", "4096"]  # fmt: skip
        with server_process(args, timeout=300) as server:
            assert server.proc.stderr is not None
            placed: dict[str, tuple[int, str]] = {}
            while len(placed) < 2:
                line = server.proc.stderr.readline()
                assert line, "the server ended before placing its workers"
                found = PLACED.search(line)
                if found:
                    placed[found.group(1)] = (int(found.group(2)), found.group(3))
            assert placed["0-1"][1] != placed["2-3"][1]  # pinned to different nodes
            url = server.url + "/v1/messages"
            before = httpx.post(url, json=body(24, False), timeout=240)
            assert before.status_code == 200
            text = before.json()["content"][0]["text"]

            # the range on the second node (the head's raylet also serves the cluster)
            raylets = [raylet_of(pid) for pid, _ in placed.values()]
            on_b = [pid for pid, cmd in raylets if "raylet" in cmd and "node_b,1" in cmd]
            assert len(on_b) == 1, raylets
            raylet = on_b[0]
            events = []
            with httpx.stream("POST", url, json=body(3000, True), timeout=300) as reply:
                assert reply.status_code == 200
                for line in reply.iter_lines():
                    events.append(line)
                    if line.startswith("event: content_block_delta") and raylet:
                        kill_node(raylet)  # node B, mid-decode
                        raylet = 0
            assert "event: error" in events, events[-5:]
            assert "event: message_stop" not in events

            wait_nodes(gcs, 1)  # the cluster has noticed
            node_b = start_node(gcs)  # the node comes back (a new node id)
            try:
                wait_nodes(gcs, 2)
                after = httpx.post(url, json=body(24, False), timeout=300)
                assert after.status_code == 200, after.text[-2000:]
                assert after.json()["content"][0]["text"] == text
            finally:
                stop(node_b)
