"""Every `python` block of docs/library.md runs, as written, on the demo model.

Each block is a complete script; it runs from the repository root (where
models/demo.gguf is) in a fresh namespace, and its own asserts are the checks.
"""

from __future__ import annotations

import pytest
from tests.support.doc_examples import DEMO_MODEL, REPO, Example, python_examples

EXAMPLES = python_examples()


def test_the_page_has_its_examples() -> None:
    headings = [e.heading for e in EXAMPLES]
    assert len(EXAMPLES) >= 8, headings
    assert headings[0] == "Quick start"  # the one the wheel test runs outside the repo
    assert DEMO_MODEL in EXAMPLES[0].code


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: f"line{e.line}")
def test_example_runs(example: Example, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    code = compile(example.code, f"docs/library.md:{example.line}", "exec")
    exec(code, {"__name__": "__main__"})
