"""The server graph over a fake model (tests/unit/serving/fake_server.py) with any KV store,
a real directory included, and the two-turn conversation the cache tests replay."""

from __future__ import annotations

import io

from tests.support.fake_compute import FakeRunner
from tests.unit.generation.byte_tokenizer import VOCAB
from tests.unit.serving.fake_server import (
    TOK,
    CountingRandom,
    FakeServer,
    FixedClock,
    ReplyScript,
    finished,
    prompt_ready,
    texts,
)

from ds4.apps.bootstrap import Engine
from ds4.apps.options import ServerOptions
from ds4.apps.server_bootstrap import bootstrap_server
from ds4.domain.kvcache.policy import KvCacheOptions
from ds4.ports.kv_store import KVStore

REPLIES = {"hi": "Hello there, friend.", "more": "Here is more."}
SYSTEM = {"role": "system", "content": "You are terse."}
FIRST = [SYSTEM, {"role": "user", "content": "hi"}]
SECOND = [
    *FIRST,
    {"role": "assistant", "content": REPLIES["hi"]},
    {"role": "user", "content": "more"},
]
# Only evict and shutdown saves: after the first conversation the directory holds one file.
OPTS = KvCacheOptions(
    budget_bytes=0, min_tokens=8, cold_max_tokens=0, continued_interval_tokens=0,
    boundary_trim_tokens=0, boundary_align_tokens=8,
)  # fmt: skip


def serve(store: KVStore | None, opts: KvCacheOptions = OPTS) -> FakeServer:
    """The server graph over a fake model; `store` None: no disk cache at all."""
    runner = FakeRunner(vocab=VOCAB, script=ReplyScript(REPLIES))
    options = ServerOptions(model=None, ctx=4096, kv_cache=opts)
    trace = io.StringIO()
    built = bootstrap_server(
        options, trace, engine=Engine(TOK, runner), store=store,
        clock=FixedClock(), random=CountingRandom(),
    )  # fmt: skip
    return FakeServer(built, runner, None, trace)


def answer(server: FakeServer) -> tuple[str, int, int]:
    """The follow-up's text, its prompt length and its cached tokens."""
    events = server.run(server.chat(SECOND))
    ready = prompt_ready(events)
    assert finished(events).finish == "stop"
    return texts(events), ready.prompt_tokens, ready.cached_tokens
