"""Next-token choice from logits (server.md §0.3)."""
