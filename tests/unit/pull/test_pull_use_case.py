"""`ds4 pull`'s use case (apps/pull_command.py::pull) over a fake ModelHub: the space
check before any byte moves, the verification after, the link rule."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from ds4.apps import pull_command
from ds4.domain.errors import Ds4Error
from ds4.domain.model_catalog import LINK_NAME, catalog_entry
from ds4.ports.model_hub import HubFile

Q2 = catalog_entry("q2-imatrix").files[0]
DATA = b"gguf bytes " * 100


class FakeHub:
    def __init__(self, files: dict[str, bytes], *, serve: bytes | None = None) -> None:
        self.files = files
        self.serve = serve  # what a download writes (default: the right bytes)
        self.downloads: list[tuple[str, bool]] = []

    def list_files(self, repo_id: str) -> list[HubFile]:
        return [HubFile(p, len(d), hashlib.sha256(d).hexdigest()) for p, d in self.files.items()]

    def resumable_bytes(self, directory: str, path: str) -> int:
        return 0

    def download(
        self, repo_id: str, path: str, directory: str, *, force: bool, progress: bool
    ) -> str:
        self.downloads.append((path, force))
        target = Path(directory) / path
        target.write_bytes(self.files[path] if self.serve is None else self.serve)
        return str(target)


class Usage(NamedTuple):
    total: int
    used: int
    free: int


def test_a_pull_that_does_not_fit_is_refused_before_any_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda _: Usage(10**6, 10**6 - 100, 100))
    hub = FakeHub({Q2: DATA})
    with pytest.raises(Ds4Error, match=r"not enough disk space in gguf: the pull needs"):
        pull_command.pull(hub, "q2-imatrix", Path("gguf"), progress=False)
    assert hub.downloads == []
    assert not (tmp_path / LINK_NAME).exists()


def test_a_download_that_stays_wrong_is_an_error_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    hub = FakeHub({Q2: DATA}, serve=b"x" * len(DATA))
    with pytest.raises(Ds4Error, match=f"gguf/{Q2}: downloaded twice"):
        pull_command.pull(hub, "q2-imatrix", Path("gguf"), progress=False)
    assert hub.downloads == [(Q2, False), (Q2, True)]
    assert not (tmp_path / LINK_NAME).exists()


def test_a_regular_file_at_the_link_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / LINK_NAME).write_bytes(b"my own model")
    with pytest.raises(Ds4Error, match=r"is a regular file, not a link"):
        pull_command.pull(FakeHub({Q2: DATA}), "q2-imatrix", Path("gguf"), progress=False)
    assert (tmp_path / LINK_NAME).read_bytes() == b"my own model"
    assert (tmp_path / "gguf" / Q2).read_bytes() == DATA


def test_the_link_moves_to_the_new_main_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    q4 = catalog_entry("q4-imatrix").files[0]
    hub = FakeHub({Q2: DATA, q4: DATA + b"4"})
    pull_command.pull(hub, "q2-imatrix", Path("gguf"), progress=False)
    assert (tmp_path / LINK_NAME).readlink() == Path("gguf") / Q2
    pull_command.pull(hub, "q4-imatrix", Path("gguf"), progress=False)
    assert (tmp_path / LINK_NAME).readlink() == Path("gguf") / q4
    pull_command.pull(hub, "q2-imatrix", Path("gguf"), progress=False)  # present: relink only
    assert (tmp_path / LINK_NAME).readlink() == Path("gguf") / Q2
    assert len(hub.downloads) == 2


@pytest.mark.parametrize("name", ["pro-q4-layers00-30", "pro-q4-layers31-output"])
def test_a_pro_half_leaves_the_link_alone(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    half = catalog_entry(name).files[0]
    hub = FakeHub({Q2: DATA, half: DATA + b"half"})
    pull_command.pull(hub, "q2-imatrix", Path("gguf"), progress=False)
    pull_command.pull(hub, name, Path("gguf"), progress=False)
    assert (tmp_path / "gguf" / half).read_bytes() == DATA + b"half"
    assert (tmp_path / LINK_NAME).readlink() == Path("gguf") / Q2  # still the main model
