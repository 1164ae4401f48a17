"""A loopback stand-in for the Hugging Face Hub's file API, as huggingface_hub's
HfApi.model_info and hf_hub_download use it, on 127.0.0.1 only:

- the hub origin: GET /api/models/{repo}[/revision/{rev}] (the listing, with sizes and
  LFS sha256 when ?blobs=True), HEAD|GET /{repo}/resolve/{rev}/{file}: a relative 307 to
  the commit's URL (followed, same origin), then a 302 to the CDN origin carrying
  X-Repo-Commit, X-Linked-Etag and X-Linked-Size, as the hub answers for an LFS file;
  a gated repository answers 401 without the right bearer token;
- the CDN origin (another port, so the client stops following there and keeps the
  hub's headers): GET /cdn/{sha256} with Range: bytes=N-, able to drop the connection
  mid-body and then answer 503, as a network that goes away does.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HubState:
    repo: str
    files: dict[str, bytes]
    gated_token: str | None = None  # when set, the hub origin wants this bearer token
    cut_after: int | None = None  # the next CDN body stops after this many bytes
    down: bool = False  # the CDN answers 503 (set after a cut when `stay_down`)
    stay_down: bool = False
    log: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, Range
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sha(self, path: str) -> str:
        return hashlib.sha256(self.files[path]).hexdigest()

    def by_sha(self, sha: str) -> bytes | None:
        for name in self.files:
            if self.sha(name) == sha:
                return self.files[name]
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: HubState
    role: str  # "hub" or "cdn"
    cdn_origin: str

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, *, body: bool) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        with self.state.lock:
            self.state.log.append((self.command, path, self.headers.get("Range")))
        if self.role == "cdn":
            self._cdn(path, body=body)
            return
        token = self.state.gated_token
        if token is not None and self.headers.get("Authorization") != f"Bearer {token}":
            self._send(401, b'{"error":"Access to this model is restricted."}',
                       {"X-Error-Code": "GatedRepo", "Content-Type": "application/json"},
                       body=body)  # fmt: skip
            return
        repo = self.state.repo
        if path == f"/api/models/{repo}" or path.startswith(f"/api/models/{repo}/revision/"):
            self._listing(blobs="blobs=true" in url.query.lower())
            return
        if path.startswith(f"/{repo}/resolve/main/"):
            name = path.removeprefix(f"/{repo}/resolve/main/")
            self._send(307, b"", {"Location": f"/{repo}/resolve/{COMMIT}/{name}"}, body=body)
            return
        if path.startswith(f"/{repo}/resolve/{COMMIT}/"):
            name = path.removeprefix(f"/{repo}/resolve/{COMMIT}/")
            if name not in self.state.files:
                self._send(404, b"", {"X-Error-Code": "EntryNotFound"}, body=body)
                return
            sha = self.state.sha(name)
            self._send(302, b"", {
                "Location": f"{self.cdn_origin}/cdn/{sha}",
                "X-Repo-Commit": COMMIT,
                "X-Linked-Etag": f'"{sha}"',
                "X-Linked-Size": str(len(self.state.files[name])),
                "ETag": '"pointer-etag"',
            }, body=body)  # fmt: skip
            return
        self._send(404, b"", {"X-Error-Code": "RepoNotFound"}, body=body)

    def _listing(self, *, blobs: bool) -> None:
        siblings: list[dict[str, object]] = []
        for name, data in self.state.files.items():
            entry: dict[str, object] = {"rfilename": name}
            if blobs:
                entry["size"] = 134
                entry["blobId"] = hashlib.sha1(name.encode()).hexdigest()
                sha = self.state.sha(name)
                entry["lfs"] = {"size": len(data), "sha256": sha, "pointerSize": 134}
            siblings.append(entry)
        info = {"id": self.state.repo, "modelId": self.state.repo, "sha": COMMIT,
                "private": False, "gated": self.state.gated_token is not None and "manual",
                "siblings": siblings}  # fmt: skip
        self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, body=True)

    def _cdn(self, path: str, *, body: bool) -> None:
        data = self.state.by_sha(path.removeprefix("/cdn/"))
        if data is None:
            self._send(404, b"", {}, body=body)
            return
        if self.state.down:
            self._send(503, b"", {}, body=body)
            return
        start = 0
        asked = self.headers.get("Range")
        if asked and asked.startswith("bytes=") and asked.endswith("-"):
            start = int(asked.removeprefix("bytes=").removesuffix("-"))
        part = data[start:]
        headers = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        if start:
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        status = 206 if start else 200
        cut = self.state.cut_after if body else None
        if cut is None:
            self._send(status, part, headers, body=body)
            return
        # A connection that goes away mid-body: the full length announced, `cut` bytes
        # sent, the socket closed.
        self.state.cut_after = None
        self.state.down = self.state.stay_down
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        self.wfile.write(part[:cut])
        self.wfile.flush()
        self.close_connection = True

    def _send(self, status: int, data: bytes, headers: dict[str, str], *, body: bool) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body and data:
            self.wfile.write(data)


class LoopbackHub:
    """The two origins on 127.0.0.1 (ephemeral ports), serving `state`."""

    def __init__(self, state: HubState) -> None:
        self.state = state
        self._cdn = ThreadingHTTPServer(("127.0.0.1", 0), self._handler("cdn", ""))
        cdn_origin = f"http://127.0.0.1:{self._cdn.server_address[1]}"
        self._hub = ThreadingHTTPServer(("127.0.0.1", 0), self._handler("hub", cdn_origin))
        self.endpoint = f"http://127.0.0.1:{self._hub.server_address[1]}"
        self._threads = [
            threading.Thread(target=s.serve_forever, daemon=True) for s in (self._hub, self._cdn)
        ]
        for t in self._threads:
            t.start()

    def _handler(self, role: str, cdn_origin: str) -> type[_Handler]:
        return type("Handler", (_Handler,), {"state": self.state, "role": role,
                                             "cdn_origin": cdn_origin})  # fmt: skip

    def cdn_gets(self) -> list[str | None]:
        """The Range header of each body request the CDN saw."""
        return [r for m, p, r in self.state.log if m == "GET" and p.startswith("/cdn/")]

    def close(self) -> None:
        for server in (self._hub, self._cdn):
            server.shutdown()
            server.server_close()
