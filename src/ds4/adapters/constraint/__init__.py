"""Token constraints (ports/constraint.py) on llguidance."""
