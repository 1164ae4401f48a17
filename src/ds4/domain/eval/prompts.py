"""The eval prompts (docs/reference/eval.md §2), byte for byte: the deterministic
token-count gate of docs/reference/eval.md §9 depends on every character here.

The system prompt and a user prompt per answer kind; domain/chat renders them with
the effective think mode into the text the tokenizer encodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.chat.messages import SystemMessage, ThinkMode, UserMessage
from ds4.domain.chat.renderer import render_chat
from ds4.domain.eval.cases import CHOICE_LETTERS, AnswerKind, EvalCase

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
