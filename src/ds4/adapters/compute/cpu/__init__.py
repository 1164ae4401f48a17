"""The native CPU compute backend: every layer and the head in C (ds4._native_cpu) over
the mmapped GGUF blocks, with per-sequence state owned by the native side."""

from ds4.adapters.compute.cpu.runner import CpuRunner, cpu_runner, open_cpu_runner

__all__ = ["CpuRunner", "cpu_runner", "open_cpu_runner"]
