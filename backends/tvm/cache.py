"""Compiled regions in the disk cache (`myir/cache.py`): a second process skips TVM.

A compiled region is exported as a shared library, `<key>.so`, where the key hashes the
region's program (structure, dtypes, shapes), the target, TVM's version and the source of
this backend (a change to a lowering or the schedule must not find old kernels).  Its
generated source (LLVM IR or CUDA C, shown by `Region.source`) is kept beside it as text.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

from backends.tvm import load_tvm
from myir.cache import DiskCache, source_version


def key(program_key: str, target, tvm_version: str) -> str:
    text = f"{program_key}\n{target.export()}\n{tvm_version}\n{_backend_version()}"
    return hashlib.sha256(text.encode()).hexdigest()[:40]


@functools.cache
def _backend_version() -> str:
    """What turns a program into kernels: this package's source."""
    return source_version(os.path.dirname(os.path.abspath(__file__)))


def load(disk: DiskCache, name: str):
    """(the loaded module, its generated source), or (None, None) when absent or not ours."""
    if disk.read(f"{name}.so") is None:
        return None, None
    try:
        module = load_tvm().runtime.load_module(str(disk.path(f"{name}.so")))
    except RuntimeError:   # e.g. built by another TVM runtime: compile afresh
        return None, None
    try:
        return module, disk.path(f"{name}.txt").read_text()
    except OSError:
        return module, None


def store(disk: DiskCache, name: str, executable, source: str) -> None:
    """Save a compiled region; where the cache cannot be written (removed, full), it is not
    saved, and the region, compiled already, runs all the same."""
    fd, tmp = tempfile.mkstemp(suffix=".so")
    os.close(fd)
    try:
        executable.export_library(tmp)
        disk.write_text(f"{name}.txt", source)
        disk.write(f"{name}.so", Path(tmp).read_bytes())
    except OSError:
        pass
    finally:
        os.unlink(tmp)
