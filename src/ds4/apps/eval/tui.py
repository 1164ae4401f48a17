"""The full-screen view (prompt-toolkit): the case list with its running score on the
left; the speed and phase, the question and the live output on the right. The run goes
on a worker thread; keys steer it through RunControls (docs/eval.md "The screen")."""

from __future__ import annotations

import signal
import textwrap
import threading
from collections.abc import Callable
from types import FrameType

from prompt_toolkit.application import Application, get_app
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import HSplit, Layout, VSplit, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.styles import Style

from ds4.apps.eval.views import RunControls, Snapshot, TuiState
from ds4.domain.eval.report import hours_minutes
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


# ---- tui render ----------------------------------------------------------------------
# What the full-screen view draws (docs/eval.md "The screen"), as prompt-toolkit
# formatted text built from a Snapshot: pure functions of the snapshot and the size.


Fragments = StyleAndTextTuples

STYLES = {
    "PEND": "class:pend",
    "FILL": "class:fill",
    "RUN": "class:run",
    "SKIP": "class:skip",
    "STOP": "class:stop",
    "PASS": "class:pass",
    "FAIL": "class:fail",
    "ERR": "class:fail",
}
STYLE_SHEET = {
    "pend": "#888888",
    "fill": "ansicyan",
    "run": "ansiyellow",
    "skip": "#888888",
    "stop": "bold ansiyellow",
    "pass": "bold ansigreen",
    "fail": "bold ansired",
    "paused": "bold ansired",
    "selected": "reverse",
    "question": "ansiblue",
    "thinking": "#888888",
    "answer": "",
    "title": "bold",
}


def left_width(columns: int) -> int:
    return min(max(columns // 2, 42), 72)


def short_count(n: int) -> str:
    """Counts >= 10 000 as `Nk`, >= 1 000 000 as `Nm`."""
    if n >= 1_000_000:
        return f"{n // 1_000_000}m"
    if n >= 10_000:
        return f"{n // 1000}k"
    return str(n)


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def left_pane(s: Snapshot, width: int, height: int) -> Fragments:
    out: Fragments = [("class:title", f"ds4-eval (p)ause (q)uit {hours_minutes(s.elapsed)}")]
    if s.paused:
        out += [("", " "), ("class:paused", "PAUSED")]
    out.append(("", "\n"))
    out.append(("", f"score {s.passed}/{len(s.rows)}  failed {s.failed}\n"))
    room = max(height - 2, 1)
    first = min(max(s.selected - room // 2, 0), max(len(s.rows) - room, 0))
    for index in range(first, min(first + room, len(s.rows))):
        number, short, source, title, given, correct = s.rows[index]
        mark = ">" if index == s.selected else " "
        right = f" {given}/{correct}" if given or correct else ""
        head = f"{mark}{number:02d} "
        body = _fit(f"{source}: {title}", max(width - len(head) - 5 - len(right), 1))
        line_style = "class:selected" if index == s.selected else ""
        pad = " " * max(width - len(head) - 5 - len(body) - len(right), 0)
        out += [
            (line_style, head),
            (STYLES.get(short, ""), f"{short:<4} "),
            (line_style, body + pad + right),
            ("", "\n"),
        ]
    return out


def status_line(s: Snapshot) -> Fragments:
    done, total = s.progress
    if s.phase == "FILL":
        pct = 100 * done // total if total else 0
        phase = f"FILL {short_count(done)}/{short_count(total)} {pct}%"
    elif s.phase in ("THINK", "ANS"):
        phase = f"{s.phase} {short_count(done)}/{short_count(total)}"
    else:
        phase = "idle"
    return [("class:title", f"Speed {s.speed:.1f} t/s  {phase}  {s.current_id}")]


def question_lines(s: Snapshot, width: int, rows: int = 3) -> Fragments:
    lines = textwrap.wrap(" ".join(s.question.split()), max(width, 1))[:rows]
    return [("class:question", "\n".join(lines))]


def stream_tail(s: Snapshot, width: int, height: int) -> Fragments:
    """The last `height` wrapped lines of the streamed output, styles kept."""
    width = max(width, 1)
    lines: list[Fragments] = [[]]
    column = 0
    for style, text in s.stream:
        for k, part in enumerate(text.split("\n")):
            if k:
                lines.append([])
                column = 0
            rest = part
            while rest:
                if column >= width:
                    lines.append([])
                    column = 0
                piece, rest = rest[: width - column], rest[width - column :]
                lines[-1].append((style, piece))
                column += len(piece)
    out: Fragments = []
    for i, line in enumerate(lines[-max(height, 1) :]):
        if i:
            out.append(("", "\n"))
        out += line
    return out
