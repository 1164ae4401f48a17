"""The DeepSeek V4 Flash Vision encoder (docs/vision.md): its mmproj GGUF layout, image
preprocessing, the token block an image becomes, and the encoder math."""
