"""Metadata arrays read from a file: compact, yet they act like the lists they replace."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from tests.support.sample_gguf import SAMPLE_METADATA, write_sample

from ds4.adapters.gguf.reader import GGUFFile, parse_gguf
from ds4.adapters.gguf.writer import GGUFWriter
from ds4.domain.gguf.records import ArrayValue, MetaValue, PackedArray, StringArray, ValueType
from ds4.domain.kvcache.kv_file import model_identity
from ds4.domain.model.presets import FLASH


def parse_metadata(tmp_path: Path, metadata: dict[str, MetaValue]) -> dict[str, MetaValue]:
    path = tmp_path / "m.gguf"
    writer = GGUFWriter(path)
    for key, value in metadata.items():
        writer.add_metadata(key, value)
    writer.begin_data()
    writer.finish()
    blob = path.read_bytes()
    return parse_gguf(memoryview(blob), len(blob)).metadata


def test_arrays_read_from_a_file_are_compact_and_equal_their_lists(tmp_path: Path) -> None:
    path = tmp_path / "s.gguf"
    write_sample(path)
    with GGUFFile(path) as f:
        for key, want in SAMPLE_METADATA.items():
            if want.vtype is not ValueType.ARRAY:
                continue
            got = f.metadata[key]
            assert isinstance(got.value, PackedArray | StringArray), key
            assert got.items() == want.value and want.value == got.value, key
            assert repr(got.value) == repr(want.value), key  # model identity hashes repr
            assert list(got.value) == want.value and got.value.tolist() == want.value, key


def test_indexing_slicing_and_iteration() -> None:
    packed = PackedArray(np.array([5, 6, 7], dtype="<u4"))
    assert (packed[0], packed[-1], packed[1:]) == (5, 7, [6, 7])
    assert type(packed[0]) is int and list(packed) == [5, 6, 7]
    with pytest.raises(IndexError):
        packed[3]
    records = b"".join(struct.pack("<Q", len(s)) + s for s in (b"ab", b"", b"\xff!"))
    strings = StringArray(records, np.array([0, 10, 18, 29], dtype=np.int64))
    assert list(strings) == ["ab", "", "\\xff!"]  # bad UTF-8 stays visible, never raises
    assert (strings[-1], strings[:2], len(strings)) == ("\\xff!", ["ab", ""], 3)
    with pytest.raises(IndexError):
        strings[-4]


def test_arrays_are_read_only_and_unhashable() -> None:
    packed = PackedArray(np.array([1.5], dtype="<f4"))
    with pytest.raises(ValueError, match="read-only"):
        packed.numpy()[0] = 2
    with pytest.raises(TypeError):
        hash(packed)
    assert isinstance(packed, ArrayValue)
    assert packed != (1.5,)  # like a list: not equal to a tuple


def test_bool_arrays_read_any_nonzero_byte_as_true() -> None:
    record = struct.pack("<Q", 1) + b"b" + struct.pack("<IIQ", 9, 7, 3) + bytes([1, 0, 7])
    blob = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + record
    blob += bytes(-len(blob) % 32 + 32)
    value = parse_gguf(memoryview(blob), len(blob)).metadata["b"].value
    assert value == [True, False, True] and repr(value) == "[True, False, True]"


def test_model_identity_is_unchanged_by_the_compact_form(tmp_path: Path) -> None:
    lists = {
        "deepseek4.attention.compress_ratios": MetaValue(
            ValueType.ARRAY, list(FLASH.compress_ratios), ValueType.UINT32
        ),
        "deepseek4.swiglu_clamp_exp": MetaValue(
            ValueType.ARRAY, [10.0, 1e-6, 0.1], ValueType.FLOAT32
        ),
        "general.tags": MetaValue(ValueType.ARRAY, ["a", "b c"], ValueType.STRING),
    }
    read = parse_metadata(tmp_path, lists)
    as_lists = {k: MetaValue(v.vtype, list(v.items() or ()), v.item_type) for k, v in read.items()}
    assert model_identity(FLASH, read, []) == model_identity(FLASH, as_lists, [])
