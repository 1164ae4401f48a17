"""The ComputeSession contract on the reference engine: errors, payload, rewind, cancel."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from ds4.adapters.compute.reference import open_reference_runner
from ds4.domain.errors import Ds4Error
from ds4.ports.compute import ModelRunner


@pytest.fixture(scope="module")
def runner(mixed_gguf: Path) -> ModelRunner:
    return open_reference_runner(str(mixed_gguf), numerics="ds4")


@pytest.fixture(scope="module")
def tokens(oracle_mixed: Path) -> list[int]:
    ref = np.load(oracle_mixed / "reference_logits.npz")
    return [int(t) for t in ref["tokens_3"][:37]]


def test_bad_input_is_a_ds4_error(runner: ModelRunner, tmp_path: Path) -> None:
    session = runner.new_session(8)
    with pytest.raises(Ds4Error, match="no logits"):
        session.logits()
    with pytest.raises(Ds4Error, match="outside the vocabulary"):
        session.prefill([0, runner.hparams.n_vocab])
    with pytest.raises(Ds4Error, match="context"):
        session.prefill(list(range(9)))
    assert list(session.tokens) == []
    with pytest.raises(Ds4Error):
        runner.new_session(0)
    with pytest.raises(Ds4Error, match="cannot open"):
        open_reference_runner(str(tmp_path / "missing.gguf"))
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(Ds4Error):
        open_reference_runner(str(junk))
    with pytest.raises(Ds4Error, match="numerics"):
        open_reference_runner(str(junk), numerics="fp16")


def test_payload_layout_and_restore_then_decode_is_bit_exact(
    runner: ModelRunner, tokens: list[int]
) -> None:
    hp = runner.hparams
    live = runner.new_session(64)
    live.prefill(tokens[:30])
    data = live.payload()
    header = struct.unpack_from("<13I", data)
    assert header[0] == 0x34565344 and header[1] == 1
    assert header[7] == 30 and header[12] == min(30, hp.n_swa)
    # docs/reference/formats.md §8.2–8.3 generalised: header, tokens, logits, counts, raw rows,
    # compressor state
    size = 52 + 4 * 30 + 4 * hp.n_vocab + 8 * hp.n_layer + hp.n_layer * header[12] * hp.head_dim * 4
    for r in hp.compress_ratios:
        if r == 4:
            size += (30 // 4) * (hp.head_dim + hp.indexer_head_dim) * 4
            size += 2 * 8 * 2 * hp.head_dim * 4 + 2 * 8 * 2 * hp.indexer_head_dim * 4
        elif r:
            size += (30 // r) * hp.head_dim * 4 + 2 * r * hp.head_dim * 4
    assert len(data) == size

    restored = runner.new_session(64)
    restored.load_payload(data)
    assert list(restored.tokens) == tokens[:30]
    assert np.array_equal(restored.logits(), live.logits())
    assert restored.payload() == data
    for t in tokens[30:]:
        assert np.array_equal(restored.eval(t), live.eval(t))


def test_corrupt_payloads_are_rejected(runner: ModelRunner, tokens: list[int]) -> None:
    live = runner.new_session(64)
    live.prefill(tokens[:10])
    data = live.payload()
    target = runner.new_session(64)
    bad_magic = b"XXXX" + data[4:]
    for bad in (bad_magic, data[:-4], data + b"\0", data[:40]):
        with pytest.raises(Ds4Error):
            target.load_payload(bad)
    with pytest.raises(Ds4Error, match="context"):
        runner.new_session(8).load_payload(data)
    with pytest.raises(Ds4Error, match="chunk or window"):
        runner.new_session(4096).load_payload(data)


def test_rewind_is_exact_and_floors_after_restore(runner: ModelRunner, tokens: list[int]) -> None:
    full = runner.new_session(64)
    logits = full.prefill(tokens, all_logits=True)
    assert full.rewind_floor(21) == 21
    full.rewind(21)
    assert list(full.tokens) == tokens[:21]
    assert np.array_equal(full.logits(), logits[20])
    assert np.array_equal(full.prefill(tokens[21:]), logits[-1])

    restored = runner.new_session(64)
    restored.load_payload(full.payload())
    # Below the restore point only the last window survives: exact spots are the restore
    # point itself and nothing earlier (the overlapping ratio-4 lane needs 4 more tokens).
    assert restored.rewind_floor(len(tokens)) == len(tokens)
    assert restored.rewind_floor(len(tokens) - 1) == 0
    restored.prefill([5, 6])
    assert restored.rewind_floor(len(tokens) + 1) == len(tokens) + 1  # re-evaluates token 37
    assert restored.rewind_floor(len(tokens) - 2) == 0
    restored.rewind(len(tokens))
    assert np.array_equal(restored.logits(), logits[-1])
    with pytest.raises(Ds4Error):
        restored.rewind(3)
    restored.rewind(0)
    assert list(restored.tokens) == []


def test_cancel_from_progress_leaves_last_finished_chunk(
    runner: ModelRunner, tokens: list[int]
) -> None:
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        if done >= 10:
            raise KeyboardInterrupt

    session = runner.new_session(64)
    with pytest.raises(KeyboardInterrupt):
        session.prefill(tokens[:20], chunk=5, progress=progress)
    assert seen == [(5, 20), (10, 20)]
    assert list(session.tokens) == tokens[:10]
    reference = runner.new_session(64)
    assert np.array_equal(session.logits(), reference.prefill(tokens[:10]))
    assert np.array_equal(session.prefill(tokens[10:20]), reference.prefill(tokens[10:20]))
