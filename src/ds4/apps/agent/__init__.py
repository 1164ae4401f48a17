"""`ds4 agent`: the terminal coding agent (docs/agent.md). The UI thread owns the
terminal, the worker thread owns the engine session, transcript and tools; they talk
only through channel.AgentChannel."""
