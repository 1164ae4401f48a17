"""Tool-call ids and exact-DSML replay memory (server.md §5)."""
