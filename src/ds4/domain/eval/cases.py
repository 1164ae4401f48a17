"""The eval case model (docs/reference/eval.md §1): what one question is, as data.

A case set is a list of these, read from files (domain/eval/case_schema.py for our
JSONL schema, domain/eval/readers/ for the formats public benchmarks ship in); no
case lives in code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

MAX_CHOICES = 10  # letters A..J
CHOICE_LETTERS = "ABCDEFGHIJ"
TITLE_CHARS = 60  # a display title is about the first 60 characters of the question
MAX_CASE_TOKENS = 1_000_000  # the generation budget cap (docs/reference/eval.md §3)

# Suite names every case set understands; `all` selects every case. A case file may use
# other lowercase names too (a user's own suites).
DEFAULT_SUITE = "core"
ALL_SUITES = "all"
KNOWN_SUITES = ("core", "hard", "hard-smoke")


class AnswerKind(Enum):
    MULTIPLE_CHOICE = "MULTIPLE_CHOICE"  # answer: one letter A..J
    INTEGER = "INTEGER"  # answer: a decimal integer
    LINE_SET = "LINE_SET"  # answer: line spec such as 11, 17-20, 3,13-15 (0: safe)
    ORDERED_SEQUENCE = "ORDERED_SEQUENCE"  # answer: comma-separated items in order

    @property
    def trace_name(self) -> str:
        """The `answer_kind:` value of a trace record (docs/reference/eval.md §6)."""
        return _TRACE_NAMES[self]


_TRACE_NAMES = {
    AnswerKind.MULTIPLE_CHOICE: "multiple_choice",
    AnswerKind.INTEGER: "exact_integer",
    AnswerKind.LINE_SET: "line_set",
    AnswerKind.ORDERED_SEQUENCE: "ordered_sequence",
}


@dataclass(frozen=True)
class EvalCase:
    source: str
    id: str
    question: str
    answer: str
    answer_kind: AnswerKind
    domain: str = ""
    title: str = ""
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()  # other answers graded as correct
    max_tokens: int | None = None  # this case's generation budget (None: -n)
    suites: frozenset[str] = field(default_factory=lambda: frozenset({DEFAULT_SUITE}))

    @property
    def key(self) -> tuple[str, str]:
        """What a trace names a case by."""
        return (self.source, self.id)

    @property
    def display_title(self) -> str:
        return self.title or display_title(self.question)

    def in_suite(self, suite: str) -> bool:
        return suite == ALL_SUITES or suite in self.suites


def display_title(question: str) -> str:
    """The first line's first 60 characters, whitespace collapsed."""
    flat = " ".join(question.split())
    return flat if len(flat) <= TITLE_CHARS else flat[: TITLE_CHARS - 3].rstrip() + "..."


def inferred_kind(source: str, choices: tuple[str, ...]) -> AnswerKind:
    """The kind of a case that does not say: choices make it multiple choice, the
    COMPSEC source a line set, anything else an integer."""
    if choices:
        return AnswerKind.MULTIPLE_CHOICE
    if source == "COMPSEC":
        return AnswerKind.LINE_SET
    return AnswerKind.INTEGER


@dataclass(frozen=True)
class SourceInfo:
    """A row of the sources table: where a data set comes from and under what terms."""

    name: str
    license: str
    url: str
    note: str = ""
