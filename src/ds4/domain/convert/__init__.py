"""Checkpoint conversion rules: quant presets, tensor naming, FP8/FP4 decoding (pure)."""
