"""Compute adapters: implementations of ds4.ports.compute."""
