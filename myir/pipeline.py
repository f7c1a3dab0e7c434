"""The compilation pipeline for one function and argument signature:

    parse (frontend) → [expand (AD) → infer → optimize: later issues] → backend

Each stage's graph is kept so `lower(...)` can show it.  Stages never mutate the graph of
an earlier stage (the parsed graph is shared by every signature).
"""

from __future__ import annotations

from backends.python import compile_module, generate
from frontend import parse
from myir.api import Lowered


def run_pipeline(fn, args, backend: str, options: dict) -> Lowered:
    stages = {"parsed": parse(fn)}
    final = stages["parsed"]
    generated = generate(final)
    filename = fn.__code__.co_filename
    entry = compile_module(generated, filename)
    # No stage looks at the argument types yet (inference is a later issue): the generated
    # Python is the same for every signature, so calls can go to it directly.
    return Lowered(fn, stages, generated.source, entry, generic=True)
