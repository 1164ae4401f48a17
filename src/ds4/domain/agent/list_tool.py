"""`list`: one directory's entries (docs/agent.md "Tools", list)."""

from __future__ import annotations

from collections.abc import Sequence

from ds4.ports.workspace import DirEntry

MAX_ENTRIES = 300


def list_report(path: str, entries: Sequence[DirEntry]) -> str:
    """`<path>:` then `<kind> <size> <name>` rows in directory order (`/` after a
    directory's name), at most 300."""
    out = [f"{path}:"]
    for entry in entries[:MAX_ENTRIES]:
        slash = "/" if entry.kind == "d" else ""
        out.append(f"{entry.kind} {entry.size:>10} {entry.name}{slash}")
    if len(entries) > MAX_ENTRIES:
        out.append("... more entries omitted ...")
    return "\n".join(out) + "\n"
