"""What the full-screen view draws (docs/eval.md "The screen"), as prompt-toolkit
formatted text built from a Snapshot: pure functions of the snapshot and the size."""

from __future__ import annotations

import textwrap

from prompt_toolkit.formatted_text import StyleAndTextTuples

from ds4.apps.eval.tui_state import Snapshot
from ds4.domain.eval.report import hours_minutes

Fragments = StyleAndTextTuples

STYLES = {
    "PEND": "class:pend",
    "FILL": "class:fill",
    "RUN": "class:run",
    "SKIP": "class:skip",
    "STOP": "class:stop",
    "PASS": "class:pass",
    "FAIL": "class:fail",
    "ERR": "class:fail",
}
STYLE_SHEET = {
    "pend": "#888888",
    "fill": "ansicyan",
    "run": "ansiyellow",
    "skip": "#888888",
    "stop": "bold ansiyellow",
    "pass": "bold ansigreen",
    "fail": "bold ansired",
    "paused": "bold ansired",
    "selected": "reverse",
    "question": "ansiblue",
    "thinking": "#888888",
    "answer": "",
    "title": "bold",
}


def left_width(columns: int) -> int:
    return min(max(columns // 2, 42), 72)


def short_count(n: int) -> str:
    """Counts >= 10 000 as `Nk`, >= 1 000 000 as `Nm`."""
    if n >= 1_000_000:
        return f"{n // 1_000_000}m"
    if n >= 10_000:
        return f"{n // 1000}k"
    return str(n)


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def left_pane(s: Snapshot, width: int, height: int) -> Fragments:
    out: Fragments = [("class:title", f"ds4-eval (p)ause (q)uit {hours_minutes(s.elapsed)}")]
    if s.paused:
        out += [("", " "), ("class:paused", "PAUSED")]
    out.append(("", "\n"))
    out.append(("", f"score {s.passed}/{len(s.rows)}  failed {s.failed}\n"))
    room = max(height - 2, 1)
    first = min(max(s.selected - room // 2, 0), max(len(s.rows) - room, 0))
    for index in range(first, min(first + room, len(s.rows))):
        number, short, source, title, given, correct = s.rows[index]
        mark = ">" if index == s.selected else " "
        right = f" {given}/{correct}" if given or correct else ""
        head = f"{mark}{number:02d} "
        body = _fit(f"{source}: {title}", max(width - len(head) - 5 - len(right), 1))
        line_style = "class:selected" if index == s.selected else ""
        pad = " " * max(width - len(head) - 5 - len(body) - len(right), 0)
        out += [
            (line_style, head),
            (STYLES.get(short, ""), f"{short:<4} "),
            (line_style, body + pad + right),
            ("", "\n"),
        ]
    return out


def status_line(s: Snapshot) -> Fragments:
    done, total = s.progress
    if s.phase == "FILL":
        pct = 100 * done // total if total else 0
        phase = f"FILL {short_count(done)}/{short_count(total)} {pct}%"
    elif s.phase in ("THINK", "ANS"):
        phase = f"{s.phase} {short_count(done)}/{short_count(total)}"
    else:
        phase = "idle"
    return [("class:title", f"Speed {s.speed:.1f} t/s  {phase}  {s.current_id}")]


def question_lines(s: Snapshot, width: int, rows: int = 3) -> Fragments:
    lines = textwrap.wrap(" ".join(s.question.split()), max(width, 1))[:rows]
    return [("class:question", "\n".join(lines))]


def stream_tail(s: Snapshot, width: int, height: int) -> Fragments:
    """The last `height` wrapped lines of the streamed output, styles kept."""
    width = max(width, 1)
    lines: list[Fragments] = [[]]
    column = 0
    for style, text in s.stream:
        for k, part in enumerate(text.split("\n")):
            if k:
                lines.append([])
                column = 0
            rest = part
            while rest:
                if column >= width:
                    lines.append([])
                    column = 0
                piece, rest = rest[: width - column], rest[width - column :]
                lines[-1].append((style, piece))
                column += len(piece)
    out: Fragments = []
    for i, line in enumerate(lines[-max(height, 1) :]):
        if i:
            out.append(("", "\n"))
        out += line
    return out
