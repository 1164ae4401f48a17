"""What `ds4 pull` asks of a model hub: a repository's files with their sizes and
hashes, the bytes an interrupted download already holds, and one file downloaded into a
directory, resuming what is there. adapters/model_hub.py serves it over the Hugging
Face Hub (huggingface_hub); tests/integration/pull/ runs that adapter against a loopback
server that speaks the hub's file API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class HubFile:
    """One file of a hub repository: its path in the repository, its size in bytes,
    and the sha256 of its content (hex) when the hub reports it (files stored with LFS)."""

    path: str
    size: int
    sha256: str | None


class ModelHub(Protocol):
    def list_files(self, repo_id: str) -> list[HubFile]:
        """Every file of the repository, with sizes and hashes. Raises Ds4Error (one
        line, never the token) when the hub refuses or cannot be reached."""
        ...

    def resumable_bytes(self, directory: str, path: str) -> int:
        """Bytes an interrupted download of `path` into `directory` already holds (the
        next `download` resumes from there), 0 when none."""
        ...

    def download(
        self, repo_id: str, path: str, directory: str, *, force: bool, progress: bool
    ) -> str:
        """Fetch `path` into `directory`/`path`, resuming an interrupted download
        (`force`: discard what is on disk and fetch it whole); `progress`: draw a
        progress bar. Returns the local file's path. Raises Ds4Error on failure; what
        was received stays for the next call to resume."""
        ...
