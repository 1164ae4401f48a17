"""Numerical oracle tooling: tiny random Hugging Face DeepseekV4 models and their logits.

Needs the optional ``oracle`` extra (torch, transformers, safetensors). Nothing under
``src/ds4`` imports this package; it produces fixtures that tests compare against.
See docs/oracle/hf_deepseek_v4.md for what the HF implementation computes.
"""
