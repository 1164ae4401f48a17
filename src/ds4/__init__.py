"""ds4: local inference engine and toolkit for DeepSeek V4."""

__version__ = "0.1.0"
