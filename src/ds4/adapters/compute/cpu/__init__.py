"""The native CPU compute backend: the reference engine's forward pass and state with
every weight product on the C kernels of ds4._native_cpu."""

from ds4.adapters.compute.cpu.runner import CpuRunner, cpu_runner, open_cpu_runner

__all__ = ["CpuRunner", "cpu_runner", "open_cpu_runner"]
