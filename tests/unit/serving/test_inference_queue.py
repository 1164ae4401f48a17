"""The inference queue over the fake server: one job at a time, in arrival order, and a
job cancelled while it waits never reaches the engine. The first job's delivery is
held open, so the others are certainly queued behind it (no timing guesses)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tests.unit.serving.fake_server import FakeServer, fake_server

from ds4.adapters.http.inference_worker import Job, JobOutput
from ds4.domain.generation.events import Finished, TextDelta, Usage

REPLIES = {"first": "One.", "second": "Two.", "third": "Three."}
WAIT = 30.0


class Recorder:
    """Every job's outputs in delivery order; job 0 blocks on its first output until
    `release` is set, so jobs submitted meanwhile wait in the queue."""

    def __init__(self) -> None:
        self.outputs: list[tuple[int, JobOutput]] = []
        self.running = threading.Event()
        self.release = threading.Event()
        self.done: dict[int, threading.Event] = {}

    def deliver(self, index: int) -> Callable[[JobOutput], None]:
        self.done[index] = threading.Event()

        def deliver(output: JobOutput) -> None:
            if index == 0 and not self.running.is_set():
                self.running.set()
                assert self.release.wait(WAIT)
            self.outputs.append((index, output))
            if isinstance(output, Finished):
                self.done[index].set()

        return deliver

    def of(self, index: int) -> list[JobOutput]:
        return [output for i, output in self.outputs if i == index]


def submit(server: FakeServer, recorder: Recorder, index: int, user: str) -> Job:
    job = Job(server.chat([{"role": "user", "content": user}]), recorder.deliver(index))
    server.built.state.inference.submit(job)
    return job


def test_jobs_run_one_at_a_time_in_arrival_order() -> None:
    server, recorder = fake_server(REPLIES, disk=False), Recorder()
    inference = server.built.state.inference
    inference.start()
    try:
        submit(server, recorder, 0, "first")
        assert recorder.running.wait(WAIT)  # job 0 holds the worker
        submit(server, recorder, 1, "second")
        submit(server, recorder, 2, "third")
        assert inference.submitted == 3
        recorder.release.set()
        assert all(recorder.done[i].wait(WAIT) for i in range(3))
    finally:
        inference.stop()
    order = [i for i, _ in recorder.outputs]
    assert order == sorted(order)  # no interleaving: each job ends before the next starts
    for index, answer in enumerate(("One.", "Two.", "Three.")):
        outputs = recorder.of(index)
        assert "".join(o.text for o in outputs if isinstance(o, TextDelta)) == answer
        assert isinstance(outputs[-1], Finished) and outputs[-1].finish == "stop"


def test_a_job_cancelled_while_queued_never_reaches_the_engine() -> None:
    server, recorder = fake_server(REPLIES, disk=False), Recorder()
    inference = server.built.state.inference
    inference.start()
    try:
        submit(server, recorder, 0, "first")
        assert recorder.running.wait(WAIT)
        cancelled = submit(server, recorder, 1, "second")
        cancelled.cancel.set()  # the client went away while the job waited
        submit(server, recorder, 2, "third")
        recorder.release.set()
        assert all(recorder.done[i].wait(WAIT) for i in range(3))
    finally:
        inference.stop()
    prompt = len(cancelled.prepared.prompt_tokens)
    assert recorder.of(1) == [Finished("cancelled", "", None, (), Usage(prompt, 0, 0))]
    assert server.trace.getvalue().count("===== request") == 2  # Worker.run: jobs 0 and 2
    assert "Two." not in "".join(o.text for _, o in recorder.outputs if isinstance(o, TextDelta))
