"""SSD streaming's pure parts: eviction policies replayed on routing traces, the expert
budget, and the expert profile format (docs/ssd-streaming.md)."""
