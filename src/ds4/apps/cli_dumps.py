"""`--dump-logits` (.npy) and `--dump-logprobs` (JSON, docs/reference/cli-and-bench.md §3), written
atomically."""

from __future__ import annotations

import io
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.sampling import StepLogprobs, argmax
from ds4.ports.tokenizer import Tokenizer

MAX_LOGPROBS_TOP_K = 128


def write_atomically(path: str, data: bytes) -> None:
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        Path(tmp).replace(target)
    except OSError as exc:
        raise Ds4Error(f"cannot write {path}: {exc.strerror or exc}") from None


def dump_logits(path: str, logits: npt.NDArray[np.float32]) -> None:
    """float32 [n_prompt_tokens, n_vocab]: the logits after every prompt position."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(logits, dtype=np.float32))
    write_atomically(path, buffer.getvalue())


def _json_text(raw: bytes) -> str:
    """docs/reference/cli-and-bench.md §3 escaping: invalid UTF-8 writes every byte >= 0x80 as
    \\u00XX."""
    try:
        chars = raw.decode("utf-8")
        high_as_escape = False
    except UnicodeDecodeError:
        chars = raw.decode("latin-1")
        high_as_escape = True
    out = ['"']
    for ch in chars:
        cp = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif cp < 0x20 or (high_as_escape and cp >= 0x80):
            out.append(f"\\u{cp:04x}")
        else:
            out.append(ch)
    return "".join(out) + '"'


def _token(tokenizer: Tokenizer, token: int) -> str:
    raw = tokenizer.token_bytes(token)
    return f'{{"id":{token},"text":{_json_text(raw)},"bytes":[{",".join(map(str, raw))}]}}'


def _g9(value: float) -> str:
    return f"{value:.9g}" if math.isfinite(value) else "null"


def logprobs_step(
    tokenizer: Tokenizer, step: int, logits: npt.NDArray[np.float32], top_k: int
) -> tuple[str, int]:
    """One step's JSON and the selected (argmax) token."""
    selected = argmax(logits)
    entries = [
        f'{{"token":{_token(tokenizer, entry.id)},"logit":{_g9(entry.logit)},'
        f'"logprob":{_g9(entry.logprob)}}}'
        for entry in StepLogprobs(logits).top(top_k)
    ]
    body = (
        f'{{"step":{step},"selected":{_token(tokenizer, selected)},'
        f'"top_logprobs":[{",".join(entries)}]}}'
    )
    return body, selected


def dump_logprobs(
    path: str,
    session: EngineSession,
    tokenizer: Tokenizer,
    *,
    prompt_tokens: int,
    max_steps: int,
    top_k: int,
    cancel: Callable[[], bool],
) -> int:
    """Greedy continuation with the top-k alternatives at each step; returns steps written."""
    if not 1 <= top_k <= MAX_LOGPROBS_TOP_K:
        raise Ds4Error(f"--logprobs-top-k {top_k} is not in 1..{MAX_LOGPROBS_TOP_K}")
    k = top_k
    steps: list[str] = []
    logits = session.logits()
    eos = tokenizer.special.eos
    budget = max(0, min(max_steps, session.ctx - session.pos))
    for step in range(budget):
        if cancel():
            break
        body, selected = logprobs_step(tokenizer, step, logits, k)
        steps.append(body)
        if selected == eos or step + 1 == budget:
            break
        logits = session.eval(selected)
    head = f'{{"source":"ds4","prompt_tokens":{prompt_tokens},"ctx":{session.ctx},"top_k":{k},'
    text = head + '"steps":[\n' + ",\n".join(steps) + "\n]}\n"
    write_atomically(path, text.encode())
    return len(steps)
