"""Files the server keeps: KV cache checkpoints."""
