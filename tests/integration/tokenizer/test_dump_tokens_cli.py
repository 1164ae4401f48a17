"""`ds4 cli --dump-tokens` with the default tokenizer.json and with a GGUF's metadata."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.integration.tokenizer.tokenizer_corpus import TRICKY
from tests.integration.tokenizer.tokenizer_oracle import corpus_chunks, hf_ids, vocabulary

from ds4.adapters.gguf.writer import GGUFWriter
from ds4.adapters.tokenizer.bpe import NativeBpeTokenizer
from ds4.adapters.tokenizer.vocabulary import vocabulary_from_gguf_values
from ds4.apps import cli as commands
from ds4.apps import cli_command
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.records import MetaValue, ValueType

PROMPT = "Hi <think>x</think>\r\n  12345 «ciao»\n\n"


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    cli_command.register(parser.add_subparsers())
    args = parser.parse_args(["cli", *argv])
    code: int = args.run(args)
    return code


def llama_cpp_token_types() -> list[int]:
    """Token types the way llama.cpp's converter writes them for this vocabulary."""
    types = [1] * len(vocabulary().tokens)
    for token in vocabulary().added:
        text = token.content
        looks_special = (text.startswith("<｜") and text.endswith("｜>")) or (
            text.startswith("<|") and text.endswith("|>")
        )
        types[token.id] = 3 if looks_special or token.early is not False else 4
    return types


def write_tokenizer_gguf(path: Path, with_types: bool) -> None:
    vocab = vocabulary()
    writer = GGUFWriter(path)
    arr = ValueType.ARRAY
    writer.add_metadata("general.architecture", MetaValue(ValueType.STRING, "deepseek4"))
    tokens = list(vocab.tokens)
    merges = [f"{a} {b}" for a, b in vocab.merges]
    writer.add_metadata("tokenizer.ggml.tokens", MetaValue(arr, tokens, ValueType.STRING))
    writer.add_metadata("tokenizer.ggml.merges", MetaValue(arr, merges, ValueType.STRING))
    if with_types:
        types = llama_cpp_token_types()
        writer.add_metadata("tokenizer.ggml.token_type", MetaValue(arr, types, ValueType.INT32))
    writer.begin_data()
    writer.finish()


def test_dump_tokens_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["--dump-tokens", "-p", PROMPT]) == 0
    lines = capsys.readouterr().out.splitlines()
    ids = hf_ids(PROMPT)
    assert [int(line.split()[1]) for line in lines] == ids
    assert [int(line.split()[0]) for line in lines] == list(range(len(ids)))
    assert any(line.endswith("<think>  [special]") for line in lines)
    assert '"\\r"' in "\n".join(lines)  # CR LF has no merge: two tokens


def test_dump_tokens_json_from_a_prompt_file_kept_byte_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompt = tmp_path / "p.txt"
    prompt.write_bytes(PROMPT.encode("utf-8"))
    assert run_cli(["--dump-tokens", "--json", "--prompt-file", str(prompt)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == hf_ids(PROMPT)
    assert "".join(r["text"] for r in rows) == PROMPT
    assert [r["special"] for r in rows].count(True) == 2


def test_bad_prompt_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(Ds4Error, match="not UTF-8"):
        run_cli(["--dump-tokens", "--prompt-file", str(bad)])
    with pytest.raises(SystemExit) as usage:  # a usage error before anything loads
        run_cli(["--dump-tokens", "--prompt-file", str(tmp_path / "missing.txt")])
    assert usage.value.code == 2
    with pytest.raises(Ds4Error, match="give the prompt"):
        run_cli(["--dump-tokens"])


@pytest.mark.parametrize("with_types", [True, False], ids=["token_type", "no_token_type"])
def test_gguf_metadata_tokenizes_like_tokenizer_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], with_types: bool
) -> None:
    gguf = tmp_path / "tok.gguf"
    write_tokenizer_gguf(gguf, with_types)
    assert run_cli(["-m", str(gguf), "--dump-tokens", "--json", "-p", PROMPT]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == hf_ids(PROMPT)
    types = llama_cpp_token_types() if with_types else None
    vocab = vocabulary()
    tok = NativeBpeTokenizer(
        vocabulary_from_gguf_values(vocab.tokens, [f"{a} {b}" for a, b in vocab.merges], types)
    )
    for text in [*TRICKY, corpus_chunks()[0]]:
        assert tok.encode(text) == hf_ids(text)


def test_a_non_gguf_model_is_a_clear_error(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"not a gguf")
    with pytest.raises(Ds4Error, match="too small to be GGUF"):  # the GGUF reader's line
        run_cli(["-m", str(fake), "--dump-tokens", "-p", "x"])


@pytest.mark.skipif(
    cli_command.register not in commands.registrars(), reason="cli_command not wired yet"
)
def test_installed_command_dumps_tokens() -> None:
    ds4 = Path(sys.executable).parent / "ds4"
    result = subprocess.run(
        [str(ds4), "cli", "--dump-tokens", "--json", "-p", PROMPT],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert [r["id"] for r in json.loads(result.stdout)] == hf_ids(PROMPT)
