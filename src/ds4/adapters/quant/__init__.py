"""Quant formats: dequantizers (numpy reference, native C) and quantizers."""
