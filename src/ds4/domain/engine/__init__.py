"""Use-case orchestration over the compute port: the live session."""
