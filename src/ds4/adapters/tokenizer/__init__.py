"""Byte-level BPE tokenizer of DeepSeek V4: pure-Python reference and native fast path."""
