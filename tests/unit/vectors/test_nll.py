"""Teacher-forced NLL on a fake engine: recorded continuations and texts, chunked."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tests.support.fake_compute import FakeComputeSession
from tests.unit.generation.byte_tokenizer import VOCAB, ByteTokenizer
from tests.unit.vectors.vector_fixtures import steps_of

from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.vectors.local_run import TokenIndex, prompt_ids
from ds4.domain.vectors.nll import score_case, score_text, text_budget
from ds4.domain.vectors.records import VectorCase

TOKENIZER = ByteTokenizer()


def nll_after(history: list[int], token: int) -> float:
    logits = FakeComputeSession(vocab=VOCAB).logits_after(history).astype(np.float64)
    return float(np.log(np.exp(logits - logits.max()).sum()) + logits.max() - logits[token])


def test_a_case_scores_each_recorded_token_after_the_ones_before_it() -> None:
    case = VectorCase("c", "short", "hi", 64, steps_of("a", "b", "c"), "p", "o", None)
    session = EngineSession(FakeComputeSession(vocab=VOCAB, ctx=64))
    rows = score_case(session, TOKENIZER, TokenIndex(TOKENIZER), case)
    ids = prompt_ids(TOKENIZER, "hi")
    assert [(r.case, r.index, r.raw) for r in rows] == [
        ("c", 0, b"a"),
        ("c", 1, b"b"),
        ("c", 2, b"c"),
    ]
    for row, before in zip(rows, (ids, [*ids, 97], [*ids, 97, 98]), strict=True):
        assert math.isclose(row.nll, nll_after(before, row.token_id), rel_tol=1e-9)


def test_recorded_bytes_no_token_has_are_an_error() -> None:
    case = VectorCase("c", "short", "hi", 64, steps_of("ab"), "p", "o", None)
    session = EngineSession(FakeComputeSession(vocab=VOCAB, ctx=64))
    with pytest.raises(Ds4Error, match="case c step 0: no token of this model has"):
        score_case(session, TOKENIZER, TokenIndex(TOKENIZER), case)


@pytest.mark.parametrize("chunk", [1, 4, 100])
def test_a_text_is_scored_after_its_warmup_whatever_the_chunk(chunk: int) -> None:
    ids = TOKENIZER.encode("the quick brown fox")
    compute = FakeComputeSession(vocab=VOCAB, ctx=len(ids))
    rows = list(score_text(compute, TOKENIZER, ids, name="t", warmup=5, chunk=chunk))
    assert [r.index for r in rows] == list(range(len(ids) - 5))
    for row in rows:
        position = 5 + row.index
        assert row.token_id == ids[position]
        assert math.isclose(row.nll, nll_after(ids[:position], ids[position]), rel_tol=1e-9)
    assert compute.evaluated == ids[:-1]  # the last scored token is never evaluated


def test_the_session_size_bounds_what_gets_scored() -> None:
    ids = TOKENIZER.encode("abcdefghij")
    compute = FakeComputeSession(vocab=VOCAB, ctx=7)
    rows = list(score_text(compute, TOKENIZER, ids, name="t", warmup=3, chunk=2))
    assert len(rows) == text_budget(10, 3, 7) == 4
    with pytest.raises(Ds4Error, match="needs more than --warmup 10"):
        text_budget(10, 10, 100)
    with pytest.raises(Ds4Error, match="--ctx 3 leaves nothing to score"):
        text_budget(10, 3, 3)
