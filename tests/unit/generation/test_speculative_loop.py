"""The decode loops with a drafter (docs/mtp.md): whatever the drafts, a greedy turn is
the turn decoded without them (text, tokens, events, the state left behind, EOS never
evaluated), and good drafts are verified in blocks."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from tests.support.fake_compute import FakeComputeSession, Script
from tests.support.sessions import prefilled
from tests.unit.generation.byte_tokenizer import VOCAB
from tests.unit.generation.scripts import EOS, PROMPT, TOKENIZER, SpeechScript
from tests.unit.generation.test_generate_tools import BLOCK, ForcedCloseScript

from ds4.domain.engine.session import EngineSession
from ds4.domain.generation.events import Finished, GenerationEvent
from ds4.domain.generation.loop import TurnSettings, decode_tokens, decode_turn
from ds4.domain.sampling import GREEDY, SamplingParams


class ScriptDrafter:
    """Proposes what the script says next, spoiled where `wrong(i)` says (i counts the
    proposals made so far): every proposal right, some wrong, or none right."""

    def __init__(self, compute: FakeComputeSession, script: Script, wrong: str) -> None:
        self.compute, self.script, self.wrong = compute, script, wrong
        self.made = 0
        self.settled: list[tuple[int, int]] = []

    def _spoiled(self) -> bool:
        self.made += 1
        if self.wrong == "none":
            return False
        if self.wrong == "some":
            return self.made % 3 == 0
        return True

    def draft(self, token: int, limit: int) -> list[int]:
        history = [*self.compute.tokens, token]
        out: list[int] = []
        while len(out) < limit:
            step = self.script(history)
            guess = step.token if step is not None else 0
            if self._spoiled():
                guess = (guess + 1) % VOCAB
            out.append(guess)
            history.append(guess)
        return out

    def settle(self, proposed: int, accepted: int) -> None:
        self.settled.append((proposed, accepted))


def decode(
    script: Script,
    settings: TurnSettings,
    wrong: str | None,
    draft: int = 4,
) -> tuple[list[GenerationEvent], FakeComputeSession, list[tuple[int, int]], ScriptDrafter | None]:
    compute = FakeComputeSession(vocab=VOCAB, ctx=2048, script=script)
    drafter = ScriptDrafter(compute, script, wrong) if wrong is not None else None
    session = EngineSession(compute, drafter=drafter, draft=draft)
    prefilled(session, PROMPT)
    seen: list[tuple[int, int]] = []
    events = list(
        decode_turn(
            session,
            TOKENIZER,
            settings,
            prompt_tokens=len(PROMPT),
            on_token=lambda t: seen.append((t, session.pos)),
        )
    )
    return events, compute, seen, drafter


def finished(events: Sequence[GenerationEvent]) -> Finished:
    last = events[-1]
    assert isinstance(last, Finished)
    return last


TEXT = SpeechScript([("Quel ramo del lago di Como, che volge a mezzogiorno.", 30.0)])
STOPPED = (TEXT, TurnSettings(GREEDY, stops=("lago di",)))
CASES: dict[str, tuple[Script, TurnSettings]] = {
    "text": (TEXT, TurnSettings(GREEDY)),
    "stop string": STOPPED,
    "budget": (TEXT, TurnSettings(GREEDY, max_tokens=11)),
    "tool block": (SpeechScript([("Ok.  " + BLOCK + "\n\nAFTER", 30.0)]),
                   TurnSettings(GREEDY, tools_active=True)),
    "forced close": (ForcedCloseScript(), TurnSettings(GREEDY, thinking=True, tools_active=True)),
    "sure sampling": (TEXT, TurnSettings(SamplingParams(temperature=1.0, seed=3))),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("wrong", ["none", "some", "all"])
def test_a_turn_is_the_same_with_any_drafts(case: str, wrong: str) -> None:
    script, settings = CASES[case]
    plain, plain_compute, plain_seen, _ = decode(script, settings, None)
    events, compute, seen, drafter = decode(script, settings, wrong)
    assert events == plain
    assert compute.tokens == plain_compute.tokens  # the state holds exactly the turn
    assert EOS not in compute.evaluated
    assert [t for t, _ in seen] == [t for t, _ in plain_seen] == list(finished(events).tokens)
    assert all(pos >= i for i, (_, pos) in enumerate(seen, start=len(PROMPT) + 1))
    assert drafter is not None and drafter.settled  # drafts were made and verified
    if wrong == "none" and case == "text":
        assert all(accepted == proposed for proposed, accepted in drafter.settled)
        assert max(compute.prefill_calls[1:]) == 5  # a sampled token and its 4 drafts
    if wrong == "all":
        assert all(accepted == 0 for _, accepted in drafter.settled)


def test_drafts_never_reach_past_eos_or_the_budget() -> None:
    script = SpeechScript([("abc", 30.0)])
    _, compute, _, drafter = decode(script, TurnSettings(GREEDY), "none", draft=8)
    assert EOS not in compute.evaluated
    assert drafter is not None
    assert all(proposed <= 2 for proposed, _ in drafter.settled)  # "bc", then EOS is cut


def test_decode_tokens_is_the_same_with_drafts() -> None:
    script = SpeechScript([("una due tre quattro cinque sei sette", 30.0)])
    outs = []
    for wrong in (None, "none", "some", "all"):
        compute = FakeComputeSession(vocab=VOCAB, ctx=512, script=script)
        drafter = ScriptDrafter(compute, script, wrong) if wrong else None
        session = EngineSession(compute, drafter=drafter, draft=3)
        prefilled(session, PROMPT)
        tokens = list(decode_tokens(session, GREEDY, 20, eos=EOS))
        assert list(session.tokens) == PROMPT + tokens
        outs.append(tokens)
    assert outs[1:] == outs[:1] * 3


def test_no_drafts_when_the_request_opts_out() -> None:
    script, settings = CASES["text"]
    off = TurnSettings(GREEDY, speculative=False)
    events, compute, _, drafter = decode(script, off, "none")
    assert drafter is not None and not drafter.settled and drafter.made == 0
    assert set(compute.prefill_calls[1:]) <= {1} and events == decode(script, settings, None)[0]
