"""MTP speculative decoding on the real backends (docs/mtp.md): greedy output is the same
with and without drafts on every backend and numerics, on the demo model's trained
MTP head (which the model accepts about half the time) and on a random tiny model with
a random MTP block (accepted almost never); the block's window cache after many
verified blocks and rewinds equals one rebuilt from scratch."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tools.demo.files import GOLDENS

from ds4.apps.bootstrap import Engine, load_engine
from ds4.apps.options import EngineOptions
from ds4.domain.engine.session import EngineSession
from ds4.domain.generation.loop import TurnSettings, decode_tokens, decode_turn, prefill
from ds4.domain.sampling import GREEDY, SamplingParams
from ds4.domain.speculative import MtpDrafter

ROOT = Path(__file__).resolve().parents[3]
DEMO, DEMO_MTP = ROOT / "models" / "demo.gguf", ROOT / "models" / "demo-mtp.gguf"
OPENING = json.loads(GOLDENS.read_text(encoding="utf-8"))["openings"][0]
TINY_CONFIGS = [
    ("cpu", "ds4"),
    pytest.param("cpu", "exact", marks=pytest.mark.slow),
    pytest.param("reference", "ds4", marks=pytest.mark.slow),
]
CONFIGS = [
    ("cpu", "exact"),
    ("cpu", "ds4"),
    pytest.param("cpu", "fp32", marks=pytest.mark.slow),
    ("reference", "ds4"),
    pytest.param("reference", "fp32", marks=pytest.mark.slow),
]


def engine(model: Path, mtp: Path, backend: str, numerics: str) -> Engine:
    return load_engine(
        EngineOptions(str(model), backend=backend, numerics=numerics, threads=2, mtp=str(mtp))
    )


def greedy(
    engine: Engine, ids: list[int], n: int, speculative: bool
) -> tuple[list[int], EngineSession]:
    compute = engine.runner.new_session(512)
    session = engine.session_over(compute) if speculative else EngineSession(compute)
    for _ in prefill(session, ids):
        pass
    return list(decode_tokens(session, GREEDY, n, eos=-1)), session


def stats(session: EngineSession) -> tuple[int, int]:
    assert isinstance(session.drafter, MtpDrafter)
    return session.drafter.stats.proposed, session.drafter.stats.accepted


@pytest.mark.parametrize(("backend", "numerics"), CONFIGS)
def test_demo_greedy_output_is_the_same_with_its_mtp_head(backend: str, numerics: str) -> None:
    e = engine(DEMO, DEMO_MTP, backend, numerics)
    ids = e.tokenizer.encode(OPENING)
    n = 32 if backend == "cpu" else 12
    plain, _ = greedy(e, ids, n, speculative=False)
    fast, session = greedy(e, ids, n, speculative=True)
    assert fast == plain
    proposed, accepted = stats(session)
    assert proposed > 0 and accepted / proposed > 0.25  # a trained head: often right


@pytest.mark.parametrize(("backend", "numerics"), TINY_CONFIGS)
def test_random_tiny_greedy_output_is_the_same_with_a_random_block(
    tiny_with_mtp: tuple[Path, Path], backend: str, numerics: str
) -> None:
    model, mtp = tiny_with_mtp
    e = engine(model, mtp, backend, numerics)
    ids = e.tokenizer.encode("Hello there, a random model")
    n = 24 if backend == "cpu" else 8
    plain, _ = greedy(e, ids, n, speculative=False)
    fast, session = greedy(e, ids, n, speculative=True)
    assert fast == plain
    proposed, accepted = stats(session)
    assert proposed > 0 and accepted / proposed < 0.1  # a random head: nearly never


def test_a_chat_turn_is_the_same_with_mtp() -> None:
    e = engine(DEMO, DEMO_MTP, "cpu", "ds4")
    prompt = e.tokenizer.encode(
        "<｜begin▁of▁sentence｜><｜User｜>Continua: " + OPENING + "<｜Assistant｜><think>"
    )
    finals = []
    for speculative in (False, True):
        compute = e.runner.new_session(1024)
        session = e.session_over(compute) if speculative else EngineSession(compute)
        for _ in prefill(session, prompt):
            pass
        settings = TurnSettings(GREEDY, max_tokens=60, thinking=True)
        events = list(decode_turn(session, e.tokenizer, settings, prompt_tokens=len(prompt)))
        finals.append((events[-1], tuple(session.tokens)))
    assert finals[0] == finals[1]


@pytest.mark.parametrize(("backend", "numerics"), [("cpu", "exact"), ("cpu", "ds4")])
def test_the_blocks_window_cache_equals_one_rebuilt_from_scratch(
    backend: str, numerics: str
) -> None:
    """After verified blocks, a checkpoint restore and other tokens decoded where rows
    had been computed, the next drafts are those of a fresh drafter on a fresh session
    holding the same tokens."""
    e = engine(DEMO, DEMO_MTP, backend, numerics)
    ids = e.tokenizer.encode(OPENING)
    compute = e.runner.new_session(512)
    assert isinstance(compute, EngineSession)
    session = e.session_over(compute)
    for _ in prefill(session, ids):
        pass
    out = list(decode_tokens(session, GREEDY, 20, eos=-1))
    cp = compute.checkpoint()
    list(decode_tokens(session, GREEDY, 20, eos=-1))  # rows for 20 more positions
    compute.restore(cp)  # back 20 tokens; then other tokens in their place, undrafted
    out += decode_tokens(
        EngineSession(compute), SamplingParams(temperature=1.5, seed=5), 20, eos=-1
    )
    assert list(compute.tokens) == [*ids, *out]
    _, fresh = greedy(e, [*ids, *out], 0, speculative=True)
    mine, theirs = session.drafter, fresh.drafter
    assert isinstance(mine, MtpDrafter) and isinstance(theirs, MtpDrafter)
    for token in (out[-1], 14):
        assert mine.draft(token, 4) == theirs.draft(token, 4)
        assert mine.first_logits is not None and theirs.first_logits is not None
        assert np.array_equal(mine.first_logits, theirs.first_logits)


def test_sampled_decoding_with_mtp_runs_and_keeps_its_seed() -> None:
    e = engine(DEMO, DEMO_MTP, "cpu", "ds4")
    ids = e.tokenizer.encode(OPENING)
    runs = []
    for _ in range(2):
        compute = e.runner.new_session(512)
        session = e.session_over(compute)
        for _ in prefill(session, ids):
            pass
        runs.append(list(decode_tokens(session, SamplingParams(0.8, seed=9), 24, eos=-1)))
    assert runs[0] == runs[1] and len(runs[0]) == 24  # reproducible from the seed
