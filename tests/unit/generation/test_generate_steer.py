"""decode_turn's steer hook: a forced token replaces the sampled one, is evaluated and
decoded like any other, and the hook sees the count and the reasoning state."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from tests.support.sessions import prefilled
from tests.unit.generation.scripts import PROMPT, TOKENIZER, speaking

from ds4.domain.generation.events import Finished
from ds4.domain.generation.loop import TurnSettings, decode_turn

THINK_CLOSE = TOKENIZER.special.think_close


Steer = Callable[[npt.NDArray[np.float32], int, bool], int | None]


def run(
    text: str, steer: Steer | None, thinking: bool = True, max_tokens: int = 50
) -> tuple[Finished, list[int]]:
    session, _ = speaking(text)
    prefilled(session, PROMPT)
    settings = TurnSettings(max_tokens=max_tokens, thinking=thinking)
    evaluated: list[int] = []
    events = list(
        decode_turn(
            session, TOKENIZER, settings, prompt_tokens=len(PROMPT), on_token=evaluated.append,
            steer=steer,
        )
    )  # fmt: skip
    finished = events[-1]
    assert isinstance(finished, Finished)
    return finished, evaluated


def test_a_forced_token_is_emitted_instead_of_the_sample() -> None:
    seen: list[tuple[int, bool]] = []

    def steer(logits: npt.NDArray[np.float32], generated: int, reasoning: bool) -> int | None:
        seen.append((generated, reasoning))
        return THINK_CLOSE if generated == 3 else None

    finished, evaluated = run("abcdefg", steer)
    assert finished.text == "abc</think>efg"  # the 4th sampled token was replaced
    assert evaluated[3] == THINK_CLOSE
    assert finished.reasoning == "abc" and finished.content == "efg"
    assert seen[:5] == [(0, True), (1, True), (2, True), (3, True), (4, False)]


def test_no_steer_is_the_plain_loop() -> None:
    plain, _ = run("abc", None)
    steered, _ = run("abc", lambda logits, generated, reasoning: None)
    assert plain.text == steered.text == "abc"


def test_a_forced_token_never_counts_as_eos() -> None:
    def steer(logits: npt.NDArray[np.float32], generated: int, reasoning: bool) -> int | None:
        return TOKENIZER.encode("z")[0] if generated < 4 else None

    finished, _ = run("", steer, thinking=False)
    assert finished.text == "zzzz"
    assert finished.finish == "stop"  # then the model's own EOS
