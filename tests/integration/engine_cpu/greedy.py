"""A greedy continuation with every step's logits, to compare two backends on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.ports.compute import ModelRunner

N_GREEDY = 64


@dataclass(frozen=True)
class GreedyRun:
    prompt_logits: npt.NDArray[np.float32]  # (len(prompt), V)
    tokens: list[int]  # N_GREEDY greedy picks
    step_logits: npt.NDArray[np.float32]  # (N_GREEDY, V): after each picked token


def greedy_run(runner: ModelRunner, prompt: list[int]) -> GreedyRun:
    session = runner.new_session(len(prompt) + N_GREEDY)
    prompt_logits = session.prefill(prompt, all_logits=True)
    last, tokens, steps = prompt_logits[-1], [], []
    for _ in range(N_GREEDY):
        tokens.append(int(np.argmax(last)))
        last = session.eval(tokens[-1])
        steps.append(last)
    return GreedyRun(prompt_logits, tokens, np.stack(steps))
