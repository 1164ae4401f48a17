"""The stored-responses store (domain/serving/response_store.py): its bounds and least
recently used eviction, the record file's checks, and the archive it mirrors into."""

from __future__ import annotations

import msgspec
import pytest

from ds4.domain.errors import Ds4Error
from ds4.domain.serving.response_store import (
    MAGIC,
    RecordError,
    ResponseStore,
    StoredResponse,
    decode_record,
    encode_record,
)


def record(n: int, size: int = 10) -> StoredResponse:
    rid = f"resp_{n:024x}"
    body = msgspec.json.encode({"id": rid, "object": "response", "pad": "x" * size})
    return StoredResponse(rid, 1000 + n, body, b'[{"role":"user","content":"hi"}]', 42)


class MemoryArchive:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.fail_writes = False

    def names(self) -> list[str]:
        return sorted(self.files)

    def read(self, name: str, limit: int) -> bytes | None:
        data = self.files.get(name)
        return None if data is None or len(data) > limit else data

    def write(self, name: str, data: bytes) -> None:
        if self.fail_writes:
            raise OSError("disk full")
        self.files[name] = data

    def delete(self, name: str) -> None:
        self.files.pop(name, None)


def test_the_count_bound_evicts_the_least_recently_used() -> None:
    store = ResponseStore(max_count=2)
    one, two, three = record(1), record(2), record(3)
    store.put(one)
    store.put(two)
    assert store.get(one.id) == one  # a use: two is now the oldest
    store.put(three)
    assert store.get(two.id) is None
    assert store.ids() == [three.id, one.id]


def test_the_byte_bound_evicts_until_the_rest_fit() -> None:
    small = record(1).nbytes
    store = ResponseStore(max_count=100, max_bytes=3 * small)
    for n in range(1, 5):
        store.put(record(n))
    assert len(store) == 3 and store.nbytes <= 3 * small
    assert store.get(record(1).id) is None
    assert not store.put(record(9, size=10 * small))  # alone over the bound
    assert len(store) == 3


def test_zero_keeps_nothing_and_bounds_are_range_checked() -> None:
    assert not ResponseStore(max_count=0).put(record(1))
    assert not ResponseStore(max_bytes=0).enabled
    for count, size in ((-1, 1), (10**7, 1), (1, -1), (1, 1 << 60)):
        with pytest.raises(Ds4Error):
            ResponseStore(count, size)


def test_put_replaces_and_delete_forgets() -> None:
    store = ResponseStore()
    store.put(record(1))
    newer = StoredResponse(record(1).id, 5, record(1).body, b"[]", 7)
    store.put(newer)
    assert len(store) == 1 and store.get(newer.id) == newer
    assert store.nbytes == newer.nbytes
    assert store.delete(newer.id)
    assert not store.delete(newer.id)
    assert store.nbytes == 0


def test_an_invalid_id_is_refused() -> None:
    bad = StoredResponse("resp_../../etc", 1, b'{"id":"x"}', b"[]", 0)
    with pytest.raises(RecordError):
        ResponseStore().put(bad)


def test_the_archive_mirrors_the_store_and_a_restart_loads_it() -> None:
    archive = MemoryArchive()
    store = ResponseStore(max_count=2, archive=archive)
    for n in (1, 2, 3):
        store.put(record(n))
    assert archive.names() == [record(2).id, record(3).id]  # the evicted one removed
    store.delete(record(2).id)
    assert archive.names() == [record(3).id]
    again = ResponseStore(max_count=2, archive=archive)
    assert again.load() == 1
    assert again.get(record(3).id) == record(3)


def test_loading_drops_damaged_records_and_applies_the_bounds_oldest_first() -> None:
    archive = MemoryArchive()
    for n in (1, 2, 3):
        archive.files[record(n).id] = encode_record(record(n))
    damaged = bytearray(archive.files[record(2).id])
    damaged[-3] ^= 1
    archive.files[record(2).id] = bytes(damaged)
    log: list[str] = []
    store = ResponseStore(max_count=1, archive=archive, log=log.append)
    assert store.load() == 1
    assert store.ids() == [record(3).id]  # 1 was older than 3: evicted
    assert archive.names() == [record(3).id]
    assert any("checksum mismatch" in line for line in log)


def test_a_failed_disk_write_still_keeps_it_in_memory() -> None:
    archive = MemoryArchive()
    archive.fail_writes = True
    log: list[str] = []
    store = ResponseStore(archive=archive, log=log.append)
    assert store.put(record(1))
    assert store.get(record(1).id) is not None
    assert any("not written to disk" in line for line in log)


def test_a_record_round_trips_through_its_file() -> None:
    one = record(7)
    assert decode_record(encode_record(one), one.id) == one


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda d, n: b"garbage", "no DS4RESP1 header"),
        (lambda d, n: d[:-1] + b"X", "checksum mismatch"),
        (lambda d, n: d, "does not match its name"),
    ],
)
def test_a_bad_record_file_is_refused_with_its_reason(mangle: object, reason: str) -> None:
    one = record(7)
    data = mangle(encode_record(one), one.id)  # type: ignore[operator]
    name = one.id if reason != "does not match its name" else record(8).id
    with pytest.raises(RecordError, match=reason):
        decode_record(data, name)


def _framed(payload: bytes) -> bytes:
    import hashlib

    return MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"[1,2]", "malformed record"),
        (
            b'{"id":"resp_a","created_at":1,"kv_tokens":1,"response":{"id":"resp_b"},"history":[]}',
            "does not carry the record's id",
        ),
        (
            b'{"id":"resp_a","created_at":1,"kv_tokens":1,"response":{"id":"resp_a"},"history":{}}',
            "not an array",
        ),
        (
            b'{"id":"resp_a","created_at":1,"kv_tokens":-5,"response":{"id":"resp_a"},'
            b'"history":[]}',
            "out of range",
        ),
        (
            b'{"id":"resp_a","created_at":1,"kv_tokens":1,"response":{"id":"resp_a"},'
            b'"history":[],"extra":1}',
            "malformed record",
        ),
    ],
)
def test_a_checksummed_record_of_the_wrong_shape_is_refused(payload: bytes, reason: str) -> None:
    with pytest.raises(RecordError, match=reason):
        decode_record(_framed(payload), "resp_a")
