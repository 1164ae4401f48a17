"""GGUF container facts as plain values: type tables and metadata/tensor records."""
