"""The agent's local adapters: files (atomic writes, limits, listing, walking, where a
path really points) and shell jobs (exit status, output file, timeout, stop, group)."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from ds4.adapters.agent.tools import LocalShell, LocalWorkspace
from ds4.domain.agent.file_tools import is_inside
from ds4.domain.agent.tool_catalog import ToolError
from ds4.domain.agent.toolbox import BashJobs
from ds4.ports.agent import MAX_FILE_BYTES


def test_write_is_atomic_keeps_the_mode_and_makes_parents(tmp_path: Path) -> None:
    ws = LocalWorkspace(str(tmp_path))
    script = tmp_path / "run.sh"
    script.write_text("old")
    script.chmod(0o751)
    ws.write("run.sh", b"new")
    assert script.read_bytes() == b"new"
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    ws.write("deep/er/file.txt", b"x")
    assert (tmp_path / "deep/er/file.txt").read_bytes() == b"x"
    assert [p.name for p in tmp_path.iterdir() if ".tmp." in p.name] == []
    with pytest.raises(ToolError, match="it is a directory"):
        ws.write("deep", b"x")


def test_reads_are_bounded_and_errors_name_the_path(tmp_path: Path) -> None:
    ws = LocalWorkspace(str(tmp_path))
    big = tmp_path / "big.bin"
    with big.open("wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: costs nothing
    with pytest.raises(ToolError, match=r"file too large: big.bin exceeds 16777216 bytes"):
        ws.read("big.bin")
    with pytest.raises(ToolError, match=r"cannot read missing\.txt: no such file or directory"):
        ws.read("missing.txt")
    with pytest.raises(ToolError, match=r"cannot read \.: not a regular file"):
        ws.read(".")


def test_listing_and_walking_never_follow_symlinks(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src/a.py").write_text("a")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git/config").write_text("x")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (tmp_path / "link").symlink_to(outside)
    ws = LocalWorkspace(str(tmp_path))
    kinds = {e.name: e.kind for e in ws.list_dir(".")}
    assert kinds == {"src": "d", ".git": "d", "link": "l"}
    assert list(ws.walk(".", 24)) == ["src/a.py"]
    assert list(ws.walk("src/a.py", 24)) == ["src/a.py"]
    assert not is_inside(ws.root, ws.resolve("link/secret.txt"))
    assert is_inside(ws.root, ws.resolve("src/../src/a.py"))
    assert not is_inside(ws.root, ws.resolve("../x"))
    with pytest.raises(ToolError, match="opendir failed"):
        ws.list_dir("nope")


def _pid_alive(pid: int) -> bool:
    """A zombie waiting to be reaped counts as gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def test_a_job_reports_its_exit_status_and_keeps_its_output(tmp_path: Path) -> None:
    shell = LocalShell(str(tmp_path))
    jobs = BashJobs(shell)
    snap = shell.start("pwd; echo err >&2; printf 'no newline'; exit 3", 60)
    done = shell.wait(snap.job, 30, lambda: False)
    assert not done.running and done.exit_status == 3 and not done.timed_out
    assert Path(done.output_path).name.startswith("ds4_agent_output_")
    text = jobs.observe(done)
    assert text.endswith(f"<output>\n{tmp_path.resolve()}\nerr\nno newline\n</output>\n")
    assert "exit_status=3\n" in text
    assert done.output_lines == 3
    assert shell.jobs() == []  # forgotten after its final observation
    assert Path(done.output_path).exists()  # the file stays for the model to read
    Path(done.output_path).unlink()


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    shell = LocalShell(str(tmp_path))
    snap = shell.start("sleep 30 & echo $! > child.pid; wait", 1)
    done = shell.wait(snap.job, 20, lambda: False)
    assert done.timed_out and done.exit_status == 128 + 9
    child = int((tmp_path / "child.pid").read_text())
    for _ in range(50):
        if not _pid_alive(child):
            break
        time.sleep(0.05)
    assert not _pid_alive(child)
    shell.close()


def test_stop_and_cancelled_waits(tmp_path: Path) -> None:
    shell = LocalShell(str(tmp_path))
    snap = shell.start("trap '' TERM; echo started; sleep 30", 600)
    waited = shell.wait(snap.job, 30, lambda: True)  # the user's interrupt: returns at once
    assert waited.running
    for _ in range(200):  # the trap is set once `started` is out
        if shell.snapshot(snap.job).output_bytes:
            break
        time.sleep(0.02)
    assert shell.find(0, snap.pid) == snap.job
    stopped = shell.stop(snap.job, 5)  # TERM is ignored: KILL after the grace second
    assert not stopped.running and stopped.exit_status == 128 + 9
    shell.close()
