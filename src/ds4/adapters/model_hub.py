"""The ModelHub port over the Hugging Face Hub (huggingface_hub): the file listing with
sizes and LFS sha256 (`HfApi.model_info(files_metadata=True)`), a file's location and
size (`get_hf_file_metadata`: the HEAD on /resolve/, following the hub's redirects),
then the bytes by ranged GET into DIR/FILE.part, renamed to DIR/FILE when whole.

The ranged GET is ours because hf_hub_download (2.x) downloads into a temporary file
unique to the process and deletes it when the download fails: a second `ds4 pull` could
not resume. A dropped connection is retried here at once from where it stopped (the
location asked again, since the storage URL is signed and expires), and a failed pull
leaves the .part file for the next one. Files stored with Xet are fetched the same way:
the hub's /resolve/ URL serves their bytes over plain HTTP.

The token is --token, else huggingface_hub's own choice (HF_TOKEN, then the token cache
`hf auth login` writes); it is sent to the hub's origin only, never to the CDN a file
redirects to. The endpoint is HF_ENDPOINT when set (a mirror). Errors become one-line
Ds4Error messages naming the repository and file, never the token."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
)
from huggingface_hub.utils import logging as hf_logging
from huggingface_hub.utils._headers import build_hf_headers
from tqdm import tqdm

from ds4.domain.errors import Ds4Error
from ds4.ports.model_hub import HubFile

_RESUME_HINT = "run the pull again to resume"
_TOKEN_HINT = "pass --token, set HF_TOKEN or run `hf auth login`"


class HuggingFaceHub:
    def __init__(self, *, token: str | None, endpoint: str | None) -> None:
        self._token = token
        self._endpoint = endpoint or None
        self._api = HfApi(endpoint=self._endpoint, token=token)
        # The client's own warnings (a retried chunk, a signed URL) are not ds4's lines:
        # a failure reaches the user as one Ds4Error line; a retry that works is silent.
        hf_logging.set_verbosity(logging.ERROR)

    def list_files(self, repo_id: str) -> list[HubFile]:
        try:
            info = self._api.model_info(repo_id, files_metadata=True)
        except Exception as exc:
            raise _one_line(exc, repo_id, None) from None
        files: list[HubFile] = []
        for sibling in info.siblings or []:
            lfs = sibling.lfs
            size = lfs.size if lfs is not None else sibling.size
            if size is None:
                continue
            files.append(HubFile(sibling.rfilename, size, lfs.sha256 if lfs else None))
        return files

    def resumable_bytes(self, directory: str, path: str) -> int:
        part = _part_path(Path(directory), path)
        return part.stat().st_size if part.is_file() else 0

    def download(
        self, repo_id: str, path: str, directory: str, *, force: bool, progress: bool
    ) -> str:
        target = Path(directory) / path
        try:
            url = hf_hub_url(repo_id, path, endpoint=self._endpoint)
            meta = get_hf_file_metadata(url, token=self._token, endpoint=self._endpoint)
            if meta.size is None:
                raise Ds4Error(f"{repo_id}/{path}: the hub did not say the file's size")
            part = _part_path(Path(directory), path)
            if force:
                part.unlink(missing_ok=True)
            size = meta.size

            def locate() -> tuple[str, dict[str, str]]:
                # Asked again at each (re)connect: the storage URL the hub redirects to
                # is signed and expires, which a long download outlives.
                where = get_hf_file_metadata(url, token=self._token, endpoint=self._endpoint)
                if _origin(where.location) == _origin(url):
                    return where.location, build_hf_headers(token=self._token)
                return where.location, {"user-agent": "ds4"}

            _ranged_get(locate, part, size, progress=progress, name=path)
            part.replace(target)
        except Ds4Error:
            raise
        except Exception as exc:
            raise _one_line(exc, repo_id, path) from None
        return str(target)


def _part_path(directory: Path, path: str) -> Path:
    return directory / f"{path}.part"


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


_RETRIES = 5  # reconnects in a row that bring no new byte before the pull gives up


def _ranged_get(
    locate: Callable[[], tuple[str, dict[str, str]]],
    part: Path,
    size: int,
    *,
    progress: bool,
    name: str,
) -> None:
    """Append the rest of the file to `part` (Range: bytes=N- from its size N), until
    it holds `size` bytes; a dropped connection reconnects from where it stopped."""
    part.parent.mkdir(parents=True, exist_ok=True)
    tries = _RETRIES
    bar = tqdm(total=size, initial=0, unit="B", unit_scale=True, desc=name[-40:],
               disable=not progress)  # fmt: skip
    with bar, httpx.Client(follow_redirects=True, timeout=httpx.Timeout(60.0)) as client:
        while True:
            held = part.stat().st_size if part.exists() else 0
            bar.n = held
            bar.refresh()
            if held >= size:
                return
            url, headers = locate()
            ask = dict(headers, **{"Accept-Encoding": "identity"})
            if held:
                ask["Range"] = f"bytes={held}-"
            try:
                with client.stream("GET", url, headers=ask) as reply:
                    if reply.status_code not in (200, 206):
                        reply.read()
                        reply.raise_for_status()
                    mode = "ab" if reply.status_code == 206 else "wb"  # 200: the whole file
                    with part.open(mode) as out:
                        # raw, as it arrives: a chunker would lose what it holds when the
                        # connection drops
                        for chunk in reply.iter_raw():
                            out.write(chunk)
                            bar.update(len(chunk))
                            tries = _RETRIES
                    if part.stat().st_size < size:
                        raise httpx.RemoteProtocolError("the body ended early")
            except (httpx.TransportError, httpx.RemoteProtocolError):
                tries -= 1
                if tries <= 0:
                    raise


def _one_line(exc: Exception, repo_id: str, path: str | None) -> Ds4Error:
    what = f"{repo_id}/{path}" if path else repo_id
    if isinstance(exc, GatedRepoError):
        status = exc.response.status_code
        return Ds4Error(f"{what}: the repository is gated (HTTP {status}); {_TOKEN_HINT}")
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code
        if status in (401, 403):
            return Ds4Error(f"{what}: the hub refused access (HTTP {status}); {_TOKEN_HINT}")
        if isinstance(exc, RepositoryNotFoundError):
            return Ds4Error(f"{what}: no such repository on the hub (or it needs a token)")
        return Ds4Error(f"{what}: the hub answered HTTP {status}; run the pull again to resume")
    if isinstance(exc, EntryNotFoundError) and not isinstance(exc, LocalEntryNotFoundError):
        return Ds4Error(f"{what}: no such file in the repository")
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        return Ds4Error(f"{what}: the download answered HTTP {status}; {_RESUME_HINT}")
    if isinstance(exc, (httpx.HTTPError, LocalEntryNotFoundError, OSError)):
        kind = type(exc).__name__
        return Ds4Error(f"{what}: the download failed ({kind}); {_RESUME_HINT}")
    return Ds4Error(f"{what}: the download failed ({type(exc).__name__}: {_first_line(exc)})")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"
