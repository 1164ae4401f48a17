"""The eval case model (docs/reference/eval.md §1): what one question is, as data; which
cases a run takes, in which order (§3); and the one session's context sized to them (§3.1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from ds4.domain.errors import Ds4Error

# --- cases ---
# The eval case model (docs/reference/eval.md §1): what one question is, as data.
#
# A case set is a list of these, read from files (domain/eval/case_schema.py for our
# JSONL schema, domain/eval/readers.py for the formats public benchmarks ship in); no
# case lives in code.

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


# --- selection ---
# Which cases a run takes, in which order (docs/reference/eval.md §3): the suite and
# the --source/--domain/--case-id filters in file order, then --case-sequence (numbers
# into that list), then the first --questions N.


@dataclass(frozen=True)
class Selection:
    suite: str = DEFAULT_SUITE
    sources: tuple[str, ...] = ()  # any of (case-insensitive)
    domains: tuple[str, ...] = ()  # any of; "physics" also matches "physics/optics"
    case_ids: tuple[str, ...] = ()  # any of, exact
    sequence: tuple[int, ...] = ()  # 1-based numbers into the filtered list
    questions: int | None = None  # the first N


def parse_case_sequence(text: str) -> tuple[int, ...]:
    """`3,1,2`: positive case numbers, each at most once."""
    numbers: list[int] = []
    for raw in text.split(","):
        part = raw.strip()
        if not part.isdigit() or int(part) < 1:
            raise ValueError(f"{part!r} is not a case number (1-based)")
        if int(part) in numbers:
            raise ValueError(f"case {int(part)} is listed twice")
        numbers.append(int(part))
    return tuple(numbers)


def _domain_matches(domain: str, wanted: str) -> bool:
    d, w = domain.lower(), wanted.lower()
    return d == w or d.startswith(w + "/")


def filtered(cases: Sequence[EvalCase], sel: Selection) -> list[EvalCase]:
    sources = {s.lower() for s in sel.sources}
    out = []
    for case in cases:
        if not case.in_suite(sel.suite):
            continue
        if sources and case.source.lower() not in sources:
            continue
        if sel.domains and not any(_domain_matches(case.domain, d) for d in sel.domains):
            continue
        if sel.case_ids and case.id not in sel.case_ids:
            continue
        out.append(case)
    return out


def select_cases(cases: Sequence[EvalCase], sel: Selection) -> list[EvalCase]:
    chosen = filtered(cases, sel)
    if sel.sequence:
        beyond = [n for n in sel.sequence if n > len(chosen)]
        if beyond:
            raise Ds4Error(
                f"--case-sequence: case {beyond[0]} does not exist (the selection has "
                f"{len(chosen)} cases; --list-cases shows them)"
            )
        chosen = [chosen[n - 1] for n in sel.sequence]
    if sel.questions is not None:
        if sel.questions > len(chosen):
            raise Ds4Error(
                f"--questions {sel.questions}: only {len(chosen)} questions are selected"
            )
        chosen = chosen[: sel.questions]
    if not chosen:
        raise Ds4Error(
            f"no case matches the selection (suite {sel.suite!r}"
            + (f", source {', '.join(sel.sources)}" if sel.sources else "")
            + (f", domain {', '.join(sel.domains)}" if sel.domains else "")
            + (f", id {', '.join(sel.case_ids)}" if sel.case_ids else "")
            + "; --suite all --list-cases lists every loaded case)"
        )
    return chosen


def case_listing(cases: Sequence[EvalCase]) -> list[str]:
    """The --list-cases lines."""
    rows = []
    for number, case in enumerate(cases, 1):
        kind = case.answer_kind.value
        suites = ",".join(sorted(case.suites))
        rows.append(
            f"{number:3d} {case.source}/{case.id}  {kind}  [{suites}]  {case.display_title}"
        )
    return rows


# --- context size ---
# Auto-sizing the one session's context to the selected cases
# (docs/reference/eval.md §3.1).

CONTEXT_CAP = 1_000_000  # the largest context ds4 eval asks for
_ROUNDS = 3  # the think mode may depend on the size; it settles within three rounds


@dataclass(frozen=True)
class SizedContext:
    ctx: int
    max_prompt: int  # the longest prompt among the cases
    case: int  # 1-based: the case that set the size (the largest prompt + budget)
    prompt: int  # that case's prompt tokens
    budget: int  # and its generation budget

    def log_line(self) -> str:
        return (
            f"ds4-eval: context auto-sized to {self.ctx} tokens (largest prompt="
            f"{self.prompt} tokens, case={self.case}, generation budget={self.budget})"
        )


def auto_size_context(
    labels: Sequence[str],
    budgets: Sequence[int],
    prompt_length: Callable[[int, int], int],
) -> SizedContext:
    """The smallest context that holds every case's prompt and generation budget.

    `prompt_length(i, ctx)` is case i's encoded prompt for a session of `ctx` tokens
    (the effective think mode, and so the prompt, may depend on it). Starting from the
    cap, the size is recomputed until it no longer changes (at most three rounds).
    A case that cannot fit under the cap is an error naming it.
    """
    if not labels:
        raise Ds4Error("no cases selected")
    candidate = CONTEXT_CAP
    sized: SizedContext | None = None
    for _ in range(_ROUNDS):
        lengths = [prompt_length(i, candidate) for i in range(len(labels))]
        need = [n + b for n, b in zip(lengths, budgets, strict=True)]
        worst = max(range(len(labels)), key=lambda i: (need[i], lengths[i]))
        if need[worst] > CONTEXT_CAP:
            raise Ds4Error(
                f"case {worst + 1} ({labels[worst]}) needs {lengths[worst]} prompt tokens + "
                f"{budgets[worst]} generation tokens, more than the {CONTEXT_CAP} token "
                "context cap (lower -n/--tokens or leave the case out)"
            )
        sized = SizedContext(need[worst], max(lengths), worst + 1, lengths[worst], budgets[worst])
        if sized.ctx == candidate:
            break
        candidate = sized.ctx
    assert sized is not None
    return sized
