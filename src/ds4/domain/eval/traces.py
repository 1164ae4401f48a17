"""The eval trace file (docs/reference/eval.md §6): render the header, one record per case
and the summary; parse a trace back, re-grade it without a model (§6.2), and compare two
runs side by side (`ds4 eval --compare`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from ds4.domain.eval.cases import CHOICE_LETTERS, AnswerKind, EvalCase
from ds4.domain.eval.grading import Grade, grade_output

# --- trace format ---
# The eval trace file (docs/reference/eval.md §6): render the header, one record per
# case and the summary; parse a trace back for --regrade-trace and --compare.
#
# Prompts and the model output are written as counted blocks (`LABEL_BEGIN bytes=N`, N
# bytes of UTF-8, a newline if the text lacks one, `LABEL_END`), so the parser copies
# them exactly and never mistakes marker-like text inside them for structure.

TITLE = "# ds4-eval trace"
CASE_MARK = b"===== CASE "
SUMMARY_MARK = b"===== SUMMARY ====="
_BEGIN = re.compile(rb"([A-Z][A-Z_]*)_BEGIN bytes=(\d+)")
_LEGACY_OUTPUT = b"MODEL_OUTPUT_BEGIN"
_KEY = re.compile(rb"[a-z_]+")
_LEGACY_END = b"\nMODEL_OUTPUT_END"


def g6(value: float) -> str:
    """C's %.6g."""
    return f"{value:.6g}"


@dataclass(frozen=True)
class TraceHeader:
    started_unix: int
    model: str
    backend: str
    ctx: int
    max_tokens: int
    max_prompt_tokens: int
    questions: int
    temperature: float
    top_p: float
    min_p: float
    seed: int
    think_mode_requested: str
    soft_limit_reply_budget: int
    hard_limit_reply_budget: int
    soft_limit_think_close_rank: int

    def render(self) -> str:
        rows = [
            TITLE,
            f"started_unix: {self.started_unix}",
            f"model: {self.model}",
            f"backend: {self.backend}",
            f"ctx: {self.ctx}",
            f"max_tokens: {self.max_tokens}",
            f"max_prompt_tokens: {self.max_prompt_tokens}",
            f"questions: {self.questions}",
            f"temperature: {g6(self.temperature)}",
            f"top_p: {g6(self.top_p)}",
            f"min_p: {g6(self.min_p)}",
            f"seed: {self.seed}",
            f"think_mode_requested: {self.think_mode_requested}",
            f"soft_limit_reply_budget: {self.soft_limit_reply_budget}",
            f"hard_limit_reply_budget: {self.hard_limit_reply_budget}",
            f"soft_limit_think_close_rank: {self.soft_limit_think_close_rank}",
        ]
        return "\n".join(rows) + "\n\n"


@dataclass(frozen=True)
class ThinkClose:
    """How reasoning ended: natural (the model wrote `</think>`), soft_forced or
    hard_forced (docs/reference/eval.md §4), with the 1-based token index, the budget
    left at that point and the rank of `</think>` then (0: not measured)."""

    kind: str
    token_index: int = 0
    remaining_budget: int = 0
    rank: int = 0


@dataclass(frozen=True)
class TraceRecord:
    number: int  # 1-based, in the selected list
    of: int
    case: EvalCase
    timestamp_unix: int
    status: str
    picked: str
    prompt_tokens: int
    generated_tokens: int
    elapsed_sec: float
    temperature: float
    top_p: float
    min_p: float
    think_mode_effective: str
    system_prompt: str
    question_prompt: str
    model_output: str
    think_close: ThinkClose | None = None
    error: str | None = None
    attempts: int = 1


def counted_block(label: str, text: str) -> str:
    size = len(text.encode("utf-8"))
    newline = "" if text.endswith("\n") else "\n"
    return f"{label}_BEGIN bytes={size}\n{text}{newline}{label}_END\n"


def _one_line(text: str) -> str:
    return " ".join(text.splitlines())


def render_record(r: TraceRecord) -> str:
    c = r.case
    rows = [
        f"===== CASE {r.number}/{r.of} {c.source}/{c.id} =====",
        f"timestamp_unix: {r.timestamp_unix}",
        f"source: {c.source}",
        f"id: {c.id}",
        f"domain: {_one_line(c.domain)}",
        f"title: {_one_line(c.display_title)}",
        f"status: {r.status}",
        f"picked: {r.picked}",
        f"expected: {c.answer}",
        f"prompt_tokens: {r.prompt_tokens}",
        f"generated_tokens: {r.generated_tokens}",
        f"elapsed_sec: {r.elapsed_sec:.3f}",
        f"temperature: {g6(r.temperature)}",
        f"top_p: {g6(r.top_p)}",
        f"min_p: {g6(r.min_p)}",
        f"think_mode_effective: {r.think_mode_effective}",
    ]
    close = r.think_close
    if close is None:
        rows.append("think_close: none")
    else:
        rows += [
            f"think_close: {close.kind}",
            f"think_close_token_index: {close.token_index}",
            f"think_close_remaining_budget: {close.remaining_budget}",
            f"think_close_rank: {close.rank}",
        ]
    if r.attempts > 1:
        rows.append(f"attempts: {r.attempts}")
    if r.error:
        rows.append(f"error: {_one_line(r.error)}")
    if c.answer_kind is AnswerKind.MULTIPLE_CHOICE:
        rows.append("choices:")
        rows += [f"  {CHOICE_LETTERS[i]}. {_one_line(t)}" for i, t in enumerate(c.choices)]
    else:
        rows.append(f"answer_kind: {c.answer_kind.trace_name}")
    head = "\n".join(rows) + "\n"
    blocks = (
        counted_block("SYSTEM_PROMPT", r.system_prompt)
        + counted_block("QUESTION_PROMPT", r.question_prompt)
        + counted_block("MODEL_OUTPUT", r.model_output)
    )
    return head + blocks + "\n"


def render_summary(passed: int, failed: int, total: int) -> str:
    return f"===== SUMMARY =====\npassed: {passed}\nfailed: {failed}\ntotal: {total}\n"


# ---- parsing ----------------------------------------------------------------------


def _line_end(data: bytes, pos: int, stop: int) -> int:
    newline = data.find(b"\n", pos, stop)
    return stop if newline < 0 else newline


@dataclass(frozen=True)
class CountedBlock:
    label: str
    content: slice  # where the content lies in the data
    after: int  # the start of the line after `LABEL_END`


def counted_block_at(data: bytes, start: int, end: int) -> CountedBlock | None:
    """The counted block the line data[start:end] opens, if it is well formed (its
    N bytes are followed, after an optional newline, by the `LABEL_END` line)."""
    match = _BEGIN.fullmatch(data, start, end)
    if match is None:
        return None
    label, size = match.group(1), int(match.group(2))
    content = end + 1
    after = content + size
    if after > len(data):
        return None
    close = label + b"_END"
    candidates = (after, after + 1) if data[after : after + 1] == b"\n" else (after,)
    for at in candidates:
        stop = at + len(close)
        if data[at:stop] == close and (stop == len(data) or data[stop : stop + 1] == b"\n"):
            return CountedBlock(label.decode(), slice(content, after), stop + 1)
    return None


def next_marker(data: bytes, pos: int) -> int | None:
    """The start of the next `===== CASE ` or summary line at or after the line
    starting at `pos`, stepping over counted blocks whole."""
    while pos < len(data):
        end = _line_end(data, pos, len(data))
        line = data[pos:end]
        if line.startswith(CASE_MARK) or line == SUMMARY_MARK:
            return pos
        block = counted_block_at(data, pos, end)
        pos = block.after if block is not None else end + 1
    return None


@dataclass
class TraceCase:
    header: str  # the `===== CASE ...` line
    fields: dict[str, str] = field(default_factory=dict)
    blocks: dict[str, bytes] = field(default_factory=dict)

    def text(self, label: str) -> str | None:
        block = self.blocks.get(label)
        return None if block is None else block.decode("utf-8", "replace")


@dataclass
class ParsedTrace:
    header: dict[str, str]
    cases: list[TraceCase]


def _field(line: bytes) -> tuple[str, str] | None:
    """A `key: value` line (a bare `key:` has an empty value); None for other lines."""
    colon = line.find(b":")
    if colon <= 0 or not _KEY.fullmatch(line, 0, colon):
        return None
    value = line[colon + 1 :]
    if value and not value.startswith(b" "):
        return None
    return line[:colon].decode(), value[1:].decode("utf-8", "replace")


def _parse_case(data: bytes, start: int, stop: int) -> TraceCase:
    """One record: data[start:stop], its first line the case header."""
    first_end = _line_end(data, start, stop)
    case = TraceCase(data[start:first_end].decode("utf-8", "replace"))
    pos = first_end + 1
    while pos < stop:
        end = _line_end(data, pos, stop)
        block = counted_block_at(data, pos, end)
        if block is not None:
            case.blocks.setdefault(block.label, data[block.content])
            pos = block.after
            continue
        line = data[pos:end]
        if line == _LEGACY_OUTPUT:  # no byte count: up to the first \nMODEL_OUTPUT_END
            close = data.find(_LEGACY_END, end, stop)
            if close >= 0:
                case.blocks.setdefault("MODEL_OUTPUT", data[end + 1 : close])
                pos = close + len(_LEGACY_END) + 1
                continue
        parsed = _field(line)
        if parsed is not None:
            case.fields.setdefault(*parsed)
        pos = end + 1
    return case


def parse_trace(data: bytes) -> ParsedTrace:
    first = next_marker(data, 0)
    header: dict[str, str] = {}
    head = data if first is None else data[:first]
    for line in head.split(b"\n"):
        parsed = _field(line)
        if parsed is not None:
            header.setdefault(*parsed)
    cases: list[TraceCase] = []
    pos = first
    while pos is not None and data.startswith(CASE_MARK, pos):
        after_header = _line_end(data, pos, len(data)) + 1
        following = next_marker(data, after_header)
        cases.append(_parse_case(data, pos, len(data) if following is None else following))
        pos = following
    return ParsedTrace(header, cases)


# --- compare ---
# `ds4 eval --compare A.trace B.trace`: two runs of the same cases side by side (this
# engine against another server on identical prompts, or before and after a change).
#
# Cases are matched by source/id; the statuses and picks are the traces' own (regrade
# each trace first to compare under today's extractor).

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
class TraceComparison:
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


def compare_traces(a: ParsedTrace, b: ParsedTrace, a_name: str, b_name: str) -> TraceComparison:
    a_cases = {_key(r): r for r in a.cases}  # a case traced twice (SWITCHED): the last wins
    b_cases = {_key(r): r for r in b.cases}
    keys = list(a_cases) + [k for k in b_cases if k not in a_cases]
    out = TraceComparison(
        [f"A: {a_name} ({_describe(a)})", f"B: {b_name} ({_describe(b)})", HEADER]
    )
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


# --- regrade ---
# Re-grade a trace without a model (docs/reference/eval.md §6.2): each record's model
# output goes through today's extractor against the case's key.

GRADED_STATUSES = ("PASSED", "FAILED", "")  # "" : a legacy trace without statuses
_NUMBER = re.compile(r"===== CASE (\d+)/")

CaseLookup = Callable[[str, str], EvalCase | None]


class RegradeOutcome(Enum):
    PASSED = "PASSED"
    FAILED = "FAILED"
    NOT_GRADED = "NOT_GRADED"


def regrade_one(case: EvalCase, status: str, output: str) -> tuple[RegradeOutcome, Grade]:
    grade = grade_output(case, output)
    if status not in GRADED_STATUSES:
        return RegradeOutcome.NOT_GRADED, grade
    return (RegradeOutcome.PASSED if grade.correct else RegradeOutcome.FAILED), grade


@dataclass
class RegradeSummary:
    total: int = 0
    passed: int = 0
    failed: int = 0
    changed: int = 0
    not_graded: int = 0
    unknown: int = 0
    parse_errors: int = 0
    lines: list[str] = field(default_factory=list)  # one per changed, unknown or bad record

    def line(self, path: str) -> str:
        return (
            f"ds4-eval: regraded {self.total} cases from {path}: passed={self.passed} "
            f"failed={self.failed} changed={self.changed} not_graded={self.not_graded} "
            f"unknown={self.unknown} parse_errors={self.parse_errors}"
        )

    @property
    def exit_code(self) -> int:
        return 1 if self.unknown or self.parse_errors or self.total == 0 else 0


def case_number(record: TraceCase, ordinal: int) -> int:
    match = _NUMBER.match(record.header)
    return int(match.group(1)) if match else ordinal


def regrade(trace: ParsedTrace, lookup: CaseLookup) -> RegradeSummary:
    out = RegradeSummary()
    for ordinal, record in enumerate(trace.cases, 1):
        out.total += 1
        number = case_number(record, ordinal)
        source, case_id = record.fields.get("source", ""), record.fields.get("id", "")
        output = record.text("MODEL_OUTPUT")
        if not source or not case_id or output is None:
            out.parse_errors += 1
            out.lines.append(f"case {number}: no source, id or MODEL_OUTPUT block")
            continue
        case = lookup(source, case_id)
        if case is None:
            out.unknown += 1
            out.lines.append(f"case {number} {source}/{case_id}: not in the loaded cases")
            continue
        status, traced_pick = record.fields.get("status", ""), record.fields.get("picked")
        outcome, grade = regrade_one(case, status, output)
        if outcome is RegradeOutcome.NOT_GRADED:
            out.not_graded += 1
            continue
        if outcome is RegradeOutcome.PASSED:
            out.passed += 1
        else:
            out.failed += 1
        status_changed = status not in ("", outcome.value)
        pick_changed = bool(traced_pick) and traced_pick != grade.picked
        if status_changed or pick_changed:
            out.changed += 1
            out.lines.append(
                f"case {number} {source}/{case_id}: trace {status} picked={traced_pick} -> "
                f"regrade {outcome.value} picked={grade.picked} expected={case.answer}"
            )
    return out
