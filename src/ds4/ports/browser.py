"""Browser: a page rendered by a real browser engine, as text (docs/agent.md, visit_page)."""

from __future__ import annotations

from typing import Protocol

from ds4.domain.engine.cancel import CancelCheck


class Browser(Protocol):
    def visit(self, url: str, cancel: CancelCheck) -> str:
        """The rendered page as Markdown-like text (title, headings, links, text);
        ToolError naming what to install when no browser is available."""
        ...

    def close(self) -> None: ...
