"""ds4.lib on the demo model: what the faces promise beyond the docs' examples, and
a clear Ds4Error for every bad argument (never a traceback from deep inside)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.doc_examples import DEMO_MODEL, REPO

import ds4.lib as ds4

MAX_PREFIX_START = "Reasoning Effort: Absolute maximum"


@pytest.fixture(scope="module")
def model() -> Iterator[ds4.Model]:
    with ds4.open_model(REPO / DEMO_MODEL) as opened:
        yield opened


@pytest.fixture
def session(model: ds4.Model) -> ds4.Session:
    s = model.new_session(ctx=256)
    s.prefill(ds4.render_chat([ds4.UserMessage("Renzo e Lucia")], think="none"))
    return s


# ---- the module itself -----------------------------------------------------------


def test_every_public_name_exists_and_the_rest_is_private() -> None:
    for name in ds4.__all__:
        assert hasattr(ds4, name), name
    modules = sorted(p.stem for p in (REPO / "src" / "ds4" / "lib").glob("*.py"))
    assert all(m == "__init__" or m.startswith("_") for m in modules), modules
    assert (REPO / "src" / "ds4" / "py.typed").is_file()


def test_importing_the_library_loads_no_http_stack() -> None:
    code = "import sys, ds4.lib; print(sorted({'litestar', 'uvicorn'} & set(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


# ---- opening a model ---------------------------------------------------------------


def test_open_model_names_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(ds4.Ds4Error, match=r"nope\.gguf: no such file"):
        ds4.open_model(tmp_path / "nope.gguf")
    with pytest.raises(ds4.Ds4Error, match="is not a regular file"):
        ds4.open_model(tmp_path)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf at all" * 10)
    with pytest.raises(ds4.Ds4Error, match=r"junk\.gguf"):
        ds4.open_model(junk)
    with pytest.raises(ds4.Ds4Error, match="backend 'gpu' is not available"):
        ds4.open_model(REPO / DEMO_MODEL, backend="gpu")
    with pytest.raises(ds4.Ds4Error, match="threads 0 is out of range"):
        ds4.open_model(REPO / DEMO_MODEL, threads=0)


def test_no_path_takes_the_commands_model_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4_MODEL", "/nonexistent/model.gguf")
    with pytest.raises(ds4.Ds4Error, match=r"/nonexistent/model.gguf \(from DS4_MODEL\)"):
        ds4.open_model()


def test_the_reference_backend_agrees_on_the_first_token(model: ds4.Model) -> None:
    prompt = ds4.render_chat([ds4.UserMessage("Renzo e Lucia")], think="none")
    with ds4.open_model(REPO / DEMO_MODEL, backend="reference") as reference:
        slow = reference.new_session(ctx=64)
        slow.prefill(prompt)
        fast = model.new_session(ctx=64)
        fast.prefill(prompt)
        assert slow.generate_tokens(1) == fast.generate_tokens(1)


# ---- tokens and sessions -------------------------------------------------------------


def test_bad_numbers_are_refused(model: ds4.Model, session: ds4.Session) -> None:
    with pytest.raises(ds4.Ds4Error, match=r"ids\[1\] = 999999999 is not a token id"):
        model.detokenize([1, 999_999_999])
    with pytest.raises(ds4.Ds4Error, match="ctx 1 is out of range"):
        model.new_session(ctx=1)
    with pytest.raises(ds4.Ds4Error, match="ctx must be an integer"):
        model.new_session(ctx=True)
    with pytest.raises(ds4.Ds4Error, match="max_tokens -1 is out of range"):
        session.generate(max_tokens=-1)
    with pytest.raises(ds4.Ds4Error, match=r"sampling\.seed 0 is out of range"):
        session.generate(sampling=ds4.SamplingParams(seed=0))
    with pytest.raises(ds4.Ds4Error, match="n 9999 is out of range"):
        session.rewind(9999)
    with pytest.raises(ds4.Ds4Error, match="budget_mb -1 is out of range"):
        model.kv_files("unused", budget_mb=-1)
    with pytest.raises(ds4.Ds4Error, match="max_ids 0 is out of range"):
        ds4.tool_memory(max_ids=0)
    with pytest.raises(ds4.Ds4Error, match="stops must be a list of strings"):
        session.generate(stops="\n")
    with pytest.raises(ds4.Ds4Error, match=r"stops\[1\] = '' is not a non-empty string"):
        session.generate(stops=["a", ""])


def test_a_prompt_too_long_for_the_context_gives_the_counts(model: ds4.Model) -> None:
    small = model.new_session(ctx=8)
    with pytest.raises(ds4.Ds4Error) as info:
        small.prefill(list(range(9)))
    assert str(info.value) == (
        "prompt exceeds context: 9 tokens, and ctx=8 needs room for at least one more"
    )


def test_prompts_that_do_not_fit(model: ds4.Model) -> None:
    small = model.new_session(ctx=8)
    with pytest.raises(ds4.Ds4Error, match="prompt exceeds context"):
        small.prefill(list(range(8)))
    with pytest.raises(ds4.Ds4Error, match="prompt exceeds context"):
        small.prefill("")
    with pytest.raises(ds4.Ds4Error, match="prefill a prompt first"):
        small.generate()


def test_the_callback_sees_every_event_and_finished_last(session: ds4.Session) -> None:
    events: list[ds4.GenerationEvent] = []
    turn = session.generate(max_tokens=12, on_event=events.append)
    assert events[-1] is turn
    assert not any(isinstance(e, ds4.Finished) for e in events[:-1])
    assert turn.reasoning is None  # think="none": the prompt already closed reasoning


def test_a_thinking_prompt_starts_in_reasoning(model: ds4.Model) -> None:
    s = model.new_session(ctx=256)
    s.prefill(ds4.render_chat([ds4.UserMessage("Renzo e Lucia")], think="high"))
    turn = s.generate(max_tokens=20)
    assert turn.reasoning is not None  # the demo closes <think> at once: ""
    assert turn.usage.reasoning_tokens >= 1


def test_cancel_stops_prefill_and_generation(model: ds4.Model) -> None:
    s = model.new_session(ctx=256, chunk=4)
    prompt = model.tokenize(ds4.render_chat([ds4.UserMessage("Quel ramo del lago di Como")]))
    asked = iter([False, False, True])
    with pytest.raises(ds4.CancelledError):
        s.prefill(prompt, cancel=lambda: next(asked))
    assert len(s) == 8  # two chunks of 4 made it in
    s.prefill(prompt)
    assert s.generate(max_tokens=10, cancel=lambda: True).finish == "cancelled"


def test_stop_strings_end_the_turn(session: ds4.Session) -> None:
    free = session.snapshot()
    text = session.generate(max_tokens=40).content
    assert len(text) > 4
    session.restore(free)
    stop = text[2:4]
    turn = session.generate(max_tokens=40, stops=[stop])
    assert turn.finish == "stop" and turn.stop == stop
    assert turn.content == text[: text.index(stop)]


def test_bad_payloads_and_foreign_snapshots(model: ds4.Model, session: ds4.Session) -> None:
    other = model.new_session(ctx=128)
    with pytest.raises(ds4.Ds4Error, match="context 256, not 128"):
        other.restore(session.snapshot())
    other.prefill([0, 5, 6])
    with pytest.raises(ds4.Ds4Error):
        other.load_payload(b"DSV4 but not really")
    assert len(other) == 0  # a bad payload empties the session


# ---- chat rendering -----------------------------------------------------------------


def test_think_modes_and_their_fallback() -> None:
    user = [ds4.UserMessage("x")]
    assert ds4.render_chat(user, think="none").endswith("<｜Assistant｜></think>")
    assert MAX_PREFIX_START not in ds4.render_chat(user, think="max", ctx=4096)
    assert MAX_PREFIX_START in ds4.render_chat(user, think=ds4.ThinkMode.MAX)
    with pytest.raises(ds4.Ds4Error, match="think 'maybe': use one of 'none', 'high', 'max'"):
        ds4.render_chat(user, think="maybe")
    wire = {"role": "user", "content": "x"}
    with pytest.raises(ds4.Ds4Error, match=r"messages\[1\] is a dict, not a message"):
        ds4.render_chat([*user, wire])  # type: ignore[list-item]
    with pytest.raises(ds4.Ds4Error, match="non-empty string 'name'"):
        ds4.render_chat(user, tools=[{"type": "function", "function": {"name": ""}}])


def test_request_bodies_in_every_form() -> None:
    body = '{"messages": [{"role": "user", "content": "ciao"}], "think": false}'
    expected = ds4.render_chat([ds4.UserMessage("ciao")], think="none")
    assert ds4.render_chat_request(body) == expected
    assert ds4.render_chat_request(body.encode()) == expected
    assert ds4.render_chat_request(body, think="high").endswith("<think>")
    with pytest.raises(ds4.ChatRequestError, match="invalid chat request"):
        ds4.render_chat_request(b"{not json")
    with pytest.raises(ds4.ChatRequestError, match="nothing to answer"):
        ds4.render_chat_request({"messages": [{"role": "assistant", "content": "hi"}]})


# ---- .kv files and tool memory -------------------------------------------------------


def test_kv_files_carry_the_tool_memory(model: ds4.Model, tmp_path: Path) -> None:
    calls = (ds4.ToolCall("read_file", '{"path": "a.txt"}', "call_" + "ab" * 16),)
    block = ds4.render_tool_calls(calls)
    memory = ds4.tool_memory()
    memory.remember(calls, block)
    prompt = ds4.render_chat(
        [ds4.UserMessage("leggi a.txt"), ds4.AssistantMessage("", tool_calls=calls),
         ds4.ToolResultMessage("ciao", tool_call_id=calls[0].id)],
    )  # fmt: skip
    s = model.new_session(ctx=512)
    s.prefill(prompt)
    files = model.kv_files(tmp_path)
    assert files.save(s, prompt, tool_memory=memory)

    fresh = ds4.tool_memory()
    again = model.new_session(ctx=512)
    assert files.load(again, prompt, tool_memory=fresh) == len(s)
    assert fresh.lookup(calls[0].id) == block


def test_a_damaged_kv_file_is_never_loaded(
    model: ds4.Model, session: ds4.Session, tmp_path: Path
) -> None:
    files = model.kv_files(tmp_path)
    text = model.detokenize(session.tokens)
    assert files.save(session)  # keyed by the text of its tokens
    (path,) = tmp_path.glob("*.kv")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    fresh = model.new_session(ctx=256)
    assert files.load(fresh, text) == 0
    assert len(fresh) == 0
    assert not list(tmp_path.glob("*.kv"))  # set aside into quarantine/


def test_min_tokens_skips_short_sessions(
    model: ds4.Model, session: ds4.Session, tmp_path: Path
) -> None:
    files = model.kv_files(tmp_path, min_tokens=len(session) + 1)
    assert not files.save(session)
    assert len(files) == 0
