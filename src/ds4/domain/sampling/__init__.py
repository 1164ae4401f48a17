"""Next-token choice from logits (docs/reference/server.md §4.7)."""
