"""The compilation pipeline for one function and argument signature:

    parse (frontend) → linear recursion as loops → expand (grad macros, AD) → optimize
      → infer (types, specialisation) → optimize with types (→ fastmath algebra, if asked)
      → backend

Each stage's graph is kept so `lower(...)` can show it.  `compile(f, optimize=False)` (or
MYIR_OPTIMIZE=0 in the environment) skips the optimizer, for debugging (fastmath included:
it is part of the optimizer).  Stages never mutate the graph of
an earlier stage (the parsed graph is shared by every signature).
"""

from __future__ import annotations

import gc
import inspect
import os
import time

from backends.python import entry_function, generate, module_code
from frontend import parse, wrap_macros
from myir.api import Lowered, callable_defaults, default_functions, static_arguments
from myir import progress
from myir.ir.analysis import clear_caches
from myir.ir.edit import GraphMoved
from passes.expand import expand
from passes.fastmath import optimize_fastmath
from passes.infer import infer
from passes.linear_recursion import recursion_as_loops
from passes.opt import optimize, optimize_typed


def run_pipeline(fn, args, backend: str, options: dict, transforms=(),
                 report=None, stages: bool = True) -> Lowered:
    """Compile `fn` for `args` through every stage, naming each to `report` as it starts
    (by default a progress line: `myir/progress.py`).  The garbage collector is paused
    meanwhile: the stages make graphs full of reference cycles, and collections triggered
    by them scanned every live object again and again (a third of the lstm gradient's
    compile time once a process had compiled a few programs).  What they leave is moved to
    the oldest generation (`_Generations`), and the analysis caches are cleared so they keep no
    graph alive.

    The typed optimization works on the graphs inference made (kept by no stage) rather
    than on a copy, moving the bodies of graphs called once (`passes.opt.call_inline`): if
    one is used again after all (`GraphMoved`), the compile starts over with every
    inlining a copy.  So does the untyped one on the expanded program when `stages` is
    false (a compile for a call, which shows no stage): the result then has every stage
    but that one (`Lowered.all_stages`)."""
    paused = gc.isenabled()
    if paused:
        _generations.collect_if_due()
    gc.disable()
    if report is None:
        kinds = "".join(f"{s.kind}(" for s in transforms)
        report = progress.for_compile(f"{kinds}{fn.__qualname__}{')' * len(transforms)}")
    try:
        with report:
            try:
                return _run_pipeline(fn, args, backend, options, transforms, report, True,
                                     stages)
            except GraphMoved:
                return _run_pipeline(fn, args, backend, options, transforms, report, False,
                                     stages)
    finally:
        clear_caches()
        if paused:
            _generations.promote()
            gc.enable()


class _Generations:
    """The compile's objects, allocated while the collector is paused, are all in its
    youngest generation when it resumes: the first collection after the compile scanned
    them all (90 ms after the gradient of 800 helper functions, a twentieth of its compile)
    and a later one of the middle generation did again, to find what they mostly are, the
    program the compiled function keeps.  So they are moved straight to the oldest
    generation (`gc.freeze`, then `gc.unfreeze`), which only full collections scan.  The
    collector does not count objects moved so (only those its own collections promote)
    when it decides on a full collection, and the garbage among them (graphs that inlining
    emptied, compiled functions dropped since) would pile up in a process that does little
    but compile: a full collection runs when a compile starts once the objects moved since
    the last outnumber those it kept, so garbage never holds more than the live objects
    do."""

    def __init__(self):
        self.kept: int | None = None    # objects tracked after our last full collection
        self.moved = 0                  # objects moved to the oldest generation since

    def collect_if_due(self) -> None:
        if self.kept is None:
            self.kept = len(gc.get_objects())
        elif self.moved > self.kept:
            gc.collect()
            self.kept, self.moved = len(gc.get_objects()), 0

    def promote(self) -> None:
        self.moved += gc.get_count()[0]    # (the youngest generation's objects)
        gc.freeze()
        gc.unfreeze()


_generations = _Generations()


def _run_pipeline(fn, args, backend: str, options: dict, transforms, report,
                  moves: bool, shown: bool) -> Lowered:
    timings: dict[str, float] = {}
    step = _Stopwatch(timings, report)
    parsed = step("parse", parse, fn)
    stages = {"parsed": parsed}
    root = wrap_macros(parsed, transforms, default_functions(callable_defaults(fn), args),
                       dict(static_arguments(args))) if transforms else parsed
    root = step("recursion", recursion_as_loops, root)
    optimizing = options.get("optimize", os.environ.get("MYIR_OPTIMIZE", "1") != "0")
    expanded = step("expand", expand, root, optimizing)
    if expanded is not parsed and (shown or not optimizing):
        stages["expanded"] = expanded
    final = expanded
    if optimizing:
        final = stages["optimized"] = step("optimize", optimize, expanded, not shown, moves,
                                           False)   # (optimize_typed settles it)
    typed = step("infer", infer, final, args)
    graph, types = typed.graph, typed.types
    if optimizing:  # inference made every graph it returns: they may be edited in place
        graph, types = step("optimize_typed", optimize_typed, graph, types, True, True, moves)
        if options.get("fastmath"):
            graph, types = step("fastmath", optimize_fastmath, graph, types)
        _annotate(types)
    final = stages["typed"] = graph
    regions = []
    if backend == "tvm":
        final, regions = step("tvm", _tvm_regions, final, types, stages, options.get("target"),
                              report)
    generated = step("codegen", generate, final)
    code = step("codegen", module_code, generated, fn.__code__.co_filename)
    entry = step("codegen", entry_function, code, generated.namespace, generated.entry,
                 generated.source)
    return Lowered(fn, stages, generated.source, entry, regions, timings, generated, code,
                   all_stages="expanded" in stages or expanded is parsed or not optimizing)


class _Stopwatch:
    """`step(name, f, *args)` reports the stage `name`, runs f and adds its time to
    `timings[name]` (ms)."""

    def __init__(self, timings: dict, report):
        self.timings = timings
        self.report = report

    def __call__(self, name: str, f, *args):
        self.report.stage(name)
        start = time.perf_counter()
        try:
            return f(*args)
        finally:
            ms = (time.perf_counter() - start) * 1e3
            self.timings[name] = self.timings.get(name, 0.0) + ms


def _annotate(types: dict) -> None:
    """Nodes carry their types (`node.abstract`) so printed and drawn graphs show them."""
    for node, abstract in types.items():
        node.abstract = abstract


def _tvm_regions(graph, types, stages, target, report):
    from backends.tvm import lower_regions

    final, regions, types = lower_regions(graph, types, target, report)
    if regions:     # a copy, with new nodes: shown as a stage of its own
        _annotate(types)
        stages["regions"] = final
    return final, regions
