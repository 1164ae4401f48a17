"""Where the agent's file tools may go without asking: inside the working directory.

A path that resolves (symlinks followed, by the workspace) outside the root needs the
user's yes, whatever the tool; the checks here are on resolved absolute paths only.
"""

from __future__ import annotations

import posixpath


def is_inside(root: str, resolved: str) -> bool:
    """`resolved` is `root` or below it (both absolute and normalized)."""
    root = posixpath.normpath(root)
    resolved = posixpath.normpath(resolved)
    if root == "/":
        return True
    return resolved == root or resolved.startswith(root + "/")
