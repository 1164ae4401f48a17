"""Token constraints: a grammar the sampler's candidates are restricted to
(docs/structured-outputs.md).

A `Grammar` is a plain value the domain builds from a request (a JSON schema, a
regular expression, a Lark grammar, or the DSML grammar of a forced or strict tool
call); a `ConstraintCompiler` turns it into a `TokenConstraint` over one model's
vocabulary, the state of one generation: which tokens may come next, as a packed bit
mask, and the tokens actually taken. The adapter is llguidance
(adapters/constraint/llguidance.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import RequestError

GrammarKind = Literal["json_schema", "regex", "lark", "gbnf"]


@dataclass(frozen=True)
class Grammar:
    """What the output must match. `source`: the schema's JSON text, the regular
    expression, the Lark grammar (which may inline schemas with llguidance's
    `%json {...}`) or a GBNF grammar (llama.cpp's, read as Lark); `param`: the
    request field it came from, named in a refusal."""

    kind: GrammarKind
    source: str
    param: str


class GrammarError(RequestError):
    """A grammar the compiler cannot build (an unsupported schema keyword, a bad
    regex, a Lark syntax error): a 400 naming the field and the compiler's reason."""

    def __init__(self, param: str, reason: str) -> None:
        super().__init__(f"{param}: {reason}", param=param)
        self.reason = reason


class TokenConstraint(Protocol):
    """The grammar's state in one generation."""

    def allowed(self) -> npt.NDArray[np.int32]:
        """The tokens that may come next: bit i of word i // 32 (little-endian bit
        order) set for an allowed id; ceil(vocab / 32) words. Only EOS once the grammar
        is complete and nothing may follow."""
        ...

    def advance(self, token: int) -> bool:
        """Take `token` (sampled or forced); False when the grammar refuses it (the
        constraint is then broken and allows nothing more)."""
        ...

    @property
    def complete(self) -> bool:
        """What was taken so far is a whole match (EOS may end the output here)."""
        ...


class ConstraintCompiler(Protocol):
    """Grammars to constraints over one model's vocabulary."""

    def compile(self, grammar: Grammar) -> TokenConstraint:
        """A fresh constraint at the grammar's start; GrammarError when it cannot be
        built (the reason names what is unsupported)."""
        ...
