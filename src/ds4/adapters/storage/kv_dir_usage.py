"""How many bytes the disk KV cache holds, for the /metrics gauge.

Read at every scrape from another thread than the inference worker's, which owns the
KVStore; so this only lists the directory and stats the checkpoint names (40 hex
digits + `.kv`, docs/reference/formats.md §9), without opening or verifying any file
and without touching the store's state. Links are not followed (ADR 0006); temp files
of a write in progress and the quarantine are not counted, as the budget does not
count them either.
"""

from __future__ import annotations

import os

from ds4.domain.kvcache.kv_file import parse_cache_name


def kv_files_bytes(directory: str | os.PathLike[str]) -> int:
    total = 0
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if parse_cache_name(entry.name) is None:
                    continue
                try:
                    if entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue  # deleted (evicted) between listing and stat
    except OSError:
        return total  # the directory is gone or unreadable: nothing to count
    return total
