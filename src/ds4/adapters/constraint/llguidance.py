"""The ConstraintCompiler on llguidance (docs/structured-outputs.md).

llguidance is given DeepSeek V4's vocabulary once per tokenizer (`lltokenizer`, kept
on the tokenizer object): every id's bytes, with the control tokens (BOS, EOS, the
role and think markers, the place holders) marked special so no grammar text can be
spelled with them; the `｜DSML｜` marker keeps its text, because the model writes the
DSML tags with it. Schemas compile compact (no whitespace between JSON tokens unless
the schema's `x-guidance` asks for it), so a rambling model cannot fill its budget
with blank space.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

import llguidance
import numpy as np
import numpy.typing as npt
from llguidance.gbnf_to_lark import any_to_lark

from ds4.ports.constraint import Grammar, GrammarError, TokenConstraint
from ds4.ports.tokenizer import Tokenizer

_COMPACT: dict[str, object] = {"whitespace_flexible": False}
_SPECIAL_PREFIX = b"\xff"  # llguidance's mark of a special token's bytes

_CACHE: weakref.WeakKeyDictionary[object, llguidance.LLTokenizer] = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()


class _Vocabulary:
    """What llguidance's TokenizerWrapper reads from a tokenizer."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        special = tokenizer.special
        self.eos_token_id = special.eos
        self.bos_token_id = special.bos
        control = [
            i for i in range(tokenizer.vocab_size) if tokenizer.is_added(i) and i != special.dsml
        ]
        marked = set(control)
        self.special_token_ids = control
        self.tokens = [
            _SPECIAL_PREFIX + tokenizer.token_bytes(i) if i in marked else tokenizer.token_bytes(i)
            for i in range(tokenizer.vocab_size)
        ]
        self._tokenizer = tokenizer

    def __call__(self, text: bytes | str) -> Sequence[int]:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        return self._tokenizer.encode(text)


def lltokenizer(tokenizer: Tokenizer) -> llguidance.LLTokenizer:
    """llguidance's view of `tokenizer`, built once (~0.5 s for 129 280 ids)."""
    with _CACHE_LOCK:
        cached = _CACHE.get(tokenizer)
        if cached is None:
            wrapper = llguidance.TokenizerWrapper(_Vocabulary(tokenizer))
            cached = llguidance.LLTokenizer(wrapper)
            _CACHE[tokenizer] = cached
        return cached


def grammar_text(grammar: Grammar) -> str:
    """The llguidance grammar of a Grammar value."""
    if grammar.kind == "json_schema":
        try:
            return llguidance.LLMatcher.grammar_from_json_schema(grammar.source, defaults=_COMPACT)  # type: ignore[arg-type]
        except ValueError as error:
            raise GrammarError(grammar.param, f"not a JSON schema: {error}") from None
    if grammar.kind == "regex":
        return llguidance.LLMatcher.grammar_from_regex(grammar.source)
    if grammar.kind == "gbnf":
        try:
            return llguidance.LLMatcher.grammar_from_lark(any_to_lark(grammar.source))
        except Exception as error:  # the converter raises whatever its parser does
            raise GrammarError(grammar.param, f"not a GBNF grammar: {error}") from None
    return llguidance.LLMatcher.grammar_from_lark(grammar.source)


def _reason(message: str) -> str:
    """The first line of llguidance's message (the rest is parser state)."""
    line = message.strip().splitlines()[0] if message.strip() else "invalid grammar"
    return line.removeprefix("Error: ")


class LlguidanceConstraint:
    """One generation's matcher; `allowed` reuses one mask buffer."""

    def __init__(self, matcher: llguidance.LLMatcher, vocab: int) -> None:
        self._matcher = matcher
        self._mask = np.zeros((vocab + 31) // 32, dtype=np.int32)

    def allowed(self) -> npt.NDArray[np.int32]:
        self._matcher.unsafe_compute_mask_ptr(self._mask.ctypes.data, self._mask.nbytes)
        return self._mask

    def advance(self, token: int) -> bool:
        return bool(self._matcher.consume_token(token))

    @property
    def complete(self) -> bool:
        return bool(self._matcher.is_accepting())

    @property
    def error(self) -> str:
        return str(self._matcher.get_error())


class LlguidanceCompiler:
    """Grammars to llguidance matchers over one tokenizer's vocabulary."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer  # llguidance's view is built at the first compile

    def compile(self, grammar: Grammar) -> TokenConstraint:
        text = grammar_text(grammar)
        vocabulary = lltokenizer(self._tokenizer)
        problem = llguidance.LLMatcher.validate_grammar(text, vocabulary)
        if problem and not problem.startswith("WARNING"):
            raise GrammarError(grammar.param, _reason(problem))
        matcher = llguidance.LLMatcher(vocabulary, text, log_level=0)
        if matcher.is_error():
            raise GrammarError(grammar.param, _reason(matcher.get_error()))
        return LlguidanceConstraint(matcher, self._tokenizer.vocab_size)
