"""The frontend: Python functions (their source) → graph IR."""

from frontend.parser import parse, wrap_macros

__all__ = ["parse", "wrap_macros"]
