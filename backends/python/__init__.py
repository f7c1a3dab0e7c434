"""The reference backend: graphs → Python source (numpy for arrays)."""

from backends.python.codegen import Generated, compile_module, generate

__all__ = ["Generated", "compile_module", "generate"]
