"""The tokenizer endpoints (docs/reference/server.md "Tokenizer endpoints"): GET
/tokenizer_info, POST /tokenize and POST /detokenize, in the shapes vLLM serves, which
lm-evaluation-harness's `tokenizer_backend=remote` reads to count a log-likelihood
request's context in the server's own tokens (docs/lm-eval.md).

The text is tokenized as it is: no chat template, and `add_special_tokens` adds the
BOS token in front when true (the default false is what the harness sends). Bodies go
through the same bounding decode as every other POST (requests.decode_body); token
ids outside the vocabulary and an over-long prompt are 400s naming the field.
"""

from __future__ import annotations

import msgspec

from ds4.domain.errors import ContextLengthError, RequestError
from ds4.domain.serving.prepare import refuse_certain_overflow
from ds4.ports.tokenizer import Tokenizer
from ds4.wire.replies import json_body
from ds4.wire.requests import decode_body

TOKENIZER_INFO_PATH = "/tokenizer_info"
TOKENIZE_PATH = "/tokenize"
DETOKENIZE_PATH = "/detokenize"


class TokenizeBody(msgspec.Struct):
    prompt: str | None = None
    add_special_tokens: bool = False


class DetokenizeBody(msgspec.Struct):
    tokens: list[int] | None = None


def tokenizer_info_body(tokenizer: Tokenizer, ctx: int) -> bytes:
    special = tokenizer.special
    return json_body(
        {
            "tokenizer_class": "ds4",
            "bos_token": _text(tokenizer, special.bos),
            "eos_token": _text(tokenizer, special.eos),
            "model_max_length": ctx,
            "vocab_size": tokenizer.vocab_size,
        }
    )


def _text(tokenizer: Tokenizer, token: int) -> str:
    return tokenizer.token_bytes(token).decode("utf-8", errors="replace")


def tokenize_body(
    body: bytes, tokenizer: Tokenizer, ctx: int, longest_token: int | None = None
) -> bytes:
    request = decode_body(body, TokenizeBody)
    if request.prompt is None:
        raise RequestError("missing prompt", param="prompt")
    if longest_token is not None:
        refuse_certain_overflow(request.prompt, ctx, longest_token)
    tokens = list(tokenizer.encode(request.prompt))
    if request.add_special_tokens:
        tokens.insert(0, tokenizer.special.bos)
    if len(tokens) > ctx:
        raise ContextLengthError(len(tokens), ctx)
    return json_body({"count": len(tokens), "max_model_len": ctx, "tokens": tokens})


def detokenize_body(body: bytes, tokenizer: Tokenizer) -> bytes:
    request = decode_body(body, DetokenizeBody)
    if request.tokens is None:
        raise RequestError("missing tokens", param="tokens")
    bad = next((t for t in request.tokens if not 0 <= t < tokenizer.vocab_size), None)
    if bad is not None:
        raise RequestError(
            f"tokens: id {bad} is not in the vocabulary (0..{tokenizer.vocab_size - 1})",
            param="tokens",
        )
    return json_body({"prompt": tokenizer.decode(request.tokens)})
