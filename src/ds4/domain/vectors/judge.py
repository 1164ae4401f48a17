"""The comparison rule for one step (docs/test-vectors.md "The rule"):

- the local argmax token's bytes equal the recorded selected token's bytes;
- every ranked recorded alternative (logprob above -1000, non-empty bytes) has a local
  top-k entry with identical bytes whose logprob is within `tolerance` of it.

The report carries more than the verdict: where the recorded token ranks in the local
model's whole vocabulary and how far every alternative's logprob moved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ds4.domain.vectors.records import VectorStep, VectorToken

DEFAULT_TOLERANCE = 4.0


@dataclass(frozen=True)
class LocalToken:
    """A token as the local model scores it at one step."""

    id: int
    raw: bytes
    logprob: float
    rank: int  # 1-based, over the whole vocabulary (ties by id)


@dataclass(frozen=True)
class AlternativeCheck:
    token: VectorToken
    recorded: float
    local: LocalToken | None  # the best-ranked local token with these bytes; None: none has
    ok: bool

    @property
    def delta(self) -> float | None:
        return None if self.local is None else self.local.logprob - self.recorded


@dataclass(frozen=True)
class StepReport:
    index: int
    recorded: VectorToken
    recorded_logprob: float
    recorded_local: LocalToken | None  # the recorded token in the local model's ranking
    chosen: LocalToken  # the local argmax, which the next step continues from
    alternatives: tuple[AlternativeCheck, ...]

    @property
    def argmax_ok(self) -> bool:
        return self.chosen.raw == self.recorded.raw

    @property
    def passed(self) -> bool:
        return self.argmax_ok and all(a.ok for a in self.alternatives)

    @property
    def max_abs_delta(self) -> float | None:
        deltas = [abs(d) for a in self.alternatives if (d := a.delta) is not None]
        return max(deltas) if deltas else None

    def problems(self, top_k: int, tolerance: float) -> list[str]:
        out = []
        if not self.argmax_ok:
            out.append("argmax differs")
        for alt in self.alternatives:
            if alt.ok:
                continue
            shown = _show(alt.token.raw)
            if alt.local is None:
                out.append(f"{shown}: no local token has these bytes")
            elif alt.local.rank > top_k:
                out.append(f"{shown}: local rank {alt.local.rank}, not in the top {top_k}")
            else:
                out.append(f"{shown}: |Δlogprob| {abs(alt.delta or 0.0):.3f} > {tolerance:g}")
        return out


def judge_step(
    step: VectorStep,
    top: Sequence[LocalToken],
    lookup: Mapping[bytes, LocalToken],
    tolerance: float = DEFAULT_TOLERANCE,
) -> StepReport:
    """`top`: the local top-k, best first; `lookup`: the best-ranked local token for each
    recorded byte string that some local token has."""
    checks = tuple(
        AlternativeCheck(
            alt.token,
            alt.logprob,
            lookup.get(alt.token.raw),
            any(t.raw == alt.token.raw and abs(t.logprob - alt.logprob) <= tolerance for t in top),
        )
        for alt in step.compared
    )
    return StepReport(
        step.index, step.token, step.logprob, lookup.get(step.token.raw), top[0], checks
    )


def _show(raw: bytes) -> str:
    return repr(raw.decode("utf-8", errors="backslashreplace"))
