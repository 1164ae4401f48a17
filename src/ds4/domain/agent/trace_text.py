"""The --trace file's escaping and token records (docs/agent.md "Trace")."""

from __future__ import annotations

from collections.abc import Sequence

from ds4.ports.tokenizer import Tokenizer

_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"'}


def escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def text_record(label: str, text: str) -> str:
    return f'{label}="{escape(text)}"'


def token_records(tokenizer: Tokenizer, label: str, start: int, ids: Sequence[int]) -> list[str]:
    lines = [f"tokens label={label} start={start} len={len(ids)}"]
    for i, token in enumerate(ids):
        raw = tokenizer.token_bytes(token)
        shown = escape(raw.decode("utf-8", errors="replace"))
        lines.append(
            f'token index={start + i} id={token} bytes={len(raw)} text="{shown}" hex={raw.hex()}'
        )
    return lines
