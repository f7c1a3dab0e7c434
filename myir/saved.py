"""Compiled programs saved in the disk cache (`myir/cache.py`): a fresh process calling a
function compiled before, for the same argument types, skips the whole pipeline.

A program is saved under a key that hashes everything the pipeline's result depends on:

* myir's own source (every module of `myir/`, `frontend/`, `passes/`, `backends/`) and the
  versions of Python (the code is saved marshalled) and numpy;
* the function: `frontend.fingerprint` — its source and everything it reads, transitively;
* its transforms (`grad`), backend and options, and the environment variables that act as
  options (`MYIR_TARGET`, `MYIR_OPTIMIZE`);
* the argument signature (`api.signature_of`).

What is saved is the generated module: its code (marshalled), source and entry's name, the
data of its namespace (pickled: numbers, arrays, exception classes, compiled regions), and the
recipes of the rest (`Generated.recipes`).  A region is pickled as its program and target
and compiled again when loaded, which finds it in the region cache.  A saved program has no
graphs, so `lower()` always runs the pipeline.  A program whose namespace cannot be pickled
is simply not saved.

`MYIR_PROGRAM_CACHE=off` disables saved programs (the region cache stays);
`MYIR_CACHE_DIR=off` disables both.
"""

from __future__ import annotations

import functools
import hashlib
import marshal
import os
import pickle
import sys
import time

import numpy as np

from backends.python.codegen import entry_function, rebuild
from frontend.fingerprint import fingerprint
from myir.api import Lowered
from myir.cache import open_cache, source_version

_FORMAT = 1
_PACKAGES = ("myir", "frontend", "passes", "backends")
STATS = {"saved": 0, "loaded": 0, "not_saved": 0}


def key(fn, transforms: tuple, backend: str, options: dict, signature: tuple) -> str | None:
    """The program's name in the cache, or None when saved programs are off."""
    if os.environ.get("MYIR_PROGRAM_CACHE") == "off" or open_cache() is None:
        return None
    parts = [f"myir program {_FORMAT}", runtime(), fingerprint(fn), repr(transforms), backend, repr(sorted(options.items())),
             *(f"{v}={os.environ.get(v)}" for v in ("MYIR_TARGET", "MYIR_OPTIMIZE")),
             repr(signature)]
    return "program-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


@functools.cache
def _myir_version() -> str:
    """What turns a function into a program: the source of these packages."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return source_version(*(os.path.join(root, package) for package in _PACKAGES))


def load(name: str, fn) -> Lowered | None:
    """The saved program `name`, ready to call, or None (absent, not ours, or unreadable)."""
    disk = open_cache()
    data = disk.read(name) if disk is not None else None
    if data is None:
        return None
    lowered = from_bytes(data, fn)
    if lowered is not None:
        STATS["loaded"] += 1
    return lowered


def from_bytes(data: bytes, fn) -> Lowered | None:
    """The program `to_bytes` wrote, ready to call, or None when it cannot be rebuilt here
    (e.g. a class it refers to is gone: the caller compiles afresh).  The bytes are unpickled:
    they must come from this user's signed cache or from a channel that already runs what it
    is sent (a pickled compiled function, `myir/api.py`)."""
    start = time.perf_counter()
    try:
        saved = pickle.loads(data)
        namespace = saved["namespace"]
        namespace.update((n, rebuild(recipe)) for n, recipe in saved["recipes"].items())
        entry = entry_function(marshal.loads(saved["code"]), namespace, saved["entry"],
                               saved["source"])
    except Exception:
        return None
    return Lowered(fn, {}, saved["source"], entry, saved["regions"],
                   {"load": (time.perf_counter() - start) * 1e3}, from_disk=True, saved=data)


def to_bytes(lowered: Lowered) -> bytes | None:
    """The program as bytes (`from_bytes` rebuilds it), or None when its namespace holds a
    value pickle cannot write (a lambda, a local class).  A program loaded keeps the bytes
    it was loaded from: it has no generated module to write them from again."""
    if lowered.saved is None and lowered.generated is not None:
        generated = lowered.generated
        data = {n: v for n, v in generated.namespace.items() if n not in generated.recipes}
        try:
            lowered.saved = pickle.dumps(
                {"source": generated.source, "entry": generated.entry,
                 "code": marshal.dumps(lowered.code), "namespace": data,
                 "recipes": generated.recipes, "regions": lowered.regions},
                protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            return None
    return lowered.saved


def shipped(lowered: Lowered) -> tuple | None:
    """The program as `to_bytes` writes it, with its regions' kernels (program, target,
    library bytes), for another process to run without compiling (`from_shipped`); None when
    it cannot be written."""
    data = to_bytes(lowered)
    if data is None:
        return None
    libraries = []
    if lowered.regions:
        from backends.tvm.region import library

        for region in lowered.regions:
            lib = library(region)
            if lib is not None:
                libraries.append((region.program, region.target, lib))
    return data, libraries


def from_shipped(shipped: tuple, fn) -> Lowered | None:
    """The program `shipped` gave, ready to call (or None, as `from_bytes`), its kernels
    loaded rather than compiled."""
    data, libraries = shipped
    if libraries:
        from backends.tvm.region import install_library

        for program, target, lib in libraries:
            install_library(program, target, lib)
    return from_bytes(data, fn)


def runtime() -> str:
    """What saved bytes run on: myir's code, Python (the code is marshalled) and numpy.
    Programs shipped to another process (`myir/api.py`) are used there only when it matches."""
    return "\n".join((_myir_version(), sys.version, np.__version__))


def save(name: str, lowered: Lowered) -> None:
    """Save a freshly compiled program under `name`, when its namespace can be pickled."""
    disk = open_cache()
    if disk is None:
        return
    payload = to_bytes(lowered)
    if payload is None:
        STATS["not_saved"] += 1
        return
    try:
        disk.write(name, payload)
    except OSError:
        STATS["not_saved"] += 1
        return
    STATS["saved"] += 1
