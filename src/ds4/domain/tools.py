"""Tool-call ids and exact-DSML replay memory (docs/reference/chat-and-dsml.md §4): the
ids, the KTM trailer that stores each id's sampled block, and the memory that hands the
model back the block it sampled.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Literal

import msgspec

from ds4.domain.chat import AssistantMessage, Message
from ds4.domain.dsml.parser import BlockStart, BlockStatus, parse_block
from ds4.domain.dsml.syntax import SPELLINGS, ToolCall
from ds4.ports.system import RandomSource

# --- ktm ---
# KTM trailer bytes: tool id -> exact sampled DSML block (docs/reference/formats.md §9.4,
# docs/reference/chat-and-dsml.md §4.4).
#
# u8[3] "KTM" | u8 version=1 | u32 LE count | count x (u32 id_len, u32 dsml_len, id, dsml)

KTM_MAGIC = b"KTM"
KTM_VERSION = 1
MAX_ID_BYTES = 256
MAX_DSML_BYTES = 512 * 1024 * 1024
_HEADER = struct.Struct("<3sBI")
_ENTRY = struct.Struct("<II")


def encode_ktm(entries: Sequence[tuple[str, str]]) -> bytes:
    """The trailer for (id, dsml) pairs; b"" when there are none (flag bit stays clear)."""
    if not entries:
        return b""
    parts = [_HEADER.pack(KTM_MAGIC, KTM_VERSION, len(entries))]
    for tool_id, dsml in entries:
        id_bytes, dsml_bytes = tool_id.encode(), dsml.encode()
        parts += (_ENTRY.pack(len(id_bytes), len(dsml_bytes)), id_bytes, dsml_bytes)
    return b"".join(parts)


def ktm_size(entries: Sequence[tuple[str, str]]) -> int:
    """Exactly len(encode_ktm(entries)), for the disk budget check."""
    if not entries:
        return 0
    return _HEADER.size + sum(_ENTRY.size + len(i.encode()) + len(d.encode()) for i, d in entries)


def decode_ktm(data: bytes, *, max_count: int) -> list[tuple[str, str]]:
    """Entries up to the first bad or short one; [] for a bad header or a count over
    `max_count` (4 x the memory's id limit)."""
    if len(data) < _HEADER.size:
        return []
    magic, version, count = _HEADER.unpack_from(data)
    if magic != KTM_MAGIC or version != KTM_VERSION or count > max_count:
        return []
    entries: list[tuple[str, str]] = []
    pos = _HEADER.size
    for _ in range(count):
        if pos + _ENTRY.size > len(data):
            break
        id_len, dsml_len = _ENTRY.unpack_from(data, pos)
        pos += _ENTRY.size
        if not (1 <= id_len <= MAX_ID_BYTES and 1 <= dsml_len <= MAX_DSML_BYTES):
            break
        if pos + id_len + dsml_len > len(data):
            break
        try:
            tool_id = data[pos : pos + id_len].decode()
            dsml = data[pos + id_len : pos + id_len + dsml_len].decode()
        except UnicodeDecodeError:
            break
        entries.append((tool_id, dsml))
        pos += id_len + dsml_len
    return entries


def dsml_blocks(text: str) -> list[str]:
    """Every complete DSML block in `text`, in order, each from its leading blank line
    (when present) through its close tag — the same bytes the parser captures."""
    blocks: list[str] = []
    pos = 0
    while True:
        found = [(at, s) for s in SPELLINGS if (at := text.find(s.block_open, pos)) >= 0]
        if not found:
            return blocks
        at, spelling = min(found, key=lambda item: item[0])
        start = at - 2 if at - 2 >= pos and text[at - 2 : at] == "\n\n" else at
        block = BlockStart(start, at + len(spelling.block_open), spelling)
        parsed = parse_block(text, block)
        if parsed.status is BlockStatus.COMPLETE:
            blocks.append(text[start : parsed.end])
            pos = parsed.end
        else:
            pos = block.tag_end


# --- tool ids ---
# Tool-call ids: `call_` (OpenAI chat, Responses) or `toolu_` (Anthropic) + 32 hex digits.

ToolApi = Literal["openai", "anthropic"]
ID_PREFIXES: dict[ToolApi, str] = {"openai": "call_", "anthropic": "toolu_"}
_ID_BYTES = 16
_MAX_DRAWS = 64


def new_tool_id(random: RandomSource, api: ToolApi, taken: Callable[[str], bool]) -> str:
    """A fresh id that `taken` rejects none of (redrawn on the rare collision)."""
    for _ in range(_MAX_DRAWS):
        candidate = ID_PREFIXES[api] + random.token_bytes(_ID_BYTES).hex()
        if not taken(candidate):
            return candidate
    # Only a broken random source collides this often; failing beats looping forever.
    raise RuntimeError("random source keeps repeating tool ids")


# --- replay memory ---
# Exact DSML replay memory (docs/reference/chat-and-dsml.md §4): tool id -> the block the model
# sampled.
#
# Clients send tool calls back as JSON; re-rendering JSON rarely reproduces the
# sampled bytes, which would break KV prefix reuse. Remembering the sampled block per
# id lets the renderer insert it verbatim. Bounded by id count and accounted bytes,
# evicting least recently used ids; one block is shared by all ids of its turn.

DEFAULT_MAX_IDS = 100_000
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
# Fixed bookkeeping charge per id and per block, so the byte cap stays honest for
# many tiny entries (the reference counts its C struct sizes; ADR 0020).
ENTRY_OVERHEAD = 64


class ReplaySource(Enum):
    RAM = "ram"  # sampled by this process
    DISK = "disk"  # loaded from a KV cache file's KTM trailer


@dataclass
class _Block:
    dsml: str
    ids: dict[str, None] = field(default_factory=dict)  # ordered set

    @property
    def size(self) -> int:
        return len(self.dsml.encode()) + 1 + ENTRY_OVERHEAD


@dataclass
class _Entry:
    block: _Block
    source: ReplaySource


@dataclass(frozen=True)
class ReplayStats:
    """Per request: histories replayed from RAM / disk, rendered canonically, ids unknown."""

    mem: int = 0
    disk: int = 0
    canonical: int = 0
    missing_ids: int = 0


def _entry_size(tool_id: str) -> int:
    return len(tool_id.encode()) + 1 + ENTRY_OVERHEAD


class ToolReplayMemory:
    def __init__(
        self,
        random: RandomSource,
        *,
        max_ids: int = DEFAULT_MAX_IDS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        enabled: bool = True,
    ) -> None:
        self._random = random
        self.max_ids = max_ids
        self.max_bytes = max_bytes
        self.enabled = enabled
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # oldest first
        self._blocks: dict[str, _Block] = {}
        self.byte_size = 0

    def __len__(self) -> int:
        return len(self._entries)

    def has_id(self, tool_id: str) -> bool:
        return tool_id in self._entries

    def source_of(self, tool_id: str) -> ReplaySource | None:
        entry = self._entries.get(tool_id)
        return None if entry is None else entry.source

    def lookup(self, tool_id: str) -> str | None:
        """The sampled block for `tool_id` (and mark it recently used)."""
        entry = self._entries.get(tool_id)
        if entry is None:
            return None
        self._entries.move_to_end(tool_id)
        return entry.block.dsml

    # -- storing --------------------------------------------------------------

    def put(self, tool_id: str, dsml: str, source: ReplaySource = ReplaySource.RAM) -> None:
        if not self.enabled or not tool_id or not dsml:
            return
        entry = self._entries.get(tool_id)
        if entry is not None and entry.block.dsml == dsml:
            self._entries.move_to_end(tool_id)
            if source is ReplaySource.RAM:
                entry.source = ReplaySource.RAM
            return
        if entry is not None:
            self._drop(tool_id)
        block = self._blocks.get(dsml)
        if block is None:
            block = self._blocks[dsml] = _Block(dsml)
            self.byte_size += block.size
        block.ids[tool_id] = None
        self._entries[tool_id] = _Entry(block, source)
        self.byte_size += _entry_size(tool_id)
        self._prune()

    def remember(self, calls: Sequence[ToolCall], raw_dsml: str | None) -> None:
        """After a turn: every call id now names the block the model sampled."""
        for call in calls:
            self.put(call.id, raw_dsml or "", ReplaySource.RAM)

    def _drop(self, tool_id: str) -> None:
        entry = self._entries.pop(tool_id)
        self.byte_size -= _entry_size(tool_id)
        del entry.block.ids[tool_id]
        if not entry.block.ids:
            del self._blocks[entry.block.dsml]
            self.byte_size -= entry.block.size

    def _prune(self) -> None:
        while self._entries and (
            len(self._entries) > self.max_ids or self.byte_size > self.max_bytes
        ):
            self._drop(next(iter(self._entries)))

    # -- ids ------------------------------------------------------------------

    def new_id(self, api: ToolApi, taken: Container[str] = ()) -> str:
        """Unique against `taken` (this turn's ids) and every id in memory."""

        def used(candidate: str) -> bool:
            return candidate in taken or candidate in self._entries

        return new_tool_id(self._random, api, used)

    def assign_ids(
        self, calls: Sequence[ToolCall], api: ToolApi, shown: Sequence[str] = ()
    ) -> tuple[ToolCall, ...]:
        """Ids already streamed to the client win (by index); the rest are drawn fresh."""
        taken: set[str] = {c.id for c in calls if c.id} | {s for s in shown if s}
        out: list[ToolCall] = []
        for index, call in enumerate(calls):
            tool_id = call.id or (shown[index] if index < len(shown) else "")
            if not tool_id:
                tool_id = self.new_id(api, taken)
                taken.add(tool_id)
            out.append(replace_id(call, tool_id))
        return tuple(out)

    # -- replay ---------------------------------------------------------------

    def attach(self, messages: Sequence[Message]) -> tuple[list[Message], ReplayStats]:
        """Give each assistant message with calls its sampled block when every call id
        is known and they all name the same block; otherwise it renders canonically."""
        stats = ReplayStats()
        out: list[Message] = []
        for message in messages:
            if (
                isinstance(message, AssistantMessage)
                and message.tool_calls
                and not message.raw_dsml
            ):
                attached, stats = self._attach_one(message, stats)
                out.append(attached)
            else:
                out.append(message)
        return out, stats

    def _attach_one(
        self, message: AssistantMessage, stats: ReplayStats
    ) -> tuple[AssistantMessage, ReplayStats]:
        ids = [call.id for call in message.tool_calls]
        found = [self._entries.get(i) for i in ids] if self.enabled else [None] * len(ids)
        entries = [e for e in found if e is not None]
        if len(entries) == len(ids) and len({id(e.block) for e in entries}) == 1:
            for tool_id in ids:
                self._entries.move_to_end(tool_id)
            from_ram = any(e.source is ReplaySource.RAM for e in entries)
            stats = replace(stats, mem=stats.mem + from_ram, disk=stats.disk + (not from_ram))
            return msgspec.structs.replace(message, raw_dsml=entries[0].block.dsml), stats
        missing = sum(1 for i, e in zip(ids, found, strict=True) if e is None and i)
        return message, replace(
            stats, canonical=stats.canonical + 1, missing_ids=stats.missing_ids + missing
        )

    # -- disk -----------------------------------------------------------------

    def ktm_entries(self, cache_text: str) -> list[tuple[str, str]]:
        """(id, block) for every remembered block that occurs in a checkpoint's text."""
        if not self.enabled:
            return []
        entries: list[tuple[str, str]] = []
        seen: set[str] = set()
        for dsml in dsml_blocks(cache_text):
            block = self._blocks.get(dsml)
            if block is not None and dsml not in seen:
                seen.add(dsml)
                entries += [(tool_id, dsml) for tool_id in block.ids]
        return entries

    def ktm_trailer(self, cache_text: str) -> bytes:
        return encode_ktm(self.ktm_entries(cache_text))

    def load_ktm(self, data: bytes, wanted: Callable[[str], bool] | None = None) -> int:
        """Import a trailer's entries as DISK entries; returns how many were taken."""
        if not self.enabled:
            return 0
        loaded = 0
        for tool_id, dsml in decode_ktm(data, max_count=4 * self.max_ids):
            if wanted is None or wanted(tool_id):
                self.put(tool_id, dsml, ReplaySource.DISK)
                loaded += 1
        return loaded


def replace_id(call: ToolCall, tool_id: str) -> ToolCall:
    return ToolCall(call.name, call.arguments, tool_id)
