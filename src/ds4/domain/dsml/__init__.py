"""DeepSeek's DSML tool-call markup: render, parse, stream-track, recover
(docs/reference/chat-and-dsml.md §3)."""
