"""Teacher-forced negative log-likelihood (`ds4 gguf score`, docs/test-vectors.md
"Scoring"): how much probability a model gives to a known continuation, token by token,
and the TSV it writes, read back and compared.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.cancel import CancelCheck, CancelledError, never_cancel
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.loop import prefill
from ds4.domain.sampling import StepLogprobs
from ds4.domain.vectors.local_run import Progress, TokenIndex, check_fits, no_progress, prompt_ids
from ds4.domain.vectors.records import VectorCase
from ds4.ports.compute import ComputeSession
from ds4.ports.tokenizer import Tokenizer

# --- nll ---
# Teacher-forced negative log-likelihood: how much probability a model gives to a
# known continuation, token by token (`ds4 gguf score`, docs/test-vectors.md "Scoring").
#
# - a vector case: its prompt as recorded (local_run.prompt_ids), then each recorded
#   token, fed whatever the model would have chosen;
# - a text: its tokens without chat markers; the first `warmup` tokens are context only,
#   the rest are scored, evaluated in chunks that return every position's logits.


@dataclass(frozen=True)
class ScoredToken:
    case: str
    index: int  # position in the scored continuation (0: the first scored token)
    token_id: int
    raw: bytes
    nll: float


def score_case(
    session: EngineSession,
    tokenizer: Tokenizer,
    index: TokenIndex,
    case: VectorCase,
    *,
    progress: Progress = no_progress,
    cancel: CancelCheck = never_cancel,
) -> list[ScoredToken]:
    targets = []
    for step in case.steps:
        token_id = index.natural(step.token.raw)
        if token_id is None:
            raise Ds4Error(
                f"case {case.id} step {step.index}: no token of this model has the recorded "
                f"bytes {step.token.raw.hex()} (another tokenizer?)"
            )
        targets.append(token_id)
    ids = prompt_ids(tokenizer, case.prompt)
    check_fits(case.id, ids, len(targets), session.ctx)
    done = 0
    for event in prefill(session, ids, cancel=cancel):
        progress(event.done - done)
        done = event.done
    logits = session.logits()
    scored = []
    for position, target in enumerate(targets):
        nll = -StepLogprobs(logits).logprob(target)
        scored.append(ScoredToken(case.id, position, target, tokenizer.token_bytes(target), nll))
        progress(1)
        if position + 1 < len(targets):
            logits = session.eval(target)
    return scored


def text_budget(n_tokens: int, warmup: int, ctx: int) -> int:
    """How many tokens of a text get scored: those after the warmup that fit ctx."""
    if n_tokens <= warmup:
        raise Ds4Error(f"the text has {n_tokens} tokens; scoring needs more than --warmup {warmup}")
    if ctx <= warmup:
        raise Ds4Error(f"--ctx {ctx} leaves nothing to score after --warmup {warmup}")
    return min(n_tokens - warmup, ctx - warmup)


def score_text(
    compute: ComputeSession,
    tokenizer: Tokenizer,
    ids: Sequence[int],
    *,
    name: str,
    warmup: int,
    chunk: int,
    progress: Progress = no_progress,
    cancel: CancelCheck = never_cancel,
) -> Iterator[ScoredToken]:
    """Tokens ids[warmup : warmup + budget], each scored on everything before it.

    The state must be empty and hold ctx >= warmup + budget - 1 tokens. Logits of a
    chunk come from one pass ([chunk, vocab] float32 at a time)."""
    scored = text_budget(len(ids), warmup, compute.ctx)
    end = warmup + scored  # ids[end - 1] is scored but never evaluated
    logits = compute.prefill(list(ids[:warmup]), chunk=chunk)
    progress(warmup)
    yield _scored(tokenizer, name, 0, ids[warmup], logits)
    position = warmup
    while position + 1 < end:
        if cancel():
            raise CancelledError
        piece = list(ids[position : min(position + chunk, end - 1)])
        rows = compute.prefill(piece, all_logits=True)
        for offset, row in enumerate(rows):
            target = position + offset + 1
            yield _scored(tokenizer, name, target - warmup, ids[target], row)
        position += len(piece)
        progress(len(piece))


def _scored(
    tokenizer: Tokenizer, name: str, index: int, token: int, logits: npt.NDArray[np.float32]
) -> ScoredToken:
    nll = -StepLogprobs(logits).logprob(token)
    return ScoredToken(name, index, token, tokenizer.token_bytes(token), nll)


# --- score table ---
# The TSV `ds4 gguf score` writes, read back and compared (docs/test-vectors.md
# "Scoring"):
#
#     # ds4-score-v1
#     # <key>	<value>                  (model, backend, numerics, source: informational)
#     case	index	token_id	token_hex	nll
#     short_italian_fact	0	19923	416461	0.0123
#
# One row per scored token; nll = -log p(token | everything before it), natural log.
# Two tables compare when they scored the same tokens: same cases, positions and bytes
# (ids may differ between tokenizers).

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
class ScoreComparison:
    total: CaseComparison
    cases: tuple[CaseComparison, ...]
    b_worse: int  # tokens B gives a higher nll than A
    b_better: int


def compare_tables(
    a: list[ScoredToken], b: list[ScoredToken], names: tuple[str, str]
) -> ScoreComparison:
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
    return ScoreComparison(total, cases, worse, better)
