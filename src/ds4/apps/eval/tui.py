"""The full-screen view (prompt-toolkit): the case list with its running score on the
left; the speed and phase, the question and the live output on the right. The run goes
on a worker thread; keys steer it through RunControls (docs/eval.md "The screen")."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

from prompt_toolkit.application import Application, get_app
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import HSplit, Layout, VSplit, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.styles import Style

from ds4.apps.eval.run_control import RunControls
from ds4.apps.eval.tui_render import (
    STYLE_SHEET,
    left_pane,
    left_width,
    question_lines,
    status_line,
    stream_tail,
)
from ds4.apps.eval.tui_state import TuiState
from ds4.domain.eval.runner import RunOutcome

QUESTION_ROWS = 3
_EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def _size() -> tuple[int, int]:
    size = get_app().output.get_size()
    return size.columns, size.rows


def _keys(state: TuiState, controls: RunControls) -> KeyBindings:
    keys = KeyBindings()

    @keys.add("p")
    def _pause(event: KeyPressEvent) -> None:
        controls.toggle_pause()
        state.invalidate()

    @keys.add("q")
    def _quit(event: KeyPressEvent) -> None:
        controls.quit()

    @keys.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        controls.quit(signalled=True)

    @keys.add("up")
    def _up(event: KeyPressEvent) -> None:
        state.move(-1)

    @keys.add("down")
    def _down(event: KeyPressEvent) -> None:
        state.move(1)

    @keys.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        running = state.running
        controls.run_next(state.selected + 1, running=None if running is None else running + 1)

    return keys


def build_application(state: TuiState, controls: RunControls) -> Application[None]:
    def left() -> StyleAndTextTuples:
        columns, rows = _size()
        return left_pane(state.snapshot(), left_width(columns), rows)

    def status() -> StyleAndTextTuples:
        return status_line(state.snapshot())

    def question() -> StyleAndTextTuples:
        columns, _ = _size()
        return question_lines(state.snapshot(), columns - left_width(columns) - 1, QUESTION_ROWS)

    def stream() -> StyleAndTextTuples:
        columns, rows = _size()
        height = rows - 2 - QUESTION_ROWS
        return stream_tail(state.snapshot(), columns - left_width(columns) - 1, height)

    right = HSplit(
        [
            Window(FormattedTextControl(status), height=1),
            Window(FormattedTextControl(question), height=QUESTION_ROWS),
            Window(height=1, char="─"),
            Window(FormattedTextControl(stream)),
        ]
    )
    body = VSplit(
        [
            Window(FormattedTextControl(left), width=lambda: left_width(_size()[0])),
            Window(width=1, char="│"),
            right,
        ]
    )
    return Application(
        layout=Layout(body),
        key_bindings=_keys(state, controls),
        style=Style.from_dict(STYLE_SHEET),
        full_screen=True,
        refresh_interval=0.5,  # the elapsed clock moves even when nothing is streamed
    )


def run_full_screen(
    run: Callable[[], RunOutcome], state: TuiState, controls: RunControls
) -> tuple[RunOutcome | None, int | None]:
    """Run the eval on a worker thread under the full-screen view; returns its outcome
    (None if the worker failed; it re-raises) and the signal that ended it, if any."""
    app = build_application(state, controls)
    outcome: list[RunOutcome] = []
    failure: list[BaseException] = []
    got_signal: list[int] = []

    def work() -> None:
        try:
            outcome.append(run())
        except BaseException as error:  # shown after the screen is restored
            failure.append(error)
        finally:
            loop = app.loop  # set before pre_run_callables start this thread
            if loop is not None:
                loop.call_soon_threadsafe(app.exit)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        got_signal.append(signum)
        controls.quit(signalled=True)

    state.invalidate = app.invalidate
    previous = {sig: signal.signal(sig, on_signal) for sig in _EXIT_SIGNALS}
    worker = threading.Thread(target=work, name="ds4-eval-run", daemon=True)
    try:
        app.pre_run_callables.append(worker.start)
        app.run()
        worker.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failure:
        raise failure[0]
    return (outcome[0] if outcome else None), (got_signal[0] if got_signal else None)
