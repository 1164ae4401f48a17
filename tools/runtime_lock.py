"""Derive requirements-runtime.lock from requirements.lock: only what `ds4` needs to run.

`make serve` installs this subset (no test tools, no torch/transformers), so a first
start downloads and installs a fraction of what `make test` needs. The subset is the
transitive closure of pyproject.toml's [project] dependencies plus the package build's
requirements (build-requirements.in), read from the installed distributions' metadata,
with each entry copied verbatim (pins and hashes) from requirements.lock.

Run after `make lock` in a venv built from requirements.lock:
    .venv/bin/python -m tools.runtime_lock
`--check` exits 1 when the file on disk differs (the tests use it).
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
HEADER = "# Runtime subset of requirements.lock (derived by tools/runtime_lock.py; do not edit).\n"


def lock_blocks(text: str) -> dict[str, str]:
    """requirements.lock entries by canonical name: 'name==ver \\' + hash lines + comments."""
    blocks: dict[str, str] = {}
    current: list[str] = []
    for line in text.splitlines(keepends=True):
        if line[:1].isalnum():
            if current:
                blocks[_name(current[0])] = "".join(current)
            current = [line]
        elif current:
            current.append(line)
    if current:
        blocks[_name(current[0])] = "".join(current)
    return blocks


def _name(first_line: str) -> str:
    return canonicalize_name(re.split(r"[=<>!~ ;\\]", first_line, maxsplit=1)[0])


def roots() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = list(project["dependencies"])
    for line in (REPO / "build-requirements.in").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            names.append(line.strip())
    return [Requirement(n) for n in names]


def closure(start: list[Requirement]) -> set[str]:
    """Canonical names of the requirements and everything they pull in (no extras of
    theirs; environment markers evaluated for this interpreter)."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        for text in metadata.requires(req.name) or []:
            todo.append(Requirement(text))
    return seen


def render() -> str:
    blocks = lock_blocks((REPO / "requirements.lock").read_text(encoding="utf-8"))
    wanted = closure(roots())
    missing = sorted(wanted - blocks.keys())
    if missing:
        raise SystemExit(f"not in requirements.lock: {', '.join(missing)}")
    return HEADER + "".join(blocks[name] for name in sorted(wanted))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = ap.parse_args()
    target = REPO / "requirements-runtime.lock"
    text = render()
    if args.check:
        same = target.exists() and target.read_text(encoding="utf-8") == text
        print("requirements-runtime.lock is " + ("current" if same else "stale"))
        return 0 if same else 1
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target.name}: {text.count('==')} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
