"""`ds4 eval --validate-cases`: every problem of the case files, not only the first
(docs/eval.md "Case files")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ds4.domain.eval.case_schema import CaseDataError, CaseSet, parse_case_lines
from ds4.domain.eval.readers.formats import AUTO, detect_format, parse_case_file
from ds4.domain.eval.sources import source_table


@dataclass
class ValidationReport:
    lines: list[str] = field(default_factory=list)
    problems: int = 0


def _one_file(path: str, text: str, fmt: str, problems: list[str]) -> CaseSet:
    try:
        chosen = detect_format(path, text) if fmt == AUTO else fmt
        if chosen == "ds4":
            return parse_case_lines(text, path, problems)
        return parse_case_file(path, text, chosen)
    except CaseDataError as error:
        problems.append(str(error))
        return CaseSet()


def validation_report(files: Sequence[tuple[str, str]], fmt: str = AUTO) -> ValidationReport:
    problems: list[str] = []
    merged = CaseSet()
    counts = []
    for path, text in files:
        cases = _one_file(path, text, fmt, problems)
        counts.append(f"{path}: {len(cases.cases)} cases")
        for case in cases.cases:
            try:
                merged.add_case(case, cases.origins[case.key])
            except CaseDataError as error:
                problems.append(str(error))
        for info in cases.sources.values():
            merged.add_source(info)
    table = source_table(merged.sources)
    for source in sorted({c.source for c in merged.cases} - set(table)):
        problems.append(f"source {source!r} has no row in the sources table (licence and URL)")
    seen: dict[str, str] = {}
    for case in merged.cases:
        text = " ".join(case.question.split())
        first = seen.setdefault(text, f"{case.source}/{case.id}")
        if first != f"{case.source}/{case.id}":
            problems.append(f"{merged.origins[case.key]}: same question as {first}")
    report = ValidationReport(counts + problems, len(problems))
    if problems:
        report.lines.append(f"ds4-eval: {len(problems)} problems in {len(files)} case files")
    else:
        report.lines.append(f"ds4-eval: {len(merged.cases)} cases in {len(files)} files are valid")
    return report
