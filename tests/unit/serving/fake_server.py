"""The server built by the composition root over fakes: a scripted fake model, the byte
tokenizer, an in-memory KV store, a fixed clock and counting random bytes. No socket,
no uvicorn: tests drive the Worker (and the inference queue) directly."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_compute import FakeComputeSession, FakeRunner, Scripted
from tests.support.memory_kv_store import MemoryKVStore
from tests.unit.generation.byte_tokenizer import VOCAB, ByteTokenizer

from ds4.apps.bootstrap import Engine
from ds4.apps.options import ServerOptions
from ds4.apps.server_bootstrap import BuiltServer, bootstrap_server
from ds4.domain.engine.cancel import CancelCheck, never_cancel
from ds4.domain.generation.events import Finished, TextDelta
from ds4.domain.kvcache.kv_file import SaveReason
from ds4.domain.kvcache.policy import KvCacheOptions
from ds4.domain.serving.exchange import PromptReady, ServedEvent
from ds4.domain.serving.job import Worker
from ds4.domain.serving.prepare import PreparedJob, prepare_job
from ds4.wire.anthropic import parse_messages
from ds4.wire.chat import parse_chat_completion

TOK = ByteTokenizer()
EOS, USER, ASSISTANT = TOK.special.eos, TOK.special.user, TOK.special.assistant


class ReplyScript:
    """The fake model's answer to the last user turn: after `<｜User｜>{text}<｜Assistant｜>`
    and the think marker that ends the prompt it says replies[text] (else `default`),
    then EOS. So a conversation gets the same answers whatever state it resumes from."""

    def __init__(self, replies: Mapping[str, str], default: str = "ok") -> None:
        self.replies = {user: TOK.encode(text) for user, text in replies.items()}
        self.default = TOK.encode(default)

    def __call__(self, history: Sequence[int]) -> Scripted | None:
        tokens = list(history)
        if ASSISTANT not in tokens:
            return None
        at = len(tokens) - 1 - tokens[::-1].index(ASSISTANT)
        if at + 1 >= len(tokens):
            return None  # the think marker still belongs to the prompt
        user = max((i for i in range(at) if tokens[i] == USER), default=-1)
        text = TOK.decode(tokens[user + 1 : at]) if user >= 0 else ""
        reply = self.replies.get(text, self.default)
        k = len(tokens) - (at + 2)
        return Scripted(reply[k] if k < len(reply) else EOS)


class FixedClock:
    def now(self) -> int:
        return 1_700_000_000


class CountingRandom:
    """Distinct, predictable bytes (tool ids, seeds)."""

    def __init__(self) -> None:
        self.calls = 0

    def token_bytes(self, n: int) -> bytes:
        self.calls += 1
        return bytes((self.calls + i) % 256 for i in range(n))


# Saves every 16 tokens; a cold save cuts at the chat anchor (min 8 tokens).
KV_OPTS = KvCacheOptions(
    budget_bytes=0,
    min_tokens=8,
    cold_max_tokens=4096,
    continued_interval_tokens=16,
    boundary_trim_tokens=0,
    boundary_align_tokens=8,
)


@dataclass
class FakeServer:
    built: BuiltServer
    runner: FakeRunner
    store: MemoryKVStore | None
    trace: io.StringIO = field(default_factory=io.StringIO)

    @property
    def worker(self) -> Worker:
        return self.built.workers[0]

    @property
    def compute(self) -> FakeComputeSession:
        (session,) = self.runner.sessions
        return session

    def chat(self, messages: list[dict[str, Any]], **extra: Any) -> PreparedJob:
        body = {"messages": messages, "think": False, **extra}
        return self._prepare(parse_chat_completion(json.dumps(body).encode()).generation)

    def anthropic(self, messages: list[dict[str, Any]], **extra: Any) -> PreparedJob:
        body = {"max_tokens": 200, "messages": messages, **extra}
        return self._prepare(parse_messages(json.dumps(body).encode()).generation)

    def _prepare(self, request: Any) -> PreparedJob:
        state = self.built.state
        with state.memory_lock:
            return prepare_job(
                request, state.tokenizer, state.memory, state.config.ctx, state.bindings
            )

    def run(self, job: PreparedJob, cancel: CancelCheck = never_cancel) -> list[ServedEvent]:
        return list(self.worker.run(job, cancel=cancel))

    def sources(self) -> list[str]:
        return [
            line.split("source=")[1].split()[0]
            for line in self.trace.getvalue().splitlines()
            if "--- cache decision ---" in line and "source=" in line
        ]

    def saved(self) -> list[tuple[SaveReason, int]]:
        """(reason, tokens) of every stored checkpoint, in save order."""
        assert self.store is not None
        return [(f.header.reason, f.header.tokens) for f in self.store.files.values()]


def fake_server(
    replies: Mapping[str, str],
    *,
    disk: bool = True,
    opts: KvCacheOptions = KV_OPTS,
    chunk: int = 0,
    ctx: int = 4096,
    store: MemoryKVStore | None = None,
    sessions: int = 1,
    rewind_step: int = 1,
    rewind_history: int | None = None,
    mem_bytes: int = ServerOptions(model=None).kv_mem_bytes,
) -> FakeServer:
    """The server graph from bootstrap_server with every adapter a fake; `rewind_step`
    models an engine that rewinds exactly only to multiples of it, `rewind_history` one
    that rewinds at most that far back (a real state's bounded history); `mem_bytes` is
    the in-memory checkpoint budget (0: none)."""
    runner = FakeRunner(
        vocab=VOCAB,
        script=ReplyScript(replies),
        rewind_step=rewind_step,
        rewind_history=rewind_history,
    )
    if disk and store is None:
        store = MemoryKVStore()
    options = ServerOptions(
        model=None,
        ctx=ctx,
        prefill_chunk=chunk,
        sessions=sessions,
        kv_cache=opts,
        kv_mem_bytes=mem_bytes,
    )
    trace = io.StringIO()
    built = bootstrap_server(
        options,
        trace,
        engine=Engine(TOK, runner),
        store=store,
        clock=FixedClock(),
        random=CountingRandom(),
    )
    return FakeServer(built, runner, store, trace)


def finished(events: Sequence[ServedEvent]) -> Finished:
    last = events[-1]
    assert isinstance(last, Finished)
    return last


def prompt_ready(events: Sequence[ServedEvent]) -> PromptReady:
    (ready,) = [e for e in events if isinstance(e, PromptReady)]
    return ready


def texts(events: Sequence[ServedEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))
