"""On-demand analyses of graphs: node order, users, nested graphs, free variables, recursion.

Each analysis is a small function of a root graph, cached, and never kept up to date by hand
(no incremental manager to keep consistent: the lesson of Myia's manager):

* analyses of a whole program (`users`, `call_graph`, ...) are cached per *IR version*,
  which every edit through `myir.ir.edit` bumps;
* analyses that walk graphs (`toposort`, `free_variables`, `reachable_graphs`, `children`,
  `scope`, `scope_size`, `callees`) are cached with the `stamp` of each graph they read (see `Graph.stamp`), and stay valid
  while those graphs are unchanged.  The optimizer edits one graph at a time, inlining
  copies of others into it: the others' node orders and nested graphs then need not be
  found again after every edit, which cost time in proportion to the program per edit.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import operator
from collections import Counter
from typing import NamedTuple

import networkx as nx

from myir.ir.graph import Apply, Constant, Graph, Node, is_graph_constant
from myir.ir.primitives import Primitive

class SwitchCall(NamedTuple):
    """`switch(cond, then, else_)(*args)`: an `if` whose branches are graphs."""

    switch: Apply
    cond: Node
    then: Graph
    else_: Graph
    args: list


def primitive_name(node: Node) -> str | None:
    """The name of the primitive an apply calls, or None.  (Exact type tests: the node
    classes and Primitive have no subclasses, and the optimizer asks this of every node it
    visits, several times.)"""
    if type(node) is Apply:
        fn = node.inputs[0]
        if type(fn) is Constant and type(fn.value) is Primitive:
            return fn.value.name
    return None


def switch_call(node: Node) -> SwitchCall | None:
    """The parts of `node` if it calls `switch(c, G1, G2)` with graph constants, else None."""
    if isinstance(node, Apply) and primitive_name(node.fn) == "switch":
        sw = node.fn
        if is_graph_constant(sw.inputs[2]) and is_graph_constant(sw.inputs[3]):
            return SwitchCall(sw, sw.inputs[1], sw.inputs[2].value, sw.inputs[3].value,
                              node.args)
    return None


_version = [0]


def tail_targets(out: Node) -> list:
    """The graphs a graph's output `out` calls in tail position: the one a call of a graph
    constant calls, the two branches of a `switch` call, or none (a value, a primitive
    call, a call of a computed function)."""
    if isinstance(out, Apply) and is_graph_constant(out.fn):
        return [out.fn.value]
    sc = switch_call(out)
    return [sc.then, sc.else_] if sc is not None else []


def tail_calls(g: Graph) -> list:
    """`tail_targets` of g's output where g makes that call.  An output that is a node of an
    enclosing graph is a value computed there, not a call of g's: the branch of an `or`
    that returns the `a or b` its enclosing graph computed before (`a or b or c`) calls
    nothing, though that value is itself a call of a `switch`."""
    out = g.output
    return tail_targets(out) if type(out) is Apply and out.graph is g else []


def bump_version() -> None:
    """Called by every edit: invalidates all cached analyses."""
    _version[0] += 1


# Every analysis cache, for `clear_caches`.
_CACHES: list[dict] = []


def compilation_cache() -> dict:
    """A new dict that `clear_caches` empties when a compilation is done: for a cache whose
    entries hold a compilation's values (and through them its graphs and inference's
    frames), which must not outlive it."""
    cache: dict = {}
    _CACHES.append(cache)
    return cache


def clear_caches() -> None:
    """Forget every cached analysis: called when a compilation is done, so that the graphs
    of finished compilations are not kept alive (and scanned by the garbage collector)."""
    for cache in _CACHES:
        cache.clear()


# Entries a cache holds before it is emptied.  The entries keep their graphs alive until
# `clear_caches`; a bound far above the graphs one compilation makes, as inlining copies a
# chain of calls (about 11,000 for a gradient of 800 calls), so they are not sorted again.
_MAX_ENTRIES = 1 << 16


def cached(fn):
    """Cache `fn(graph)` until the IR is next edited."""
    cache: dict = {}
    _CACHES.append(cache)

    @functools.wraps(fn)
    def wrapper(graph):
        key = id(graph)
        hit = cache.get(key)
        if hit is not None and hit[0] == _version[0] and hit[1] is graph:
            return hit[2]
        result = fn(graph)
        if len(cache) > _MAX_ENTRIES:
            cache.clear()
        cache[key] = (_version[0], graph, result)
        return result

    return wrapper


# The graphs (and their stamps) read by the `cached_by_stamps` analyses being computed,
# innermost last.
_reading: list[dict] = []


def _read(graph: Graph) -> None:
    """Note that the analysis being computed depends on `graph`'s structure."""
    if _reading:
        _reading[-1][graph] = graph.stamp


_stamp = operator.attrgetter("stamp")


def cached_by_stamps(fn):
    """Cache `fn(graph)` while every graph it read (with `_read`, or through the analyses
    it called) keeps its stamp.  (The graphs read and their stamps are kept as two tuples,
    compared and passed on without a Python loop: the optimizer asks for these analyses
    tens of thousands of times per compile, nearly always hitting.)"""
    cache: dict = {}
    _CACHES.append(cache)

    @functools.wraps(fn)
    def wrapper(graph):
        hit = cache.get(id(graph))
        if hit is not None and hit[0] is graph and tuple(map(_stamp, hit[2])) == hit[3]:
            result, graphs, stamps = hit[1], hit[2], hit[3]
        else:
            _reading.append({})
            try:
                result = fn(graph)
            finally:
                reads = _reading.pop()
            graphs, stamps = tuple(reads), tuple(reads.values())
            if len(cache) > _MAX_ENTRIES:
                cache.clear()
            cache[id(graph)] = (graph, result, graphs, stamps)
        if _reading:  # the analysis calling this one depends on what it read
            _reading[-1].update(zip(graphs, stamps))
        return result

    def held(graph):
        """The valid cached entry for `graph` (for `copied` and `kept`), or None."""
        hit = cache.get(id(graph))
        if hit is None or hit[0] is not graph or tuple(map(_stamp, hit[2])) != hit[3]:
            return None
        return hit

    def copied(original, copy, mapping: dict, result) -> None:
        """Cache `result(r)` for `copy`, a copy of `original` (`mapping`: the graphs of
        the copied scope to their copies), where original's result r is cached: the copy
        reads the copies of the graphs the original read (the others themselves)."""
        hit = held(original)
        if hit is not None:
            graphs = tuple(mapping.get(g, g) for g in hit[2])
            if len(cache) > _MAX_ENTRIES:
                cache.clear()
            cache[id(copy)] = (copy, result(hit[1]), graphs, tuple(map(_stamp, graphs)))

    def kept(hit, result) -> None:
        """Cache `result` for the graph of `hit` (its entry from `held`, taken before an
        edit of the graphs it read that `result` accounts for), with their stamps now."""
        graph, _, graphs, _ = hit
        cache[id(graph)] = (graph, result, graphs, tuple(map(_stamp, graphs)))

    wrapper.held = held
    wrapper.copied = copied
    wrapper.kept = kept
    return wrapper


@cached_by_stamps
def reachable_graphs(root: Graph) -> list[Graph]:
    """`root` and every graph reachable from it through graph constants (its defaults'
    included: `def f(x, g=lambda y: 2 * y)` runs the lambda's `def` with f's), in discovery
    order.
    Values that `root` or its nested graphs capture from enclosing graphs are computed there:
    graphs used only to compute them are not reached from `root`.  (Cached with the stamps
    of the graphs it walks: inlining a graph asks for the graphs nested in it, which edits
    elsewhere in the program leave unchanged.)"""
    result = [root]
    found = {root}      # (nodes and graphs hash by identity)
    enclosing = set(ancestors(root))
    walked = set()      # the graphs whose nodes were walked, read at the end
    seen: set[Node] = set()
    stack = [root.output, *root.defaults.values()]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        kind = type(node)
        if kind is Apply:
            if node.graph not in enclosing:
                walked.add(node.graph)
                stack.extend(reversed(node.inputs))
        elif kind is Constant and type(node.value) is Graph and node.value not in found:
            found.add(node.value)
            result.append(node.value)
            stack.extend([node.value.output, *node.value.defaults.values()])
    for g in found:
        _read(g)
    for g in walked:
        _read(g)
    return result


@cached_by_stamps
def children(root: Graph) -> dict[Graph, list[Graph]]:
    """Graph -> graphs whose `parent` it is, among those reachable from `root`."""
    result: dict[Graph, list[Graph]] = {g: [] for g in reachable_graphs(root)}
    for g in reachable_graphs(root):
        if g.parent is not None and g.parent in result:
            result[g.parent].append(g)
    return result


@cached_by_stamps
def scope(graph: Graph) -> list[Graph]:
    """`graph` and every graph nested in it (transitively), among those reachable from it;
    parents before children.  Found without leaving the scope: its cost is the scope's
    size, not that of everything `graph` calls (cloning or inlining each function of a
    chain of calls would otherwise walk the rest of the chain).  Cached with the stamps of
    the scope's graphs: edits elsewhere leave it valid."""
    result = [graph]
    found = {id(graph)}
    seen: set[int] = set()
    inside: dict[int, bool] = {id(graph): True}  # graph -> whether nested in `graph`
    walked = {graph}
    stack = [graph.output]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if type(node) is Apply:
            owner = node.graph
            nested = inside.get(id(owner))
            if nested is None:
                nested = inside[id(owner)] = is_nested_in(owner, graph)
            if nested:
                walked.add(owner)
                stack.extend(reversed(node.inputs))
        elif type(node) is Constant and isinstance(node.value, Graph) \
                and id(node.value) not in found and is_nested_in(node.value, graph):
            found.add(id(node.value))
            result.append(node.value)
            walked.add(node.value)
            if node.value.output is not None:   # None: moved (`myir.ir.edit.move_inline`)
                stack.append(node.value.output)
    for g in walked:
        _read(g)
    return result


@cached_by_stamps
def scope_size(graph: Graph) -> int:
    """The number of applies in `graph`'s scope: what inlining it would copy."""
    return sum(1 for h in scope(graph) for n in toposort(h)
               if isinstance(n, Apply) and n.graph is h)


def is_nested_in(g: Graph | None, outer: Graph) -> bool:
    """Whether g is `outer` or a graph nested in it (so it may read outer's nodes)."""
    while g is not None:
        if g is outer:
            return True
        g = g.parent
    return False


def ancestors(graph: Graph) -> list[Graph]:
    """The graphs `graph` is nested in, innermost first."""
    result = []
    g = graph.parent
    while g is not None:
        result.append(g)
        g = g.parent
    return result


@cached_by_stamps
def free_variables(graph: Graph) -> list[Node]:
    """Nodes of enclosing graphs that `graph` needs: those used in its scope, and those that
    closures it refers to capture.  In order of discovery.  (Written for speed: every graph
    that inlining copies is walked once, and the graphs walked are noted at the end.)
    A top-level graph has none, whatever its body: it reads no graph, and the order of a
    graph calling it (`toposort`) does not depend on its body."""
    if graph.parent is None:
        return []
    enclosing = set(ancestors(graph))   # (nodes and graphs hash by identity)
    result: list[Node] = []
    seen: set[Node] = set()
    walked = {graph}
    stack: list[Node] = [graph.output] if graph.output is not None else []
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        owner = node.graph
        if owner is not None and owner in enclosing:
            result.append(node)
        elif type(node) is Apply:
            walked.add(owner)
            stack.extend(reversed(node.inputs))
        elif type(node) is Constant and type(node.value) is Graph:
            h = node.value
            if h is graph or h.parent is None:
                continue  # itself, or a top-level graph: captures nothing
            if h in enclosing:
                stack.extend(free_variables(h))
            else:
                walked.add(h)
                if h.output is not None:
                    stack.append(h.output)
    for g in walked:
        _read(g)
    return result


@cached_by_stamps
def toposort(graph: Graph) -> list[Node]:
    """The nodes owned by `graph` that its output depends on, inputs before users.

    Among the valid orders it picks the one closest to creation order, which for parsed code
    is source order: generated code then evaluates (and raises) in the order CPython does.
    A constant other than a graph computes nothing and comes first: one made after the
    operation that uses it (the frontend puts in `aug_mod` for `k %= 3` once the function is
    parsed) does not hold that operation back behind the operations made in between.
    A graph constant counts as depending on the free variables it captures from `graph`: a
    closure comes just after the values it closes over (first, if none), whatever its own
    id (a copy made when its graph was inlined has a late one), so that it does not hold
    back the calls of it behind the operations made before the copy."""
    _read(graph)
    nodes: dict[int, Node] = {}
    deps_of: dict[int, list[Node]] = {}  # node -> its inputs (captured values) in `graph`
    constants: list[Node] = []  # other than graphs: they come first
    computing: list[Node] = []
    closures: list[Node] = []   # graph constants
    stack = [graph.output] if graph.output is not None else []  # None: moved, or not built
    while stack:
        node = stack.pop()
        key = id(node)
        if key in nodes:
            continue
        nodes[key] = node
        kind = type(node)
        if kind is Apply:
            computing.append(node)
            if node.graph is graph:
                deps_of[key] = node.inputs
                stack.extend(reversed(node.inputs))
        elif kind is Constant and type(node.value) is not Graph:
            constants.append(node)
        elif kind is Constant:
            closures.append(node)
            if node.value is not graph and node.value.parent is not None:  # (else: none)
                deps = [fv for fv in free_variables(node.value) if fv.graph is graph]
                if deps:
                    deps_of[key] = deps
                    stack.extend(deps)
        else:
            computing.append(node)
    # The order wanted is the smallest by (computes, id) among the valid ones: the sorted
    # order itself where it is valid, as it is for code made in order (inputs first), the
    # usual case; else Kahn's algorithm picks it, a heap holding the nodes ready to place.
    # (Sorted by the id alone, a float, in two groups: a key of tuples took twice as long.
    # Nodes sharing an id keep the order they were found in, depth first from the output
    # with each node's inputs left to right, which the graph alone decides: ids subdivided
    # by inlining many levels deep do tie, and ties broken by identity gave another order,
    # and so other generated code and another first exception, from one run to the next.)
    constants.sort(key=_debug_id)
    computing.sort(key=_debug_id)
    order = constants + _after_captured(computing, closures, deps_of)
    if _inputs_first(order, deps_of):
        return order
    return _kahn(order, deps_of)


_debug_id = operator.attrgetter("debug.id")


def _inputs_first(order: list[Node], deps_of: dict[int, list[Node]]) -> bool:
    """Whether every node of `order` comes after the nodes `deps_of` gives it (all of them
    in `order`): each node's inputs checked against those placed before it, as a set and
    without a Python loop over the inputs."""
    placed: set[int] = set()
    for n in order:
        key = id(n)
        deps = deps_of.get(key)
        if deps is not None and not placed.issuperset(map(id, deps)):
            return False
        placed.add(key)
    return True


def _after_captured(computing: list[Node], closures: list[Node], deps_of: dict) -> list[Node]:
    """`computing` (sorted by id) with each closure placed after the last node it captures
    (first where it captures none), closures at one place in the order they were found."""
    if not closures:
        return computing
    at: dict[int, list[Node]] = {}
    for c in closures:
        deps = deps_of.get(id(c))
        place = bisect.bisect_right(computing, max(map(_debug_id, deps)), key=_debug_id) \
            if deps else 0
        at.setdefault(place, []).append(c)
    order: list[Node] = []
    start = 0
    for place in sorted(at):    # the closures placed before computing[place]
        order += computing[start:place]
        order += at[place]
        start = place
    order += computing[start:]
    return order


def _kahn(order: list[Node], deps_of: dict[int, list[Node]]) -> list[Node]:
    """The nodes of `order` in the smallest order by their place in it in which every node
    comes after the nodes `deps_of` gives it (Kahn's algorithm, the next node always the
    first that is ready).  `order` is scanned, a node placed when met if its inputs are,
    and held back otherwise; a heap holds only those held back whose inputs have since
    been placed, which come before any node not met yet.  (Most nodes are ready when met,
    even where some are not: no heap, dict or set per node for those.)"""
    placed: set[int] = set()
    result: list[Node] = []
    held: dict[int, list[int]] = {}     # id(node) -> the places of those waiting for it
    waiting: dict[int, int] = {}        # place -> how many distinct inputs it waits for
    ready: list[int] = []   # the places of nodes held back that may now be placed
    i = 0
    while True:
        if ready:
            p = heapq.heappop(ready)
        elif i < len(order):
            p = i
            i += 1
            deps = deps_of.get(id(order[p]))
            if deps is not None and not placed.issuperset(map(id, deps)):
                missing = set(map(id, deps)) - placed
                waiting[p] = len(missing)
                for key in missing:
                    held.setdefault(key, []).append(p)
                continue
        else:
            break
        node = order[p]
        placed.add(id(node))
        result.append(node)
        for q in held.pop(id(node), ()):
            waiting[q] -= 1
            if waiting[q] == 0:
                heapq.heappush(ready, q)
    assert len(result) == len(order), "cycle in a graph"
    return result


def computed_before(starts, runs) -> set:
    """The ids of the Apply nodes that computing `starts` computes: their inputs' ancestors,
    with the outputs' ancestors of the graphs `runs(node)` says each node's call ran.  What
    has surely run before a node, for the analyses that prove an update in place unseen."""
    result: set = set()
    stack = list(starts)
    while stack:
        n = stack.pop()
        if not isinstance(n, Apply) or id(n) in result:
            continue
        result.add(id(n))
        stack.extend(n.inputs)
        stack.extend(g.output for g in runs(n))
    return result


def is_closure(graph: Graph) -> bool:
    return bool(free_variables(graph))


@cached
def users(root: Graph) -> dict[Node, list[tuple[Apply, int]]]:
    """Node -> list of (user, index) over every graph reachable from root: (apply, i) when
    the node is input i of an apply, (graph, OUTPUT) when it is a graph's output."""
    result: dict[Node, list[tuple[Apply, int]]] = {}
    for g in reachable_graphs(root):
        for node in toposort(g):
            if isinstance(node, Apply) and node.graph is g:
                for i, inp in enumerate(node.inputs):
                    result.setdefault(inp, []).append((node, i))
        result.setdefault(g.output, []).append((g, OUTPUT))
    return result


OUTPUT = -1


@cached
def graph_uses(root: Graph) -> dict[Graph, list[tuple[Apply, int]]]:
    """Graph -> every use of a constant holding that graph, as in `users` (gathered without
    it: the optimizer asks for these at every sweep, and the users of every node of the
    program cost several times as much)."""
    by_constant: dict[Constant, list[tuple[Apply, int]]] = {}    # in `users`'s order
    for g in reachable_graphs(root):
        order = toposort(g)
        # the graph constants g's applies use are among its nodes: the applies using none
        # (most, once a program is inlined) are passed over without a loop on their inputs
        held = {n for n in order if type(n) is Constant and type(n.value) is Graph}
        for node in order if held else ():
            if type(node) is Apply and node.graph is g and not held.isdisjoint(node.inputs):
                for i, inp in enumerate(node.inputs):
                    if inp in held:
                        by_constant.setdefault(inp, []).append((node, i))
        if is_graph_constant(g.output):
            by_constant.setdefault(g.output, []).append((g, OUTPUT))
    result: dict[Graph, list[tuple[Apply, int]]] = {g: [] for g in reachable_graphs(root)}
    for node, uses in by_constant.items():
        result.setdefault(node.value, []).extend(uses)
    return result


def _callees(root: Graph) -> dict[Graph, set[Graph]]:
    """Graph -> the graphs it (or a graph nested in it) refers to."""
    return {g: callees(g) for g in reachable_graphs(root)}


@cached_by_stamps
def callees(graph: Graph) -> set[Graph]:
    """The graphs that constants among the inputs of `graph`'s sorted nodes hold (cached by
    stamps: the optimizer asks for the call graph at every sweep, and most graphs are
    unchanged since the last)."""
    result = set()
    owners = set()  # a free variable's inputs belong to its own graph (`graph`'s: read)
    for node in toposort(graph):
        if type(node) is Apply:
            if node.graph is not graph:
                owners.add(node.graph)
            for inp in node.inputs:     # (a loop, not a comprehension: no call per node)
                if type(inp) is Constant and type(inp.value) is Graph:
                    result.add(inp.value)
    for g in owners:
        _read(g)
    return result


@cached
def call_graph(root: Graph) -> nx.DiGraph:
    """networkx DiGraph: an edge g -> h when g (or a graph nested in it) refers to h."""
    cg = nx.DiGraph()
    for g, callees in _callees(root).items():
        cg.add_node(g)
        cg.add_edges_from((g, h) for h in callees)
    return cg


@cached
def recursive_graphs(root: Graph) -> set[Graph]:
    """Graphs on a cycle of the call graph (self-recursive loops, recursion, mutual
    recursion): the strongly connected components with a cycle (type inference asks for
    them at every compile; building a networkx graph for them took a tenth of inference's
    time for small programs)."""
    edges = _callees(root)
    return {g for component in strongly_connected_components(edges)
            for g in component if len(component) > 1 or g in edges.get(g, ())}


def strongly_connected_components(edges: dict) -> list[list]:
    """The strongly connected components of the graph `edges` (node -> its successors),
    by Tarjan's algorithm without recursion (a call chain may be as deep as the program),
    successors' components before their predecessors'."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    result: list[list] = []

    def visit(g) -> None:
        index[g] = low[g] = len(index)
        stack.append(g)
        on_stack.add(g)

    for start in edges:
        if start in index:
            continue
        visit(start)
        work = [(start, iter(edges[start]))]
        while work:
            g, successors = work[-1]
            for h in successors:
                if h not in index:
                    visit(h)
                    work.append((h, iter(edges.get(h, ()))))
                    break
                if h in on_stack:
                    low[g] = min(low[g], index[h])
            else:
                work.pop()
                if work:
                    caller = work[-1][0]
                    low[caller] = min(low[caller], low[g])
                if low[g] == index[g]:
                    component = []
                    while not component or component[-1] is not g:
                        component.append(stack.pop())
                        on_stack.discard(component[-1])
                    result.append(component)
    return result


def graph_stats(root: Graph) -> dict:
    graphs = reachable_graphs(root)
    applies = 0
    prims: Counter = Counter()
    closures = 0
    seen_closures: set[int] = set()
    for g in graphs:
        for node in toposort(g):
            if isinstance(node, Apply) and node.graph is g:
                applies += 1
                for inp in node.inputs:
                    if isinstance(inp, Constant) and isinstance(inp.value, Primitive) and inp is node.inputs[0]:
                        prims[inp.value.name] += 1
                    if is_graph_constant(inp) and is_closure(inp.value) and id(inp) not in seen_closures:
                        seen_closures.add(id(inp))
                        closures += 1
    return {"graphs": len(graphs), "applies": applies, "closures": closures, "primitives": prims}

