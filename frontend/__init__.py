"""The frontend: Python functions (their source) → graph IR."""

from frontend.parser import parse

__all__ = ["parse"]
