"""The DSV4 session snapshot payload (docs/reference/formats.md §8), generalised to the file's
shape.

Every backend snapshots through this one codec: it turns a SessionSnapshot (tokens,
logits, and per layer the last raw KV rows, the emitted compressed rows and each
compressor's frontier) into bytes and back, so a payload written by one backend
restores into any other. Header fields use this model's sizes where Flash has
constants (layer count, widths, vocabulary, sliding window). Beyond docs/reference/formats.md §8.4
the decoder also checks that each layer's row counts match the token count, since positions are
derived from them, and that every value is one a session can hold (dsv4_values.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.compressor_frontier import frontier_slots, lanes
from ds4.domain.engine.dsv4_values import check_frontier, check_rows, check_state
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams

F32 = npt.NDArray[np.float32]

MAGIC = 0x34565344
VERSION = 1
N_HEADER = 13


def prefill_chunk(ctx: int) -> int:
    return min(ctx, 2048)


def raw_window(hp: DeepSeekV4HParams, ctx: int) -> int:
    return min(hp.n_swa, ctx)


def comp_capacity(ctx: int) -> int:
    return ctx // 4 + 2


@dataclass(frozen=True)
class CompressorSnapshot:
    rows: F32  # (emitted rows, row width)
    frontier_kv: F32  # (slots, lanes * row width)
    frontier_score: F32


@dataclass(frozen=True)
class LayerSnapshot:
    raw: F32  # the last min(tokens, window) raw KV rows (r, head_dim)
    attn: CompressorSnapshot | None
    index: CompressorSnapshot | None


@dataclass(frozen=True)
class SessionSnapshot:
    tokens: list[int]
    logits: F32  # (vocab,) after the last token (zeros when there is none)
    layers: list[LayerSnapshot]


def layer_compressors(hp: DeepSeekV4HParams, il: int) -> tuple[int, int]:
    """(attention ratio or 0, indexer ratio or 0) of layer il."""
    return hp.compress_ratios[il], 4 if hp.has_indexer(il) else 0


def encode_payload(hp: DeepSeekV4HParams, ctx: int, snap: SessionSnapshot) -> bytes:
    t = len(snap.tokens)
    window = raw_window(hp, ctx)
    r = min(t, window)
    header = [MAGIC, VERSION, ctx, prefill_chunk(ctx), window, window, comp_capacity(ctx), t,
              hp.n_layer, hp.head_dim, hp.indexer_head_dim, hp.n_vocab, r]  # fmt: skip
    parts: list[bytes] = [np.array(header, "<u4").tobytes(), np.array(snap.tokens, "<u4").tobytes()]
    parts.append(np.asarray(snap.logits, "<f4").tobytes())
    n_comp = [lay.attn.rows.shape[0] if lay.attn else 0 for lay in snap.layers]
    n_index = [lay.index.rows.shape[0] if lay.index else 0 for lay in snap.layers]
    parts += [np.array(n_comp, "<u4").tobytes(), np.array(n_index, "<u4").tobytes()]
    for lay in snap.layers:
        if lay.raw.shape[0] != r:
            raise Ds4Error(f"snapshot layer holds {lay.raw.shape[0]} raw rows, expected {r}")
        parts.append(np.asarray(lay.raw, "<f4").tobytes())
        for comp in (lay.attn, lay.index):
            if comp is not None:
                for arr in (comp.rows, comp.frontier_kv, comp.frontier_score):
                    parts.append(np.asarray(arr, "<f4").tobytes())
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, dtype: str, count: int) -> npt.NDArray[Any]:
        size = np.dtype(dtype).itemsize * count
        if self.pos + size > len(self.data):
            raise Ds4Error("snapshot payload is truncated")
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos).copy()
        self.pos += size
        return out


def _header_checks(hp: DeepSeekV4HParams, ctx: int, h: list[int]) -> None:
    shape = [hp.n_layer, hp.head_dim, hp.indexer_head_dim, hp.n_vocab]
    window = raw_window(hp, ctx)
    t = h[7]
    checks = [
        (h[0] == MAGIC and h[1] == VERSION, "not a DSV4 version 1 payload"),
        (h[2] <= ctx and t < ctx, f"snapshot context {h[2]} / {t} tokens do not fit context {ctx}"),
        (h[8:12] == shape, "snapshot is for a different model shape"),
        (h[3] == prefill_chunk(ctx) and h[5] == window, "snapshot chunk or window differs"),
        (h[4] != 0 and h[12] == min(t, h[5]) and h[12] <= min(h[4], window), "bad raw row count"),
        (h[6] <= comp_capacity(ctx), "snapshot compressed capacity exceeds this session's"),
    ]  # fmt: skip
    for ok, message in checks:
        if not ok:
            raise Ds4Error(message)


def _compressor(
    rd: _Reader, name: str, ratio: int, row_width: int, count: int, t: int, cap: int, ctx: int
) -> CompressorSnapshot | None:
    if not ratio:
        if count:
            raise Ds4Error(f"snapshot {name} has compressed rows it cannot have")
        return None
    if count > cap or count > ctx // ratio + 2 or count != t // ratio:
        raise Ds4Error(f"snapshot {name} compressed row count {count} is inconsistent")
    rows = rd.take("<f4", count * row_width).reshape(-1, row_width).astype(np.float32)
    slots, width = frontier_slots(ratio), lanes(ratio) * row_width
    s_kv = rd.take("<f4", slots * width).reshape(slots, width).astype(np.float32)
    s_sc = rd.take("<f4", slots * width).reshape(slots, width).astype(np.float32)
    check_rows(f"{name} compressed rows", rows)
    check_frontier(name, ratio, t, s_kv, s_sc)
    return CompressorSnapshot(rows, s_kv, s_sc)


def decode_payload(hp: DeepSeekV4HParams, ctx: int, data: bytes) -> SessionSnapshot:
    """Validate (docs/reference/formats.md §8.4) and decode; Ds4Error on any failure."""
    rd = _Reader(data)
    h = [int(v) for v in rd.take("<u4", N_HEADER)]
    _header_checks(hp, ctx, h)
    t, r = h[7], h[12]
    tokens = rd.take("<u4", t).astype(np.int64)
    if t and int(tokens.max()) >= hp.n_vocab:
        raise Ds4Error("snapshot holds a token id outside the vocabulary")
    logits = rd.take("<f4", hp.n_vocab).astype(np.float32)
    check_state("logits", logits)
    n_comp = rd.take("<u4", hp.n_layer).astype(np.int64)
    n_index = rd.take("<u4", hp.n_layer).astype(np.int64)
    layers = []
    for il in range(hp.n_layer):
        raw = rd.take("<f4", r * hp.head_dim).reshape(r, hp.head_dim).astype(np.float32)
        check_rows(f"layer {il} raw KV rows", raw)
        attn_ratio, index_ratio = layer_compressors(hp, il)
        attn = _compressor(rd, f"layer {il} attention", attn_ratio, hp.head_dim,
                           int(n_comp[il]), t, h[6], ctx)  # fmt: skip
        index = _compressor(rd, f"layer {il} indexer", index_ratio, hp.indexer_head_dim,
                            int(n_index[il]), t, h[6], ctx)  # fmt: skip
        layers.append(LayerSnapshot(raw, attn, index))
    if rd.pos != len(data):
        raise Ds4Error(f"snapshot payload has {len(data) - rd.pos} unexpected trailing bytes")
    return SessionSnapshot([int(x) for x in tokens], logits, layers)


def empty_logits(hp: DeepSeekV4HParams) -> F32:
    return np.zeros(hp.n_vocab, np.float32)


def check_tokens(tokens: Sequence[int], n_held: int, ctx: int, n_vocab: int) -> None:
    """Ds4Error unless `tokens` fit after n_held tokens and are all in the vocabulary."""
    if n_held + len(tokens) > ctx:
        raise Ds4Error(f"{n_held + len(tokens)} tokens do not fit the context of {ctx}")
    ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
    bad = ids[(ids < 0) | (ids >= n_vocab)]
    if bad.size:
        raise Ds4Error(f"token id {int(bad[0])} is outside the vocabulary (0..{n_vocab - 1})")
