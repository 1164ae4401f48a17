"""The engine answerer on a fake model and the byte tokenizer: prefill, the decode loop
with the reply-budget closer steering it, and what an Answer reports."""

from __future__ import annotations

from collections.abc import Sequence

from tests.support.fake_compute import FakeComputeSession, Scripted
from tests.unit.eval.fakes import RecordingView
from tests.unit.generation.byte_tokenizer import VOCAB, ByteTokenizer

from ds4.adapters.eval.answerers import EngineAnswerer
from ds4.domain.chat import ThinkMode
from ds4.domain.eval.cases import AnswerKind, EvalCase
from ds4.domain.eval.prompts import HARD, NATURAL, SOFT, ReplyLimits, case_prompt
from ds4.domain.sampling import SamplingParams
from ds4.ports.case_answerer import Answer, AnswerLimits

TOKENIZER = ByteTokenizer()
CASE = EvalCase("S", "1", "2+2?", "4", AnswerKind.INTEGER)


class Says:
    """After any prompt ending with the assistant prefix, say `text` then EOS."""

    def __init__(self, text: str) -> None:
        self.tokens = TOKENIZER.encode(text)
        self.start: int | None = None

    def __call__(self, history: Sequence[int]) -> Scripted | None:
        marker = TOKENIZER.special.assistant
        if marker not in history:
            return None
        start = len(history) - 1 - list(reversed(history)).index(marker) + 2  # + <think>
        k = len(history) - start
        return Scripted(self.tokens[k] if 0 <= k < len(self.tokens) else TOKENIZER.special.eos)


class Runner:
    def __init__(self, text: str) -> None:
        self.says = Says(text)

    def new_session(self, ctx: int) -> FakeComputeSession:
        return FakeComputeSession(vocab=VOCAB, ctx=ctx, script=self.says)


def answer(text: str, limit: int, reply: ReplyLimits, mode: ThinkMode = ThinkMode.HIGH) -> Answer:
    answerer = EngineAnswerer(TOKENIZER, Runner(text), backend="fake")  # type: ignore[arg-type]
    answerer.open(4096)
    prompt = case_prompt(CASE, mode)
    limits = AnswerLimits(limit, SamplingParams(temperature=0.0), reply)
    return answerer.answer(prompt, limits, RecordingView(), lambda: False)


def test_a_natural_close_and_the_raw_output() -> None:
    result = answer("ok</think>Answer: 4", 100, ReplyLimits(soft=10, hard=5, rank=3))
    assert result.output == "ok</think>Answer: 4"
    assert result.finish == "stop"
    assert result.generated_tokens == len(TOKENIZER.encode("ok</think>Answer: 4"))
    assert result.think_close is not None and result.think_close.kind == NATURAL
    assert result.think_close.token_index == 3  # o, k, </think>


def test_the_hard_limit_forces_the_close() -> None:
    result = answer("x" * 200, 30, ReplyLimits(soft=10, hard=10, rank=3))
    assert result.finish == "length"
    assert result.generated_tokens == 30
    assert result.output == "x" * 20 + "</think>" + "x" * 9
    assert result.think_close is not None
    assert (result.think_close.kind, result.think_close.token_index) == (HARD, 21)
    assert result.think_close.remaining_budget == 10


def test_the_soft_limit_closes_when_the_model_ranks_it_first() -> None:
    # the fake model's own next token is </think> at position 25: inside the soft window
    result = answer("y" * 24 + "</think>Answer: 4", 40, ReplyLimits(soft=20, hard=2, rank=1))
    assert result.think_close is not None
    assert result.think_close.kind == SOFT and result.think_close.rank == 1
    assert result.think_close.token_index == 25


def test_no_thinking_no_close() -> None:
    result = answer("Answer: 4", 50, ReplyLimits(soft=10, hard=5, rank=3), ThinkMode.NONE)
    assert result.think_close is None
    assert result.output == "Answer: 4"
