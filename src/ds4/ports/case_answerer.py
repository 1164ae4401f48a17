"""CaseAnswerer: how `ds4 eval` puts one prompt to a model and gets its raw output.

Two adapters, both in adapters/eval/answerers.py: the in-process engine
(`EngineAnswerer`: prefill, then the decode loop with the reply-budget closer) and an
OpenAI-compatible endpoint (`EndpointAnswerer`), so the same cases, prompts and
grading run against this engine or another server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from ds4.domain.engine.cancel import CancelCheck
from ds4.domain.eval.prompts import CasePrompt, ReplyLimits
from ds4.domain.eval.traces import ThinkClose
from ds4.domain.sampling import SamplingParams

AnswerFinish = Literal["stop", "length", "cancelled", "error"]


@dataclass(frozen=True)
class AnswerLimits:
    max_tokens: int  # the case's generation limit L
    sampling: SamplingParams
    reply: ReplyLimits = field(default_factory=ReplyLimits)


@dataclass(frozen=True)
class Answer:
    """output: the raw generated text (reasoning, `</think>`, the answer) as the model
    wrote it; prompt_tokens as the model counted them."""

    output: str
    prompt_tokens: int
    generated_tokens: int
    finish: AnswerFinish
    think_close: ThinkClose | None = None
    error: str | None = None


class AnswerObserver(Protocol):
    """What a front end sees while a case runs (called on the answering thread)."""

    def prefill(self, done: int, total: int) -> None: ...

    def reasoning(self, text: str) -> None: ...

    def text(self, text: str) -> None: ...

    def tokens(self, generated: int) -> None:
        """`generated` tokens so far (the speed readout)."""
        ...


class CaseAnswerer(Protocol):
    @property
    def ctx(self) -> int | None:
        """The session's context size; None where it is not known (an endpoint)."""
        ...

    @property
    def backend(self) -> str:
        """What answers, for the trace header (`cpu`, `endpoint`, ...)."""
        ...

    def prompt_tokens(self, prompt: CasePrompt) -> int | None:
        """The encoded prompt's length, or None where it is only known afterwards."""
        ...

    def answer(
        self,
        prompt: CasePrompt,
        limits: AnswerLimits,
        observer: AnswerObserver,
        cancel: CancelCheck,
    ) -> Answer:
        """Generate until EOS, the limit or cancel() (finish "cancelled"); an engine or
        transport failure is finish "error" with a one-line reason."""
        ...

    def close(self) -> None:
        """Release what the answerer holds (connections); it is not used afterwards."""
        ...
