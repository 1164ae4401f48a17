"""Thin entry points: parse flags, ask the composition root for objects, run."""
