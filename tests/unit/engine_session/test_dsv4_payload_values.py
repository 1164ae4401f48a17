"""The DSV4 decoder refuses values no session can hold (docs/adr/0007-kv-file-integrity.md):
a payload whose bytes are intact but whose state is damaged never restores."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from ds4.domain.engine.compressor_frontier import EMPTY_SCORE, frontier_from_inputs, used_slots
from ds4.domain.engine.dsv4_payload import (
    CompressorSnapshot,
    LayerSnapshot,
    SessionSnapshot,
    decode_payload,
    encode_payload,
    layer_compressors,
    raw_window,
)
from ds4.domain.errors import Ds4Error
from ds4.domain.model.presets import TINY_SHAPES

HP = TINY_SHAPES["tiny"]  # dense, ratio 4 + indexer and ratio 128 layers
CTX = 512
T = 37  # ratio 4: a previous and one current slot used; ratio 128: 37 slots used


def f16_rows(rng: np.random.Generator, n: int, width: int) -> np.ndarray:
    return (rng.standard_normal((n, width)) * 3).astype(np.float16).astype(np.float32)


def compressor(rng: np.random.Generator, ratio: int, width: int) -> CompressorSnapshot:
    lanes = 2 if ratio == 4 else 1
    kv = rng.standard_normal((T, lanes * width)).astype(np.float32)
    score = rng.standard_normal((T, lanes * width)).astype(np.float32)
    s_kv, s_sc = frontier_from_inputs(
        ratio, lanes * width, T, lambda a, b: kv[a:b], lambda a, b: score[a:b]
    )
    return CompressorSnapshot(f16_rows(rng, T // ratio, width), s_kv, s_sc)


def snapshot() -> SessionSnapshot:
    rng = np.random.default_rng(5)
    layers = []
    for il in range(HP.n_layer):
        attn_ratio, index_ratio = layer_compressors(HP, il)
        layers.append(
            LayerSnapshot(
                f16_rows(rng, min(T, raw_window(HP, CTX)), HP.head_dim),
                compressor(rng, attn_ratio, HP.head_dim) if attn_ratio else None,
                compressor(rng, index_ratio, HP.indexer_head_dim) if index_ratio else None,
            )
        )
    tokens = [int(t) for t in rng.integers(0, HP.n_vocab, T)]
    logits = (rng.standard_normal(HP.n_vocab) * 4).astype(np.float32)
    return SessionSnapshot(tokens, logits, layers)


def test_a_real_state_round_trips() -> None:
    snap = snapshot()
    back = decode_payload(HP, CTX, encode_payload(HP, CTX, snap))
    assert back.tokens == snap.tokens and np.array_equal(back.logits, snap.logits)
    assert all(np.array_equal(a.raw, b.raw) for a, b in zip(back.layers, snap.layers, strict=True))


def attn(il: int) -> Callable[[SessionSnapshot], CompressorSnapshot]:
    def pick(snap: SessionSnapshot) -> CompressorSnapshot:
        comp = snap.layers[il].attn
        assert comp is not None
        return comp

    return pick


def index(il: int) -> Callable[[SessionSnapshot], CompressorSnapshot]:
    def pick(snap: SessionSnapshot) -> CompressorSnapshot:
        comp = snap.layers[il].index
        assert comp is not None
        return comp

    return pick


Damage = Callable[[SessionSnapshot], None]


def unused_slot(ratio: int) -> int:
    return int(np.flatnonzero(~used_slots(ratio, T))[0])


DAMAGE: dict[str, tuple[Damage, str]] = {
    "layer-0 raw row NaN": (lambda s: s.layers[0].raw.__setitem__((3, 7), np.nan), "raw KV"),
    "layer-0 raw row 3e38": (lambda s: s.layers[0].raw.__setitem__((0, 0), 3e38), "raw KV"),
    "raw row past f16": (lambda s: s.layers[5].raw.__setitem__((15, 127), 65520.0), "raw KV"),
    "raw row -inf": (lambda s: s.layers[1].raw.__setitem__((2, 2), -np.inf), "raw KV"),
    "compressed row inf": (lambda s: attn(2)(s).rows.__setitem__((1, 5), np.inf), "compressed"),
    "indexer row NaN": (lambda s: index(4)(s).rows.__setitem__((0, 0), np.nan), "indexer"),
    "logits NaN": (lambda s: s.logits.__setitem__(17, np.nan), "logits"),
    "logits 3e38": (lambda s: s.logits.__setitem__(0, 3e38), "logits"),
    "frontier input NaN": (
        lambda s: attn(3)(s).frontier_kv.__setitem__((36, 9), np.nan),
        "frontier inputs",
    ),
    "frontier score 1e30": (
        lambda s: attn(2)(s).frontier_score.__setitem__((4, 0), 1e30),
        "frontier scores",
    ),
    "unused slot kv": (
        lambda s: attn(3)(s).frontier_kv.__setitem__((unused_slot(128), 1), 0.5),
        "slots it does not use",
    ),
    "unused slot score": (
        lambda s: index(2)(s).frontier_score.__setitem__((unused_slot(4), 0), 0.0),
        "slots it does not use",
    ),
    "token id": (lambda s: s.tokens.__setitem__(4, HP.n_vocab), "outside the vocabulary"),
}


@pytest.mark.parametrize("name", DAMAGE)
def test_damaged_values_are_refused(name: str) -> None:
    damage, message = DAMAGE[name]
    snap = snapshot()
    damage(snap)
    data = encode_payload(HP, CTX, snap)
    with pytest.raises(Ds4Error, match=message):
        decode_payload(HP, CTX, data)


def test_the_empty_marker_is_what_unused_slots_hold() -> None:
    comp = attn(3)(snapshot())
    unused = ~used_slots(128, T)
    assert (comp.frontier_score[unused] == EMPTY_SCORE).all() and (
        comp.frontier_kv[unused] == 0
    ).all()
