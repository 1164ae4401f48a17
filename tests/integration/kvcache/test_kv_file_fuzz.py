"""Any bytes under a cache file's name load as the verified file or are a logged miss
(docs/adr/0007-kv-file-integrity.md): never an exception, never other tokens restored.

Hypothesis mutates one real checkpoint: a random 48-byte header, a few byte edits
anywhere, a cut, bytes appended, or a file of random bytes. Each example runs a fresh
store and cache over its own directory, as a server start would.
"""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.fake_compute import FakeComputeSession
from tests.support.sessions import prefilled
from tests.unit.serving.fake_server import FixedClock

from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.domain.engine.session import EngineSession
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.kv_file import HEADER_SIZE, SaveReason, cache_key_name
from ds4.domain.kvcache.policy import KvCacheOptions

OPTS = KvCacheOptions(min_tokens=4, budget_bytes=0)
KEY = b"<sys>fuzzed<user>"
TOKENS = [7, 8, 9, 10, 11, 12]


def open_cache(directory: Path, log: list[str]) -> DiskCache:
    store = DiskKVStore(directory, log=log.append)
    return DiskCache(store, FixedClock(), OPTS, quant_bits=2, model_tag=3, log=log.append)


@cache
def pristine() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        session = EngineSession(FakeComputeSession(ctx=4096))
        prefilled(session, TOKENS)
        assert open_cache(Path(tmp), []).save(session, KEY, SaveReason.EVICT, trailer=b"KTM")
        return (Path(tmp) / cache_key_name(KEY)).read_bytes()


def edited(data: bytes, edits: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for at, value in edits:
        out[at % len(out)] = value
    return bytes(out)


MUTATIONS = st.one_of(
    st.binary(min_size=HEADER_SIZE, max_size=HEADER_SIZE).map(
        lambda header: header + pristine()[HEADER_SIZE:]
    ),
    st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1, max_size=4).map(
        lambda edits: edited(pristine(), edits)
    ),
    st.integers(0, 400).map(lambda n: pristine()[:n]),
    st.binary(min_size=1, max_size=64).map(lambda tail: pristine() + tail),
    st.binary(max_size=300),
)


@settings(max_examples=300, deadline=None)
@given(MUTATIONS)
def test_any_bytes_load_verified_or_are_a_logged_miss(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / cache_key_name(KEY)).write_bytes(data)
        log: list[str] = []
        session = EngineSession(FakeComputeSession(ctx=4096))
        loaded = open_cache(Path(tmp), log).load(session, KEY + b"and the next turn")
    if loaded is not None:
        assert data == pristine() and list(session.tokens) == TOKENS
    else:
        assert list(session.tokens) == [] and log  # nothing restored, and a line says why
