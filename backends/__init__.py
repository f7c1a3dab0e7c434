"""Backends: graphs → running code.  `python` is the reference; `tvm` compiles array regions."""
