"""DeepSeek V4 model description: hyperparameters, presets, tensor catalog, validation."""
