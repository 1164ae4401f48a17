"""The vector files as values: a set of cases, each a prompt, its session size and the
recorded steps (docs/test-vectors.md "Files")."""

from __future__ import annotations

from dataclasses import dataclass

NEGLIGIBLE_LOGPROB = -1000.0  # the API writes -9999.0 for alternatives it does not rank
MAX_STEPS = 16
MAX_TOPS = 32
MAX_TOKEN_BYTES = 128
MAX_TOP_LOGPROBS = MAX_TOPS  # what official.vec can carry per step


@dataclass(frozen=True)
class VectorToken:
    """A token as recorded: its bytes (authoritative) and its text (display only)."""

    raw: bytes
    text: str


@dataclass(frozen=True)
class Alternative:
    token: VectorToken
    logprob: float

    @property
    def compared(self) -> bool:
        """The rule checks an alternative only when the source ranked it (not the API's
        -9999 placeholder) and it has bytes."""
        return self.logprob > NEGLIGIBLE_LOGPROB and bool(self.token.raw)


@dataclass(frozen=True)
class VectorStep:
    index: int
    token: VectorToken  # the selected (greedy) token
    logprob: float
    alternatives: tuple[Alternative, ...]

    @property
    def compared(self) -> tuple[Alternative, ...]:
        return tuple(a for a in self.alternatives if a.compared)


@dataclass(frozen=True)
class VectorCase:
    id: str
    kind: str  # short | long
    prompt: str
    ctx: int  # the session size the case is checked with
    steps: tuple[VectorStep, ...]
    prompt_file: str
    official_file: str
    prompt_tokens: int | None  # what the source counted (usage.prompt_tokens), if it did


@dataclass(frozen=True)
class VectorSet:
    source: str
    model: str
    endpoint: str
    top_logprobs: int  # how many alternatives each step lists: the local top-k compared
    max_tokens: int
    cases: tuple[VectorCase, ...]

    def case_ids(self) -> list[str]:
        return [c.id for c in self.cases]
