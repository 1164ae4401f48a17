"""Stored Responses (`store`, `previous_response_id`, GET/DELETE /v1/responses/{id}):
the records, their file encoding, and the store's bounds and eviction
(docs/adr/0069-stored-responses.md).

A record is what a continuation needs and what GET returns: the response object as
the API answered it, the input items of the whole conversation up to it (earlier
inputs and outputs, then its own input), and the handle of the KV state at its end
(its token count; the state itself is kept by the worker, in memory and on disk,
under the response's visible transcript: docs/kv-cache.md). Records are opaque JSON
here; the wire module (wire/responses_state.py) builds and reads them.

Bounds: at most `max_count` records and `max_bytes` of them together; beyond either
the least recently used goes first (storing, continuing and retrieving are uses).
A record alone larger than `max_bytes` is not stored. With an archive (the disk,
`--kv-disk-dir`) every record is written there too, and removed with it, so a
restarted server finds what it kept; `load` reads them back, checking each one's
checksum and shape, and drops the damaged ones.

Pure: the archive is a port, the lock is passed in, the order is a use counter.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import msgspec

from ds4.domain.errors import Ds4Error
from ds4.ports.response_archive import ResponseArchive

Log = Callable[[str], None]
T = TypeVar("T")

RESPONSE_ID = re.compile(r"resp_[A-Za-z0-9_-]{1,96}")
MAGIC = b"DS4RESP1 "
_DIGEST_HEX = 64
_HEAD = len(MAGIC) + _DIGEST_HEX + 1  # magic, sha256 of the payload in hex, "\n"
MAX_TOKENS = 2**31 - 1
# The bounds' flags (ds4 server --stored-responses, --stored-responses-mb).
MAX_STORED_RESPONSES = 1_000_000
MAX_STORED_MIB = 65536  # 64 GiB of records in memory at most
DEFAULT_STORED_RESPONSES = 1000
DEFAULT_STORED_MIB = 256
_RECORD_OVERHEAD = 256  # bytes a record costs beyond its JSON (ids, counters, the entry)


class RecordError(Ds4Error):
    """A stored record that is not one (damaged, foreign, or of another shape)."""


@dataclass(frozen=True)
class StoredResponse:
    id: str
    created_at: int
    body: bytes  # the response object, JSON, as the API returned it
    history: bytes  # the conversation's input items up to it, a JSON array
    kv_tokens: int  # tokens in the KV state at its end

    @property
    def nbytes(self) -> int:
        return len(self.body) + len(self.history) + len(self.id) + _RECORD_OVERHEAD


class _RecordFile(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    created_at: int
    kv_tokens: int
    response: msgspec.Raw
    history: msgspec.Raw


def valid_id(value: object) -> bool:
    return isinstance(value, str) and RESPONSE_ID.fullmatch(value) is not None


def encode_record(record: StoredResponse) -> bytes:
    """The record's file: magic, the payload's sha256, then the JSON payload."""
    payload = msgspec.json.encode(
        _RecordFile(
            record.id,
            record.created_at,
            record.kv_tokens,
            msgspec.Raw(record.body.strip()),
            msgspec.Raw(record.history.strip()),
        )
    )
    return MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def decode_record(data: bytes, name: str) -> StoredResponse:
    """The record of a file named `name`; RecordError saying what is wrong with it."""
    if not data.startswith(MAGIC) or len(data) < _HEAD or data[_HEAD - 1 : _HEAD] != b"\n":
        raise RecordError("not a stored response (no DS4RESP1 header)")
    digest, payload = data[len(MAGIC) : _HEAD - 1], data[_HEAD:]
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        raise RecordError("checksum mismatch")
    try:
        record = msgspec.json.decode(payload, type=_RecordFile)
        response = msgspec.json.decode(record.response)
        history = msgspec.json.decode(record.history)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise RecordError(f"malformed record: {error}") from None
    if not valid_id(record.id) or record.id != name:
        raise RecordError(f"record id {record.id!r} does not match its name {name!r}")
    if not isinstance(response, dict) or response.get("id") != record.id:
        raise RecordError("the response object does not carry the record's id")
    if not isinstance(history, list):
        raise RecordError("the history is not an array of items")
    if not 0 <= record.kv_tokens <= MAX_TOKENS or record.created_at < 0:
        raise RecordError("token count or creation time out of range")
    return StoredResponse(
        record.id, record.created_at, bytes(record.response), bytes(record.history),
        record.kv_tokens,
    )  # fmt: skip


def check_bounds(max_count: int, max_bytes: int) -> None:
    if not 0 <= max_count <= MAX_STORED_RESPONSES:
        raise Ds4Error(f"stored responses {max_count}: use 0..{MAX_STORED_RESPONSES}")
    if not 0 <= max_bytes <= MAX_STORED_MIB << 20:
        raise Ds4Error(f"stored responses bytes {max_bytes}: use 0..{MAX_STORED_MIB} MiB")


@dataclass
class _Entry:
    record: StoredResponse
    used: int


class ResponseStore:
    def __init__(
        self,
        max_count: int = DEFAULT_STORED_RESPONSES,
        max_bytes: int = DEFAULT_STORED_MIB << 20,
        archive: ResponseArchive | None = None,
        *,
        lock: AbstractContextManager[object] | None = None,
        log: Log = lambda _: None,
    ) -> None:
        check_bounds(max_count, max_bytes)
        self.max_count, self.max_bytes = max_count, max_bytes
        self._archive = archive
        self._lock: AbstractContextManager[object] = lock or contextlib.nullcontext()
        self._log = log
        self._entries: dict[str, _Entry] = {}
        self._bytes = 0
        self._uses = 0

    @property
    def enabled(self) -> bool:
        return self.max_count > 0 and self.max_bytes > 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def nbytes(self) -> int:
        with self._lock:
            return self._bytes

    def ids(self) -> list[str]:
        """Most recently used first."""
        with self._lock:
            return [k for k, _ in sorted(self._entries.items(), key=lambda kv: -kv[1].used)]

    def load(self) -> int:
        """Read the archive's records back (at start): the damaged ones are logged and
        deleted, then the oldest beyond the bounds are evicted. Returns the count kept."""
        if self._archive is None:
            return 0
        records: list[StoredResponse] = []
        names: list[str] = self._archive_call(self._archive.names, [])
        for name in names:
            data = self._archive_call(partial(self._read, name), None)
            if data is None:
                continue
            try:
                records.append(decode_record(data, name))
            except RecordError as error:
                self._log(f"stored response {name} dropped: {error}")
                self._remove(name)
        records.sort(key=lambda r: (r.created_at, r.id))
        for record in records:
            self._put_entry(record, write=False)
        kept = len(self)
        if records:
            self._log(f"stored responses: {kept} loaded ({self.nbytes} bytes)")
        return kept

    def put(self, record: StoredResponse) -> bool:
        """Keep `record` (replacing one with its id), evicting the least recently used
        beyond the bounds; False when storing is off or it alone is over the bytes."""
        if not valid_id(record.id):
            raise RecordError(f"invalid response id {record.id!r}")
        if not self.enabled:
            return False
        if record.nbytes > self.max_bytes:
            self._log(
                f"stored response {record.id} not kept: {record.nbytes} bytes, "
                f"bound {self.max_bytes}"
            )
            return False
        return self._put_entry(record, write=True)

    def get(self, response_id: str) -> StoredResponse | None:
        """The record (a use), or None when unknown or evicted."""
        with self._lock:
            entry = self._entries.get(response_id)
            if entry is None:
                return None
            entry.used = self._use()
            return entry.record

    def delete(self, response_id: str) -> bool:
        """Forget the record, here and in the archive; False when it was not here."""
        with self._lock:
            entry = self._entries.pop(response_id, None)
            if entry is not None:
                self._bytes -= entry.record.nbytes
        if entry is None:
            return False
        self._remove(response_id)
        return True

    # ---- inside ----------------------------------------------------------------

    def _put_entry(self, record: StoredResponse, *, write: bool) -> bool:
        if write and self._archive is not None:
            archive = self._archive
            try:
                archive.write(record.id, encode_record(record))
            except OSError as error:  # kept in memory all the same
                self._log(f"stored response {record.id} not written to disk: {error}")
        with self._lock:
            old = self._entries.pop(record.id, None)
            if old is not None:
                self._bytes -= old.record.nbytes
            self._entries[record.id] = _Entry(record, self._use())
            self._bytes += record.nbytes
            evicted = self._evict()
        for gone in evicted:
            self._log(f"stored response {gone} evicted (least recently used)")
            self._remove(gone)
        return record.id in self._entries

    def _evict(self) -> list[str]:
        """Under the lock: drop least recently used records until both bounds hold."""
        gone: list[str] = []
        while self._entries and (
            len(self._entries) > self.max_count or self._bytes > self.max_bytes
        ):
            oldest = min(self._entries, key=lambda k: self._entries[k].used)
            self._bytes -= self._entries.pop(oldest).record.nbytes
            gone.append(oldest)
        return gone

    def _use(self) -> int:
        self._uses += 1
        return self._uses

    def _read(self, name: str) -> bytes | None:
        if self._archive is None or not valid_id(name):
            return None
        return self._archive.read(name, self.max_bytes + _HEAD)

    def _remove(self, name: str) -> None:
        if self._archive is not None:
            archive = self._archive
            self._archive_call(partial(archive.delete, name), None)

    def _archive_call(self, call: Callable[[], T], default: T) -> T:
        try:
            return call()
        except OSError as error:
            self._log(f"stored responses: disk error: {error}")
            return default
