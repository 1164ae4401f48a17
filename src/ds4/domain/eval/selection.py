"""Which cases a run takes, in which order (docs/reference/eval.md §3): the suite and
the --source/--domain/--case-id filters in file order, then --case-sequence (numbers
into that list), then the first --questions N."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ds4.domain.errors import Ds4Error
from ds4.domain.eval.cases import DEFAULT_SUITE, EvalCase


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
