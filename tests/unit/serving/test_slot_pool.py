"""`--sessions N` over the fake server: N jobs run side by side, each answering as it
would alone; a follow-up (or a tool result) goes back to the slot holding its
conversation and a new conversation takes an empty or the stalest slot; a job
cancelled while queued never runs; a client gone during prefill frees its slot within
one chunk with the server's default chunk; shutdown answers the queue and every slot
keeps its live state on disk.

Jobs are held open in their delivery callback where a test needs others to run
meanwhile, so nothing here guesses how long work takes."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from tests.unit.serving.fake_server import FakeServer, fake_server
from tests.unit.serving.test_worker_run import ANTHROPIC_LS, tool_call_dsml, turn

from ds4.adapters.http.inference_worker import Job, JobFailed, JobOutput
from ds4.adapters.http.slot_pool import SlotPool
from ds4.apps.options import DEFAULT_PREFILL_CHUNK
from ds4.domain.errors import ErrorKind
from ds4.domain.generation.events import Finished, PrefillProgress, TextDelta
from ds4.domain.serving.exchange import PromptReady
from ds4.domain.serving.prepare import PreparedJob

WAIT = 30.0
REPLIES = {"first": "One.", "second": "Two.", "third": "Three.", "fourth": "Four."}


@dataclass
class Tracked:
    """One job's outputs. `hold`: its first output waits for `release` (the job is then
    busy in its slot); `leave_in_prefill`: its client goes away at the first chunk."""

    job: Job
    outputs: list[JobOutput] = field(default_factory=list)
    started: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def text(self) -> str:
        return "".join(o.text for o in self.outputs if isinstance(o, TextDelta))

    @property
    def last(self) -> JobOutput:
        return self.outputs[-1]

    def ready(self) -> PromptReady:
        (ready,) = [o for o in self.outputs if isinstance(o, PromptReady)]
        return ready


def submit(
    server: FakeServer, prepared: PreparedJob, *, hold: bool = False, leave_in_prefill: bool = False
) -> Tracked:
    tracked: Tracked

    def deliver(output: JobOutput) -> None:
        first = not tracked.outputs
        tracked.outputs.append(output)
        if leave_in_prefill and isinstance(output, PrefillProgress):
            tracked.job.cancel.set()  # the client disconnected while the chunk ran
        if first:
            tracked.started.set()
            if hold:
                assert tracked.release.wait(WAIT)
        if isinstance(output, (Finished, JobFailed)):
            tracked.done.set()

    tracked = Tracked(Job(prepared, deliver))
    server.built.state.inference.submit(tracked.job)
    return tracked


def pool_of(server: FakeServer) -> SlotPool:
    pool = server.built.state.inference
    assert isinstance(pool, SlotPool)
    return pool


def user(server: FakeServer, text: str) -> PreparedJob:
    return server.chat([turn("user", text)])


def test_jobs_run_side_by_side_and_each_answers_as_alone() -> None:
    server = fake_server(REPLIES, disk=False, sessions=3)
    pool = pool_of(server)
    pool.start()
    try:
        held = submit(server, user(server, "first"), hold=True)
        assert held.started.wait(WAIT)  # busy in its slot, mid-prefill
        others = [submit(server, user(server, text)) for text in ("second", "third")]
        assert all(t.done.wait(WAIT) for t in others)  # with one session: never
        assert not held.done.is_set()
        held.release.set()
        assert held.done.wait(WAIT)
    finally:
        pool.stop()
    assert [t.text for t in (held, *others)] == ["One.", "Two.", "Three."]
    assert sorted(pool.served) == [0, 1, 2]


def test_a_follow_up_returns_to_its_slot_and_new_conversations_take_the_stalest() -> None:
    server = fake_server(REPLIES, disk=False, sessions=3)
    pool = pool_of(server)
    pool.start()

    def run(messages: list[dict[str, str]]) -> Tracked:
        tracked = submit(server, server.chat(messages))
        assert tracked.done.wait(WAIT)
        return tracked

    try:
        first = [turn("user", "first")]
        a = run(first)  # slot 0 (all empty)
        b = run([turn("user", "second")])  # slot 1: empty beats sharing an opening
        follow = run([*first, turn("assistant", "One."), turn("user", "third")])
        c = run([turn("user", "fourth")])  # slot 2, empty
        d = run([turn("user", "second"), turn("assistant", "Two."), turn("user", "first")])
        e = run([turn("user", "third")])  # no continuation: the stalest, slot 0
    finally:
        pool.stop()
    assert list(pool.served) == [0, 1, 0, 2, 1, 0]
    assert follow.ready().cached_tokens > 0 and d.ready().cached_tokens > 0
    assert [t.text for t in (a, b, follow, c, d, e)] == [
        "One.", "Two.", "Three.", "Four.", "One.", "Three.",
    ]  # fmt: skip


def test_a_tool_result_goes_to_the_slot_that_made_the_call() -> None:
    reply = "I should list it.</think>Looking." + tool_call_dsml("ls", path="/tmp")
    answer = "Listed.</think>It holds a.txt."
    replies = {"List /tmp": reply, "<tool_result>a.txt</tool_result>": answer, "hi": "Hi."}
    server = fake_server(replies, disk=False, sessions=2)
    pool = pool_of(server)
    pool.start()
    tools: dict[str, Any] = {"tools": [ANTHROPIC_LS]}
    try:
        first = submit(server, server.anthropic([turn("user", "List /tmp")], **tools))
        assert first.done.wait(WAIT)
        assert isinstance(first.last, Finished)
        (call,) = first.last.tool_calls
        other = submit(server, server.anthropic([turn("user", "hi")]))
        assert other.done.wait(WAIT)
        result = {"type": "tool_result", "tool_use_id": call.id, "content": "a.txt"}
        # prepared against every slot's bindings: the call id is live in slot 0
        job = server.anthropic([{"role": "user", "content": [result]}], **tools)
        resumed = submit(server, job)
        assert resumed.done.wait(WAIT)
    finally:
        pool.stop()
    assert list(pool.served) == [0, 1, 0]
    assert resumed.text == "It holds a.txt."
    assert "source=anthropic-tool-output" in server.trace.getvalue()


def test_a_job_cancelled_while_queued_never_runs() -> None:
    server = fake_server(REPLIES, disk=False, sessions=2)
    pool = pool_of(server)
    pool.start()
    try:
        busy = [submit(server, user(server, t), hold=True) for t in ("first", "second")]
        assert all(t.started.wait(WAIT) for t in busy)  # both slots taken
        cancelled = submit(server, user(server, "third"))
        assert (pool.running, pool.waiting) == (2, 1)  # what /metrics reports
        cancelled.job.cancel.set()
        for t in busy:
            t.release.set()
        assert cancelled.done.wait(WAIT) and all(t.done.wait(WAIT) for t in busy)
    finally:
        pool.stop()
    assert isinstance(cancelled.last, Finished) and cancelled.last.finish == "cancelled"
    assert cancelled.text == "" and server.trace.getvalue().count("===== request") == 2


def long_prompt(server: FakeServer) -> PreparedJob:
    return user(server, "x" * (2 * DEFAULT_PREFILL_CHUNK + 100))  # three chunks


def test_a_client_gone_during_prefill_frees_its_slot_within_one_chunk() -> None:
    """With the server's default chunk; the next job then runs in that very slot."""
    server = fake_server(REPLIES, disk=False, sessions=2, ctx=8192, chunk=DEFAULT_PREFILL_CHUNK)
    pool = pool_of(server)
    pool.start()
    try:
        gone = submit(server, long_prompt(server), leave_in_prefill=True)
        assert gone.done.wait(WAIT)
        again = submit(server, long_prompt(server))  # the client retries
        assert again.done.wait(WAIT)
    finally:
        pool.stop()
    chunk, total = DEFAULT_PREFILL_CHUNK, len(gone.job.prepared.prompt_tokens)
    assert isinstance(gone.last, Finished) and gone.last.finish == "cancelled"
    assert [o for o in gone.outputs if isinstance(o, PrefillProgress)] == [
        PrefillProgress(chunk, total)
    ]
    assert list(pool.served) == [0, 0]  # the slot is free, and holds the chunk it finished
    assert again.ready().cached_tokens == chunk and again.text == "ok"
    assert server.runner.sessions[0].prefill_calls == [chunk, chunk, total - 2 * chunk]


def test_one_session_also_stops_a_prefill_within_one_chunk_by_default() -> None:
    server = fake_server(REPLIES, disk=False, ctx=8192, chunk=DEFAULT_PREFILL_CHUNK)
    inference = server.built.state.inference
    inference.start()
    try:
        gone = submit(server, long_prompt(server), leave_in_prefill=True)
        assert gone.done.wait(WAIT)
    finally:
        inference.stop()
    assert server.compute.prefill_calls == [DEFAULT_PREFILL_CHUNK]


def test_shutdown_answers_the_queue_and_every_slot_keeps_its_state_on_disk() -> None:
    server = fake_server(REPLIES, sessions=2, mem_bytes=0)  # only the live states
    pool = pool_of(server)
    pool.start()
    done = [submit(server, user(server, t)) for t in ("first", "second")]
    assert all(t.done.wait(WAIT) for t in done)
    busy = [submit(server, user(server, t), hold=True) for t in ("third", "fourth")]
    assert all(t.started.wait(WAIT) for t in busy)
    queued = submit(server, user(server, "first"))
    stopper = threading.Thread(target=pool.stop)
    stopper.start()
    assert queued.done.wait(WAIT)
    for t in busy:
        t.release.set()
    stopper.join(WAIT)
    assert queued.outputs == [JobFailed("server shutting down", ErrorKind.UNAVAILABLE)]
    assert all(isinstance(t.last, Finished) and t.last.finish == "cancelled" for t in busy)
    saves = [line for line in server.trace.getvalue().splitlines() if "reason=shutdown" in line]
    assert len({line.split("sha=")[1].split()[0] for line in saves}) == 2  # one per slot
