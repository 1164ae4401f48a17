"""`ds4 gguf inspect` and the engine loaders (cli, server) refuse the same files with the
same one line, never a traceback (issue 14; docs/adr/0004-gguf-validation.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.support.micro_model import MICRO, VOCAB, micro_metadata, write_micro_model

from ds4.domain.gguf.records import MetaValue, ValueType
from ds4.domain.tokenizer import BYTE_TO_CHAR

DS4 = [sys.executable, "-m", "ds4"]
U32_MAX = 2**32 - 1
ARRAY = ValueType.ARRAY


def ds4(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DS4, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def engine_runs(model: Path) -> list[subprocess.CompletedProcess[str]]:
    """The two ways a user hands a model to the engine: cli, then server."""
    return [
        ds4("cli", "-m", model, "-p", "hi", "-n", "1"),
        ds4("server", "-m", model),  # refused before it binds a port
    ]


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The reason of a one-line usage or load error, without the command's prefix:
    a file refused by the -m/FILE flag check reads "ds4 cli: error: argument -m/--model:
    REASON", one refused by the reader "ds4: error: REASON"."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and ": error: " in lines[0], done.stderr
    reason = lines[0].split(": error: ", 1)[1]
    return re.sub(r"^argument [^:]+: ", "", reason)


def tokens_with(changes: dict[int, str]) -> MetaValue:
    tokens = [changes.get(i, t) for i, t in enumerate(VOCAB.tokens)]
    return MetaValue(ARRAY, tokens, ValueType.STRING)


def tid2eid_with_bad_entry() -> bytes:
    table = np.zeros((MICRO.n_vocab, MICRO.n_expert_used), dtype="<i4")
    table[5, 1] = MICRO.n_expert  # one past the last expert
    return table.tobytes()


def first_merge_replaced(text: str) -> MetaValue:
    merges = [f"{a} {b}" for a, b in VOCAB.merges]
    return MetaValue(ARRAY, [text, *merges[1:]], ValueType.STRING)


TYPES = micro_metadata()["tokenizer.ggml.token_type"]
TYPES_LIST = list(TYPES.items() or ())

# case -> (metadata overrides, tensor data overrides, a fragment of the expected problem)
CASES: dict[str, tuple[dict[str, MetaValue | None], dict[str, bytes], str]] = {
    "sinkhorn 2^31-1 (hung the worker)": (
        {"deepseek4.hyper_connection.sinkhorn_iterations": MetaValue(ValueType.UINT32, 2**31 - 1)},
        {}, "2147483647 is out of range (allowed 1..256)",
    ),
    "indexer top_k u32 max (OverflowError)": (
        {"deepseek4.attention.indexer.top_k": MetaValue(ValueType.UINT32, U32_MAX)},
        {}, "4294967295 is out of range",
    ),
    "sliding window u32 max (OverflowError)": (
        {"deepseek4.attention.sliding_window": MetaValue(ValueType.UINT32, U32_MAX)},
        {}, "4294967295 is out of range",
    ),
    "original context 0 (math domain error)": (
        {"deepseek4.rope.scaling.original_context_length": MetaValue(ValueType.UINT64, 0)},
        {}, "0 is out of range",
    ),
    "compress rope base 0 (math domain error)": (
        {"deepseek4.attention.compress_rope_freq_base": MetaValue(ValueType.FLOAT32, 0.0)},
        {}, "0 is out of range",
    ),
    "tid2eid entry out of range (500 on every request)": (
        {}, {"blk.0.ffn_gate_tid2eid.weight": tid2eid_with_bad_entry()},
        "token 5 routes to expert 8, outside 0..7",
    ),
    "token_type shorter than tokens": (
        {"tokenizer.ggml.token_type": MetaValue(ARRAY, TYPES_LIST[:-3], ValueType.INT32)},
        {}, f"has {len(VOCAB.tokens) - 3} entries for {len(VOCAB.tokens)} tokens",
    ),
    "merge names an unknown token": (
        {"tokenizer.ggml.merges": first_merge_replaced("a zzz")}, {}, "needs 'zzz', not a token",
    ),
    "merge without a space": (
        {"tokenizer.ggml.merges": first_merge_replaced("aa")}, {}, "is not two tokens and a space",
    ),
    "byte symbol missing": (
        {"tokenizer.ggml.tokens": tokens_with({0: "<not a byte>"})}, {},
        f"byte symbol {BYTE_TO_CHAR[0]!r} is not a token",
    ),
    "empty added token": (
        {"tokenizer.ggml.tokens": tokens_with({len(VOCAB.tokens) - 1: ""})}, {},
        f"added token {len(VOCAB.tokens) - 1} is an empty string",
    ),
    "token_type of floats": (
        {"tokenizer.ggml.token_type": MetaValue(ARRAY, [1.0] * len(TYPES_LIST), ValueType.FLOAT32)},
        {}, "not an integer array",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_inspect_and_engine_refuse_with_the_same_problem(tmp_path: Path, case: str) -> None:
    metadata, data, fragment = CASES[case]
    model = write_micro_model(tmp_path / "bad.gguf", metadata=metadata, data=data)
    inspect = ds4("gguf", "inspect", model)
    assert inspect.returncode == 1, inspect.stdout + inspect.stderr
    assert "Traceback" not in inspect.stderr
    errors = [
        line.strip().removeprefix("error: ")
        for line in inspect.stdout.splitlines()
        if line.startswith("  error: ")
    ]
    assert any(fragment in e for e in errors), errors
    line = one_line_error(engine_runs(model)[0])  # the cli; the server is checked below
    for error in errors:
        assert error in line


def test_the_server_refuses_a_bad_file_like_inspect(tmp_path: Path) -> None:
    metadata, data, _ = CASES["sinkhorn 2^31-1 (hung the worker)"]
    model = write_micro_model(tmp_path / "bad.gguf", metadata=metadata, data=data)
    line = one_line_error(engine_runs(model)[1])
    assert "sinkhorn_iterations: 2147483647 is out of range (allowed 1..256)" in line


def test_the_micro_model_itself_is_valid_and_runs(tmp_path: Path) -> None:
    model = write_micro_model(tmp_path / "good.gguf")
    inspect = ds4("gguf", "inspect", model)
    assert inspect.returncode == 0, inspect.stdout
    done = ds4("cli", "-m", model, "-p", "hi", "-n", "1", "--temp", "0")
    assert done.returncode == 0, done.stderr


def not_a_model(tmp_path: Path, kind: str) -> Path:
    if kind == "device":
        return Path("/dev/zero")
    if kind == "pipe":
        os.mkfifo(tmp_path / "pipe")
        return tmp_path / "pipe"
    if kind == "directory":
        return tmp_path
    path = tmp_path / f"{kind}.bin"
    if kind == "junk":
        path.write_bytes(np.random.default_rng(0).bytes(8 << 20))
    else:  # a truncated model
        whole = write_micro_model(tmp_path / "whole.gguf").read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
    return path


@pytest.mark.parametrize("kind", ["device", "pipe", "directory", "junk", "truncated"])
def test_files_that_are_not_models_are_refused_at_once_everywhere(
    tmp_path: Path, kind: str
) -> None:
    """/dev/zero made the server read without end; now all three print the reader's line."""
    model = not_a_model(tmp_path, kind)
    inspect = one_line_error(ds4("gguf", "inspect", model))
    for done in engine_runs(model):
        assert one_line_error(done) == inspect
