"""official.vec: the compact line form of the vectors, and the one file that gives each
case's session size (docs/test-vectors.md "Files").

    case <id> <ctx> <steps> <prompt-file>
    step <index> <selected-token-hex> <top-count>
    top <token-hex> <logprob %.9g>            (top-count lines)
    end

ASCII; `#` comments and blank lines are ignored. Hex is the lowercase hex of the
token's UTF-8 bytes. A `top` line lists only alternatives the source ranked (logprob
above -1000) with non-empty bytes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ds4.domain.vectors.fields import VectorFileError
from ds4.domain.vectors.records import MAX_STEPS, MAX_TOKEN_BYTES, MAX_TOPS, VectorCase

VEC_FILE = "official.vec"
MIN_CTX = 2
MAX_CTX = 1 << 20  # DeepSeek V4's context window (docs/reference/model.md §1.1)

_HEX = re.compile(r"(?:[0-9a-f]{2})+")


@dataclass(frozen=True)
class VecStep:
    index: int
    selected: bytes
    tops: tuple[tuple[bytes, float], ...]


@dataclass(frozen=True)
class VecCase:
    id: str
    ctx: int
    prompt_file: str
    steps: tuple[VecStep, ...]


class _Lines:
    def __init__(self, raw: bytes, where: str) -> None:
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError as exc:
            raise VectorFileError(f"{where}: not ASCII (byte {exc.start})") from None
        self.where = where
        self._rows = [
            (number, line.split())
            for number, line in enumerate(text.splitlines(), start=1)
            if line.strip() and not line.lstrip().startswith("#")
        ]
        self._next = 0
        self.number = 0

    def fail(self, problem: str) -> VectorFileError:
        return VectorFileError(f"{self.where} line {self.number}: {problem}")

    def more(self) -> bool:
        return self._next < len(self._rows)

    def take(self, keyword: str, fields: int) -> list[str]:
        if not self.more():
            raise VectorFileError(f"{self.where}: ends inside a case (expected {keyword!r})")
        self.number, words = self._rows[self._next]
        self._next += 1
        if not words or words[0] != keyword:
            raise self.fail(f"expected {keyword!r}, found {' '.join(words)[:60]!r}")
        if len(words) != fields + 1:
            raise self.fail(f"{keyword!r} takes {fields} fields, found {len(words) - 1}")
        return words[1:]

    def integer(self, text: str, what: str, low: int, high: int) -> int:
        if not text.isdigit() or not low <= int(text) <= high:
            raise self.fail(f"{what} {text!r} is not an integer in {low}..{high}")
        return int(text)

    def hex_bytes(self, text: str) -> bytes:
        if not _HEX.fullmatch(text):
            raise self.fail(f"{text[:40]!r} is not lowercase hex of whole bytes")
        if len(text) // 2 > MAX_TOKEN_BYTES:
            raise self.fail(f"a token of {len(text) // 2} bytes (at most {MAX_TOKEN_BYTES})")
        return bytes.fromhex(text)

    def logprob(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise self.fail(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value > 0:
            raise self.fail(f"logprob {text} is not a finite number <= 0")
        return value


def parse_vec(raw: bytes, where: str = VEC_FILE) -> dict[str, VecCase]:
    lines = _Lines(raw, where)
    cases: dict[str, VecCase] = {}
    while lines.more():
        case_id, ctx, count, prompt_file = lines.take("case", 4)
        if case_id in cases:
            raise lines.fail(f"case {case_id!r} appears twice")
        ctx_value = lines.integer(ctx, "ctx", MIN_CTX, MAX_CTX)
        steps = tuple(
            _step(lines, index) for index in range(lines.integer(count, "steps", 1, MAX_STEPS))
        )
        lines.take("end", 0)
        cases[case_id] = VecCase(case_id, ctx_value, prompt_file, steps)
    if not cases:
        raise VectorFileError(f"{where}: holds no case")
    return cases


def _step(lines: _Lines, index: int) -> VecStep:
    number, selected, count = lines.take("step", 3)
    if number != str(index):
        raise lines.fail(f"step index {number!r}, expected {index}")
    chosen = lines.hex_bytes(selected)
    tops = []
    for _ in range(lines.integer(count, "top count", 0, MAX_TOPS)):
        token, logprob = lines.take("top", 2)
        tops.append((lines.hex_bytes(token), lines.logprob(logprob)))
    return VecStep(index, chosen, tuple(tops))


def render_vec(cases: list[VectorCase], prompt_prefix: str = "") -> bytes:
    """The file for these cases; prompt paths are written as `<prompt_prefix><prompt_file>`
    (the official file names them from the repository root: `tests/test-vectors/`)."""
    out = [
        "# ds4-official-logprob-vectors-v1",
        "# case <id> <ctx> <steps> <prompt-file>",
        "# step <index> <selected-hex> <top-count>",
        "# top <token-hex> <official-logprob>",
    ]
    for case in cases:
        out += [
            "",
            f"case {case.id} {case.ctx} {len(case.steps)} {prompt_prefix}{case.prompt_file}",
        ]
        for step in case.steps:
            tops = step.compared
            out.append(f"step {step.index} {step.token.raw.hex()} {len(tops)}")
            out += [f"top {a.token.raw.hex()} {a.logprob:.9g}" for a in tops]
        out.append("end")
    return ("\n".join(out) + "\n").encode("ascii")
