"""`ds4 eval --compare A.trace B.trace`: two runs of the same cases side by side (this
engine against another server on identical prompts, or before and after a change).

Cases are matched by source/id; the statuses and picks are the traces' own (regrade
each trace first to compare under today's extractor).
"""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.eval.trace_format import ParsedTrace, TraceCase

HEADER = "#   A        B        A given  B given  expected    A gen    B gen  test"


@dataclass(frozen=True)
class Side:
    status: str
    picked: str
    generated: str

    @staticmethod
    def of(record: TraceCase | None) -> Side:
        if record is None:
            return Side("-", "-", "-")
        f = record.fields
        return Side(
            f.get("status", "") or "?", f.get("picked", "-"), f.get("generated_tokens", "-")
        )


@dataclass
class Comparison:
    lines: list[str]
    both_passed: int = 0
    only_a: int = 0
    only_b: int = 0
    both_failed: int = 0
    not_comparable: int = 0

    def summary(self) -> str:
        return (
            f"ds4-eval compare: both passed={self.both_passed} only A passed={self.only_a} "
            f"only B passed={self.only_b} both failed={self.both_failed} "
            f"not comparable={self.not_comparable}"
        )


def _key(record: TraceCase) -> tuple[str, str]:
    return record.fields.get("source", ""), record.fields.get("id", "")


def _describe(trace: ParsedTrace) -> str:
    h = trace.header
    return f"{h.get('backend', '?')} {h.get('model', '?')}, temperature {h.get('temperature', '?')}"


def compare_traces(a: ParsedTrace, b: ParsedTrace, a_name: str, b_name: str) -> Comparison:
    a_cases = {_key(r): r for r in a.cases}  # a case traced twice (SWITCHED): the last wins
    b_cases = {_key(r): r for r in b.cases}
    keys = list(a_cases) + [k for k in b_cases if k not in a_cases]
    out = Comparison([f"A: {a_name} ({_describe(a)})", f"B: {b_name} ({_describe(b)})", HEADER])
    for number, key in enumerate(keys, 1):
        left, right = Side.of(a_cases.get(key)), Side.of(b_cases.get(key))
        expected = (a_cases.get(key) or b_cases[key]).fields.get("expected", "-")
        graded = {"PASSED", "FAILED"}
        if left.status in graded and right.status in graded:
            a_ok, b_ok = left.status == "PASSED", right.status == "PASSED"
            if a_ok and b_ok:
                out.both_passed += 1
            elif a_ok:
                out.only_a += 1
            elif b_ok:
                out.only_b += 1
            else:
                out.both_failed += 1
        else:
            out.not_comparable += 1
        mark = "  *" if left.status != right.status or left.picked != right.picked else ""
        out.lines.append(
            f"{number:3d} {left.status:<8} {right.status:<8} {left.picked:<8} {right.picked:<8} "
            f"{expected:<8} {left.generated:>8} {right.generated:>8}  {key[0]}/{key[1]}{mark}"
        )
    out.lines.append(out.summary())
    return out
