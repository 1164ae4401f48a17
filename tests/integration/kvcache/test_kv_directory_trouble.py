"""Trouble in the KV cache directory (issue 14, item 5; docs/adr/0007-kv-file-integrity.md):
a directory named like a cache file, an unreadable directory, a hard link named like a
cache file, a read-only directory. None is a traceback; each is a log line or, for an
unreadable directory, one clear error at start-up."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from tests.integration.kvcache.fake_kv_server import FIRST, REPLIES, answer, serve
from tests.integration.kvcache.fs_faults import read_only, unreadable
from tests.support.fake_compute import FakeComputeSession
from tests.support.sessions import prefilled
from tests.unit.serving.fake_server import FixedClock

from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.apps.options import ServerOptions
from ds4.apps.server_bootstrap import bootstrap_server
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.kv_file import SaveReason, cache_key_name
from ds4.domain.kvcache.policy import KvCacheOptions

OPTS = KvCacheOptions(min_tokens=4, budget_bytes=0)
KEY = b"<sys>a conversation<user>"


def cache_in(directory: Path, log: list[str], opts: KvCacheOptions = OPTS) -> DiskCache:
    store = DiskKVStore(directory, log=log.append)
    return DiskCache(store, FixedClock(), opts, quant_bits=2, model_tag=7, log=log.append)


def session_with(tokens: list[int]) -> EngineSession:
    session = EngineSession(FakeComputeSession(ctx=4096))
    if tokens:
        prefilled(session, tokens)
    return session


def test_a_directory_named_like_a_cache_file_is_skipped_with_one_log_line(
    tmp_path: Path,
) -> None:
    squatter = tmp_path / cache_key_name(KEY)
    squatter.mkdir()
    temp_like = tmp_path / (cache_key_name(b"other") + ".tmp.77")  # like a leftover temp file
    temp_like.mkdir()
    log: list[str] = []
    cache = cache_in(tmp_path, log)
    assert cache.store.entries() == [] and cache.store.entries() == []
    assert sorted(line for line in log if "not a regular file" in line) == sorted(
        f"kv cache skipped {path.name}: not a regular file" for path in (squatter, temp_like)
    )
    assert cache.load(session_with([]), KEY + b"more") is None
    with pytest.raises(OSError):  # the save cannot replace a directory (KvCheckpoints logs it)
        cache.save(session_with([1] * 6), KEY, SaveReason.COLD)
    assert cache.save(session_with([2] * 6), b"another key", SaveReason.COLD)
    assert squatter.is_dir() and temp_like.is_dir() and len(cache.store.entries()) == 1


def test_a_fifo_named_like_a_cache_file_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / cache_key_name(KEY)
    os.mkfifo(fifo)
    log: list[str] = []
    cache = cache_in(tmp_path, log)
    assert cache.store.entries() == []
    assert cache.store.read(fifo.name[:40]) is None and cache.store.read_key(fifo.name[:40]) is None
    assert log == [f"kv cache skipped {fifo.name}: not a regular file"]


def test_a_directory_named_like_a_cache_file_is_a_logged_store_failure_in_the_server(
    tmp_path: Path,
) -> None:
    server = serve(DiskKVStore(tmp_path))
    server.run(server.chat(FIRST))
    live_key = server.built.state.tokenizer.decode(list(server.compute.tokens)).encode()
    (tmp_path / cache_key_name(live_key)).mkdir()
    server.worker.shutdown()  # the shutdown save meets the directory
    assert "kv cache store failed reason=shutdown" in server.trace.getvalue()


def test_an_unreadable_directory_is_one_clear_error_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv_dir = tmp_path / "kv"
    kv_dir.mkdir()
    script = tmp_path / "script.json"
    script.write_text('["ok"]')
    options = ServerOptions(model=None, backend="scripted", script=str(script),
                            kv_disk_dir=str(kv_dir))  # fmt: skip
    with unreadable(monkeypatch, kv_dir), pytest.raises(Ds4Error) as error:
        bootstrap_server(options, None)
    assert str(error.value) == f"KV cache directory {kv_dir} is not readable: Permission denied"


def test_a_hard_link_named_like_a_cache_file_is_read_but_never_written_in_place(
    tmp_path: Path,
) -> None:
    log: list[str] = []
    cache = cache_in(tmp_path / "kv", log)
    cache.save(session_with([3] * 6), KEY, SaveReason.COLD)
    (path,) = (tmp_path / "kv").glob("*.kv")
    elsewhere = tmp_path / "elsewhere.bin"
    path.rename(elsewhere)
    path.hardlink_to(elsewhere)  # the cache's name now points at a file elsewhere
    before = elsewhere.read_bytes()
    restored = session_with([])
    loaded = cache.load(restored, KEY + b" and more")
    assert loaded is not None and list(restored.tokens) == [3] * 6
    cache.save(session_with([3] * 6), KEY, SaveReason.CONTINUED, trailer=b"KTM\x01\0\0\0\0")
    assert elsewhere.read_bytes() == before  # no hit count, no trailer written through
    assert any("it has 2 links" in line for line in log)


def test_a_read_only_directory_loads_and_logs_every_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv_dir = tmp_path / "kv"
    writable = cache_in(kv_dir, [])
    writable.save(session_with([4] * 6), KEY, SaveReason.COLD)
    writable.save(session_with([5] * 6), b"<sys>damaged", SaveReason.COLD)
    damaged = kv_dir / cache_key_name(b"<sys>damaged")
    data = bytearray(damaged.read_bytes())
    data[-40] ^= 1
    damaged.write_bytes(bytes(data))
    (kv_dir / (cache_key_name(b"x") + ".tmp.12")).write_bytes(b"left over")
    before = {p.name: p.read_bytes() for p in kv_dir.iterdir()}
    log: list[str] = []
    with read_only(monkeypatch, kv_dir):
        budget = KvCacheOptions(min_tokens=4, budget_bytes=150)  # opening wants to evict
        cache = cache_in(kv_dir, log, budget)
        restored = session_with([])
        loaded = cache.load(restored, KEY + b" and more")
        assert loaded is not None and list(restored.tokens) == [4] * 6
        assert cache.load(session_with([]), b"<sys>damaged and more") is None
        cache.store.entries()
        with pytest.raises(OSError):
            cache.save(session_with([6] * 6), b"<sys>new", SaveReason.COLD)
    assert {p.name: p.read_bytes() for p in kv_dir.iterdir()} == before
    assert any("could not remove" in line and ".tmp.12" in line for line in log)
    assert any("could not remove" in line and "(deleted)" in line for line in log)
    assert any(line.startswith("kv cache could not update") for line in log)  # the hit count
    assert [line for line in log if "could not quarantine" in line] == [
        f"kv cache could not quarantine {damaged.name} (checksum mismatch in the key text or "
        "payload): Read-only file system"
    ]


def test_a_read_only_directory_serves_hits_and_logs_failed_saves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv_dir = tmp_path / "kv"
    first = serve(DiskKVStore(kv_dir))
    first.run(first.chat(FIRST))
    first.worker.shutdown()
    copy = shutil.copytree(kv_dir, tmp_path / "copy")
    with read_only(monkeypatch, copy):
        server = serve(DiskKVStore(copy))
        text, _, cached = answer(server)
        server.worker.shutdown()
    assert text == REPLIES["more"] and cached > 0 and server.sources() == ["disk-text"]
    assert "kv cache store failed reason=shutdown" in server.trace.getvalue()
