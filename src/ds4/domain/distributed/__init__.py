"""Pure rules of layer-split (pipeline) inference: the session invariant's prefix hash,
layer ranges and how to split a model across workers (docs/distributed.md)."""
