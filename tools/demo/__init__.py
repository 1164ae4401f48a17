"""The shipped demo model: data, torch training, export and checks (docs/demo-model.md)."""
