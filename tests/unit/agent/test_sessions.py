"""Saving, listing, switching (restored without prefill), stripping and deleting
sessions, through the domain's library on in-memory stores."""

from __future__ import annotations

from tests.unit.agent.agent_setup import Rig, answer, block, call, make_rig

from ds4.domain.agent.session_meta import session_id
from ds4.domain.agent.slash import SlashCommand


def _run(rig: Rig, name: str, arg: str = "") -> str:
    return str(rig.agent.command(SlashCommand(name, arg)))


def test_nothing_to_save_before_a_user_turn() -> None:
    rig = make_rig([answer("hi")])
    assert _run(rig, "save") == "save failed: nothing to save"


def test_save_then_switch_in_a_new_process_restores_without_prefill() -> None:
    rig = make_rig([block(call("write", path="x", content="1")), answer("Wrote x.")])
    rig.agent.turn("  write   x  ")
    saved = _run(rig, "save")
    sid = session_id("write x", 1_800_000_000)
    assert saved == f"saved session {sid[:8]} ({len(rig.core.conv.tokens)} tokens)"
    assert not rig.core.conv.dirty
    tokens = list(rig.core.conv.tokens)

    other = rig.fresh([answer("Still here.")])
    listing = _run(other, "list")
    assert listing.startswith(f"{sid[:8]} > write x\n")
    assert f"0s ago, {len(tokens)} tokens" in listing
    switched = _run(other, "switch", sid[:5])
    assert switched.startswith(
        f"switched to session {sid[:8]} ({len(tokens)} tokens, restored from its KV file, "
        "0 tokens prefilled)"
    )
    assert "User:\x1b[0m write   x\n" in switched  # the last turns are shown
    assert other.core.conv.tokens == tokens
    assert list(other.core.session.tokens) == tokens
    assert other.core.status.last_prefill == 0
    assert other.core.conv.session_id == sid

    other.agent.turn("and now?")
    assert other.agent.last_answer == "Still here."
    assert other.core.conv.tokens[: len(tokens)] == tokens
    assert other.core.status.last_prefill is not None
    assert other.core.status.last_prefill < 40  # only the new turn was evaluated
    assert _run(other, "save").startswith(f"saved session {sid[:8]}")  # same id re-saved
    assert len(other.index.saved) == 1
    assert len(other.kv.files) == 2  # the system prompt and the session (old file replaced)


def test_strip_keeps_the_text_and_switch_rebuilds_it() -> None:
    rig = make_rig([answer("Hello.")])
    rig.agent.turn("hello")
    _run(rig, "save")
    sid = rig.core.conv.session_id
    assert sid is not None
    n = len(rig.core.conv.tokens)
    assert _run(rig, "strip", sid[:8]) == f"stripped session {sid[:8]} ({n} tokens)"
    assert ", stripped" in _run(rig, "list")
    other = rig.fresh([answer("x")])
    live = other.core.conv.system_len  # the system prompt is in the live state
    switched = _run(other, "switch", sid)
    assert f"({n} tokens, rebuilt from text, " in switched
    assert other.core.status.last_prefill == n - live  # the rest was prefilled again
    assert other.core.conv.tokens == rig.core.conv.tokens


def test_prefix_errors_and_delete() -> None:
    rig = make_rig([answer("a"), answer("b")])
    rig.agent.turn("first")
    _run(rig, "save")
    sid = rig.core.conv.session_id
    assert sid is not None
    assert _run(rig, "switch", "zz") == "switch failed: invalid session SHA prefix"
    miss = "0" if not sid.startswith("0") else "1"
    assert _run(rig, "switch", miss) == f"switch failed: no saved session matches {miss}"
    assert _run(rig, "del", sid[:6]) == f"deleted session {sid[:8]}"
    assert _run(rig, "list") == "no saved sessions\n"
    assert len(rig.kv.files) == 1  # only the system prompt's


def test_system_prompt_kv_is_reused_by_the_next_start() -> None:
    rig = make_rig([answer("a")])
    assert rig.core.status.last_prefill == rig.core.conv.system_len
    other = rig.fresh([answer("b")])
    assert other.core.status.last_prefill == 0
    assert list(other.core.session.tokens) == other.core.conv.tokens
