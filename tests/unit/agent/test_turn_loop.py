"""The worker's turn loop on a scripted engine: tool call -> confirmation ->
execution -> result -> answer, several calls in one block, denials, malformed calls,
the edit pre-flight, queued prompts, and the interrupt at each phase."""

from __future__ import annotations

from tests.support.agent_fakes import FakeIO
from tests.unit.agent.agent_setup import TOKENIZER, Rig, answer, block, call, make_rig

from ds4.domain.agent.screen import AgentState, AgentStatus
from ds4.domain.chat import EOS
from ds4.domain.engine.cancel import CancelCheck
from ds4.ports.agent import Approval, JobSnapshot


def _consistent(rig: Rig) -> None:
    """The live state is a prefix of the transcript (the next sync only extends it)."""
    tokens = rig.core.conv.tokens
    live = list(rig.core.session.tokens)
    assert tokens[: len(live)] == live


def test_write_is_confirmed_run_and_answered() -> None:
    rig = make_rig(
        [block(call("write", path="hello.txt", content="hi\n")), answer("I wrote hello.txt.")]
    )
    rig.agent.turn("write hello.txt")
    assert rig.io.questions == ["Write 3 bytes to hello.txt?"]
    assert rig.workspace.files["/work/hello.txt"] == b"hi\n"
    text = rig.transcript
    assert "<tool_result>Tool result 1 (write):\nWrote 3 bytes to hello.txt\n</tool_result>" in text
    assert text.endswith("I wrote hello.txt." + EOS)
    assert rig.agent.last_answer == "I wrote hello.txt."
    assert rig.io.statuses[-1].state is AgentState.IDLE
    assert rig.core.conv.dirty and rig.core.conv.title == "write hello.txt"
    _consistent(rig)


def test_denied_write_leaves_the_file_alone_and_the_model_continues() -> None:
    io = FakeIO(answers=[Approval.NO])
    rig = make_rig([block(call("write", path="a.txt", content="x")), answer("Not written.")], io=io)
    rig.agent.turn("write a.txt")
    assert "/work/a.txt" not in rig.workspace.files
    assert "Tool result 1 (write):\nTool error: user denied write\n" in rig.transcript
    assert rig.agent.last_answer == "Not written."


def test_timed_out_confirmation_is_a_denial() -> None:
    io = FakeIO(answers=[Approval.TIMEOUT])
    rig = make_rig([block(call("bash", command="ls")), answer("ok")], io=io)
    rig.agent.turn("list")
    assert rig.shell.started == []
    assert "Tool error: bash approval timed out" in rig.transcript


def test_several_calls_run_in_order_and_come_back_as_one_message() -> None:
    files = {"notes.txt": b"one\ntwo\n"}
    script = [
        block(call("read", path="notes.txt"), call("list", path="."), call("nope")),
        answer("Read and listed."),
    ]
    rig = make_rig(script, files=files)
    rig.agent.turn("look around")
    text = rig.transcript
    first = text.index("Tool result 1 (read):\nnotes.txt: lines 1-2 of 2\n1 one\n2 two\n")
    second = text.index("Tool result 2 (list):\n.:\n-          8 notes.txt\n")
    third = text.index("Tool result 3 (nope):\nTool error: unknown tool: nope\n")
    assert first < second < third
    assert text.count("<tool_result>") == 1  # one tool message
    assert rig.io.questions == []  # reading and listing inside the directory ask nothing


def test_read_outside_the_working_directory_asks_first() -> None:
    io = FakeIO(answers=[Approval.NO])
    rig = make_rig([block(call("read", path="../etc/passwd")), answer("ok")], io=io)
    rig.agent.turn("read it")
    assert rig.io.questions == ["Allow read of ../etc/passwd (outside the working directory)?"]
    assert "Tool error: user denied read" in rig.transcript


def test_auto_approve_asks_nothing() -> None:
    rig = make_rig(
        [block(call("bash", command="make test")), answer("Tests ran.")], auto_approve=True
    )
    rig.agent.turn("run the tests")
    assert rig.io.questions == []
    assert rig.shell.started == ["make test"]
    assert "bash job=1 pid=1001 status=done" in rig.transcript
    assert "<output>\nran: make test\n</output>" in rig.transcript


def test_edit_preflight_stops_before_the_new_text_is_sampled() -> None:
    files = {"a.py": b"x = 1\n"}
    bad_edit = block(call("edit", path="a.py", old="y = 2", new="SHOULD-NOT-APPEAR"))
    rig = make_rig([bad_edit, answer("The anchor was wrong.")], files=files)
    rig.agent.turn("edit a.py")
    text = rig.transcript
    assert "<tool_result>Tool error: old text anchor not found</tool_result>" in text
    assert "SHOULD-NOT-APPEAR" not in text
    assert "[tool call stopped: edit old selector failed]" in rig.io.text
    assert rig.workspace.files["/work/a.py"] == b"x = 1\n"
    assert rig.io.questions == []


def test_edit_runs_after_confirmation_and_reports_the_shift() -> None:
    files = {"a.py": b"a\nb\nc\n"}
    rig = make_rig(
        [block(call("edit", path="a.py", old="b\n", new="b1\nb2\n")), answer("ok")], files=files
    )
    rig.agent.turn("edit")
    assert rig.workspace.files["/work/a.py"] == b"a\nb1\nb2\nc\n"
    assert rig.io.questions == ["Edit a.py?"]
    assert "Line shift: old lines after 2 moved by +1" in rig.transcript


def test_malformed_call_gets_an_error_and_the_syntax_reminder() -> None:
    broken = (
        'ok</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="read">\n'
        "not a parameter\n</｜DSML｜tool_calls>"
    )
    rig = make_rig([broken, answer("Sorry.")])
    rig.agent.turn("read")
    text = rig.transcript
    assert "Tool error: invalid DSML tool call:" in text
    assert "Write tool calls exactly in this shape" in text
    assert rig.agent.last_answer == "Sorry."


def test_prompts_queued_while_working_follow_the_tool_result() -> None:
    rig = make_rig([block(call("list", path=".")), answer("ok")], files={"f": b""})
    rig.io.queued = ["also check README", "and the tests"]
    rig.agent.turn("list files")
    text = rig.transcript
    result_end = text.index("</tool_result>")
    queued = text.index(
        "<｜User｜>Queued user message 1:\nalso check README\n\n"
        "Queued user message 2:\nand the tests"
    )
    assert queued == result_end + len("</tool_result>")


def test_interrupt_during_prefill_closes_the_reply_and_keeps_the_state_usable() -> None:
    def in_prefill(status: AgentStatus) -> bool:
        return status.state is AgentState.PREFILL and status.prefill_done > 0

    io = FakeIO()
    rig = make_rig([answer("first"), answer("second")], io=io, chunk=4)
    io.interrupt_when = in_prefill
    rig.agent.turn("a long message " * 10)
    assert any("Model reading interrupted" in n for n in io.notices)
    assert rig.transcript.endswith("<｜Assistant｜><think>" + EOS)
    assert rig.io.statuses[-1].state is AgentState.IDLE
    _consistent(rig)
    rig.agent.turn("again")  # the next turn syncs what was left and answers
    assert rig.agent.last_answer in ("first", "second")


def test_interrupt_during_generation_stops_at_a_token() -> None:
    def generating(status: AgentStatus) -> bool:
        return status.state is AgentState.GENERATING and status.generated >= 3

    io = FakeIO(interrupt_when=generating)
    rig = make_rig([answer("a long answer that will be cut", thought="t")], io=io)
    rig.agent.turn("talk")
    assert "Stopped by user" in io.notices
    tokens = rig.core.conv.tokens
    assert tokens[-1] == TOKENIZER.special.eos
    assert "a long answer" not in rig.transcript
    _consistent(rig)
    assert rig.io.statuses[-1].state is AgentState.IDLE


def test_interrupt_at_the_confirmation_denies_and_ends_the_turn() -> None:
    io = FakeIO(answers=[Approval.INTERRUPTED])
    script = [block(call("write", path="a", content="x"), call("bash", command="ls")), answer("no")]
    rig = make_rig(script, io=io)
    rig.agent.turn("go")
    text = rig.transcript
    assert "Tool error: user denied write (interrupted)" in text
    assert "Tool result 2 (bash):\nTool error: interrupted before running" in text
    assert text.endswith("</tool_result>")  # no reply was generated after the result
    assert rig.shell.started == []
    assert "Stopped by user" in io.notices


def test_interrupt_while_a_job_runs_returns_its_observation() -> None:
    io = FakeIO()
    rig = make_rig([block(call("bash", command="block")), answer("ok")], io=io, auto_approve=True)

    real_wait = rig.shell.wait

    def wait(job: int, seconds: float, cancel: CancelCheck) -> JobSnapshot:
        io.interrupt = True  # Ctrl+C while waiting for the job
        return real_wait(job, seconds, cancel)

    rig.shell.wait = wait  # type: ignore[method-assign]
    rig.agent.turn("run it")
    text = rig.transcript
    assert "status=running" in text
    assert "Use bash_status job=1 to get info before refresh time" in text
    assert text.endswith("</tool_result>")
    assert rig.shell.jobs() == [1]  # still running, still in the table


def test_prompts_queued_until_idle_become_one_turn_each_echoed() -> None:
    rig = make_rig([answer("both done")])
    rig.agent.queued_turn(["fix a", "then b"])
    assert "<｜User｜>Queued user message 1:\nfix a\n\nQueued user message 2:\nthen b" in (
        rig.transcript
    )
    assert "fix a" in rig.io.output[0] and "then b" in rig.io.output[1]
    assert rig.agent.last_answer == "both done"
