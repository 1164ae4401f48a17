"""The DSV4 session snapshot payload (formats.md §5), generalised to the file's shape.

Header fields use this model's sizes where Flash has constants (layer count, widths,
vocabulary, sliding window). Beyond §5.4 the loader also checks that each layer's row
counts match the token count, since this engine derives positions from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.kv_state import LayerState
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


def encode_payload(
    hp: DeepSeekV4HParams, ctx: int, tokens: Sequence[int], logits: F32, states: list[LayerState]
) -> bytes:
    t = len(tokens)
    window = raw_window(hp, ctx)
    r = min(t, window)
    header = [MAGIC, VERSION, ctx, prefill_chunk(ctx), window, window, comp_capacity(ctx), t,
              hp.n_layer, hp.head_dim, hp.indexer_head_dim, hp.n_vocab, r]  # fmt: skip
    parts: list[bytes] = [np.array(header, "<u4").tobytes(), np.array(tokens, "<u4").tobytes()]
    parts.append(np.asarray(logits, "<f4").tobytes())
    n_comp = [s.attn.rows.n if s.attn else 0 for s in states]
    n_index = [s.index.rows.n if s.index else 0 for s in states]
    parts += [np.array(n_comp, "<u4").tobytes(), np.array(n_index, "<u4").tobytes()]
    for s in states:
        parts.append(np.asarray(s.raw.span(t - r, t), "<f4").tobytes())
        for comp in s.compressors():
            parts.append(np.asarray(comp.rows.view(), "<f4").tobytes())
            for arr in comp.frontier(t):
                parts.append(np.asarray(arr, "<f4").tobytes())
    return b"".join(parts)


@dataclass
class DecodedPayload:
    tokens: list[int]
    logits: F32


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


def decode_payload(
    hp: DeepSeekV4HParams, ctx: int, data: bytes, states: list[LayerState]
) -> DecodedPayload:
    """Validate (formats.md §5.4) and load into fresh `states`; Ds4Error on any failure."""
    rd = _Reader(data)
    h = [int(v) for v in rd.take("<u4", N_HEADER)]
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
    tokens = rd.take("<u4", t).astype(np.int64)
    if t and int(tokens.max()) >= hp.n_vocab:
        raise Ds4Error("snapshot holds a token id outside the vocabulary")
    logits = rd.take("<f4", hp.n_vocab).astype(np.float32)
    n_comp = rd.take("<u4", hp.n_layer).astype(np.int64)
    n_index = rd.take("<u4", hp.n_layer).astype(np.int64)
    r = h[12]
    for il, s in enumerate(states):
        s.raw.set_rows(t - r, rd.take("<f4", r * hp.head_dim).reshape(r, hp.head_dim))
        for comp, count in ((s.attn, n_comp[il]), (s.index, n_index[il])):
            if comp is None:
                if count:
                    raise Ds4Error(f"snapshot layer {il} has compressed rows it cannot have")
                continue
            if count > h[6] or count > ctx // comp.ratio + 2 or count != t // comp.ratio:
                raise Ds4Error(f"snapshot layer {il} compressed row count {count} is inconsistent")
            comp.rows.set_rows(
                0, rd.take("<f4", int(count) * comp.row_width).reshape(-1, comp.row_width)
            )
            slots = 8 if comp.ratio == 4 else comp.ratio
            s_kv = rd.take("<f4", slots * comp.width).reshape(slots, comp.width)
            s_sc = rd.take("<f4", slots * comp.width).reshape(slots, comp.width)
            comp.restore_frontier(t, s_kv.astype(np.float32), s_sc.astype(np.float32))
    if rd.pos != len(data):
        raise Ds4Error(f"snapshot payload has {len(data) - rd.pos} unexpected trailing bytes")
    return DecodedPayload([int(x) for x in tokens], logits)
