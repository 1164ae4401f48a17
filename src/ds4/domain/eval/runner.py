"""The eval run loop (docs/reference/eval.md §3): each case in turn is put to the
answerer, its output extracted and graded, and the result shown and traced.

Per case: the prompt is rendered; a prompt that does not fit the context, or leaves
no room to generate, is SKIPPED; else the generation limit is L = min(budget, ctx -
prompt) and the answerer runs it (the reply-budget closer lives in the engine
answerer). With --retry-incomplete a case that ran out of tokens before writing an
`Answer:` line runs once more with twice the budget. A case the user leaves with
Enter goes back to PENDING (SWITCHED in the trace); quitting marks the running case
STOPPED and ends the run; an engine failure marks it ERROR and ends the run. The next
case is the one the user picked, else the next PENDING one after the current (wrapping).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from ds4.domain.chat import ThinkMode
from ds4.domain.eval.cases import EvalCase
from ds4.domain.eval.grading import grade_output, has_final_answer_line
from ds4.domain.eval.prompts import CasePrompt, ReplyLimits, case_prompt
from ds4.domain.eval.report import CaseResult, CaseState
from ds4.domain.eval.traces import TraceHeader, TraceRecord, render_record, render_summary
from ds4.domain.sampling import SamplingParams
from ds4.ports.case_answerer import Answer, AnswerLimits, AnswerObserver, CaseAnswerer
from ds4.ports.system import Timer

SKIP_NO_FIT = "prompt does not fit context"
SKIP_NO_ROOM = "prompt leaves no generation room"


class Interruption(Enum):
    QUIT = "quit"  # q, Ctrl+C: stop the running case and end the run
    SWITCH = "switch"  # Enter on another case: put this one back, run that one


class RunControl(Protocol):
    def interruption(self) -> Interruption | None:
        """Polled at every token and prefill chunk; may block while the run is paused."""
        ...

    def take_choice(self) -> int | None:
        """The case number the user picked to run next (once), or None."""
        ...


class RunView(AnswerObserver, Protocol):
    def case_started(self, result: CaseResult) -> None: ...

    def case_finished(self, result: CaseResult) -> None: ...


@dataclass(frozen=True)
class RunSettings:
    think_mode: ThinkMode = ThinkMode.HIGH
    tokens: int = 16_000  # -n: the generation budget of a case
    tokens_override: bool = False  # -n was given: it wins over a case's own max_tokens
    reply: ReplyLimits = field(default_factory=ReplyLimits)
    sampling: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=0.0))
    retry_incomplete: bool = False

    def budget(self, case: EvalCase) -> int:
        if self.tokens_override or case.max_tokens is None:
            return self.tokens
        return case.max_tokens


def generation_limit(prompt: int | None, ctx: int | None, budget: int) -> int | str:
    """L for a case, or why it is skipped."""
    if prompt is None or ctx is None:
        return budget
    if prompt >= ctx:
        return SKIP_NO_FIT
    limit = min(budget, ctx - prompt)
    return limit if limit >= 1 else SKIP_NO_ROOM


class _CaseObserver:
    """Passes the answerer's events on, marking the case RUNNING at its first token."""

    def __init__(self, result: CaseResult, view: RunView) -> None:
        self._result, self.view = result, view

    def prefill(self, done: int, total: int) -> None:
        self.view.prefill(done, total)

    def reasoning(self, text: str) -> None:
        self.view.reasoning(text)

    def text(self, text: str) -> None:
        self.view.text(text)

    def tokens(self, generated: int) -> None:
        if self._result.state is CaseState.PREFILL:
            self._result.state = CaseState.RUNNING
        self._result.generated_tokens = generated
        self.view.tokens(generated)


@dataclass
class RunOutcome:
    results: list[CaseResult]
    runtime: float  # seconds, pauses excluded
    quit: bool  # the user quit (or interrupted) before every case ran

    @property
    def passed(self) -> int:
        return sum(r.state is CaseState.PASSED for r in self.results)

    @property
    def failed(self) -> int:
        return sum(r.state is CaseState.FAILED for r in self.results)

    @property
    def errored(self) -> bool:
        return any(r.state is CaseState.ERROR for r in self.results)

    @property
    def exit_code(self) -> int:
        return 1 if self.errored or self.failed else 0


class EvalRun:
    def __init__(
        self,
        cases: Sequence[EvalCase],
        answerer: CaseAnswerer,
        settings: RunSettings,
        *,
        view: RunView,
        control: RunControl,
        timer: Timer,
        trace: Callable[[str], None] | None = None,
    ) -> None:
        self.results = [CaseResult(i + 1, case) for i, case in enumerate(cases)]
        self._answerer = answerer
        self._settings = settings
        self.view = view
        self._control = control
        self._timer = timer
        self._trace = trace
        self._interrupted: Interruption | None = None

    # ---- the loop ----------------------------------------------------------------

    def run(self, header: TraceHeader | None = None) -> RunOutcome:
        if self._trace is not None and header is not None:
            self._trace(header.render())
        start = self._timer.elapsed()
        current: int | None = None
        quit_run = False
        while True:
            if self._control.interruption() is Interruption.QUIT:
                quit_run = True
                break
            index = self._next(current)
            if index is None:
                break
            current = index
            self._run_case(self.results[index])
            if self._interrupted is Interruption.QUIT:
                quit_run = True
                break
            if any(r.state is CaseState.ERROR for r in self.results):
                break
        outcome = RunOutcome(self.results, self._timer.elapsed() - start, quit_run)
        if self._trace is not None:
            self._trace(render_summary(outcome.passed, outcome.failed, len(self.results)))
        return outcome

    def _next(self, current: int | None) -> int | None:
        choice = self._control.take_choice()
        chosen = None if choice is None or not 1 <= choice <= len(self.results) else choice - 1
        if chosen is not None and self.results[chosen].state is CaseState.PENDING:
            return chosen
        start = 0 if current is None else current + 1
        for k in range(len(self.results)):
            j = (start + k) % len(self.results)
            if self.results[j].state is CaseState.PENDING:
                return j
        return None

    def _cancel(self) -> bool:
        got = self._control.interruption()
        if got is not None:
            self._interrupted = got
            return True
        return False

    # ---- one case ----------------------------------------------------------------

    def _run_case(self, result: CaseResult) -> None:
        s = self._settings
        prompt = case_prompt(result.case, s.think_mode)
        n_prompt = self._answerer.prompt_tokens(prompt)
        budget = s.budget(result.case)
        limit = generation_limit(n_prompt, self._answerer.ctx, budget)
        result.prompt_tokens = n_prompt or 0
        result.generated_tokens, result.picked, result.output = 0, "", ""
        result.think_close, result.note, result.attempts = None, None, 0
        if isinstance(limit, str):
            result.state, result.note = CaseState.SKIPPED, limit
            self.view.case_started(result)
            self._record(result, prompt, "SKIPPED")
            self.view.case_finished(result)
            return
        started = self._timer.elapsed()
        self._interrupted = None
        answer = self._attempt(result, prompt, limit)
        if self._should_retry(answer):
            retry = generation_limit(n_prompt, self._answerer.ctx, 2 * budget)
            if isinstance(retry, int) and retry > limit:
                answer = self._attempt(result, prompt, retry)
        result.elapsed = self._timer.elapsed() - started
        self._settle(result, answer, prompt)

    def _attempt(self, result: CaseResult, prompt: CasePrompt, limit: int) -> Answer:
        result.state, result.limit = CaseState.PREFILL, limit
        result.attempts += 1
        result.generated_tokens = 0
        self.view.case_started(result)
        limits = AnswerLimits(limit, self._settings.sampling, self._settings.reply)
        observer = _CaseObserver(result, self.view)
        return self._answerer.answer(prompt, limits, observer, self._cancel)

    def _should_retry(self, answer: Answer) -> bool:
        return (
            self._settings.retry_incomplete
            and answer.finish == "length"
            and not has_final_answer_line(answer.output.encode("utf-8", "surrogateescape"))
        )

    def _settle(self, result: CaseResult, answer: Answer, prompt: CasePrompt) -> None:
        result.prompt_tokens = answer.prompt_tokens or result.prompt_tokens
        result.generated_tokens = answer.generated_tokens
        result.think_close = answer.think_close
        result.output = answer.output
        if answer.finish == "cancelled":
            switched = self._interrupted is Interruption.SWITCH
            self._record(result, prompt, "SWITCHED" if switched else "STOPPED")
            result.state = CaseState.PENDING if switched else CaseState.STOPPED
        elif answer.finish == "error":
            result.state, result.note = CaseState.ERROR, answer.error or "generation failed"
            self._record(result, prompt, "ERROR")
        else:
            grade = grade_output(result.case, answer.output)
            result.picked = grade.picked
            result.state = CaseState.PASSED if grade.correct else CaseState.FAILED
            self._record(result, prompt, result.state.value)
        self.view.case_finished(result)

    def _record(self, result: CaseResult, prompt: CasePrompt, status: str) -> None:
        if self._trace is None:
            return
        sampling = self._settings.sampling
        graded = status in ("PASSED", "FAILED")
        record = TraceRecord(
            number=result.number,
            of=len(self.results),
            case=result.case,
            timestamp_unix=self._timer.unix(),
            status=status,
            picked=result.picked if graded else "?",
            prompt_tokens=result.prompt_tokens,
            generated_tokens=result.generated_tokens,
            elapsed_sec=result.elapsed,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            min_p=sampling.min_p,
            think_mode_effective=prompt.think_mode.value,
            system_prompt=prompt.system,
            question_prompt=prompt.user,
            model_output=result.output,
            think_close=result.think_close,
            error=result.note if status in ("ERROR", "SKIPPED") else None,
            attempts=max(result.attempts, 1),
        )
        self._trace(render_record(record))
