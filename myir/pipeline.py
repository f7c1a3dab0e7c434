"""The compilation pipeline for one function and argument signature:

    parse (frontend) → expand (grad macros, AD) → optimize → [infer: a later issue] → backend

Each stage's graph is kept so `lower(...)` can show it.  `compile(f, optimize=False)` (or
MYIR_OPTIMIZE=0 in the environment) skips the optimizer, for debugging.  Stages never mutate the graph of
an earlier stage (the parsed graph is shared by every signature).
"""

from __future__ import annotations

import os
import sys

from backends.python import compile_module, generate
from frontend import parse, wrap_macros
from myir.api import Lowered
from passes.expand import expand
from passes.opt import optimize

# A gradient runs a chain of backpropagators as deep as the loop or recursion it
# differentiates (100,000 iterations: a few hundred thousand frames).  Since CPython 3.11,
# Python-to-Python calls do not use the C stack, so a high limit is safe.
_RECURSION_LIMIT = 1_000_000


def run_pipeline(fn, args, backend: str, options: dict, transforms=()) -> Lowered:
    parsed = parse(fn)
    stages = {"parsed": parsed}
    root = wrap_macros(parsed, transforms) if transforms else parsed
    expanded = expand(root)
    if expanded is not parsed:
        stages["expanded"] = expanded
        sys.setrecursionlimit(max(sys.getrecursionlimit(), _RECURSION_LIMIT))
    final = expanded
    if options.get("optimize", os.environ.get("MYIR_OPTIMIZE", "1") != "0"):
        final = stages["optimized"] = optimize(expanded)
    generated = generate(final)
    entry = compile_module(generated, fn.__code__.co_filename)
    # No stage looks at the argument types yet (inference is a later issue): the generated
    # Python is the same for every signature, so calls can go to it directly.
    return Lowered(fn, stages, generated.source, entry, generic=True)
