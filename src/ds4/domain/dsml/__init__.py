"""DeepSeek's DSML tool-call markup: render, parse, stream-track, recover (server.md §4)."""
