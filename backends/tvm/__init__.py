"""The TVM backend: the python backend's glue, with each worthwhile straight-line region of
array primitives compiled by TVM for the selected target (CPU through LLVM, or CUDA).

    typed graph ──copy──► regions replaced by calls of compiled `Region`s ──► python codegen

TVM is imported only when a program has a region to compile (importing it takes ~1 s), and
programs without array regions (scalar code, control flow on numbers) run exactly the python
backend's code.
"""

from __future__ import annotations

import os

from myir.ir.analysis import reachable_graphs
from myir.ir.edit import Cloner
from myir.ir.graph import Graph

# TVM's thread pool uses one thread on these machines unless told otherwise, and reads this
# only when it is imported: kernels are parallel over the cores this process may use.
os.environ.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0))))


def lower_regions(root: Graph, types: dict, target) -> tuple[Graph, list, dict]:
    """A copy of the typed program with its regions compiled and replaced by calls, the
    regions, and the copy's types (the program itself when it has no region).  `target` is
    a user's target spec (see `target.py`)."""
    from backends.tvm.regions import compile_regions, has_candidates
    from backends.tvm.target import resolve

    if not has_candidates(root, types):
        return root, [], types
    cloner = Cloner()
    cloner.scopes([g for g in reachable_graphs(root) if g.parent is None])
    copy = cloner.mapping[root]
    types = {cloner.mapping.get(node, node): t for node, t in types.items()}
    return copy, compile_regions(copy, types, resolve(target)), types
