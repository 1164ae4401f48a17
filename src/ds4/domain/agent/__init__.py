"""The native coding agent's pure logic (docs/agent.md): tools' argument rules and
output formats, the turn loop, compaction decisions, session naming, the status line."""
