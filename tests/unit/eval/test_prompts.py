"""The eval prompts, byte for byte (docs/reference/eval.md §2): the deterministic
token-count gate depends on them, so each is pinned here as literal text."""

from __future__ import annotations

from ds4.domain.chat import ThinkMode
from ds4.domain.eval.cases import AnswerKind, EvalCase
from ds4.domain.eval.prompts import SYSTEM_PROMPT, case_prompt, user_prompt

FINAL = (
    "At the end, write exactly one final line in this format and do not write anything after it:\n"
)


def test_system_prompt() -> None:
    assert SYSTEM_PROMPT == (
        "You are solving a hard benchmark question. Reason carefully. The final answer must "
        "follow the requested format exactly."
    )


def test_multiple_choice_prompt() -> None:
    case = EvalCase("S", "1", "Q?", "B", AnswerKind.MULTIPLE_CHOICE, choices=("x", "y", "z"))
    assert user_prompt(case) == (
        "Q?\n\nChoices:\nA. x\nB. y\nC. z\n\nSolve the question. " + FINAL + "Answer: <letter>"
    )


def test_line_set_prompt() -> None:
    case = EvalCase("COMPSEC", "1", "code", "3", AnswerKind.LINE_SET)
    assert user_prompt(case) == (
        "code\n\n" + FINAL + "Answer: <line number or comma-separated line numbers>"
    )


def test_integer_prompt() -> None:
    case = EvalCase("S", "1", "2+2?", "4", AnswerKind.INTEGER)
    assert user_prompt(case) == "2+2?\n\nSolve the problem. " + FINAL + "Answer: <integer>"


def test_sequence_prompt() -> None:
    case = EvalCase("S", "1", "Sort.", "a,b", AnswerKind.ORDERED_SEQUENCE)
    assert user_prompt(case).endswith("\nAnswer: <comma-separated sequence>")


def test_rendered_chat_thinking_and_not() -> None:
    case = EvalCase("S", "1", "2+2?", "4", AnswerKind.INTEGER)
    think = case_prompt(case, ThinkMode.HIGH).rendered()
    plain = case_prompt(case, ThinkMode.NONE).rendered()
    head = "<｜begin▁of▁sentence｜>" + SYSTEM_PROMPT + "<｜User｜>" + user_prompt(case)
    assert think == head + "<｜Assistant｜><think>"
    assert plain == head + "<｜Assistant｜></think>"
