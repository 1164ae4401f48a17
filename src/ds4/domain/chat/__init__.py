"""DeepSeek V4 chat template: messages, thinking modes, prompt rendering (tokenizer-chat.md §6)."""
