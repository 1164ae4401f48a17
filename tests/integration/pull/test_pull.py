"""`ds4 pull` end to end: the real huggingface_hub client (in a `ds4 pull` process)
against a loopback server speaking the hub's file API (hub_server.py): listing, HEAD
with redirects and linked sizes/ETags, ranged GETs, a gated repository, a connection
dropped mid-file, a damaged file on disk."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integration.pull.hub_server import HubState, LoopbackHub

from ds4.domain.model_catalog import HUB_REPO, LINK_NAME, catalog_entry

REPO = Path(__file__).resolve().parents[3]
Q2 = catalog_entry("q2-imatrix").files[0]
MTP = catalog_entry("mtp").files[0]
LOW, HIGH = catalog_entry("pro-q4-split").files
SECRET = "hf_loopbackSecretToken123"


def _content(seed: str, size: int) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}{counter}".encode()).digest()
        counter += 1
    return bytes(out[:size])


@pytest.fixture
def hub() -> Iterator[LoopbackHub]:
    files = {
        Q2: _content("q2", 300_000),
        MTP: _content("mtp", 40_000),
        LOW: _content("low", 20_000),
        HIGH: _content("high", 10_000),
        "README.md": b"# loopback\n",
    }
    server = LoopbackHub(HubState(HUB_REPO, files))
    yield server
    server.close()


def pull(
    hub: LoopbackHub, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    clean.update({
        "HF_ENDPOINT": hub.endpoint,
        "HF_HOME": str(cwd / "hf-home"),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
        "NO_PROXY": "127.0.0.1",
    })  # fmt: skip
    clean.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ds4", "pull", *args],
        cwd=cwd, env=clean, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_main_model_is_fetched_verified_and_linked(hub: LoopbackHub, tmp_path: Path) -> None:
    done = pull(hub, tmp_path, "q2-imatrix")
    assert done.returncode == 0, done.stderr
    target = tmp_path / "gguf" / Q2
    assert target.read_bytes() == hub.state.files[Q2]
    link = tmp_path / LINK_NAME
    assert link.is_symlink() and link.readlink() == Path("gguf") / Q2
    assert link.resolve() == target.resolve()
    assert not list(tmp_path.glob(f".{LINK_NAME}.*"))
    assert hub.cdn_gets() == [None]

    again = pull(hub, tmp_path, "q2-imatrix")
    assert again.returncode == 0, again.stderr
    assert "already here, verified" in again.stderr
    assert hub.cdn_gets() == [None]  # nothing fetched twice


def test_parts_leave_the_link_alone(hub: LoopbackHub, tmp_path: Path) -> None:
    (tmp_path / LINK_NAME).symlink_to("elsewhere.gguf")
    for name in ("mtp", "pro-q4-split"):
        done = pull(hub, tmp_path, name, "--dir", "models")
        assert done.returncode == 0, done.stderr
    for file in (MTP, LOW, HIGH):
        assert (tmp_path / "models" / file).read_bytes() == hub.state.files[file]
    assert (tmp_path / LINK_NAME).readlink() == Path("elsewhere.gguf")


def test_a_gated_repository_wants_a_token_and_never_prints_it(
    hub: LoopbackHub, tmp_path: Path
) -> None:
    hub.state.gated_token = SECRET
    refused = pull(hub, tmp_path, "mtp")
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "401" in refused.stderr and "--token" in refused.stderr
    assert "Traceback" not in refused.stderr

    wrong = pull(hub, tmp_path, "mtp", "--token", "hf_wrong")
    assert wrong.returncode == 2 and "hf_wrong" not in wrong.stderr

    by_flag = pull(hub, tmp_path, "mtp", "--token", SECRET, "--dir", "a")
    by_env = pull(hub, tmp_path, "mtp", "--dir", "b", env={"HF_TOKEN": SECRET})
    (tmp_path / "hf-home").mkdir(exist_ok=True)
    (tmp_path / "hf-home" / "token").write_text(SECRET)
    by_cache = pull(hub, tmp_path, "mtp", "--dir", "c")
    for done, where in ((by_flag, "a"), (by_env, "b"), (by_cache, "c")):
        assert done.returncode == 0, done.stderr
        assert SECRET not in done.stderr + done.stdout
        assert (tmp_path / where / MTP).read_bytes() == hub.state.files[MTP]


def test_an_interrupted_pull_resumes_where_it_stopped(hub: LoopbackHub, tmp_path: Path) -> None:
    hub.state.cut_after = 100_000
    hub.state.stay_down = True  # the network stays away: the client's own retries fail too
    cut = pull(hub, tmp_path, "q2-imatrix")
    assert cut.returncode == 2
    assert len(cut.stderr.strip().splitlines()) == 2, cut.stderr  # "fetching ..." + the error
    assert "run the pull again to resume" in cut.stderr
    assert not (tmp_path / "gguf" / Q2).exists()
    assert not (tmp_path / LINK_NAME).exists()

    hub.state.down = False
    resumed = pull(hub, tmp_path, "q2-imatrix")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming at" in resumed.stderr
    assert hub.cdn_gets()[-1] == "bytes=100000-"
    assert (tmp_path / "gguf" / Q2).read_bytes() == hub.state.files[Q2]
    assert (tmp_path / LINK_NAME).is_symlink()


def test_a_dropped_connection_is_resumed_by_the_client(hub: LoopbackHub, tmp_path: Path) -> None:
    hub.state.cut_after = 50_000
    done = pull(hub, tmp_path, "q2-imatrix")
    assert done.returncode == 0, done.stderr
    assert hub.cdn_gets() == [None, "bytes=50000-"]
    assert (tmp_path / "gguf" / Q2).read_bytes() == hub.state.files[Q2]


@pytest.mark.parametrize("damage", ["flipped byte", "truncated"])
def test_a_damaged_file_is_named_and_fetched_again(
    hub: LoopbackHub, tmp_path: Path, damage: str
) -> None:
    assert pull(hub, tmp_path, "mtp").returncode == 0
    path = tmp_path / "gguf" / MTP
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        del data[-10:]
    else:
        data[1234] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(1, 1))  # a new mtime even on a coarse clock

    done = pull(hub, tmp_path, "mtp")
    assert done.returncode == 0, done.stderr
    assert f"{MTP}:" in done.stderr and "fetching it again" in done.stderr
    assert path.read_bytes() == hub.state.files[MTP]
    assert len(hub.cdn_gets()) == 2
