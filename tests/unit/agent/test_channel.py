"""The UI <-> worker channel: requests only when idle, the prompt queue, the timed
yes/no handshake and the interrupt."""

from __future__ import annotations

import threading
import time

from ds4.apps.agent.channel import AgentChannel, Stop, Submit
from ds4.domain.agent.screen import AgentState
from ds4.domain.agent.slash import SlashCommand
from ds4.ports.agent import Approval


def _ready(channel: AgentChannel) -> AgentChannel:
    channel.worker_idle(session_ids=["a" * 40])
    return channel


def test_submit_only_when_idle_then_queue() -> None:
    channel = AgentChannel()
    assert not channel.submit("too early")  # the worker is still starting
    _ready(channel)
    assert channel.submit("first")
    assert channel.status().state is AgentState.PREFILL  # busy at once, never a false idle
    assert not channel.submit("second")
    assert not channel.command(SlashCommand("list", ""))
    channel.queue("second")
    channel.queue("third")
    assert channel.pop_queued() == "second"
    assert channel.take_queued() == ["third"]
    assert channel.next_request() == Submit("first")
    channel.worker_idle(answer="done", dirty=True)
    assert not channel.busy and channel.dirty and channel.answer_text == "done"
    channel.stop()
    assert isinstance(channel.next_request(), Stop)


def test_questions_are_answered_time_out_or_are_interrupted() -> None:
    channel = _ready(AgentChannel(confirm_seconds=5))
    answers: list[Approval] = []
    asker = threading.Thread(target=lambda: answers.append(channel.confirm("Run `ls`?")))
    asker.start()
    while channel.question() is None:
        time.sleep(0.01)
    assert channel.question().text == "Run `ls`?"  # type: ignore[union-attr]
    channel.answer(True)
    asker.join(5)
    assert answers == [Approval.YES]
    assert channel.question() is None
    assert "Run `ls`? yes" in channel.take_output()

    quick = _ready(AgentChannel(confirm_seconds=0.05))
    assert quick.confirm("Write?") is Approval.TIMEOUT

    interrupted = _ready(AgentChannel(confirm_seconds=5))
    interrupted.interrupt()
    assert interrupted.confirm("Edit?") is Approval.INTERRUPTED
    assert interrupted.interrupted()
    interrupted.clear_interrupt()
    assert not interrupted.interrupted()


def test_without_a_person_every_question_is_a_no() -> None:
    channel = AgentChannel(ask=False, notices=False)
    assert channel.confirm("Write 3 bytes to a?") is Approval.NO
    assert channel.take_output() == ""  # notices are off


def test_a_failed_start_refuses_everything() -> None:
    channel = AgentChannel()
    channel.fail("no model")
    assert channel.failure == "no model"
    assert channel.status().state is AgentState.ERROR
    assert not channel.submit("x")
