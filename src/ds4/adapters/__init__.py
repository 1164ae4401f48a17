"""Implementations of the ports, one technology each."""
