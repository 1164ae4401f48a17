"""Vulkan compute backend (docs/vulkan.md, docs/adr/0058-vulkan-compute-backend.md)."""
