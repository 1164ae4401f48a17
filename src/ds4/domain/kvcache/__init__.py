"""Disk KV cache: the .kv file format and the store policy (formats.md §6-7, server.md §6)."""
