"""What a split model must reproduce: the same session driven on two runners."""

from __future__ import annotations

import numpy as np

from ds4.ports.compute import ComputeSession

CTX = 160


def greedy(session: ComputeSession, steps: int) -> tuple[list[int], np.ndarray]:
    """Pick the argmax `steps` times from the session's current logits."""
    tokens, logits = [], []
    last = session.logits()
    for _ in range(steps):
        tokens.append(int(np.argmax(last)))
        last = session.eval(tokens[-1])
        logits.append(last)
    return tokens, np.stack(logits)


def assert_same_session(a: ComputeSession, b: ComputeSession) -> None:
    assert list(a.tokens) == list(b.tokens)
    assert np.array_equal(a.logits(), b.logits())
    assert a.payload() == b.payload()
