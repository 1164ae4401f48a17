"""Disk KV cache on a real directory: atomic files, safety, save/load/evict round trips."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.support.fake_compute import FakeComputeSession
from tests.support.sessions import prefilled

from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.kv_file import KvcFlags, KvcHeader, SaveReason, cache_key_name
from ds4.domain.kvcache.policy import KvCacheOptions


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000

    def now(self) -> int:
        return self.t


OPTS = KvCacheOptions(min_tokens=4, budget_bytes=0)


def make_cache(tmp: Path, opts: KvCacheOptions = OPTS, clock: Clock | None = None,
               log: list[str] | None = None) -> DiskCache:  # fmt: skip
    store = DiskKVStore(tmp, log=(log.append if log is not None else lambda _: None))
    return DiskCache(store, clock or Clock(), opts, quant_bits=2, model_tag=7,
                     log=(log.append if log is not None else lambda _: None))  # fmt: skip


def empty_session() -> EngineSession:
    return EngineSession(FakeComputeSession(ctx=4096))


def session_with(tokens: list[int]) -> EngineSession:
    session = empty_session()
    prefilled(session, tokens)
    return session


def test_save_then_load_restores_tokens_and_counts_a_hit(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    assert cache.save(session_with(list(range(10))), b"<sys>hi<user>", SaveReason.COLD)
    (path,) = tmp_path.iterdir()
    assert path.name == cache_key_name(b"<sys>hi<user>")
    assert path.stat().st_mode & 0o777 != 0  # a regular file
    fresh = empty_session()
    loaded = cache.load(fresh, b"<sys>hi<user>and more")
    assert loaded is not None and loaded.tokens == 10 and loaded.text_bytes == 13
    assert list(fresh.tokens) == list(range(10))
    (entry,) = cache.store.entries()
    assert entry.header.hits == 1 and entry.header.reason is SaveReason.COLD
    assert entry.header.model_tag == 7


def test_survives_a_restart_and_prefers_the_longest_prefix(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    cache.save(session_with([1] * 5), b"AB", SaveReason.COLD)
    cache.save(session_with([2] * 8), b"ABCD", SaveReason.CONTINUED)
    reopened = make_cache(tmp_path)  # a new process: only the directory remains
    s = empty_session()
    loaded = reopened.load(s, b"ABCDEF")
    assert loaded is not None and list(s.tokens) == [2] * 8


def test_too_short_or_wrong_prefix_is_not_saved_or_loaded(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    assert not cache.save(session_with([1, 2]), b"x", SaveReason.COLD)  # < min tokens
    cache.save(session_with([1] * 6), b"hello", SaveReason.COLD)
    assert cache.load(empty_session(), b"help") is None
    assert cache.load(empty_session(), b"hell") is None


def test_a_damaged_checkpoint_is_quarantined_and_missed(tmp_path: Path) -> None:
    log: list[str] = []
    cache = make_cache(tmp_path, log=log)
    cache.save(session_with([3] * 6), b"key", SaveReason.COLD)
    (path,) = tmp_path.iterdir()
    raw = bytearray(path.read_bytes())
    raw[52 + 3 : 52 + 7] = b"BAD!"  # corrupt the payload magic
    path.write_bytes(bytes(raw))
    s = empty_session()
    assert cache.load(s, b"key...") is None
    assert list(s.tokens) == []
    assert not path.exists()
    (kept,) = (tmp_path / "quarantine").iterdir()
    assert kept.name.endswith(path.name) and kept.read_bytes() == bytes(raw)
    assert any("quarantined" in line and "checksum mismatch" in line for line in log)
    assert any("kv cache miss" in line for line in log)


def test_a_verified_checkpoint_that_fails_to_load_is_deleted(tmp_path: Path) -> None:
    """The bytes are as written, but the engine refuses them: deleted, never retried."""
    log: list[str] = []
    cache = make_cache(tmp_path, log=log)
    header = KvcHeader(2, SaveReason.COLD, KvcFlags.CHECKSUM, 6, 0, 4096, 7, 1, 1, 4)
    cache.store.write(header, b"key", b"JUNK", b"")
    s = session_with([1] * 5)
    assert cache.load(s, b"key...") is None
    assert list(s.tokens) == []  # a failed load leaves nothing half-loaded behind
    assert list(tmp_path.iterdir()) == []
    assert any("discarded" in line for line in log)


def test_garbage_symlinks_and_foreign_files(tmp_path: Path) -> None:
    log: list[str] = []
    (tmp_path / "notes.txt").write_text("not ours")
    ours_garbage = tmp_path / ("a" * 40 + ".kv")
    ours_garbage.write_bytes(b"KVC\x01" + b"\0" * 10)  # truncated
    target = tmp_path / "elsewhere.bin"
    target.write_bytes(b"secret")
    (tmp_path / ("b" * 40 + ".kv")).symlink_to(target)
    (tmp_path / ("c" * 40 + ".kv.tmp.999")).write_bytes(b"partial")
    cache = make_cache(tmp_path, log=log)
    assert cache.store.entries() == []
    assert (tmp_path / "notes.txt").exists()  # foreign: left alone
    assert target.read_bytes() == b"secret"  # symlink never followed
    assert not ours_garbage.exists() and not (tmp_path / ("c" * 40 + ".kv.tmp.999")).exists()
    assert [p.name[21:] for p in (tmp_path / "quarantine").iterdir()] == [ours_garbage.name]
    assert any("leftover" in line for line in log)
    with pytest.raises(Ds4Error, match="invalid KV cache key"):
        cache.store.read("../../etc/passwd")


def test_budget_eviction_keeps_the_file_just_written(tmp_path: Path) -> None:
    clock = Clock()
    opts = KvCacheOptions(min_tokens=4, budget_bytes=400)
    cache = make_cache(tmp_path, opts, clock)
    for i in range(5):
        clock.t += 10
        assert cache.save(session_with([i] * 20), f"conversation {i}".encode(), SaveReason.EVICT)
    names = {p.name for p in tmp_path.iterdir()}
    assert cache_key_name(b"conversation 4") in names  # protected
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 400
    assert len(names) < 5


def test_budget_precheck_skips_what_cannot_fit(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, KvCacheOptions(min_tokens=4, budget_bytes=100))
    assert not cache.save(session_with([1] * 100), b"big", SaveReason.COLD)
    assert list(tmp_path.iterdir()) == []


def test_resaving_the_same_key_rewrites_only_the_trailer(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    cache.save(session_with([5] * 6), b"k", SaveReason.COLD)
    cache.save(session_with([5] * 6), b"k", SaveReason.CONTINUED, trailer=b"KTM\x01\0\0\0\0")
    (entry,) = cache.store.entries()
    assert entry.header.reason is SaveReason.COLD  # kept
    assert entry.header.flags & KvcFlags.KTM_TRAILER
    kv = cache.store.read(entry.sha)
    assert kv is not None and kv.trailer == b"KTM\x01\0\0\0\0"


def test_writes_are_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = make_cache(tmp_path)

    def boom(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        cache.save(session_with([1] * 6), b"k", SaveReason.COLD)
    assert list(tmp_path.iterdir()) == []  # no half-written file, no temp file
