"""Tokenizer data as plain values: the byte-level alphabet and GGUF table checks."""
