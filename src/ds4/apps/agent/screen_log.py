"""The screen's scrollback: the worker's output split into lines (ANSI styling kept),
the last few thousand kept, a view that can be scrolled back."""

from __future__ import annotations

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
