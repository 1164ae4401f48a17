"""The full-terminal UI on prompt-toolkit (docs/agent.md "The screen", "Keys"):
scrollback, a queue preview, the yes/no question, the input editor and the status
footer. Runs in the main thread; everything it knows of the worker comes through the
channel, and it is redrawn whenever the channel says something changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.data_structures import Point
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import ANSI, StyleAndTextTuples, to_formatted_text
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import (
    ConditionalContainer,
    Dimension,
    FormattedTextControl,
    HSplit,
    Layout,
    Window,
)
from prompt_toolkit.layout.controls import BufferControl
from prompt_toolkit.layout.processors import BeforeInput
from prompt_toolkit.styles import Style

from ds4.apps.agent.channel import AgentChannel
from ds4.domain.agent.screen import footer_text
from ds4.domain.agent.slash import (
    COMMANDS,
    HELP,
    SlashCommand,
    parse_slash,
    usage_error,
    when_busy,
)

PROMPT = "ds4-agent> "
QUEUE_ROWS = 3
STYLE = Style.from_dict(
    {
        "footer": "bg:#444444 #d0d0d0",
        "question": "bold #ffd700",
        "queued": "bold #5fffff",
        "prompt": "bold",
    }
)


class SlashCompleter(Completer):
    """Tab: command names, and saved session ids after /switch, /del, /strip."""

    def __init__(self, channel: AgentChannel) -> None:
        self._channel = channel

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/"):
            return
        name, space, arg = text[1:].partition(" ")
        if not space:
            for command in COMMANDS:
                if command.startswith(name):
                    yield Completion("/" + command, start_position=-len(text))
            return
        if name in ("switch", "del", "strip"):
            width = 40 if len(arg) > 8 else 8
            for session in self._channel.session_ids:
                if session.startswith(arg.lower()):
                    yield Completion(session[:width], start_position=-len(arg))


def _one_line(text: str) -> str:
    return text.replace("\n", " ").replace("\r", " ").replace("\t", " ")


class AgentScreen:
    def __init__(
        self, channel: AgentChannel, history_file: Path | None, first_task: str | None = None
    ) -> None:
        self.channel = channel
        self._first_task = first_task  # -p: submitted once the worker is ready
        self.log = ScreenLog()
        self._cache: tuple[int, StyleAndTextTuples] = (-1, [])
        # "Save current session?" before leaving, /new or /switch: what comes after it
        self._then: SlashCommand | None = None
        self._after_save: SlashCommand | None = None  # runs once the save is done
        self._done = False
        history: History = FileHistory(str(history_file)) if history_file else InMemoryHistory()
        self.buffer = Buffer(
            multiline=True,
            history=history,
            completer=SlashCompleter(channel),
            complete_while_typing=False,
        )
        self.app: Application[int] = Application(
            layout=self._layout(),
            key_bindings=self._bindings(),
            style=STYLE,
            full_screen=True,
            refresh_interval=0.25,
            min_redraw_interval=0.05,
        )
        self.app.ttimeoutlen = 0.1
        channel.on_change = self.app.invalidate

    # ---- layout ---------------------------------------------------------------

    def _output(self) -> StyleAndTextTuples:
        self.log.add(self.channel.take_output())
        self._check_exit()
        version, fragments = self._cache
        if version != self.log.version:
            fragments = to_formatted_text(ANSI("\n".join(self.log.visible())))
            self._cache = (self.log.version, fragments)
        return fragments

    def _cursor(self) -> Point:
        return Point(0, max(0, len(self.log.visible()) - 1))

    def _question(self) -> StyleAndTextTuples:
        if self._then is not None:
            return [("class:question", "Save current session? (y/n) ")]
        q = self.channel.question()
        if q is None:
            return []
        left = (
            ""
            if q.deadline is None
            else f" [auto-no in {max(0, int(q.deadline - time.monotonic() + 0.999))}s]"
        )
        return [("class:question", f"{q.text} (y/n){left} ")]

    def _queue(self) -> StyleAndTextTuples:
        rows: StyleAndTextTuples = []
        queued = self.channel.queued()
        for text in queued[:QUEUE_ROWS]:
            line = _one_line(text)
            if len(line) > 60:
                line = line[:60] + f"... {len(text) - 60} characters more ..."
            rows.append(("class:queued", f"queued: {line} (ctrl+x to edit, ESC to send ASAP)\n"))
        if len(queued) > QUEUE_ROWS:
            rows.append(("class:queued", f"... {len(queued) - QUEUE_ROWS} more queued\n"))
        return rows

    def _footer(self) -> StyleAndTextTuples:
        return [("class:footer", " " + footer_text(self.channel.status()))]

    def _layout(self) -> Layout:
        asking = Condition(lambda: self._then is not None or self.channel.question() is not None)
        queued = Condition(lambda: bool(self.channel.queued()))
        self.input = Window(
            BufferControl(
                self.buffer, input_processors=[BeforeInput(PROMPT, style="class:prompt")]
            ),
            height=lambda: Dimension.exact(min(8, self.buffer.document.line_count)),
            wrap_lines=True,
        )
        body = HSplit(
            [
                Window(
                    FormattedTextControl(self._output, get_cursor_position=self._cursor),
                    wrap_lines=True,
                ),
                ConditionalContainer(
                    Window(FormattedTextControl(self._queue), height=Dimension(max=QUEUE_ROWS + 1)),
                    filter=queued,
                ),
                ConditionalContainer(
                    Window(FormattedTextControl(self._question), height=1), filter=asking
                ),
                self.input,
                Window(FormattedTextControl(self._footer), height=1, style="class:footer"),
            ]
        )
        return Layout(body, focused_element=self.input)

    # ---- keys -----------------------------------------------------------------

    def _bindings(self) -> KeyBindings:
        kb = KeyBindings()
        asking = Condition(lambda: self._then is not None or self.channel.question() is not None)
        empty = Condition(lambda: not self.buffer.text)
        with_queue = Condition(lambda: self.channel.busy and bool(self.channel.queued()))

        @kb.add("enter", filter=~asking)
        def _enter(event: KeyPressEvent) -> None:
            self._enter()

        @kb.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            self.buffer.insert_text("\n")

        @kb.add("c-c")
        def _interrupt(event: KeyPressEvent) -> None:
            self._ctrl_c()

        @kb.add("c-d", filter=empty & ~asking)
        def _leave(event: KeyPressEvent) -> None:
            self._leave()

        @kb.add("c-x")
        def _unqueue(event: KeyPressEvent) -> None:
            text = self.channel.pop_queued()
            if text is not None:
                self.buffer.document = Document(text + self.buffer.text, len(text))

        @kb.add("escape", filter=with_queue)
        def _send_now(event: KeyPressEvent) -> None:
            self.channel.interrupt()

        @kb.add("pageup")
        def _up(event: KeyPressEvent) -> None:
            self.log.scroll(10)

        @kb.add("pagedown")
        def _down(event: KeyPressEvent) -> None:
            self.log.scroll(-10)

        for key, yes in (("y", True), ("Y", True), ("n", False), ("N", False)):
            kb.add(key, filter=asking)(self._answerer(yes))

        @kb.add("<any>", filter=asking)
        def _ignore(event: KeyPressEvent) -> None:
            return None  # other keys wait: the question needs y or n

        return kb

    def _answerer(self, yes: bool) -> Callable[[KeyPressEvent], None]:
        def answer(event: KeyPressEvent) -> None:
            then = self._then
            if then is not None:
                self._then = None
                if yes and self.channel.command(SlashCommand("save", "")):
                    self._after_save = then
                else:
                    self._do(then)
                return
            self.channel.answer(yes)

        return answer

    # ---- actions --------------------------------------------------------------

    def _ctrl_c(self) -> None:
        if self.channel.question() is not None or self.channel.busy:
            self.channel.interrupt()
            return
        if self._then is not None:
            self._then = None  # the question is dropped, nothing else happens
            return
        self.buffer.reset()
        self.log.line("\x1b[38;5;245mpress Ctrl+D to exit\x1b[0m")

    def _leave(self) -> None:
        if self.channel.busy:
            self.channel.interrupt()
        self._save_first(SlashCommand("quit", ""))

    def _save_first(self, then: SlashCommand) -> None:
        """Ask to save a changed session before `then` (quit, /new, /switch)."""
        if self.channel.dirty and not self.channel.busy:
            self._then = then
        else:
            self._do(then)

    def _do(self, command: SlashCommand) -> None:
        if command.name == "quit":
            self._finish(0)
        elif not self.channel.command(command):
            self.log.line(f"command requires the model to be idle: /{command.name}")

    def _finish(self, code: int) -> None:
        """Leave the application (once: a redraw may come before it is gone)."""
        if not self._done:
            self._done = True
            self.app.exit(result=code)

    def _check_exit(self) -> None:
        if self.channel.failure is not None:
            self._finish(1)
            return
        if self._first_task is not None and self.channel.submit(self._first_task):
            self._first_task = None
        if self._after_save is not None and not self.channel.busy:
            then, self._after_save = self._after_save, None
            if self.channel.dirty:  # the save failed: its message is on screen
                self.log.line("not done: the session was not saved")
            else:
                self._do(then)

    def _enter(self) -> None:
        text = self.buffer.text.strip()
        if not text:
            return
        self.buffer.append_to_history()
        self.buffer.reset()
        if text.startswith("/"):
            self._slash(text)
        elif not self.channel.submit(text):
            self.channel.queue(text)

    def _slash(self, line: str) -> None:
        command = parse_slash(line)
        if command is None:
            self.app.output.bell()
            self.buffer.document = Document(line, len(line))
            self.log.line(f"unknown command: {line.split(maxsplit=1)[0]} (/help lists them)")
            return
        problem = usage_error(command)
        if problem is not None:
            self.log.line(problem)
            return
        if command.name == "help":
            self.log.line(HELP)
        elif command.name in ("quit", "exit"):
            self._leave()
        elif self.channel.busy:
            if when_busy(command) == "later":
                self.channel.schedule(command.name)
                self.log.line(
                    "save scheduled at next safe point"
                    if command.name == "save"
                    else "compaction scheduled at next safe point"
                )
            else:
                self.log.line(f"command requires the model to be idle: /{command.name}")
        elif command.name in ("new", "switch"):
            self._save_first(command)
        else:
            self.channel.command(command)

    def run(self) -> int:
        return self.app.run() or 0


# ---- screen log ----------------------------------------------------------------------
# The screen's scrollback: the worker's output split into lines (ANSI styling kept), the
# last few thousand kept, a view that can be scrolled back.


MAX_LINES = 4000


class ScreenLog:
    def __init__(self) -> None:
        self.lines: list[str] = [""]
        self.back = 0  # lines scrolled back from the bottom
        self.version = 0  # bumps on every change (the view's cache key)

    def add(self, text: str) -> None:
        if not text:
            return
        parts = text.replace("\r\n", "\n").split("\n")
        self.lines[-1] += parts[0]
        self.lines += parts[1:]
        if len(self.lines) > MAX_LINES:
            del self.lines[: len(self.lines) - MAX_LINES]
        self.version += 1

    def line(self, text: str) -> None:
        """A whole line of the UI's own (started on a fresh line)."""
        if self.lines[-1]:
            self.add("\n")
        self.add(text + "\n")

    def scroll(self, rows: int) -> None:
        self.back = max(0, min(len(self.lines) - 1, self.back + rows))
        self.version += 1

    def visible(self) -> list[str]:
        """The lines up to the scroll position (a trailing empty line left out)."""
        end = len(self.lines) - self.back
        lines = self.lines[:end]
        if lines and not lines[-1] and self.back == 0:
            lines = lines[:-1]
        return lines
