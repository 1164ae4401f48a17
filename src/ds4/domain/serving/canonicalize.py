"""Post-tool-call canonicalization, the fallback of docs/reference/server.md §6.

After a chat or Anthropic turn that produced tool calls, the live state holds the
prompt plus the *sampled* tokens. When the next request cannot get the sampled DSML
back by exact replay (replay disabled with --disable-exact-dsml-tool-replay, or the
parse left no raw block), it renders the turn from the client's JSON instead, so the
live state is rewritten to that canonical text before the reply goes out: then the
next prompt continues the live tokens. Responses never runs it (docs/reference/server.md §5.3).

Two choices differ from the reference snapshot, both noted in the tests:
* the expected suffix renders the calls canonically even when a sampled block
  exists (the snapshot used the sampled block [QUIRK], which is not what the next
  prompt contains once replay is off);
* a rebuild keeps the longest prefix the engine can rewind to exactly (loop.prefill)
  instead of invalidating everything; the state it ends in is the same.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from enum import Enum

from ds4.domain.chat import EOS, UNTHINK
from ds4.domain.dsml.syntax import ToolCall, render_tool_calls
from ds4.domain.engine.cancel import CancelCheck, CancelledError, never_cancel
from ds4.domain.engine.session import Session
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import Finished, PrefillProgress
from ds4.domain.generation.loop import prefill
from ds4.ports.tokenizer import Tokenizer

Trace = Callable[[str], None]
# Loads the longest disk checkpoint whose text prefixes `rendered` (more than
# `more_than` tokens) into the session; returns the tokens to sync to, or None.
DiskLoad = Callable[[Session, str, int], tuple[int, ...] | None]


class Outcome(Enum):
    ALIGNED = "aligned"  # the live state already is the canonical tokenization
    SAME_TEXT = "same-text"  # same bytes, other BPE split: the sampled state is kept
    SKIPPED = "skipped"  # the live state no longer holds the whole prompt
    EXTENDED = "extended"  # the canonical tokens continue the live ones
    REBUILT = "rebuilt"  # the live tail differed: rewound (or loaded) and re-prefilled
    CANCELLED = "cancelled"
    FAILED = "failed"


def should_canonicalize(
    calls: Sequence[ToolCall], raw_dsml: str | None, exact_replay: bool
) -> bool:
    """Calls exist and the next request cannot replay the sampled block."""
    return bool(calls) and (not exact_replay or not raw_dsml)


def requires_rebuild(live: int, canonical: int, common: int) -> bool:
    """The live tail differs from the canonical tokens (any inconsistent count too)."""
    if min(live, canonical, common) < 0 or common > live or common > canonical:
        return True
    return common < live


def checkpoint_suffix(finished: Finished, thinking: bool) -> str:
    """What the next prompt renders after this prompt for the turn: the reasoning is
    kept (a turn with calls is tool context), then the answer, the calls and EOS."""
    head = (finished.reasoning or "") + UNTHINK if thinking else ""
    return head + finished.content + render_tool_calls(finished.tool_calls) + EOS


def canonicalize_tool_checkpoint(
    session: Session,
    tokenizer: Tokenizer,
    rendered: str,
    prompt_tokens: int,
    *,
    disk_load: DiskLoad | None = None,
    trace: Trace = lambda _line: None,
    cancel: CancelCheck = never_cancel,
) -> Generator[PrefillProgress, None, Outcome]:
    """Rewrite the live state to tokenize(rendered) = prompt_text + checkpoint_suffix.

    Yields progress while it prefills (the HTTP layer only keeps the stream alive);
    never raises for an engine failure: the reply goes out whatever happens here.
    """
    canonical = tuple(tokenizer.encode(rendered))
    pos = session.pos
    common = session.common_prefix(canonical)
    if common == pos == len(canonical):
        return Outcome.ALIGNED
    if tokenizer.decode(session.tokens) == rendered:
        return Outcome.SAME_TEXT
    if common < prompt_tokens:
        trace(
            f"--- tool checkpoint canonicalization skipped: common={common} "
            f"< prompt={prompt_tokens} ---"
        )
        return Outcome.SKIPPED
    target, outcome = canonical, Outcome.EXTENDED
    try:
        if requires_rebuild(pos, len(canonical), common):
            outcome = Outcome.REBUILT
            trace(
                f"--- tool checkpoint canonicalization needs {len(canonical) - common} tokens "
                f"rebuild live={pos} canonical={len(canonical)} common={common} ---"
            )
            loaded = disk_load(session, rendered, common) if disk_load is not None else None
            target = loaded if loaded is not None else canonical
        reused = yield from prefill(session, target, cancel=cancel)
    except CancelledError:
        trace("--- tool checkpoint canonicalization cancelled ---")
        return Outcome.CANCELLED
    except Ds4Error as exc:
        trace(f"--- tool checkpoint canonicalization failed: {exc} ---")
        return Outcome.FAILED
    if outcome is Outcome.REBUILT:
        trace(
            f"--- tool checkpoint canonicalization rebuild done reused={reused} "
            f"evaluated={len(target) - reused} ---"
        )
    return outcome
