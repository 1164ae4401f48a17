"""visit_page on a real headless Chromium, against a page served on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ds4.adapters.agent.tools import ChromiumBrowser, find_chromium
from ds4.domain.agent.tool_catalog import ToolError

PAGE = b"""<!doctype html><html><head><title>Agent test page</title>
<style>.hidden { display: none }</style></head>
<body><h1>Heading one</h1><p>First <b>paragraph</b> with <a href="/next">a link</a>.</p>
<ul><li>apples</li><li>pears</li></ul><p class="hidden">invisible words</p>
<pre>x = 1
y = 2</pre><div id="late"></div>
<script>document.getElementById("late").textContent = "written by " + "javascript";</script>
</body></html>"""


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def page_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/page"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[ChromiumBrowser]:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install playwright)")
    if find_chromium() is None:
        pytest.skip("no Chromium on PATH (apt-get install chromium)")
    chromium = ChromiumBrowser()
    yield chromium
    chromium.close()


def test_a_rendered_page_comes_back_as_text(browser: ChromiumBrowser, page_url: str) -> None:
    text = browser.visit(page_url, lambda: False)
    assert text.startswith("# Agent test page\n\n# Heading one\n")
    assert "First paragraph with [a link](http://127.0.0.1:" in text
    assert "- apples\n\n- pears" in text
    assert "```\nx = 1\ny = 2\n```" in text
    assert "written by javascript" in text  # the script ran: a real browser rendered it
    assert "invisible words" not in text


def test_an_unreachable_page_is_a_tool_error(browser: ChromiumBrowser) -> None:
    with pytest.raises(ToolError, match=r"cannot open http://127\.0\.0\.1:9/"):
        browser.visit("http://127.0.0.1:9/", lambda: False)


def test_without_a_browser_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4_CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(ToolError, match=r"apt-get install chromium .* pip install playwright"):
        ChromiumBrowser().visit("http://127.0.0.1:9/", lambda: False)
