"""Constrained decoding: what a request asks its output to match (docs/structured-outputs.md)."""
