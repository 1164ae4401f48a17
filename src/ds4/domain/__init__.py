"""Pure code: no I/O, no threads, no clock, no environment (see docs/adr/0001)."""
