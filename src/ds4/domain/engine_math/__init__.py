"""Pure numeric building blocks of the DeepSeek V4 forward pass (docs/reference/model.md §3, §4)."""
