"""Make the fake model say a given text: per-position scripted next tokens."""

from __future__ import annotations

from collections.abc import Sequence

from tests.support.fake_compute import FakeComputeSession, Scripted
from tests.unit.generation.byte_tokenizer import VOCAB, ByteTokenizer

from ds4.domain.engine.session import EngineSession

TOKENIZER = ByteTokenizer()
EOS = TOKENIZER.special.eos
PROMPT = TOKENIZER.encode("<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>")


class SpeechScript:
    """After the prompt, say `segments` token by token, then EOS.

    Each segment is (text, margin): a large margin makes the token win under any
    sampling; a small one only under greedy sampling.
    """

    def __init__(self, segments: Sequence[tuple[str, float]], prompt: Sequence[int] = PROMPT):
        self.prompt = list(prompt)
        self.steps = [
            Scripted(token, margin) for text, margin in segments for token in TOKENIZER.encode(text)
        ]

    def __call__(self, history: Sequence[int]) -> Scripted | None:
        if list(history[: len(self.prompt)]) != self.prompt:
            return None
        k = len(history) - len(self.prompt)
        return self.steps[k] if k < len(self.steps) else Scripted(EOS)


def speaking(
    text: str, *, ctx: int = 512, chunk: int = 0
) -> tuple[EngineSession, FakeComputeSession]:
    compute = FakeComputeSession(vocab=VOCAB, ctx=ctx, script=SpeechScript([(text, 30.0)]))
    return EngineSession(compute, chunk=chunk), compute
