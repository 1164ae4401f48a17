"""Disk KV cache: the .kv file format and the store policy (docs/reference/formats.md §9–10,
docs/reference/server.md §4.3–4.5)."""
