"""Fakes for the eval run: an answerer that plays outputs, a control, a timer, a view."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ds4.domain.engine.cancel import CancelCheck
from ds4.domain.eval.prompts import CasePrompt
from ds4.domain.eval.report import CaseResult
from ds4.domain.eval.runner import Interruption
from ds4.ports.case_answerer import Answer, AnswerLimits, AnswerObserver


@dataclass
class Reply:
    output: str
    finish: str = "stop"
    tokens: int = 5
    error: str | None = None
    during: Callable[[], None] | None = None  # runs after the first token (a key press)


@dataclass
class FakeAnswerer:
    replies: list[Reply]
    ctx: int | None = 1000
    prompt_length: Callable[[CasePrompt], int] = lambda p: 100
    backend: str = "fake"
    asked: list[tuple[str, int]] = field(default_factory=list)  # (user prompt, limit)

    def close(self) -> None:
        return None

    def prompt_tokens(self, prompt: CasePrompt) -> int | None:
        return self.prompt_length(prompt)

    def answer(
        self,
        prompt: CasePrompt,
        limits: AnswerLimits,
        observer: AnswerObserver,
        cancel: CancelCheck,
    ) -> Answer:
        self.asked.append((prompt.user, limits.max_tokens))
        reply = self.replies.pop(0)
        observer.prefill(100, 100)
        observer.tokens(1)
        if reply.during is not None:
            reply.during()
        if cancel():
            return Answer(reply.output[:3], 100, 1, "cancelled")
        observer.text(reply.output)
        observer.tokens(reply.tokens)
        return Answer(reply.output, 100, reply.tokens, reply.finish, error=reply.error)  # type: ignore[arg-type]


class FakeControl:
    def __init__(self) -> None:
        self.pending: list[Interruption] = []
        self.quit = False
        self.choice: int | None = None

    def interruption(self) -> Interruption | None:
        if self.quit:
            return Interruption.QUIT
        return self.pending.pop(0) if self.pending else None

    def take_choice(self) -> int | None:
        choice, self.choice = self.choice, None
        return choice


class FakeTimer:
    def __init__(self) -> None:
        self.now = 0.0

    def elapsed(self) -> float:
        self.now += 0.5
        return self.now

    def unix(self) -> int:
        return 1_700_000_000


class RecordingView:
    def __init__(self) -> None:
        self.events: list[str] = []

    def case_started(self, result: CaseResult) -> None:
        self.events.append(f"start {result.number} {result.state.value}")

    def case_finished(self, result: CaseResult) -> None:
        self.events.append(f"end {result.number} {result.state.value}")

    def prefill(self, done: int, total: int) -> None:
        return None

    def reasoning(self, text: str) -> None:
        return None

    def text(self, text: str) -> None:
        return None

    def tokens(self, generated: int) -> None:
        return None
