"""Corrupt and truncated GGUF files: one GGUFFormatError naming the problem, nothing else."""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.sample_gguf import write_sample

from ds4.adapters.gguf import reader
from ds4.adapters.gguf.reader import GGUFFile, GGUFFormatError, parse_gguf


def s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def header(n_tensors: int, n_kv: int, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def tensor(name: str, dims: list[int], ggml_type: int, offset: int) -> bytes:
    return (
        s(name)
        + struct.pack("<I", len(dims))
        + struct.pack(f"<{len(dims)}Q", *dims)
        + struct.pack("<IQ", ggml_type, offset)
    )


def pad(blob: bytes, extra: int = 0) -> bytes:
    blob += b"\0" * (-len(blob) % 32)
    return blob + b"\0" * extra


def parse(blob: bytes) -> None:
    parse_gguf(memoryview(blob), len(blob))


CASES: dict[str, tuple[bytes, str]] = {
    "bad magic": (b"GGUX" + b"\0" * 40, "bad magic"),
    "old version": (pad(header(0, 0, version=2), 32), "version 2"),
    "too short": (b"GGUF\3\0\0\0", "too small"),
    "kv count absurd": (pad(header(0, 2**60), 32), "metadata count"),
    "tensor count absurd": (pad(header(2**40, 0), 32), "tensor count"),
    "too many keys": (pad(header(0, 65537), 32), "metadata count 65537 is over the limit"),
    "too many tensors": (pad(header(65537, 0), 32), "tensor count 65537 is over the limit"),
    "string runs past end": (
        pad(header(0, 1) + struct.pack("<Q", 2**62) + b"k", 32), "truncated"
    ),
    "unknown value type": (pad(header(0, 1) + s("k") + struct.pack("<I", 99), 32), "type 99"),
    "array count absurd": (
        pad(header(0, 1) + s("k") + struct.pack("<IIQ", 9, 4, 2**61), 32), "cannot fit"
    ),
    "duplicate key": (
        pad(header(0, 2) + (s("k") + struct.pack("<IB", 0, 1)) * 2, 32), "appears twice"
    ),
    "alignment not power of two": (
        pad(header(0, 1) + s("general.alignment") + struct.pack("<II", 4, 48), 32),
        "power of two",
    ),
    "alignment wrong type": (
        pad(header(0, 1) + s("general.alignment") + struct.pack("<IQ", 10, 32), 32),
        "not u32",
    ),
    "zero dims": (pad(header(1, 0) + s("t") + struct.pack("<I", 0) + b"\0" * 16, 32),
                  "0 dimensions"),
    "unknown tensor type": (pad(header(1, 0) + tensor("t", [4], 77, 0), 64), "type 77"),
    "data past end": (pad(header(1, 0) + tensor("t", [24], 0, 0), 32), "past the end"),
    "dims overflow": (pad(header(1, 0) + tensor("t", [2**40, 2**40, 2**40], 0, 0), 64),
                      "exceed the file size"),
    "misaligned offset": (pad(header(1, 0) + tensor("t", [4], 0, 4), 64), "not a multiple"),
    "partial block": (pad(header(1, 0) + tensor("t", [40], 8, 0), 128), "block size"),
    "duplicate tensor": (
        pad(header(2, 0) + tensor("t", [4], 0, 0) + tensor("t", [4], 0, 32), 64),
        "appears twice",
    ),
    "overlap": (
        pad(header(2, 0) + tensor("a", [16], 0, 0) + tensor("b", [16], 0, 32), 128), "overlap"
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_corrupt_header_names_the_problem(name: str) -> None:
    blob, fragment = CASES[name]
    with pytest.raises(GGUFFormatError, match=fragment):
        parse(blob)


def test_well_formed_handmade_file_parses() -> None:
    blob = pad(header(2, 0) + tensor("a", [8], 0, 0) + tensor("b", [8], 0, 32), 64)
    parse(blob)


def test_reader_reports_a_bad_header_without_leaking_the_mapping(tmp_path: Path) -> None:
    path = tmp_path / "junk.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 64)  # version 0
    with pytest.raises(GGUFFormatError, match="version 0 is not supported"):
        GGUFFile(path)


def string_array(key: str, items: list[str]) -> bytes:
    return s(key) + struct.pack("<IIQ", 9, 8, len(items)) + b"".join(s(i) for i in items)


def test_string_items_have_a_per_file_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each string item becomes a Python object when read, so a file gets a bounded number."""
    monkeypatch.setattr(reader, "MAX_STRING_ITEMS", 5)
    parse(pad(header(0, 2) + string_array("a", ["x"] * 3) + string_array("b", ["y"] * 2), 32))
    blob = pad(header(0, 2) + string_array("a", ["x"] * 3) + string_array("b", ["y"] * 3), 32)
    with pytest.raises(GGUFFormatError, match="'b': more than 5 string array items"):
        parse(blob)


def test_nested_arrays_have_a_per_file_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "MAX_NESTED_ARRAYS", 2)
    inner = struct.pack("<IQ", 4, 1) + struct.pack("<I", 7)  # array[u32] of one item
    nested = s("n") + struct.pack("<IIQ", 9, 9, 3) + inner * 3
    with pytest.raises(GGUFFormatError, match="more than 2 nested arrays"):
        parse(pad(header(0, 1) + nested, 32))


def test_string_array_running_past_the_end_is_truncation() -> None:
    blob = header(0, 1) + s("k") + struct.pack("<IIQ", 9, 8, 2) + s("ok") + struct.pack("<Q", 99)
    with pytest.raises(GGUFFormatError, match=r"truncated file: metadata 'k'\[1\] needs 99"):
        parse(pad(blob, 0))


@pytest.mark.parametrize("kind", ["device", "pipe", "directory"])
def test_things_that_are_not_regular_files_are_refused_before_reading(
    tmp_path: Path, kind: str
) -> None:
    """/dev/zero has size 0 and endless bytes; opening a pipe would wait for a writer."""
    if kind == "device":
        path, fragment = Path("/dev/zero"), "not a regular file (a character device)"
    elif kind == "pipe":
        path, fragment = tmp_path / "fifo", "not a regular file (a pipe)"
        os.mkfifo(path)
    else:
        path, fragment = tmp_path, "is a directory, not a GGUF file"
    with pytest.raises(GGUFFormatError, match=re.escape(fragment)):
        GGUFFile(path)


def test_missing_and_empty_files_and_directories(tmp_path: Path) -> None:
    with pytest.raises(GGUFFormatError, match="cannot open"):
        GGUFFile(tmp_path / "nope.gguf")
    (tmp_path / "empty.gguf").write_bytes(b"")
    with pytest.raises(GGUFFormatError, match="empty"):
        GGUFFile(tmp_path / "empty.gguf")
    with pytest.raises(GGUFFormatError, match="directory"):
        GGUFFile(tmp_path)


@pytest.fixture(scope="module")
def valid_blob(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("fuzz") / "s.gguf"
    write_sample(path)
    return path.read_bytes()


def directory_end(blob: bytes) -> int:
    """Where tensor data starts, so flips can target the header and directory."""
    f_size = len(blob)
    parsed = parse_gguf(memoryview(blob), f_size)
    return parsed.data_start


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.floats(0, 1))
def test_any_truncation_fails_cleanly(valid_blob: bytes, cut: float) -> None:
    n = int(cut * (len(valid_blob) - 1))
    with pytest.raises(GGUFFormatError):
        parse(valid_blob[:n])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_byte_flips_in_header_or_directory_never_crash(
    valid_blob: bytes, data: st.DataObject
) -> None:
    limit = directory_end(valid_blob)
    blob = bytearray(valid_blob)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, limit - 1))
        blob[pos] ^= data.draw(st.integers(1, 255))
    try:
        parse(bytes(blob))
    except GGUFFormatError as exc:
        assert str(exc) and "\n" not in str(exc)
