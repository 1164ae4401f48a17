"""The ModelHub port over the Hugging Face Hub (huggingface_hub): the file listing with
sizes and LFS sha256 (`model_info(files_metadata=True)`) and one file downloaded into a
directory with `hf_hub_download(local_dir=...)`, which resumes its `.incomplete` file
under DIR/.cache/huggingface/download/ with a ranged GET.

The token is --token, else huggingface_hub's own choice (HF_TOKEN, then the token cache
`hf auth login` writes); the endpoint is HF_ENDPOINT when set (a mirror). Errors become
one-line Ds4Error messages that name the repository and the file, never the token."""

from __future__ import annotations

from pathlib import Path

import httpx2
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub._local_folder import get_local_download_paths
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
)
from huggingface_hub.utils import disable_progress_bars, enable_progress_bars

from ds4.domain.errors import Ds4Error
from ds4.ports.model_hub import HubFile

_TOKEN_HINT = "pass --token, set HF_TOKEN or run `hf auth login`"


class HuggingFaceHub:
    def __init__(self, *, token: str | None, endpoint: str | None) -> None:
        self._token = token
        self._endpoint = endpoint or None
        self._api = HfApi(endpoint=self._endpoint, token=token)

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
        paths = get_local_download_paths(Path(directory), path)
        pattern = paths.incomplete_path("*").name
        found = [p.stat().st_size for p in paths.metadata_path.parent.glob(pattern)]
        return max(found, default=0)

    def download(
        self, repo_id: str, path: str, directory: str, *, force: bool, progress: bool
    ) -> str:
        if progress:
            enable_progress_bars()
        else:
            disable_progress_bars()
        try:
            return hf_hub_download(
                repo_id,
                path,
                local_dir=directory,
                token=self._token,
                endpoint=self._endpoint,
                force_download=force,
            )
        except Exception as exc:
            raise _one_line(exc, repo_id, path) from None


def _one_line(exc: Exception, repo_id: str, path: str | None) -> Ds4Error:
    what = f"{repo_id}/{path}" if path else repo_id
    if isinstance(exc, GatedRepoError):
        return Ds4Error(f"{what}: the repository is gated and refused this request; {_TOKEN_HINT}")
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code
        if status in (401, 403):
            return Ds4Error(f"{what}: the hub refused access (HTTP {status}); {_TOKEN_HINT}")
        if isinstance(exc, RepositoryNotFoundError):
            return Ds4Error(f"{what}: no such repository on the hub (or it needs a token)")
        return Ds4Error(f"{what}: the hub answered HTTP {status}; run the pull again to resume")
    if isinstance(exc, EntryNotFoundError) and not isinstance(exc, LocalEntryNotFoundError):
        return Ds4Error(f"{what}: no such file in the repository")
    if isinstance(exc, (httpx2.HTTPError, LocalEntryNotFoundError, OSError)):
        kind = type(exc).__name__
        return Ds4Error(f"{what}: the download failed ({kind}); run the pull again to resume")
    return Ds4Error(f"{what}: the download failed ({type(exc).__name__}: {_first_line(exc)})")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"
