"""The activations a direction is built from (docs/steering.md): each prompt rendered as
one chat turn, prefilled into a fresh session with the runner capturing one
component's output per layer at the last prompt position."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error
from ds4.ports.compute import ModelRunner
from ds4.ports.steering import Component, Steerable
from ds4.ports.tokenizer import Tokenizer

F32 = npt.NDArray[np.float32]


def capture_prompts(
    runner: ModelRunner,
    tokenizer: Tokenizer,
    prompts: Sequence[str],
    render: Callable[[str], str],
    *,
    ctx: int,
    component: Component,
    done: Callable[[], object] = lambda: None,
) -> list[F32]:
    """One (n_layer, n_embd) capture per prompt; `done()` after each."""
    if not isinstance(runner, Steerable):
        raise Ds4Error("activation capture needs --backend cpu or reference")
    out = []
    runner.capture(component)
    try:
        for prompt in prompts:
            ids = tokenizer.encode(render(prompt))
            if len(ids) > ctx:
                raise Ds4Error(f"a prompt has {len(ids)} tokens, more than --ctx {ctx}")
            runner.new_session(ctx).prefill(ids)
            out.append(runner.captured())
            done()
    finally:
        runner.capture(None)
    return out
