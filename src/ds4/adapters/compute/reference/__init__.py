"""The reference compute backend: a numpy DeepSeek V4 forward pass written for clarity."""

from ds4.adapters.compute.reference.runner import (
    ReferenceRunner,
    open_reference_runner,
    reference_runner,
)

__all__ = ["ReferenceRunner", "open_reference_runner", "reference_runner"]
