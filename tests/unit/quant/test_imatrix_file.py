"""imatrix .dat files: round trip, bounds-checked parsing, and the importance lookup rules."""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4.adapters.quant.imatrix_file import (
    Imatrix,
    ImatrixEntry,
    encode_imatrix,
    expert_importance,
    parse_imatrix,
    read_imatrix,
    tensor_importance,
    write_imatrix,
)
from ds4.domain.errors import Ds4Error


def _entry(values: list[float], ncall: int = 1) -> ImatrixEntry:
    return ImatrixEntry(ncall, np.array(values, dtype=np.float32))


SAMPLE = Imatrix(
    {
        "blk.0.ffn_gate_exps.weight": _entry([1.0, 2.0, 3.0, 4.0], ncall=2),
        "blk.0.attn_q_a.weight": _entry([0.5, 0.25], ncall=0),
    },
    chunks=7,
    dataset="calibration.txt",
)


def _i32(v: int) -> bytes:
    return struct.pack("<i", v)


def test_round_trip_with_tail_and_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "imatrix.dat"
    write_imatrix(path, SAMPLE)
    raw = path.read_bytes()
    name = b"blk.0.ffn_gate_exps.weight"
    assert raw.startswith(_i32(2) + _i32(len(name)) + name + _i32(2) + _i32(4))
    assert raw.endswith(_i32(7) + _i32(15) + b"calibration.txt")
    back = read_imatrix(path)
    assert back.chunks == 7 and back.dataset == "calibration.txt"
    assert list(back.entries) == list(SAMPLE.entries)
    for key, entry in SAMPLE.entries.items():
        assert back.entries[key].ncall == entry.ncall
        assert np.array_equal(back.entries[key].values, entry.values)


def test_file_without_tail_is_valid() -> None:
    raw = encode_imatrix(Imatrix(SAMPLE.entries))
    back = parse_imatrix(raw)
    assert back.chunks is None and back.dataset is None and len(back.entries) == 2


def test_importance_divides_by_ncall_only_when_positive() -> None:
    values = SAMPLE.importance("blk.0.ffn_gate_exps.weight")
    assert values is not None and np.array_equal(values, [0.5, 1.0, 1.5, 2.0])
    kept = SAMPLE.importance("blk.0.attn_q_a.weight")
    assert kept is not None and np.array_equal(kept, [0.5, 0.25])
    assert SAMPLE.importance("missing") is None


def test_every_truncation_is_a_ds4_error() -> None:
    raw = encode_imatrix(SAMPLE)
    no_tail = len(encode_imatrix(Imatrix(SAMPLE.entries)))
    for cut in range(len(raw)):
        if cut == no_tail:
            continue  # a complete file without the optional tail
        with pytest.raises(Ds4Error, match="imatrix"):
            parse_imatrix(raw[:cut])


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_i32(-1), "negative entry count"),
        (_i32(1_000_000), "claims 1000000 entries"),
        (_i32(1) + _i32(-5) + b"\0" * 12, "negative entry 0 name length"),
        (_i32(1) + _i32(1) + b"a" + _i32(1) + _i32(1 << 30) + b"\0" * 8, "truncated in entry 'a'"),
        (_i32(1) + _i32(1) + b"a" + _i32(1) + _i32(1) + struct.pack("<f", np.nan), "NaN"),
        (_i32(1) + _i32(2) + b"\xff\xfe" + _i32(1) + _i32(0), "not valid UTF-8"),
        (_i32(2) + (_i32(1) + b"a" + _i32(1) + _i32(0)) * 2, "appears twice"),
        (_i32(0) + _i32(1) + _i32(0) + b"junk", "unexpected bytes"),
    ],
)
def test_corrupt_files_name_the_problem(raw: bytes, message: str) -> None:
    with pytest.raises(Ds4Error, match=message) as info:
        parse_imatrix(raw, "bad.dat")
    assert str(info.value).startswith("bad.dat:")


def test_unreadable_file_is_a_ds4_error(tmp_path: Path) -> None:
    with pytest.raises(Ds4Error, match="cannot read imatrix file"):
        read_imatrix(tmp_path / "missing.dat")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=96))
def test_arbitrary_bytes_parse_or_raise_ds4_error(raw: bytes) -> None:
    with contextlib.suppress(Ds4Error):
        parse_imatrix(raw)


def test_tensor_lookup_prefers_the_gguf_name_and_checks_the_size() -> None:
    imatrix = Imatrix(
        {"attn.wq_a.weight": _entry([1.0, 2.0]), "blk.0.attn_q_a.weight": _entry([3.0, 4.0])}
    )
    got = tensor_importance(imatrix, "blk.0.attn_q_a.weight", "attn.wq_a.weight", 2)
    assert got is not None and np.array_equal(got, [3.0, 4.0])
    assert tensor_importance(imatrix, "nope", "attn.wq_a.weight", 2) is not None
    assert tensor_importance(imatrix, "nope", "also.nope", 2) is None
    with pytest.raises(Ds4Error, match="has 2 values, expected 3"):
        tensor_importance(imatrix, "blk.0.attn_q_a.weight", "x", 3)


def test_expert_lookup_order_and_packed_slices() -> None:
    gguf_name, hf_name = "blk.3.ffn_up_exps.weight", "layers.3.ffn.experts.1.w3.weight"
    packed = Imatrix({gguf_name: _entry([1, 2, 3, 4, 5, 6])})
    got = expert_importance(packed, gguf_name, hf_name, expert=1, n_experts=3, ncols=2)
    assert got is not None and np.array_equal(got, [3, 4])
    specific = Imatrix(
        {
            gguf_name: _entry([9, 9]),
            f"{hf_name}.expert_1": _entry([7, 7]),
            f"{hf_name}.expert.1": _entry([5, 5]),
        }
    )
    got = expert_importance(specific, gguf_name, hf_name, expert=1, n_experts=3, ncols=2)
    assert got is not None and np.array_equal(got, [5, 5])
    assert (
        expert_importance(Imatrix({}), gguf_name, hf_name, expert=0, n_experts=3, ncols=2) is None
    )
    with pytest.raises(Ds4Error, match="expected 2 or 2 x 3 experts = 6"):
        expert_importance(
            Imatrix({gguf_name: _entry([1, 2, 3])}),
            gguf_name,
            hf_name,
            expert=0,
            n_experts=3,
            ncols=2,
        )
