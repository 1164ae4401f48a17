"""Speculative decoding: drafting tokens for the main model to verify (docs/mtp.md)."""
