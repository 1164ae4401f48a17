"""`--numerics exact`: the native CPU path in docs/reference/model.md §4.5's strict operation order.

Checked bit for bit against the numpy reference engine switched to the same order
(tests/support/strict_reference.py): two implementations with different structure
(layer-major numpy over chunks vs one native call per layer) that agree on every bit
of every logit, over the window wrap, compressed rows of both ratios, the indexer's
top-k and 64 greedy steps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.integration.engine_cpu.greedy import greedy_run
from tests.support.strict_reference import use_strict_reference

from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.adapters.compute.reference import open_reference_runner
from ds4.domain.errors import Ds4Error


def test_exact_greedy_run_equals_the_strict_reference(
    tiny_q2: Path, prompt: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    got = greedy_run(open_cpu_runner(str(tiny_q2), numerics="exact"), prompt)
    use_strict_reference(monkeypatch)
    want = greedy_run(open_reference_runner(str(tiny_q2), numerics="ds4"), prompt)
    assert np.array_equal(got.prompt_logits, want.prompt_logits)
    assert got.tokens == want.tokens
    assert np.array_equal(got.step_logits, want.step_logits)


def test_exact_covers_every_layer_kind(
    tiny_all_kinds: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """132 tokens: past the first ratio-128 emission (token 127) and deep into top-k."""
    tokens = [int(t) for t in np.random.default_rng(5).integers(0, 129_280, 132)]
    got = open_cpu_runner(str(tiny_all_kinds), numerics="exact").new_session(256)
    got_logits = got.prefill(tokens, all_logits=True)
    use_strict_reference(monkeypatch)
    want = open_reference_runner(str(tiny_all_kinds), numerics="ds4").new_session(256)
    want_logits = want.prefill(tokens, all_logits=True)
    assert np.array_equal(got_logits, want_logits)
    assert got.payload() == want.payload()


def test_exact_does_not_depend_on_chunking_or_threads(tiny_all_kinds: Path) -> None:
    tokens = [int(t) for t in np.random.default_rng(6).integers(0, 129_280, 40)]
    one_pass = open_cpu_runner(str(tiny_all_kinds), numerics="exact", threads=2)
    whole = one_pass.new_session(64).prefill(tokens, all_logits=True)
    stepwise = open_cpu_runner(str(tiny_all_kinds), numerics="exact", threads=1).new_session(64)
    steps = [stepwise.prefill(tokens[:5])] + [stepwise.eval(t) for t in tokens[5:]]
    assert np.array_equal(whole[4:], np.stack(steps))


def test_exact_is_refused_by_the_reference_backend(tiny_q2: Path) -> None:
    with pytest.raises(Ds4Error, match="--backend cpu"):
        open_reference_runner(str(tiny_q2), numerics="exact")
