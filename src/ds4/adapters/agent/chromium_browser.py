"""The Browser port on a headless Chromium driven by Playwright
(docs/adr/0051-agent-tools-and-web-page-tool.md).

The browser is the system's Chromium (Debian: `apt-get install chromium`), found on
PATH or named by $DS4_CHROMIUM; Playwright (`pip install playwright`) drives it through
`executable_path`, so no browser download is ever needed. It starts on the first visit
and lives until the agent leaves. A page becomes Markdown-like text in the page itself
(headings, links, list items, code blocks, paragraphs).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from ds4.domain.agent.tool_catalog import ToolError
from ds4.domain.engine.cancel import CancelCheck

PAGE_TIMEOUT_MS = 20_000
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = (
    "visit_page needs Chromium and the playwright package: apt-get install chromium "
    "(or set DS4_CHROMIUM to a Chromium or Chrome binary) and pip install playwright"
)

# Runs in the page: the visible document as Markdown-like text.
_TO_TEXT = r"""
() => {
  const out = [];
  const skip = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "SVG", "HEAD"]);
  const inline = (node) => {
    if (node.nodeType === Node.TEXT_NODE) return node.textContent.replace(/\s+/g, " ");
    if (node.nodeType !== Node.ELEMENT_NODE || skip.has(node.tagName)) return "";
    const style = window.getComputedStyle(node);
    if (style && (style.display === "none" || style.visibility === "hidden")) return "";
    const inner = Array.from(node.childNodes).map(inline).join("");
    if (node.tagName === "A" && node.href) return `[${inner.trim()}](${node.href})`;
    if (node.tagName === "CODE") return "`" + inner + "`";
    if (node.tagName === "BR") return "\n";
    return inner;
  };
  const blocks = new Set(["P", "DIV", "SECTION", "ARTICLE", "MAIN", "HEADER", "FOOTER",
    "NAV", "ASIDE", "TABLE", "TR", "FORM", "BLOCKQUOTE", "FIGURE", "BODY"]);
  const walk = (node) => {
    if (node.nodeType !== Node.ELEMENT_NODE || skip.has(node.tagName)) return;
    const tag = node.tagName;
    if (/^H[1-6]$/.test(tag)) { out.push("#".repeat(+tag[1]) + " " + inline(node).trim()); return; }
    if (tag === "LI") { out.push("- " + inline(node).trim()); return; }
    if (tag === "PRE") { out.push("```\n" + node.innerText.replace(/\n$/, "") + "\n```"); return; }
    const hasBlock = Array.from(node.children).some(
      (c) => blocks.has(c.tagName) || /^H[1-6]$/.test(c.tagName) ||
             ["UL", "OL", "LI", "PRE"].includes(c.tagName));
    if (!hasBlock) { const t = inline(node).trim(); if (t) out.push(t); return; }
    for (const child of node.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) {
        const t = child.textContent.trim(); if (t) out.push(t);
      } else walk(child);
    }
  };
  walk(document.body || document.documentElement);
  const title = document.title ? "# " + document.title.trim() + "\n\n" : "";
  return title + out.filter((t) => t.length).join("\n\n");
}
"""


def find_chromium() -> str | None:
    named = os.environ.get("DS4_CHROMIUM")
    if named:
        return named if os.access(named, os.X_OK) else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class ChromiumBrowser:
    def __init__(self) -> None:
        self._playwright: Any = None
        self._browser: Any = None

    def _launch(self) -> Any:
        if self._browser is not None:
            return self._browser
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            raise ToolError(INSTALL_HINT + " (the playwright package is missing)") from None
        executable = find_chromium()
        if executable is None:
            raise ToolError(INSTALL_HINT + " (no Chromium found)")
        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=executable, headless=True
            )
        except Exception as exc:  # Playwright's own Error: the launch failed
            self._playwright.stop()
            self._playwright = None
            raise ToolError(
                f"cannot start Chromium ({executable}): {str(exc).splitlines()[0]}"
            ) from None
        return self._browser

    def visit(self, url: str, cancel: CancelCheck) -> str:
        if cancel():
            raise ToolError("interrupted")
        browser = self._launch()
        page = browser.new_page()
        try:
            page.goto(url, timeout=PAGE_TIMEOUT_MS, wait_until="load")
            if cancel():
                raise ToolError("interrupted")
            return str(page.evaluate(_TO_TEXT))
        except ToolError:
            raise
        except Exception as exc:  # Playwright's Error and TimeoutError
            raise ToolError(f"cannot open {url}: {str(exc).splitlines()[0]}") from None
        finally:
            page.close()

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._browser = None
        if self._playwright is not None:
            self._playwright.stop()
            self._playwright = None
