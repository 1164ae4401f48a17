"""Saved sessions on disk: KV files (DiskKVStore) and JSON records, through the
domain's library: save, list, load, strip, delete, other models' files left out."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from ds4.adapters.agent.session_index import JsonSessionIndex
from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.domain.agent.library import SessionLibrary
from ds4.domain.agent.session_meta import session_id


def _library(home: Path, tag: int = 7) -> SessionLibrary:
    return SessionLibrary(
        DiskKVStore(home / "kv"), JsonSessionIndex(home / "sessions"), model_tag=tag,
        quant_bits=2, ctx=4096,
    )  # fmt: skip


def test_save_load_strip_delete_round_trip(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lib = _library(home)
    sid = session_id("fix the build", 1000)
    rec = lib.save(
        session_id=sid, title="fix the build", created_at=1000, now=1005, tokens=12,
        text="<｜begin▁of▁sentence｜>hello", payload=b"P" * 64,
    )  # fmt: skip
    assert stat.S_IMODE((home / "sessions").stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "kv").stat().st_mode) == 0o700
    record = json.loads((home / "sessions" / f"{sid}.json").read_text())
    assert record["title"] == "fix the build" and record["kv_sha"] == rec.kv_sha
    again = _library(home)
    assert [r.id for r in again.records()] == [sid]
    loaded = again.load(again.find(sid[:4]))
    assert loaded.payload == b"P" * 64 and loaded.text.endswith("hello")
    assert again.sizes()[sid] > 64
    stripped = again.strip(again.find(sid), lambda text: 9, 2000)
    assert stripped.stripped and stripped.tokens == 9
    assert again.load(again.find(sid)).payload == b""
    assert _library(home, tag=8).records() == []  # another model's sessions are not listed
    again.delete(again.find(sid))
    assert again.records() == []
    assert list((home / "kv").glob("*.kv")) == []


def test_a_damaged_record_is_skipped(tmp_path: Path) -> None:
    lib = _library(tmp_path)
    sid = session_id("t", 1)
    lib.save(session_id=sid, title="t", created_at=1, now=1, tokens=1, text="x", payload=b"p")
    (tmp_path / "sessions" / ("f" * 40 + ".json")).write_text("{not json")
    (tmp_path / "sessions" / ("e" * 40 + ".json")).write_text('{"id": 1}')
    assert [r.id for r in lib.records()] == [sid]


def test_system_prompt_file_is_used_only_for_the_same_text_and_model(tmp_path: Path) -> None:
    lib = _library(tmp_path)
    lib.save_system("SYSTEM", 5, b"S" * 10, 1)
    assert lib.load_system("SYSTEM") == b"S" * 10
    assert lib.load_system("SYSTEM2") is None
    assert _library(tmp_path, tag=9).load_system("SYSTEM") is None
