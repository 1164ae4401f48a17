"""The distributed compute backend: a model's layers split by range across Ray actors
(docs/distributed.md). Importing this package does not import Ray; starting a runner
does."""

from ds4.adapters.compute.ray.runner import RayRunner, ray_runner

__all__ = ["RayRunner", "ray_runner"]
