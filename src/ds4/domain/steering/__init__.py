"""Directional steering: per-layer directions taken out of (or added to) sublayer
outputs, and how they are built (docs/steering.md)."""
