"""kv_files_bytes: the /metrics gauge counts checkpoint files only, by their names,
never following a link."""

from __future__ import annotations

from pathlib import Path

from ds4.adapters.storage.kv_disk_store import kv_files_bytes

SHA = "0123456789abcdef0123456789abcdef01234567"


def test_only_checkpoint_files_count(tmp_path: Path) -> None:
    (tmp_path / f"{SHA}.kv").write_bytes(b"x" * 100)
    (tmp_path / f"{SHA[::-1]}.kv").write_bytes(b"y" * 20)
    (tmp_path / f"{SHA}.kv.tmp.123").write_bytes(b"z" * 1000)  # a write in progress
    (tmp_path / "notes.kv").write_bytes(b"z" * 1000)
    outside = tmp_path / "outside"
    outside.write_bytes(b"z" * 1000)
    (tmp_path / f"{'a' * 40}.kv").symlink_to(outside)
    (tmp_path / "quarantine").mkdir()
    (tmp_path / "quarantine" / f"{'b' * 40}.kv").write_bytes(b"z" * 1000)
    assert kv_files_bytes(tmp_path) == 120


def test_a_missing_directory_holds_nothing(tmp_path: Path) -> None:
    assert kv_files_bytes(tmp_path / "gone") == 0
