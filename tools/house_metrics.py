"""The grain of src/ds4 in numbers: module count, file lengths, and the static import
closure of a module (what importing it loads of ds4).

Run from the repository root: ``python -m tools.house_metrics [--closure MODULE ...]``.
The closure follows module-level imports only (the ones paid at import time): imports
inside functions are lazy by design and ``if TYPE_CHECKING:`` blocks never run.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
from collections import deque
from pathlib import Path

SRC = Path("src")
PACKAGE = "ds4"


def module_files(root: Path = SRC / PACKAGE) -> dict[str, Path]:
    """Every ds4 module by dotted name (a package by its __init__.py)."""
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and not _is_type_checking(node.test):
            pending.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            pending.extend(node.body + node.orelse + node.finalbody)
    return found


def imported_modules(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The ds4 modules that importing ``name`` imports directly at module level."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in _top_level_imports(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            # importing a.b.c loads a and a.b first
            parts = target.split(".")
            for end in range(1, len(parts) + 1):
                prefix = ".".join(parts[:end])
                if prefix in known:
                    found.add(prefix)
    found.discard(name)
    return found


def import_closure(root: str, known: dict[str, Path]) -> set[str]:
    seen = {root}
    queue = deque([root])
    while queue:
        current = queue.popleft()
        for target in imported_modules(current, known[current], known):
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--closure",
        action="append",
        default=[],
        metavar="MODULE",
        help="print the static import closure size of this module (repeatable)",
    )
    args = parser.parse_args(argv)
    known = module_files()
    lengths = sorted(len(p.read_text(encoding="utf-8").splitlines()) for p in known.values())
    print(f"modules: {len(known)}")
    print(f"median lines: {statistics.median(lengths):g}")
    print(f"under 40 lines: {sum(1 for n in lengths if n < 40)}")
    print(f"longest: {lengths[-1]}")
    for root in args.closure:
        if root not in known:
            print(f"{root}: not a ds4 module", file=sys.stderr)
            return 2
        closure = import_closure(root, known)
        plain = [m for m in closure if known[m].name != "__init__.py"]
        packages = len(closure) - len(plain)
        print(f"import closure of {root}: {len(plain)} modules (+{packages} packages)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
