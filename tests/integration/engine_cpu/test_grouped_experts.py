"""The routed experts of a prefill chunk run grouped by expert, through the IQ2_XXS group
tile on the AVX2 and AVX-512 sets (docs/adr/0063-iq2-group-tile.md); a token's logits
must not depend on that: a chunk's prefill equals feeding the same tokens one at a
time (each token's experts then run alone, through the row kernels), bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu import open_cpu_runner

SIMD = [impl for impl in ("avx2", "avx512") if impl in cpu_kernels.available_impls()]


# avx512 with --repack-experts auto runs the Q2_K down products over interleaved rows
# (docs/adr/0067-q2k-row-interleaved-repack.md) in both paths; off keeps the GGUF rows
CASES = [(impl, "off") for impl in SIMD] + [("avx512", "auto")] * ("avx512" in SIMD)


@pytest.mark.skipif(not SIMD, reason="no AVX2 on this CPU")
@pytest.mark.parametrize(("impl", "repack"), CASES)
def test_chunk_prefill_equals_token_by_token(
    tiny_q2: Path, prompt: list[int], impl: str, repack: str
) -> None:
    runner = open_cpu_runner(str(tiny_q2), impl=impl, repack_experts=repack)
    assert (runner.repack.tensors > 0) == (repack == "auto")
    chunk = runner.new_session(256).prefill(prompt)
    one = runner.new_session(256)
    for token in prompt:
        last = one.eval(token)
    assert np.array_equal(chunk, last)
