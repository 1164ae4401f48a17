"""The repository's copy of DeepSeek's official API vectors, read as data: what the
files say, that our chat encoding gives the token counts the API reported, and the
errors for broken copies on disk."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.integration.vectors.conftest import OFFICIAL

from ds4.apps import wiring
from ds4.apps.vectors_command import load_vectors
from ds4.domain.vectors.local_run import prompt_ids
from ds4.domain.vectors.records import VectorFileError

CASES = {  # id: (kind, ctx, recorded reply, prompt tokens the API counted)
    "short_italian_fact": ("short", 16384, "Ada Lovelace", 21),
    "short_code_completion": ("short", 4096, "```c\nreturn", 27),
    "short_reasoning_plain": ("short", 4096, "16", 18),
    "long_memory_archive": ("long", 16384, "Component gamma reports anomalies", 3353),
    "long_code_audit": ("long", 16384, "The most important code", 3844),
}


def test_the_official_vectors_read_as_recorded() -> None:
    vectors = load_vectors(str(OFFICIAL))
    assert (vectors.source, vectors.model, vectors.top_logprobs) == (
        "deepseek-official-api",
        "deepseek-v4-flash",
        20,
    )
    assert vectors.case_ids() == list(CASES)
    for case in vectors.cases:
        kind, ctx, reply, counted = CASES[case.id]
        assert (case.kind, case.ctx, case.prompt_tokens) == (kind, ctx, counted)
        assert b"".join(s.token.raw for s in case.steps).decode() == reply
        for step in case.steps:
            # the API ranks only the chosen token (logprob 0.0); the other 19 are -9999
            assert len(step.alternatives) == 20
            assert [(a.token, a.logprob) for a in step.compared] == [(step.token, 0.0)]


def test_our_chat_encoding_counts_the_prompt_tokens_the_api_counted() -> None:
    tokenizer = wiring.tokenizer(None)  # the official DeepSeek V4 tokenizer
    for case in load_vectors(str(OFFICIAL)).cases:
        assert len(prompt_ids(tokenizer, case.prompt)) == case.prompt_tokens, case.id


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    out = tmp_path / "vectors"
    shutil.copytree(OFFICIAL, out)
    return out


def test_a_directory_without_a_manifest_is_not_a_vector_directory(tmp_path: Path) -> None:
    with pytest.raises(VectorFileError, match=r"no manifest\.json \(not a test-vector directory"):
        load_vectors(str(tmp_path))


def test_broken_copies_name_the_directory_file_and_problem(copy: Path) -> None:
    record = copy / "official" / "short_code_completion.official.json"
    record.unlink()
    with pytest.raises(VectorFileError) as caught:
        load_vectors(str(copy))
    assert str(caught.value) == (
        f"{copy}: official/short_code_completion.official.json: no such file"
    )
    record.mkdir()
    with pytest.raises(VectorFileError, match=r"official\.json: not a regular file"):
        load_vectors(str(copy))


def test_an_edited_prompt_no_longer_matches_its_record(copy: Path) -> None:
    prompt = copy / "prompts" / "short_reasoning_plain.txt"
    prompt.write_bytes(prompt.read_bytes().replace(b"128", b"256"))
    with pytest.raises(VectorFileError, match=r"prompt: differs from prompts/short_reasoning"):
        load_vectors(str(copy))


def test_a_truncated_record_is_invalid_json(copy: Path) -> None:
    record = copy / "official" / "long_code_audit.official.json"
    record.write_bytes(record.read_bytes()[:5000])
    with pytest.raises(VectorFileError, match=r"long_code_audit\.official\.json: not valid JSON"):
        load_vectors(str(copy), ["long_code_audit"])
