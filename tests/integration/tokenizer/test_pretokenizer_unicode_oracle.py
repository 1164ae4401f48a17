"""Every code point is classified as HF `tokenizers` (Oniguruma, Unicode 16.0) does."""

from __future__ import annotations

import pytest
from tests.integration.tokenizer.tokenizer_oracle import hf

from ds4.adapters.tokenizer.bpe import native_pretokenize
from ds4.adapters.tokenizer.pretokenize import pretokenize

PROBES = ("x{c}\n", "{c}x", " {c}{c}!", "あ{c}ア\n")


def spans(pieces: list[str]) -> list[tuple[int, int]]:
    out, pos = [], 0
    for piece in pieces:
        out.append((pos, pos + len(piece)))
        pos += len(piece)
    return out


def mismatching(code_points: range | list[int]) -> list[str]:
    pre = hf().pre_tokenizer
    bad = []
    for cp in code_points:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        for probe in PROBES:
            text = probe.format(c=chr(cp))
            theirs = [offsets for _, offsets in pre.pre_tokenize_str(text)]
            ours = spans(native_pretokenize(text))
            if ours != theirs or spans(pretokenize(text)) != theirs:
                bad.append(f"U+{cp:04X} in {probe!r}")
                break
    return bad


def test_sampled_code_points_and_all_of_ascii_and_kana() -> None:
    sample = [*range(0x300), *range(0x3000, 0x3100), *range(0x300, 0x110000, 97)]
    assert mismatching(sample) == []


@pytest.mark.slow
def test_every_code_point() -> None:
    assert mismatching(range(0x110000)) == []
