"""What one case is put to the answerer as: the eval prompts (docs/reference/eval.md §2),
byte for byte, and the reply budgets that force `</think>` so a case keeps room for its
answer (§4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.chat import SystemMessage, ThinkMode, UserMessage, render_chat
from ds4.domain.eval.cases import CHOICE_LETTERS, AnswerKind, EvalCase
from ds4.domain.eval.traces import ThinkClose

# --- prompts ---
# The eval prompts (docs/reference/eval.md §2), byte for byte: the deterministic
# token-count gate of docs/reference/eval.md §9 depends on every character here.
#
# The system prompt and a user prompt per answer kind; domain/chat renders them with
# the effective think mode into the text the tokenizer encodes.

SYSTEM_PROMPT = (
    "You are solving a hard benchmark question. Reason carefully. "
    "The final answer must follow the requested format exactly."
)

_FINAL_LINE = (
    "At the end, write exactly one final line in this format and do not write anything after it:\n"
)
MC_TAIL = "\nSolve the question. " + _FINAL_LINE + "Answer: <letter>"
LINE_SET_TAIL = "\n" + _FINAL_LINE + "Answer: <line number or comma-separated line numbers>"
INTEGER_TAIL = "\nSolve the problem. " + _FINAL_LINE + "Answer: <integer>"
# Ours (the reference has no ordered-sequence kind): the integer wording, another format.
SEQUENCE_TAIL = "\nSolve the problem. " + _FINAL_LINE + "Answer: <comma-separated sequence>"


@dataclass(frozen=True)
class CasePrompt:
    """What the model is asked: system and user text, and the think mode to render with."""

    system: str
    user: str
    think_mode: ThinkMode

    def rendered(self) -> str:
        """The chat transcript the model sees (BOS, system, user turn, assistant prefix)."""
        messages = (SystemMessage(self.system), UserMessage(self.user))
        return render_chat(messages, (), self.think_mode)


def user_prompt(case: EvalCase) -> str:
    text = case.question + "\n"
    kind = case.answer_kind
    if kind is AnswerKind.MULTIPLE_CHOICE:
        lines = "".join(f"{CHOICE_LETTERS[i]}. {c}\n" for i, c in enumerate(case.choices))
        return text + "\nChoices:\n" + lines + MC_TAIL
    if kind is AnswerKind.LINE_SET:
        return text + LINE_SET_TAIL
    if kind is AnswerKind.ORDERED_SEQUENCE:
        return text + SEQUENCE_TAIL
    return text + INTEGER_TAIL


def case_prompt(case: EvalCase, think_mode: ThinkMode) -> CasePrompt:
    return CasePrompt(SYSTEM_PROMPT, user_prompt(case), think_mode)


# --- think close ---
# Reply budgets: when to force `</think>` so a case keeps room for its answer
# (docs/reference/eval.md §4).
#
# A ThinkCloser is the `steer` hook of generation.loop.decode_turn. Before each token,
# while the model is still reasoning and `remaining = limit - generated`:
# - a forced close already begun emits its next token;
# - remaining <= hard limit: force the whole `</think>` token sequence (hard close);
# - remaining <= soft limit, `</think>` is one token and it ranks within the top
#   `rank` of the current logits: force it (soft close).
# Otherwise the sampler chooses. The first close is recorded; a `</think>` the model
# wrote itself is `natural`.

NATURAL, SOFT, HARD = "natural", "soft_forced", "hard_forced"


@dataclass(frozen=True)
class ReplyLimits:
    """--soft-limit-reply-budget, --hard-limit-reply-budget, --soft-limit-think-close-rank."""

    soft: int = 1024
    hard: int = 512
    rank: int = 3


def token_rank(logits: npt.NDArray[np.float32], token: int) -> int:
    """1-based rank of `token` by logit, ties broken by id (the sampler's order)."""
    value = logits[token]
    higher = int(np.count_nonzero(logits > value))
    tied_before = int(np.count_nonzero(logits[:token] == value))
    return 1 + higher + tied_before


class ThinkCloser:
    def __init__(self, close_tokens: Sequence[int], limits: ReplyLimits, limit: int) -> None:
        """`close_tokens`: how `</think>` tokenizes; `limit`: this case's generation
        limit L (the decode loop's budget)."""
        self._close = tuple(close_tokens)
        self._limits = limits
        self._limit = limit
        self._pending: list[int] = []
        self._reasoned = False
        self.record: ThinkClose | None = None

    def __call__(
        self, logits: npt.NDArray[np.float32], generated: int, in_reasoning: bool
    ) -> int | None:
        if self._pending:
            return self._pending.pop(0)
        if not in_reasoning:
            if self._reasoned and self.record is None:
                self.record = ThinkClose(NATURAL, generated, self._limit - generated + 1, 0)
            return None
        self._reasoned = True
        if not self._close:
            return None
        remaining = self._limit - generated
        if remaining <= self._limits.hard:
            rank = token_rank(logits, self._close[0])
            self._force(HARD, generated, remaining, rank)
            return self._pending.pop(0)
        if remaining <= self._limits.soft and len(self._close) == 1:
            rank = token_rank(logits, self._close[0])
            if rank <= self._limits.rank:
                self._force(SOFT, generated, remaining, rank)
                return self._pending.pop(0)
        return None

    def _force(self, kind: str, generated: int, remaining: int, rank: int) -> None:
        if self.record is None:
            self.record = ThinkClose(kind, generated + 1, remaining, rank)
        self._pending = list(self._close)

    def finish(self, text: str, generated: int) -> ThinkClose | None:
        """The close record once the case ended (a `</think>` written as the last
        token is only seen here)."""
        if self.record is None and self._reasoned and "</think>" in text:
            self.record = ThinkClose(NATURAL, generated, self._limit - generated + 1, 0)
        return self.record
