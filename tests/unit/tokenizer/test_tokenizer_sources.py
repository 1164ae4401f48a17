"""Which files are read as tokenizer.json, and that reading one is bounded (issue 14.3)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ds4.adapters.files import read_limited
from ds4.adapters.tokenizer.vocabulary import (
    TokenizerDataError,
    is_tokenizer_json,
    vocabulary_from_tokenizer_json,
)


@pytest.mark.parametrize(
    ("content", "is_json"),
    [
        (b'{"model": {}}', True),
        (b'\n\t  {"model": {}}', True),
        (b'\xef\xbb\xbf{"model": {}}', True),  # a UTF-8 byte order mark
        (b"GGUF\x03\x00\x00\x00", False),
        (b"\x00" * 64, False),
        (b"", False),
        (b"[1, 2]", False),
    ],
)
def test_only_a_json_object_is_taken_for_a_tokenizer(
    tmp_path: Path, content: bytes, is_json: bool
) -> None:
    path = tmp_path / "t"
    path.write_bytes(content)
    assert is_tokenizer_json(path) is is_json


def test_devices_pipes_directories_and_missing_paths_are_not_json(tmp_path: Path) -> None:
    """They go to the GGUF reader, whose error names them; none is read or waited on."""
    os.mkfifo(tmp_path / "fifo")
    for path in (Path("/dev/zero"), tmp_path / "fifo", tmp_path, tmp_path / "missing"):
        assert not is_tokenizer_json(path)


def test_reads_are_refused_before_reading_when_too_big_or_not_a_file(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"{" + b" " * 100)
    assert read_limited(path, 101) == b"{" + b" " * 100
    with pytest.raises(OSError, match="101 bytes, over the limit of 100"):
        read_limited(path, 100)
    with pytest.raises(OSError, match="not a regular file"):
        read_limited("/dev/zero", 100)


def test_tokenizer_json_over_the_limit_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ds4.adapters.tokenizer.vocabulary.MAX_TOKENIZER_JSON_BYTES", 10)
    path = tmp_path / "tokenizer.json"
    path.write_text('{"model": {"type": "BPE"}}')
    with pytest.raises(TokenizerDataError, match=r"cannot read .*: 26 bytes, over the limit"):
        vocabulary_from_tokenizer_json(path)
