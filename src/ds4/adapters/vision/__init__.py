"""Image file decoding (docs/vision.md §2)."""
