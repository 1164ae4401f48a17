"""Stored responses on a real directory (adapters/storage/response_files.py): atomic
replacement, names kept inside the directory, symlinks and FIFOs never followed, and
the store's checks over what it reads back."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from ds4.adapters.storage.response_files import SUFFIX, ResponseFiles
from ds4.domain.errors import Ds4Error
from ds4.domain.serving.response_store import ResponseStore, StoredResponse

RID = "resp_" + "b" * 24


def record(rid: str = RID) -> StoredResponse:
    return StoredResponse(rid, 3, msgspec.json.encode({"id": rid}), b"[]", 9)


def test_records_survive_a_new_store_on_the_same_directory(tmp_path: Path) -> None:
    store = ResponseStore(archive=ResponseFiles(tmp_path / "responses"))
    store.put(record())
    assert (tmp_path / "responses" / f"{RID}{SUFFIX}").stat().st_mode & 0o777 == 0o600
    again = ResponseStore(archive=ResponseFiles(tmp_path / "responses"))
    assert again.load() == 1 and again.get(RID) == record()
    again.delete(RID)
    assert list((tmp_path / "responses").iterdir()) == []


def test_a_truncated_file_is_dropped_on_load(tmp_path: Path) -> None:
    files = ResponseFiles(tmp_path)
    ResponseStore(archive=files).put(record())
    path = tmp_path / f"{RID}{SUFFIX}"
    path.write_bytes(path.read_bytes()[:-4])
    log: list[str] = []
    assert ResponseStore(archive=ResponseFiles(tmp_path), log=log.append).load() == 0
    assert not path.exists()
    assert any("checksum mismatch" in line for line in log)


def test_leftover_temp_files_are_removed_and_foreign_names_ignored(tmp_path: Path) -> None:
    (tmp_path / f"{RID}{SUFFIX}.tmp.123").write_bytes(b"half")
    (tmp_path / "notes.txt").write_text("mine")
    files = ResponseFiles(tmp_path)
    assert files.names() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_name_outside_the_id_alphabet_is_refused(tmp_path: Path) -> None:
    files = ResponseFiles(tmp_path)
    with pytest.raises(Ds4Error):
        files.write("resp_../../x", b"data")


def test_symlinks_fifos_and_oversized_files_are_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"secret")
    directory = tmp_path / "responses"
    files = ResponseFiles(directory)
    (directory / f"{RID}{SUFFIX}").symlink_to(outside)
    assert files.read(RID, 1000) is None
    other = "resp_" + "c" * 24
    os.mkfifo(directory / f"{other}{SUFFIX}")
    assert files.read(other, 1000) is None
    big = "resp_" + "d" * 24
    (directory / f"{big}{SUFFIX}").write_bytes(b"x" * 100)
    assert files.read(big, 10) is None
    files.delete(RID)  # a symlink is not ours to remove
    assert (directory / f"{RID}{SUFFIX}").is_symlink()
