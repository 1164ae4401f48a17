"""Post-tool-call canonicalization (docs/reference/server.md §6) over a
fake engine and a one-token-per-character tokenizer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from tests.support.fake_compute import FakeComputeSession
from tests.support.sessions import prefilled

from ds4.domain.chat import (
    EOS,
    AssistantMessage,
    Message,
    ThinkMode,
    ToolResultMessage,
    UserMessage,
    render_chat,
    tool_schema,
)
from ds4.domain.dsml.syntax import ToolCall, render_tool_calls
from ds4.domain.engine.session import EngineSession
from ds4.domain.generation.events import Finished, Usage
from ds4.domain.serving.job import (
    CanonicalOutcome,
    canonicalize_tool_checkpoint,
    checkpoint_suffix,
    requires_rebuild,
    should_canonicalize,
)
from ds4.ports.tokenizer import Tokenizer

D = "｜DSML｜"
CALL = ToolCall("bash", '{"command":"ls","timeout":10}', "call_a")
# The model wrote the parameters in another order: exact replay would keep this.
SAMPLED = (
    f'\n\n<{D}tool_calls>\n<{D}invoke name="bash">\n'
    f'<{D}parameter name="timeout" string="false">10</{D}parameter>\n'
    f'<{D}parameter name="command" string="true">ls</{D}parameter>\n'
    f"</{D}invoke>\n</{D}tool_calls>"
)
MERGED = 1  # the id of the two-character token "ab"


class CharTokenizer:
    """One token per character (ids handed out in order of first sight), except that
    decode also knows MERGED = "ab", so two token lists can spell the same text."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.chars: dict[int, str] = {MERGED: "ab"}

    def encode(self, text: str) -> list[int]:
        out = []
        for char in text:
            if char not in self.ids:
                self.ids[char] = len(self.ids) + 2
                self.chars[self.ids[char]] = char
            out.append(self.ids[char])
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.chars[i] for i in ids)


def finished(raw: str | None = SAMPLED) -> Finished:
    return Finished("tool_calls", "Listing.", "need files", (CALL,), Usage(1, 0, 1), raw_dsml=raw)


def run(
    session: EngineSession, tokenizer: CharTokenizer, rendered: str, prompt: int, **kwargs: object
) -> tuple[CanonicalOutcome, int]:
    generator = canonicalize_tool_checkpoint(
        session,
        cast(Tokenizer, tokenizer),
        rendered,
        prompt,
        **kwargs,  # type: ignore[arg-type]
    )
    progress = 0
    while True:
        try:
            next(generator)
            progress += 1
        except StopIteration as done:
            return done.value, progress


def live(
    text: str, tokenizer: CharTokenizer, *, ctx: int = 512, rewind_step: int = 1
) -> tuple[EngineSession, FakeComputeSession]:
    compute = FakeComputeSession(vocab=512, ctx=ctx, rewind_step=rewind_step)
    session = EngineSession(compute)
    prefilled(session, tokenizer.encode(text))
    compute.evaluated.clear()
    return session, compute


def test_gate_runs_only_without_exact_replay_a66() -> None:
    assert not should_canonicalize([CALL], SAMPLED, exact_replay=True)
    assert should_canonicalize([CALL], SAMPLED, exact_replay=False)
    assert should_canonicalize([CALL], None, exact_replay=True)
    assert not should_canonicalize([], None, exact_replay=False)


def test_requires_rebuild_when_the_live_tail_changes_a75() -> None:
    assert requires_rebuild(19296, 19290, 19081)
    assert requires_rebuild(1024, 1030, 1000)
    assert requires_rebuild(1024, 900, 900)
    assert not requires_rebuild(1024, 1024, 1024)
    assert not requires_rebuild(1024, 1100, 1024)
    assert requires_rebuild(-1, 10, 0) and requires_rebuild(10, 10, 11)


def test_checkpoint_suffix_is_what_the_next_prompt_renders_a33() -> None:
    schemas = (tool_schema({"name": "bash", "parameters": {"type": "object"}}),)
    history: list[Message] = [UserMessage("list the files && more")]
    for mode in (ThinkMode.HIGH, ThinkMode.NONE):
        prompt = render_chat(history, schemas, mode)
        turn = finished()
        suffix = checkpoint_suffix(turn, mode.thinking)
        replayed = AssistantMessage(turn.content, turn.reasoning, turn.tool_calls)
        result = ToolResultMessage("a.txt", tool_call_id="call_a")
        following = render_chat([*history, replayed, result], schemas, mode)
        assert following.startswith(prompt + suffix)
        assert suffix.endswith(EOS) and ("need files</think>" in suffix) == mode.thinking


def test_suffix_renders_calls_canonically_not_the_sampled_block_unlike_the_snapshot() -> None:
    # The snapshot put the sampled block in the expected suffix even with replay off
    # [QUIRK]; the next prompt renders the client's JSON, so that is what we expect.
    suffix = checkpoint_suffix(finished(), thinking=True)
    assert SAMPLED not in suffix and render_tool_calls([CALL]) in suffix


PROMPT = "<u>list<a><think>"
SUFFIX = checkpoint_suffix(finished(), thinking=True)


def test_live_state_equal_to_the_canonical_tokens_is_left_alone() -> None:
    tokenizer = CharTokenizer()
    session, compute = live(PROMPT + SUFFIX, tokenizer)
    assert run(session, tokenizer, PROMPT + SUFFIX, len(PROMPT)) == (CanonicalOutcome.ALIGNED, 0)
    assert compute.evaluated == []


def test_same_bytes_in_another_token_split_keep_the_sampled_state() -> None:
    tokenizer = CharTokenizer()
    rendered = PROMPT + "ab" + SUFFIX
    session, compute = live(PROMPT, tokenizer)
    prefilled(session, [*session.tokens, MERGED, *tokenizer.encode(SUFFIX)])
    compute.evaluated.clear()
    assert run(session, tokenizer, rendered, len(PROMPT)) == (CanonicalOutcome.SAME_TEXT, 0)
    assert compute.evaluated == []


def test_a_live_state_that_lost_the_prompt_is_skipped() -> None:
    tokenizer = CharTokenizer()
    session, compute = live("<u>other", tokenizer)
    lines: list[str] = []
    outcome, _ = run(session, tokenizer, PROMPT + SUFFIX, len(PROMPT), trace=lines.append)
    assert outcome is CanonicalOutcome.SKIPPED and "skipped" in lines[0]
    assert compute.evaluated == []


def test_sampled_tokens_that_prefix_the_canonical_ones_are_only_extended() -> None:
    tokenizer = CharTokenizer()
    session, compute = live(PROMPT + SUFFIX[: -len(EOS)], tokenizer)  # EOS not evaluated
    assert run(session, tokenizer, PROMPT + SUFFIX, len(PROMPT))[0] is CanonicalOutcome.EXTENDED
    assert compute.evaluated == tokenizer.encode(EOS)
    assert tokenizer.decode(session.tokens) == PROMPT + SUFFIX


def test_a_different_sampled_block_is_rewound_and_rebuilt_canonically() -> None:
    tokenizer = CharTokenizer()
    sampled = "need files</think>Listing." + SAMPLED
    session, compute = live(PROMPT + sampled, tokenizer, rewind_step=4)
    common = session.common_prefix(tokenizer.encode(PROMPT + SUFFIX))
    lines: list[str] = []
    outcome, progress = run(session, tokenizer, PROMPT + SUFFIX, len(PROMPT), trace=lines.append)
    assert outcome is CanonicalOutcome.REBUILT and progress >= 1
    assert tokenizer.decode(session.tokens) == PROMPT + SUFFIX
    floor = common - common % 4  # the engine keeps what it can rewind to exactly
    assert compute.evaluated == tokenizer.encode(PROMPT + SUFFIX)[floor:]
    assert "needs" in lines[0] and "rebuild done" in lines[-1]


def test_a_rebuild_prefers_a_longer_disk_checkpoint() -> None:
    tokenizer = CharTokenizer()
    session, compute = live(PROMPT + "need files</think>Listing." + SAMPLED, tokenizer)
    canonical = tuple(tokenizer.encode(PROMPT + SUFFIX))
    asked: list[tuple[str, int]] = []

    def disk_load(target: EngineSession, text: str, more_than: int) -> tuple[int, ...]:
        asked.append((text, more_than))
        target.invalidate()
        prefilled(target, canonical[:-3])  # the restored file; the suffix is still to prefill
        compute.evaluated.clear()
        return canonical

    outcome, _ = run(session, tokenizer, PROMPT + SUFFIX, len(PROMPT), disk_load=disk_load)
    assert outcome is CanonicalOutcome.REBUILT and asked[0][0] == PROMPT + SUFFIX
    assert compute.evaluated == list(canonical[-3:])


def test_an_engine_failure_or_a_cancel_never_escapes() -> None:
    tokenizer = CharTokenizer()
    text = PROMPT + SUFFIX[: -len(EOS)]
    session, _ = live(text, tokenizer, ctx=len(text) + 2)  # EOS does not fit
    assert run(session, tokenizer, PROMPT + SUFFIX, len(PROMPT))[0] is CanonicalOutcome.FAILED
    session, _ = live(text, tokenizer)
    cancelled = run(session, tokenizer, PROMPT + SUFFIX, len(PROMPT), cancel=lambda: True)
    assert cancelled[0] is CanonicalOutcome.CANCELLED
