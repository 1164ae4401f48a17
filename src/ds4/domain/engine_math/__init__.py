"""Pure numeric building blocks of the DeepSeek V4 forward pass (model.md §3, §7)."""
