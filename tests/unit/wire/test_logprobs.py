"""wire/logprobs.py: the request rules (ranges, types, 400s naming the field) and the
reply shapes per API (docs/reference/server.md §3.10)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ds4.domain.errors import RequestError
from ds4.domain.sampling import StepLogprobs, TokenLogprob, token_logprob
from ds4.domain.serving.exchange import LogprobRequest
from ds4.wire.logprobs import (
    FLOOR,
    chat_logprobs,
    chat_logprobs_object,
    completion_logprobs,
    legacy_logprobs,
    openai_entry,
    responses_logprobs,
    token_text,
)
from ds4.wire.replies import model_object

A = TokenLogprob(1, b"ab", -0.5, (TokenLogprob(1, b"ab", -0.5), TokenLogprob(2, b"c", -1.0)))
PARTIAL = TokenLogprob(3, b"\xe8\xb4", float("-inf"))


def test_chat_rules() -> None:
    assert chat_logprobs(None, None) is None and chat_logprobs(False, 0) is None
    assert chat_logprobs(True, None) == LogprobRequest(top=0)
    assert chat_logprobs(True, 20) == LogprobRequest(top=20)
    for logprobs, top, param in [(True, 21, "top_logprobs"), (True, True, "top_logprobs"),
                                 (None, 3, "top_logprobs"), ("yes", 0, "logprobs")]:  # fmt: skip
        with pytest.raises(RequestError) as refused:
            chat_logprobs(logprobs, top)
        assert refused.value.param == param


def test_completion_and_responses_rules() -> None:
    assert completion_logprobs(None, None) is None
    assert completion_logprobs(0, None) == LogprobRequest(top=0)
    assert completion_logprobs(5, True) == LogprobRequest(top=5, prompt=True)
    assert completion_logprobs(None, True) == LogprobRequest(prompt=True, completion=False)
    with pytest.raises(RequestError, match="0 to 5"):
        completion_logprobs(6, None)
    assert responses_logprobs(["reasoning.encrypted_content"], None) is None
    assert responses_logprobs(["message.output_text.logprobs"], 2) == LogprobRequest(top=2)
    with pytest.raises(RequestError):
        responses_logprobs("message.output_text.logprobs", None)


def test_entry_shapes() -> None:
    assert openai_entry(A) == {
        "token": "ab",
        "logprob": -0.5,
        "bytes": [97, 98],
        "top_logprobs": [
            {"token": "ab", "logprob": -0.5, "bytes": [97, 98]},
            {"token": "c", "logprob": -1.0, "bytes": [99]},
        ],
    }
    assert token_text(PARTIAL.raw) == "bytes:\\xe8\\xb4"
    assert chat_logprobs_object([PARTIAL])["content"][0]["logprob"] == FLOOR  # type: ignore[index]
    first = TokenLogprob(0, "é".encode(), None)
    shape, end = legacy_logprobs([first, A], start=3)
    assert shape == {
        "tokens": ["é", "ab"],
        "token_logprobs": [None, -0.5],
        "top_logprobs": [None, {"ab": -0.5, "c": -1.0}],
        "text_offset": [3, 4],
    }
    assert end == 6


def test_token_logprob_is_the_dump_computation() -> None:
    rng = np.random.default_rng(7)
    logits = rng.normal(size=300).astype(np.float32)
    logits[[5, 9]] = logits.max() + 1  # a tie at the top: the lower id first
    entry = token_logprob(logits, 42, 4, lambda i: bytes([i % 256]))
    step = StepLogprobs(logits)
    assert entry.logprob == step.logprob(42)
    assert [t.id for t in entry.top] == [5, 9, *[r.id for r in step.top(4)][2:]]
    full = np.lexsort((np.arange(300), -logits.astype(np.float64)))[:4]
    assert [t.id for t in entry.top] == full.tolist()  # the partial sort equals a full one


def test_the_model_object_advertises_logprobs_and_structured_outputs() -> None:
    advertised = json.loads(model_object("ds4", "demo", 4096, 512))["supported_parameters"]
    for name in ("logprobs", "top_logprobs", "response_format", "tool_choice"):
        assert name in advertised
