"""The reference backend: graphs → Python source (numpy for arrays)."""

from backends.python.codegen import Generated, compile_module, entry_function, generate, \
    module_code

__all__ = ["Generated", "compile_module", "entry_function", "generate", "module_code"]
