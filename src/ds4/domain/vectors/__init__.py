"""Recorded next-token vectors (DeepSeek's official API outputs, or a local model's own):
the files as data, the comparison rule, and teacher-forced NLL (docs/test-vectors.md)."""
