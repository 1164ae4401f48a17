"""The in-memory checkpoint store (serving.checkpoints.MemoryCheckpoints, ADR 0049): what it keeps
within its budget, what it evicts, and which entry a prompt continues from.

Checkpoints come from the fake engine (8 bytes per token); a `rewind_history` bounds
how far back a restored state rewinds exactly, as a real state's history does.
"""

from __future__ import annotations

from tests.support.fake_compute import FakeComputeSession
from tests.unit.generation.byte_tokenizer import VOCAB, ByteTokenizer

from ds4.domain.engine.session import EngineSession
from ds4.domain.serving.checkpoints import MemoryCheckpoints

TOK = ByteTokenizer()
OWNER = object()  # one runner: checkpoints move between its sessions


def session(history: int | None = None, ctx: int = 4096) -> EngineSession:
    compute = FakeComputeSession(vocab=VOCAB, ctx=ctx, rewind_history=history, owner=OWNER)
    return EngineSession(compute)


def state(text: str, history: int | None = None) -> EngineSession:
    s = session(history)
    s.extend(TOK.encode(text)).__next__()  # one chunk: the whole text
    return s


def store(budget: int, logged: list[str] | None = None, min_tokens: int = 1) -> MemoryCheckpoints:
    return MemoryCheckpoints(
        budget, TOK, min_tokens=min_tokens, log=(logged.append if logged is not None else print)
    )


def test_the_least_recently_used_go_first_when_the_budget_is_full() -> None:
    logged: list[str] = []
    mem = store(8 * 25, logged)  # room for 25 tokens
    for text in ("aaaaaaaaaa", "bbbbbbbbbb", "cccccccccc"):
        assert mem.add(state(text).checkpoint(), "prompt")
    assert mem.tokens() == [tuple(TOK.encode(t)) for t in ("cccccccccc", "bbbbbbbbbb")]
    assert mem.nbytes == 8 * 20
    assert any("evicted reason=prompt tokens=10" in line for line in logged)


def test_a_hit_is_a_use_that_keeps_an_entry() -> None:
    mem = store(8 * 25)
    mem.add(state("aaaaaaaaaa").checkpoint(), "prompt")
    mem.add(state("bbbbbbbbbb").checkpoint(), "prompt")
    live = session()
    hit = mem.best(live, TOK.encode("aaaaaaaaaa and more"), "aaaaaaaaaa and more")
    assert hit is not None
    mem.taken(hit)
    mem.add(state("cccccccccc").checkpoint(), "prompt")  # evicts b, not the a just used
    kept = sorted(tuple(TOK.encode(t)) for t in ("aaaaaaaaaa", "cccccccccc"))
    assert sorted(mem.tokens()) == kept


def test_the_same_tokens_replace_an_entry_and_too_short_or_too_large_are_skipped() -> None:
    logged: list[str] = []
    mem = store(8 * 12, logged, min_tokens=4)
    assert mem.add(state("aaaaaaaaaa").checkpoint(), "prompt")
    assert mem.add(state("aaaaaaaaaa").checkpoint(), "evict")
    assert mem.tokens() == [tuple(TOK.encode("aaaaaaaaaa"))]
    assert not mem.add(state("abc").checkpoint(), "prompt")  # under min_tokens
    assert not mem.add(state("x" * 13).checkpoint(), "prompt")  # alone over the budget
    assert "needs 104 bytes, budget 96" in logged[-1]
    assert not mem.worth_keeping(TOK.encode("aaaaaaaaaa"))  # already kept
    assert mem.worth_keeping(TOK.encode("bbbbbbbbbb"))
    assert not store(0).worth_keeping(TOK.encode("bbbbbbbbbb"))  # no budget: keep nothing


def test_a_prompt_takes_the_entry_that_keeps_the_most_of_it() -> None:
    mem = store(1 << 20)
    mem.add(state("system prompt, question one").checkpoint(), "prompt")
    mem.add(state("system prompt, question two").checkpoint(), "prompt")
    mem.add(state("another conversation").checkpoint(), "evict")
    prompt = "system prompt, question two, and a follow-up"
    hit = mem.best(session(), TOK.encode(prompt), prompt)
    assert hit is not None and hit.match == "token"
    assert hit.keep == len("system prompt, question two")
    assert hit.tokens == tuple(TOK.encode(prompt))
    assert mem.best(session(), TOK.encode("unrelated"), "unrelated") is None


def test_the_same_prompt_again_keeps_all_of_it_and_an_earlier_end_rewinds() -> None:
    mem = store(1 << 20)
    mem.add(state("the whole prompt").checkpoint(), "prompt")
    again = mem.best(session(), TOK.encode("the whole prompt"), "the whole prompt")
    assert again is not None and again.keep == len("the whole prompt")  # logits current
    shorter = mem.best(session(), TOK.encode("the whole"), "the whole")
    assert shorter is not None and shorter.keep == len("the whole") - 1  # its last redone


def test_a_rewind_beyond_the_kept_history_reaches_nothing() -> None:
    """A state whose history keeps 8 tokens rewinds exactly to the last 8 only."""
    mem = store(1 << 20)
    mem.add(state("0123456789abcdefghij", history=8).checkpoint(), "evict")
    near = "0123456789abcdef!"  # parts 4 tokens before the end: reachable
    far = "0123!"  # parts 16 before the end: out of reach
    hit = mem.best(session(), TOK.encode(near), near)
    assert hit is not None and hit.keep == 16
    assert mem.best(session(), TOK.encode(far), far) is None


def test_a_text_prefix_continues_an_entry_whose_tokens_differ() -> None:
    """Sampled tokens may spell a text that the prompt's tokenization encodes otherwise
    (here the user marker, sampled byte by byte): the entry's tokens plus the rest of
    the prompt, as the live memory-text continuation does."""
    mem = store(1 << 20)
    spelled = session()
    spelled.extend([*TOK.encode("hi "), *"<｜User｜>".encode()]).__next__()
    mem.add(spelled.checkpoint(), "evict")
    prompt = "hi <｜User｜> more"
    tokens = TOK.encode(prompt)
    assert tokens[3] == TOK.special.user  # one token in the prompt, many in the state
    hit = mem.best(session(), tokens, prompt)
    assert hit is not None and hit.match == "text"
    assert hit.keep == len(spelled.tokens)
    assert hit.tokens == (*spelled.tokens, *TOK.encode(" more"))


def test_ties_go_to_a_token_match_then_to_the_most_recent() -> None:
    mem = store(1 << 20)
    mem.add(state("abcdef").checkpoint(), "prompt")
    mem.add(state("abcxyz").checkpoint(), "prompt")
    hit = mem.best(session(), TOK.encode("abcq"), "abcq")
    assert hit is not None and list(hit.checkpoint.tokens) == TOK.encode("abcxyz")


def test_each_entry_goes_to_the_disk_once_most_recent_first() -> None:
    mem = store(1 << 20)
    mem.add(state("first").checkpoint(), "prompt")
    mem.add(state("second").checkpoint(), "prompt")
    taken = mem.take_for_disk()
    assert [list(c.tokens) for c in taken] == [TOK.encode("second"), TOK.encode("first")]
    assert mem.take_for_disk() == []  # another slot's share: nothing left
