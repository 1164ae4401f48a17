"""`mypy --strict` accepts a program that uses only ds4.lib, and catches its misuse.

tests/fixtures/lib_consumer.py stands for a user's code: it imports nothing of ds4 but
ds4.lib and its public names. A second program with two deliberate type errors proves
that mypy sees ds4.lib's real annotations (an untyped or Any-typed face would pass it).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from tests.support.doc_examples import REPO

import ds4.lib

CONSUMER = REPO / "tests" / "fixtures" / "lib_consumer.py"

MISUSE = """\
import ds4.lib as ds4

def first_id(model: ds4.Model) -> str:
    return model.tokenize(42)[0]
"""


def ds4_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) of every import of a ds4 module; name None for `import x`."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == "ds4"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ds4":
            found += [(node.module or "", a.name) for a in node.names]
    return found


def test_the_consumer_imports_only_the_public_module() -> None:
    imports = ds4_imports(CONSUMER)
    assert ("ds4.lib", None) in imports
    for module, name in imports:
        assert module == "ds4.lib", module
        assert name is None or name in ds4.lib.__all__, name


def test_mypy_strict_accepts_the_consumer_and_catches_misuse(tmp_path: Path) -> None:
    misuse = tmp_path / "misuse.py"
    misuse.write_text(MISUSE, encoding="utf-8")
    env = {**os.environ, "MYPYPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.11",
         "--no-error-summary", "--hide-error-context", str(CONSUMER), str(misuse)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert not [line for line in lines if "lib_consumer.py" in line], done.stdout
    assert any('"tokenize" of "Model" has incompatible type "int"' in line for line in lines), (
        done.stdout + done.stderr
    )
    assert any(
        'Incompatible return value type (got "int", expected "str")' in line for line in lines
    ), done.stdout
