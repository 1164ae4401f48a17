"""The footer line, session ids, prefixes, ages and the /list layout."""

from __future__ import annotations

import hashlib
import struct

import pytest

from ds4.domain.agent.screen import AgentState, AgentStatus, footer_text, progress_bar, short_count
from ds4.domain.agent.session_meta import (
    SessionRecord,
    age_text,
    listing_text,
    normalize_title,
    resolve_prefix,
    session_id,
)
from ds4.domain.errors import Ds4Error


def test_counts_and_bar() -> None:
    assert [short_count(n) for n in (999, 1000, 1234, 32000, 100000)] == [
        "999", "1k", "1.2k", "32k", "100k",
    ]  # fmt: skip
    bar = progress_bar(1, 100, "50t/s")
    assert len(bar) == 32 and bar.startswith("▶·50t/s") and bar.count("▶") == 1
    assert progress_bar(100, 100, "9t/s") == "▶" * 32


def test_footer_per_state() -> None:
    base = AgentStatus(ctx_used=1500, ctx_size=100000)
    assert footer_text(base) == "ctx 1.5k/100k | starting"
    assert footer_text(AgentStatus(AgentState.IDLE, 10, 20, last_prefill=0)) == (
        "ctx 10/20 | idle | last prefill 0 tokens"
    )
    gen = AgentStatus(AgentState.GENERATING, 10, 20, generated=5, gen_tps=12.34)
    assert footer_text(gen) == "ctx 10/20 | generation 5 tokens 12.3 t/s"
    pre = AgentStatus(
        AgentState.PREFILL, 10, 20, prefill_done=50, prefill_total=200, prefill_tps=99
    )
    assert footer_text(pre).startswith("ctx 10/20 | reading [▶▶▶▶▶▶▶▶·99t/s")
    assert footer_text(pre).endswith("] 50/200 25.0%")
    err = AgentStatus(AgentState.ERROR, 1, 2, error="boom")
    assert footer_text(err) == "ctx 1/2 | error: boom"
    assert footer_text(AgentStatus(AgentState.TOOL, 1, 2, tool="bash")) == "ctx 1/2 | running bash"


def test_session_id_is_sha1_of_title_and_creation_time() -> None:
    title = normalize_title("  fix   the\n build ")
    assert title == "fix the build"
    expected = hashlib.sha1(b"fix the build" + struct.pack("<Q", 1700000000)).hexdigest()
    assert session_id(title, 1700000000) == expected


def test_prefix_resolution() -> None:
    ids = ["abc" + "0" * 37, "abd" + "0" * 37]
    assert resolve_prefix("ABC", ids) == ids[0]
    with pytest.raises(Ds4Error, match="ambiguous"):
        resolve_prefix("ab", ids)
    with pytest.raises(Ds4Error, match="no saved session matches ff"):
        resolve_prefix("ff", ids)
    with pytest.raises(Ds4Error, match="invalid session SHA prefix"):
        resolve_prefix("xyz", ids)
    with pytest.raises(Ds4Error, match="invalid session SHA prefix"):
        resolve_prefix("a" * 41, ids)


def test_ages_and_listing() -> None:
    assert [age_text(s) for s in (5, 90, 7200, 200000)] == ["5s ago", "1m ago", "2h ago", "2d ago"]
    rec = SessionRecord("ab" * 20, "t" * 100, 0, 940, 812, 4096, 7, 2, "c" * 40, 0)
    text = listing_text([rec], 1000, {rec.id: 2_500_000})
    assert text.splitlines()[0] == "abababab > " + "t" * 69 + "..."
    assert text.splitlines()[1] == "         > 1m ago, 812 tokens, 2.50 MB, stripped"
    assert text.endswith("/strip <id> to strip KV cache.\n")
    assert listing_text([], 0, {}) == "no saved sessions\n"
