"""Tool-call ids and exact-DSML replay memory (docs/reference/chat-and-dsml.md §4)."""
