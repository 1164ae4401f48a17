"""Source checkpoints (config.json + safetensors) for the converter."""
