"""Readers for the formats public benchmarks ship in: text in, EvalCases out."""
