"""DeepSeek V4 chat template: messages, thinking modes, prompt rendering
(docs/reference/chat-and-dsml.md §2)."""
