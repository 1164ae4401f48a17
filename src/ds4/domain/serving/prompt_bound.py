"""A prompt too long for the context, known without tokenizing it (ADR 0044).

No token covers more than the vocabulary's longest token bytes, and a character is
at least one byte, so a text of n characters has at least ceil(n / longest) tokens.
Past ctx * longest characters the prompt cannot fit, and tokenizing it would only
confirm that at a high price: the tokenizer needs about 30 bytes of memory per byte
of text (a 60 MiB body took 2 GB) and seconds of CPU per 10 MiB.
"""

from __future__ import annotations

from ds4.domain.errors import ContextLengthError
from ds4.ports.tokenizer import Tokenizer


def longest_token_bytes(tokenizer: Tokenizer) -> int:
    """The most bytes one token stands for (128 in DeepSeek V4's vocabulary)."""
    return max((len(tokenizer.token_bytes(i)) for i in range(tokenizer.vocab_size)), default=1)


def tokens_at_least(text: str, longest_token: int) -> int:
    return -(-len(text) // max(longest_token, 1))


def refuse_certain_overflow(text: str, ctx: int, longest_token: int) -> None:
    """ContextLengthError, with the token count's lower bound, for a text too long for
    `ctx` whatever its tokens."""
    least = tokens_at_least(text, longest_token)
    if least >= ctx:
        raise ContextLengthError(least, ctx, lower_bound=True)
