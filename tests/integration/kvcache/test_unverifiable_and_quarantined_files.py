"""Files without the integrity footer, and the quarantine (docs/adr/0007-kv-file-integrity.md).

A file without the footer (the C engine's, or ds4's before ADR 0007) is listed, so it
counts against the budget and is evicted first, but never loaded, and its KTM trailer is
never imported; a save under its key replaces it. Damaged files move into quarantine/,
which keeps the newest four and never follows a symlink.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from tests.support.fake_compute import FakeComputeSession
from tests.support.sessions import prefilled
from tests.unit.serving.fake_server import FixedClock

from ds4.adapters.storage.kv_disk_store import KEEP, DiskKVStore
from ds4.domain.engine.session import EngineSession
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.kv_file import KvcFlags, KvcHeader, SaveReason, cache_key_name
from ds4.domain.kvcache.policy import KvCacheOptions

OPTS = KvCacheOptions(min_tokens=4, budget_bytes=0)
KEY = b"<sys>from the C engine<user>"


def cache_in(directory: Path, log: list[str], opts: KvCacheOptions = OPTS) -> DiskCache:
    store = DiskKVStore(directory, log=log.append)
    return DiskCache(store, FixedClock(), opts, quant_bits=2, model_tag=0, log=log.append)


def session_with(tokens: list[int]) -> EngineSession:
    session = EngineSession(FakeComputeSession(ctx=4096))
    if tokens:
        prefilled(session, tokens)
    return session


def write_without_footer(directory: Path, key: bytes, tokens: list[int], **kw: object) -> Path:
    """A file as the C engine writes it: header, key, payload, trailer, no footer."""
    payload = b"FAKEDSV4" + json.dumps(tokens).encode()
    trailer = b"KTM\x01\0\0\0\0"
    fields: dict[str, object] = dict(
        quant_bits=2, reason=SaveReason.COLD, flags=KvcFlags.KTM_TRAILER, tokens=len(tokens),
        hits=0, ctx=4096, model_tag=0, created_at=1, last_used=1, payload_bytes=len(payload),
    )  # fmt: skip
    header = KvcHeader(**{**fields, **kw})  # type: ignore[arg-type]
    path = directory / cache_key_name(key)
    path.write_bytes(header.encode() + struct.pack("<I", len(key)) + key + payload + trailer)
    return path


def test_a_file_without_the_footer_is_listed_never_loaded_and_replaced_by_a_save(
    tmp_path: Path,
) -> None:
    path = write_without_footer(tmp_path, KEY, [5] * 6)
    log: list[str] = []
    cache = cache_in(tmp_path, log)
    (entry,) = cache.store.entries()
    assert not entry.header.has_checksum and entry.file_size == path.stat().st_size
    session = session_with([])
    assert cache.load(session, KEY + b"hello") is None
    assert cache.load(session, KEY + b"hello") is None and list(session.tokens) == []
    assert cache.tool_trailers() == []
    assert len([line for line in log if "written without a checksum" in line]) == 1
    assert cache.save(session_with([6] * 6), KEY, SaveReason.EVICT)  # replaced, not kept
    loaded = cache.load(session, KEY + b"hello")
    assert loaded is not None and list(session.tokens) == [6] * 6


def test_a_file_without_the_footer_is_evicted_first(tmp_path: Path) -> None:
    write_without_footer(tmp_path, KEY, [5] * 600, hits=50, last_used=FixedClock().now())
    log: list[str] = []
    cache = cache_in(tmp_path, log)
    cache.save(session_with([1] * 8), b"<sys>ours", SaveReason.CONTINUED)
    budget = sum(e.file_size for e in cache.store.entries()) - 1
    cache_in(tmp_path, log, KvCacheOptions(min_tokens=4, budget_bytes=budget))
    assert [p.name for p in tmp_path.glob("*.kv")] == [cache_key_name(b"<sys>ours")]


def test_the_quarantine_keeps_the_newest_four(tmp_path: Path) -> None:
    names = [cache_key_name(bytes([i])) for i in range(KEEP + 2)]
    for name in names:
        (tmp_path / name).write_bytes(b"KVC\x01 not a header")
    log: list[str] = []
    assert DiskKVStore(tmp_path, log=log.append).entries() == []
    kept = sorted(p.name for p in (tmp_path / "quarantine").iterdir())
    assert len(kept) == KEEP and len([line for line in log if "quarantined" in line]) == KEEP + 2
    assert [k[21:] for k in kept] == sorted(names)[2:]  # listed, and so moved, in name order
    assert len([line for line in log if f"only {KEEP} are kept" in line]) == 2


def test_a_symlink_named_quarantine_is_never_followed(tmp_path: Path) -> None:
    kv_dir, elsewhere = tmp_path / "kv", tmp_path / "elsewhere"
    kv_dir.mkdir()
    elsewhere.mkdir()
    (kv_dir / "quarantine").symlink_to(elsewhere)
    damaged = kv_dir / cache_key_name(b"k")
    damaged.write_bytes(b"garbage")
    log: list[str] = []
    store = DiskKVStore(kv_dir, log=log.append)
    assert store.entries() == [] and store.entries() == []
    assert list(elsewhere.iterdir()) == [] and damaged.exists()
    assert [line for line in log if "could not quarantine" in line] == [
        f"kv cache could not quarantine {damaged.name} (not a usable KVC version 1 header): "
        "Not a directory"
    ]
