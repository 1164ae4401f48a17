"""GGUF container: bounds-checked mmap reader and streaming writer."""
