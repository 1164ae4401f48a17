"""Interfaces (typing.Protocol) the core needs, plus small value types."""
