"""The agent's tools against the local machine: the Workspace (files), Shell (background
jobs) and Browser (rendered web pages) ports.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ds4.adapters.files import read_limited
from ds4.domain.agent.tool_catalog import ToolError
from ds4.domain.engine.cancel import CancelCheck
from ds4.ports.agent import MAX_FILE_BYTES, DirEntry, EntryKind, FileStamp, JobSnapshot

# --- Workspace: the files -------------------------------------------------------------
# The Workspace port on the local filesystem, rooted at the working directory.
#
# Relative paths are taken from the root; `resolve` follows symlinks so the domain can
# tell when a path leaves the root. Writes go to a temp file in the target's directory
# and are renamed over it (an existing file keeps its mode; a new one gets the umask's).
# Directory walks never follow symlinks and skip `.git`.


def _reason(exc: OSError) -> str:
    return exc.strerror.lower() if exc.strerror else str(exc)


def _kind(mode: int) -> EntryKind:
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISLNK(mode):
        return "l"
    if stat.S_ISREG(mode):
        return "-"
    return "?"


class LocalWorkspace:
    def __init__(self, root: str) -> None:
        self._root = Path(root).resolve()

    @property
    def root(self) -> str:
        return str(self._root)

    def _abs(self, path: str) -> Path:
        return self._root / Path(path).expanduser()

    def resolve(self, path: str) -> str:
        return str(self._abs(path).resolve())

    def stamp(self, path: str) -> FileStamp | None:
        try:
            info = self._abs(path).stat()
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        return FileStamp(info.st_size, info.st_mtime_ns)

    def read(self, path: str) -> bytes:
        try:
            return read_limited(self._abs(path), MAX_FILE_BYTES)
        except OSError as exc:
            if exc.errno == errno.EFBIG:
                raise ToolError(f"file too large: {path} exceeds {MAX_FILE_BYTES} bytes") from None
            raise ToolError(f"cannot read {path}: {_reason(exc)}") from None

    def write(self, path: str, data: bytes) -> None:
        target = Path(self.resolve(path))
        if target.is_dir():
            raise ToolError(f"cannot write {path}: it is a directory")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else None
            tmp = target.with_name(f".{target.name}.tmp.{secrets.token_hex(4)}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                if mode is not None:
                    tmp.chmod(mode)
                tmp.replace(target)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise ToolError(f"cannot write {path}: {_reason(exc)}") from None

    def list_dir(self, path: str) -> list[DirEntry]:
        entries = []
        try:
            with os.scandir(self._abs(path)) as listing:
                for entry in listing:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        entries.append(DirEntry(entry.name, "?", 0))
                        continue
                    entries.append(DirEntry(entry.name, _kind(info.st_mode), info.st_size))
        except OSError as exc:
            raise ToolError(f"opendir failed: {_reason(exc)}") from None
        return entries

    def walk(self, path: str, max_depth: int) -> Iterator[str]:
        try:
            info = self._abs(path).lstat()
        except OSError as exc:
            raise ToolError(f"cannot search {path}: {_reason(exc)}") from None
        if stat.S_ISREG(info.st_mode):
            yield path
        elif stat.S_ISDIR(info.st_mode):
            yield from self._walk_dir(path, max_depth)

    def _walk_dir(self, path: str, depth: int) -> Iterator[str]:
        if depth < 0:
            return
        try:
            with os.scandir(self._abs(path)) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if entry.name == ".git" or entry.is_symlink():
                continue
            child = path.rstrip("/") + "/" + entry.name if path not in ("", ".") else entry.name
            if entry.is_file(follow_symlinks=False):
                yield child
            elif entry.is_dir(follow_symlinks=False):
                yield from self._walk_dir(child, depth - 1)


# --- Shell: background jobs -----------------------------------------------------------
# The Shell port: commands as background jobs of `/bin/sh -c`.
#
# Each job runs in its own process group (so a stop or a timeout reaches everything it
# started) with stdin from /dev/null; a reader thread copies its merged stdout+stderr to
# a private temp file (`ds4_agent_output_*`, kept after the job ends: the model may read
# it) and counts bytes and lines as they come. A timer kills the group at the timeout.

POLL_SECONDS = 0.05
STOP_GRACE = 1.0  # SIGTERM first, SIGKILL this long after


@dataclass
class _Job:
    job: int
    proc: subprocess.Popen[bytes]
    output_path: str
    timeout_sec: int
    started: float
    ended: float | None = None
    timed_out: bool = False
    output_bytes: int = 0
    newlines: int = 0
    last_byte: int = -1
    reader: threading.Thread | None = None
    timer: threading.Timer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def _exit_status(code: int | None) -> int:
    if code is None:
        return -1
    return code if code >= 0 else 128 - code


class LocalShell:
    def __init__(self, cwd: str) -> None:
        self._cwd = cwd
        self._jobs: dict[int, _Job] = {}
        self._next = 1
        self._lock = threading.Lock()

    def start(self, command: str, timeout_sec: int) -> JobSnapshot:
        fd, path = tempfile.mkstemp(prefix="ds4_agent_output_")
        sink = os.fdopen(fd, "wb")
        try:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", command],
                cwd=self._cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            sink.close()
            raise ToolError(f"cannot start /bin/sh: {exc.strerror or exc}") from None
        with self._lock:
            job = _Job(self._next, proc, path, timeout_sec, time.monotonic())
            self._jobs[job.job] = job
            self._next += 1
        assert proc.stdout is not None
        job.reader = threading.Thread(
            target=self._drain,
            args=(job, proc.stdout, sink),
            name=f"ds4-bash-{job.job}",
            daemon=True,
        )
        job.reader.start()
        job.timer = threading.Timer(timeout_sec, self._expire, args=(job,))
        job.timer.daemon = True
        job.timer.start()
        return self._snapshot(job)

    def _drain(self, job: _Job, pipe: IO[bytes], sink: IO[bytes]) -> None:
        with sink, pipe:
            while True:
                chunk = pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536)
                if not chunk:
                    break
                sink.write(chunk)
                sink.flush()
                with job.lock:
                    job.output_bytes += len(chunk)
                    job.newlines += chunk.count(b"\n")
                    job.last_byte = chunk[-1]

    def _expire(self, job: _Job) -> None:
        if job.proc.poll() is None:
            job.timed_out = True
            self._signal_group(job, signal.SIGKILL)

    @staticmethod
    def _signal_group(job: _Job, sig: signal.Signals) -> None:
        with contextlib.suppress(OSError):
            os.killpg(job.proc.pid, sig)
        with contextlib.suppress(OSError):
            job.proc.send_signal(sig)

    def _get(self, job: int) -> _Job:
        with self._lock:
            found = self._jobs.get(job)
        if found is None:
            raise ToolError(f"bash job not found: job={job} pid=0")
        return found

    def _snapshot(self, job: _Job) -> JobSnapshot:
        code = job.proc.poll()
        now = time.monotonic()
        if code is not None:
            if job.reader is not None:
                job.reader.join(timeout=0.5)  # the last output before it is reported
            if job.ended is None:
                job.ended = now
                if job.timer is not None:
                    job.timer.cancel()
        with job.lock:
            size, newlines, last = job.output_bytes, job.newlines, job.last_byte
        lines = newlines + (1 if size and last != 0x0A else 0)
        return JobSnapshot(
            job=job.job,
            pid=job.proc.pid,
            running=code is None,
            elapsed=(job.ended or now) - job.started,
            timeout_sec=job.timeout_sec,
            timed_out=job.timed_out,
            exit_status=_exit_status(code),
            output_path=job.output_path,
            output_bytes=size,
            output_lines=lines,
        )

    def wait(self, job: int, seconds: float, cancel: CancelCheck) -> JobSnapshot:
        found = self._get(job)
        deadline = time.monotonic() + seconds
        while found.proc.poll() is None and time.monotonic() < deadline and not cancel():
            time.sleep(POLL_SECONDS)
        return self._snapshot(found)

    def snapshot(self, job: int) -> JobSnapshot:
        return self._snapshot(self._get(job))

    def stop(self, job: int, seconds: float) -> JobSnapshot:
        found = self._get(job)
        if found.proc.poll() is None:
            self._signal_group(found, signal.SIGTERM)
            try:
                found.proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                self._signal_group(found, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    found.proc.wait(timeout=max(STOP_GRACE, seconds))
        return self._snapshot(found)

    def find(self, job: int, pid: int) -> int | None:
        with self._lock:
            if job > 0:
                return job if job in self._jobs else None
            for known in self._jobs.values():
                if known.proc.pid == pid:
                    return known.job
        return None

    def read_output(self, job: int, start: int, length: int) -> bytes:
        path = Path(self._get(job).output_path)
        try:
            with path.open("rb") as handle:
                handle.seek(start)
                return handle.read(max(0, length))
        except OSError:
            return b""

    def forget(self, job: int) -> None:
        with self._lock:
            self._jobs.pop(job, None)

    def jobs(self) -> list[int]:
        with self._lock:
            return sorted(self._jobs)

    def close(self) -> None:
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            if job.timer is not None:
                job.timer.cancel()
            if job.proc.poll() is None:
                self._signal_group(job, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    job.proc.wait(timeout=STOP_GRACE)


# --- Browser: headless Chromium -------------------------------------------------------
# The Browser port on a headless Chromium driven by Playwright
# (docs/adr/0051-agent-tools-and-web-page-tool.md).
#
# The browser is the system's Chromium (Debian: `apt-get install chromium`), found on
# PATH or named by $DS4_CHROMIUM; Playwright (`pip install playwright`) drives it through
# `executable_path`, so no browser download is ever needed. It starts on the first visit
# and lives until the agent leaves. A page becomes Markdown-like text in the page itself
# (headings, links, list items, code blocks, paragraphs).

PAGE_TIMEOUT_MS = 20_000
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = (
    "visit_page needs Chromium and the playwright package: apt-get install chromium "
    "(or set DS4_CHROMIUM to a Chromium or Chrome binary) and pip install playwright"
)

# Runs in the page: the visible document as Markdown-like text.
_TO_TEXT = r"""
() => {
  const out = [];
  const skip = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "SVG", "HEAD"]);
  const inline = (node) => {
    if (node.nodeType === Node.TEXT_NODE) return node.textContent.replace(/\s+/g, " ");
    if (node.nodeType !== Node.ELEMENT_NODE || skip.has(node.tagName)) return "";
    const style = window.getComputedStyle(node);
    if (style && (style.display === "none" || style.visibility === "hidden")) return "";
    const inner = Array.from(node.childNodes).map(inline).join("");
    if (node.tagName === "A" && node.href) return `[${inner.trim()}](${node.href})`;
    if (node.tagName === "CODE") return "`" + inner + "`";
    if (node.tagName === "BR") return "\n";
    return inner;
  };
  const blocks = new Set(["P", "DIV", "SECTION", "ARTICLE", "MAIN", "HEADER", "FOOTER",
    "NAV", "ASIDE", "TABLE", "TR", "FORM", "BLOCKQUOTE", "FIGURE", "BODY"]);
  const walk = (node) => {
    if (node.nodeType !== Node.ELEMENT_NODE || skip.has(node.tagName)) return;
    const tag = node.tagName;
    if (/^H[1-6]$/.test(tag)) { out.push("#".repeat(+tag[1]) + " " + inline(node).trim()); return; }
    if (tag === "LI") { out.push("- " + inline(node).trim()); return; }
    if (tag === "PRE") { out.push("```\n" + node.innerText.replace(/\n$/, "") + "\n```"); return; }
    const hasBlock = Array.from(node.children).some(
      (c) => blocks.has(c.tagName) || /^H[1-6]$/.test(c.tagName) ||
             ["UL", "OL", "LI", "PRE"].includes(c.tagName));
    if (!hasBlock) { const t = inline(node).trim(); if (t) out.push(t); return; }
    for (const child of node.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) {
        const t = child.textContent.trim(); if (t) out.push(t);
      } else walk(child);
    }
  };
  walk(document.body || document.documentElement);
  const title = document.title ? "# " + document.title.trim() + "\n\n" : "";
  return title + out.filter((t) => t.length).join("\n\n");
}
"""


def find_chromium() -> str | None:
    named = os.environ.get("DS4_CHROMIUM")
    if named:
        return named if os.access(named, os.X_OK) else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class ChromiumBrowser:
    def __init__(self) -> None:
        self._playwright: Any = None
        self._browser: Any = None

    def _launch(self) -> Any:
        if self._browser is not None:
            return self._browser
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            raise ToolError(INSTALL_HINT + " (the playwright package is missing)") from None
        executable = find_chromium()
        if executable is None:
            raise ToolError(INSTALL_HINT + " (no Chromium found)")
        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=executable, headless=True
            )
        except Exception as exc:  # Playwright's own Error: the launch failed
            self._playwright.stop()
            self._playwright = None
            raise ToolError(
                f"cannot start Chromium ({executable}): {str(exc).splitlines()[0]}"
            ) from None
        return self._browser

    def visit(self, url: str, cancel: CancelCheck) -> str:
        if cancel():
            raise ToolError("interrupted")
        browser = self._launch()
        page = browser.new_page()
        try:
            page.goto(url, timeout=PAGE_TIMEOUT_MS, wait_until="load")
            if cancel():
                raise ToolError("interrupted")
            return str(page.evaluate(_TO_TEXT))
        except ToolError:
            raise
        except Exception as exc:  # Playwright's Error and TimeoutError
            raise ToolError(f"cannot open {url}: {str(exc).splitlines()[0]}") from None
        finally:
            page.close()

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._browser = None
        if self._playwright is not None:
            self._playwright.stop()
            self._playwright = None
