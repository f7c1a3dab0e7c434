"""The TVM backend: the python backend's glue, with each worthwhile straight-line region of
array primitives compiled by TVM for the selected target (CPU through LLVM, or CUDA).

    typed graph ──copy──► regions replaced by calls of compiled `Region`s ──► python codegen

TVM is imported only when a program has a region to compile (importing it takes ~1 s), and
programs without array regions (scalar code, control flow on numbers) run exactly the python
backend's code.
"""

from __future__ import annotations

import os
import sys

from myir.ir.analysis import reachable_graphs
from myir.ir.edit import Cloner
from myir.ir.graph import Graph

# TVM's thread pool uses one thread on these machines unless told otherwise, and reads this
# only when it is imported: kernels are parallel over the cores this process may use.
os.environ.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0))))


def load_tvm():
    """The `tvm` module, imported without letting tvm_ffi import PyTorch.

    tvm_ffi imports torch at its own import when torch is installed (to work around a symbol
    clash seen on Windows, and to convert torch tensors), which made `import tvm` take 3 s
    instead of 1 s on these machines.  myir hands TVM numpy arrays and TVM tensors only, so
    torch is hidden while TVM loads (unless the program imported it already: then it is
    simply used) and is importable as usual after."""
    if "tvm" in sys.modules:
        return sys.modules["tvm"]
    hide = "torch" not in sys.modules
    if hide:
        sys.modules["torch"] = None  # `import torch` raises ImportError meanwhile
    try:
        import tvm
    finally:
        if hide and sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    return tvm


def lower_regions(root: Graph, types: dict, target, report) -> tuple[Graph, list, dict]:
    """A copy of the typed program with its regions compiled and replaced by calls, the
    regions, and the copy's types (the program itself when it has no region).  `target` is
    a user's target spec (see `target.py`); `report` is told each region as it starts
    (`myir/progress.py`)."""
    from backends.tvm.kernel import compile_kernels
    from backends.tvm.regions import compile_regions, has_candidates
    from backends.tvm.target import resolve

    if not has_candidates(root, types):
        return root, [], types
    cloner = Cloner()
    cloner.scopes([g for g in reachable_graphs(root) if g.parent is None])
    copy = cloner.mapping[root]
    types = {cloner.mapping.get(node, node): t for node, t in types.items()}
    kernels = compile_kernels(copy, types, resolve(target), report)   # vectorize: kernel.py
    return copy, kernels + compile_regions(copy, types, resolve(target), report), types
