"""`ds4 eval`: the capability regression harness (docs/eval.md)."""
