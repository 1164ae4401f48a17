"""The TSV `ds4 gguf score` writes, read back and compared (docs/test-vectors.md
"Scoring"):

    # ds4-score-v1
    # <key>\t<value>                  (model, backend, numerics, source: informational)
    case\tindex\ttoken_id\ttoken_hex\tnll
    short_italian_fact\t0\t19923\t416461\t0.0123

One row per scored token; nll = -log p(token | everything before it), natural log.
Two tables compare when they scored the same tokens: same cases, positions and bytes
(ids may differ between tokenizers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ds4.domain.errors import Ds4Error
from ds4.domain.vectors.nll import ScoredToken

SCORE_SCHEMA = "ds4-score-v1"
COLUMNS = ("case", "index", "token_id", "token_hex", "nll")


def header(info: Mapping[str, str]) -> str:
    lines = [f"# {SCORE_SCHEMA}"]
    lines += [f"# {key}\t{_one_line(value)}" for key, value in info.items()]
    lines.append("\t".join(COLUMNS))
    return "\n".join(lines) + "\n"


def row(token: ScoredToken) -> str:
    return f"{token.case}\t{token.index}\t{token.token_id}\t{token.raw.hex()}\t{token.nll:.9g}\n"


def _one_line(value: str) -> str:
    return value.replace("\t", " ").replace("\n", " ").replace("\r", " ")


@dataclass(frozen=True)
class Summary:
    tokens: int
    nll: float  # the sum

    @property
    def avg_nll(self) -> float:
        return self.nll / self.tokens if self.tokens else math.nan

    @property
    def ppl(self) -> float:
        try:
            return math.exp(self.avg_nll)
        except OverflowError:
            return math.inf

    def line(self) -> str:
        return (
            f"tokens={self.tokens} nll={self.nll:.9f} avg_nll={self.avg_nll:.9f} ppl={self.ppl:.9f}"
        )


def summarize(rows: Iterable[ScoredToken]) -> Summary:
    values = [r.nll for r in rows]
    return Summary(len(values), math.fsum(values))


def parse_table(text: str, where: str) -> list[ScoredToken]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != f"# {SCORE_SCHEMA}":
        raise Ds4Error(f"{where}: not a ds4 score table (first line is not '# {SCORE_SCHEMA}')")
    body = [(n, line) for n, line in enumerate(lines, start=1) if not line.startswith("#")]
    if not body or tuple(body[0][1].split("\t")) != COLUMNS:
        raise Ds4Error(f"{where}: missing the column line {' '.join(COLUMNS)!r}")
    rows = [_row(line, f"{where} line {n}") for n, line in body[1:] if line.strip()]
    if not rows:
        raise Ds4Error(f"{where}: no scored tokens")
    return rows


def _row(line: str, where: str) -> ScoredToken:
    fields = line.split("\t")
    if len(fields) != len(COLUMNS):
        raise Ds4Error(f"{where}: {len(fields)} fields, expected {len(COLUMNS)}")
    case, index, token_id, token_hex, nll = fields
    if not index.isdigit() or not token_id.isdigit():
        raise Ds4Error(f"{where}: index and token_id must be non-negative integers")
    try:
        raw = bytes.fromhex(token_hex)
        value = float(nll)
    except ValueError:
        raise Ds4Error(f"{where}: bad token_hex {token_hex[:40]!r} or nll {nll[:40]!r}") from None
    if math.isnan(value) or value < 0:
        raise Ds4Error(f"{where}: nll {nll} is not a number >= 0")
    return ScoredToken(case, int(index), int(token_id), raw, value)


@dataclass(frozen=True)
class CaseComparison:
    case: str
    a: Summary
    b: Summary


@dataclass(frozen=True)
class Comparison:
    total: CaseComparison
    cases: tuple[CaseComparison, ...]
    b_worse: int  # tokens B gives a higher nll than A
    b_better: int


def compare_tables(
    a: list[ScoredToken], b: list[ScoredToken], names: tuple[str, str]
) -> Comparison:
    """Token by token; both must have scored exactly the same tokens."""
    for position, (x, y) in enumerate(zip(a, b, strict=False)):
        if (x.case, x.index, x.raw) != (y.case, y.index, y.raw):
            raise Ds4Error(
                f"{names[0]} and {names[1]} scored different tokens (row {position + 1}: "
                f"{x.case}/{x.index} {x.raw.hex()} vs {y.case}/{y.index} {y.raw.hex()}); "
                "compare scores of the same vectors or text with the same tokenizer"
            )
    if len(a) != len(b):
        raise Ds4Error(f"{names[0]} has {len(a)} scored tokens, {names[1]} has {len(b)}")
    order = list(dict.fromkeys(r.case for r in a))
    cases = tuple(
        CaseComparison(
            case,
            summarize(r for r in a if r.case == case),
            summarize(r for r in b if r.case == case),
        )
        for case in order
    )
    total = CaseComparison("all", summarize(a), summarize(b))
    worse = sum(1 for x, y in zip(a, b, strict=True) if y.nll > x.nll)
    better = sum(1 for x, y in zip(a, b, strict=True) if y.nll < x.nll)
    return Comparison(total, cases, worse, better)
