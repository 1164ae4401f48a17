"""The streaming check of an `edit` (docs/agent.md "Tools", edit): as soon as a call's
`path` and `old` are both complete, see whether `old` selects a span of the file. When
it does not, the worker stops generation before `new` is sampled and returns the
reason as the tool result."""

from __future__ import annotations

import json
from collections.abc import Callable

from ds4.domain.generation.events import GenerationEvent, ToolCallArguments, ToolCallStarted

SelectorCheck = Callable[[str, str], str | None]  # (path, old) -> reason or None


class EditPreflight:
    def __init__(self, check: SelectorCheck) -> None:
        self._check = check
        self._calls: dict[int, tuple[str, dict[str, object]]] = {}
        self._checked: set[int] = set()
        self.failed: str | None = None

    def feed(self, event: GenerationEvent) -> None:
        if isinstance(event, ToolCallStarted):
            self._calls[event.index] = (event.name, {})
        elif isinstance(event, ToolCallArguments) and event.index in self._calls:
            self._member(event.index, event.fragment)

    def _member(self, index: int, fragment: str) -> None:
        body = fragment.lstrip(",")
        if body in ("{", "}", ""):
            return
        try:
            value = json.loads("{" + body + "}")
        except ValueError:
            return
        if not isinstance(value, dict):
            return
        name, args = self._calls[index]
        args.update(value)
        if name != "edit" or index in self._checked or self.failed is not None:
            return
        path, old = args.get("path"), args.get("old")
        if isinstance(path, str) and isinstance(old, str):
            self._checked.add(index)
            self.failed = self._check(path, old)
