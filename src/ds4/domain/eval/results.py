"""Where each case of a run stands, and what it produced."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ds4.domain.eval.cases import EvalCase
from ds4.domain.eval.trace_format import ThinkClose


class CaseState(Enum):
    PENDING = "PENDING"
    PREFILL = "PREFILL"
    RUNNING = "RUNNING"
    PASSED = "PASSED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"  # the prompt does not fit, or leaves no room to generate
    STOPPED = "STOPPED"  # the run was quit or interrupted during this case
    ERROR = "ERROR"  # the engine or endpoint failed (the run stops)

    @property
    def short(self) -> str:
        """The TUI's four-letter status."""
        return _SHORT[self]

    @property
    def graded(self) -> bool:
        return self in (CaseState.PASSED, CaseState.FAILED)


_SHORT = {
    CaseState.PENDING: "PEND",
    CaseState.PREFILL: "FILL",
    CaseState.RUNNING: "RUN",
    CaseState.PASSED: "PASS",
    CaseState.FAILED: "FAIL",
    CaseState.SKIPPED: "SKIP",
    CaseState.STOPPED: "STOP",
    CaseState.ERROR: "ERR",
}


@dataclass
class CaseResult:
    number: int  # 1-based position in the run
    case: EvalCase
    state: CaseState = CaseState.PENDING
    prompt_tokens: int = 0
    generated_tokens: int = 0
    limit: int = 0  # the generation limit L of the last attempt
    picked: str = ""
    elapsed: float = 0.0
    think_close: ThinkClose | None = None
    note: str | None = None  # why it was skipped, or the error
    attempts: int = 0
    output: str = ""

    @property
    def correct(self) -> bool | None:
        """True/False once graded, None otherwise."""
        return self.state is CaseState.PASSED if self.state.graded else None

    @property
    def given(self) -> str:
        """The answer as the report shows it (`-` when there is none)."""
        return self.picked if self.picked and self.state.graded else "-"
