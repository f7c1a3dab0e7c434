"""The graph IR: analyses (myir.ir.analysis), edits (myir.ir.edit), the text printer and
`Graph.stats()`.

Graphs are built two ways: by hand with the Graph API (`Graph(name, parent)`,
`add_parameter`, `apply`, `output`), and by the frontend from the module-level functions
below.  Tests that edit a graph edit a hand-built graph or a clone, never the frontend's
cached graph of a function (other tests share it).
"""

import inspect
import os
import pathlib
import re
import subprocess
import sys

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.python import compile_module, generate
from frontend import parse
from myir.errors import Location
from myir.ir import PRIMITIVES as P
from myir.ir import Apply, Constant, Graph, Parameter, analysis, clone, edit, inline, replace
from myir.ir.analysis import OUTPUT


# --------------------------------------------------------------------------------------------
# Subjects for the frontend (module level so that inspect.getsource finds them)


def straight(x, y):
    a = x * y
    b = a + 1.0
    c = b - x
    return c


def independent(x, y):
    p = x + 1
    q = y * 2
    r = x - y
    s = q + p
    return s * r


def nested(x, y):
    def inner(z):
        return z + x
    return inner(y)


def three_levels(x):
    def mid(y):
        def innermost(z):
            return x + y + z
        return innermost(1.0)
    return mid(2.0)


def siblings(x):
    def a(t):
        return t + x

    def b(t):
        return a(t) * 2.0
    return b(1.0)


def counting_loop(n):
    i = 0
    s = 0
    while i < n:
        s = s + i * i
        i = i + 1
    return s


def fact(n):
    if n <= 1:
        return 1
    return n * fact(n - 1)


def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)


def helper(t):
    return t * 3.0


def calls_helper(x):
    return helper(x) + 1.0


def mixed(x, n):
    """A loop, a branch and a closure, for clone/inline round trips through the backend."""
    scale = 2.0 if x > 0 else -0.5
    f = lambda t: t * scale + x
    total = 0.0
    for i in range(n):
        total = total + f(i)
    return total


def line_of(fn, text):
    """The absolute line number of the first line of `fn`'s source that contains `text`."""
    lines, first = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if text in line:
            return first + k
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def applies(graph):
    """The applies owned by `graph`, in toposort order."""
    return [n for n in analysis.toposort(graph) if isinstance(n, Apply) and n.graph is graph]


def graph_named(root, name):
    (g,) = [g for g in analysis.reachable_graphs(root) if g.name == name]
    return g


def run(graph, *args):
    """Compile `graph` with the python backend and call it."""
    return compile_module(generate(graph), __file__)(*args)


# --------------------------------------------------------------------------------------------
# Hand-built graphs


def build_straight():
    """graph straight(x, y): a = x * y; b = a + 1.0; c = b - x; return c"""
    g = Graph("straight")
    x = g.add_parameter("x")
    y = g.add_parameter("y")
    a = g.apply(P["mul"], x, y, name="a")
    b = g.apply(P["add"], a, 1.0, name="b")
    c = g.apply(P["sub"], b, x, name="c")
    g.output = c
    return g, (x, y), (a, b, c)


def build_nested():
    """graph outer(x, y) { k = x * 2; graph inner(z) { return z + k + x }; return inner(y) }"""
    outer = Graph("outer")
    x = outer.add_parameter("x")
    y = outer.add_parameter("y")
    k = outer.apply(P["mul"], x, 2, name="k")
    inner = Graph("inner", outer)
    z = inner.add_parameter("z")
    s = inner.apply(P["add"], z, k, name="s")
    inner.output = inner.apply(P["add"], s, x, name="t")
    call = outer.apply(inner, y, name="call")
    outer.output = call
    return outer, inner, (x, y, k, z, call)


# --------------------------------------------------------------------------------------------
# toposort


def test_toposort_inputs_before_users_hand_built():
    g, (x, y), (a, b, c) = build_straight()
    order = analysis.toposort(g)
    pos = {id(n): i for i, n in enumerate(order)}
    assert [n for n in order if isinstance(n, Apply)] == [a, b, c]
    for node in order:
        if isinstance(node, Apply):
            for inp in node.inputs:
                assert pos[id(inp)] < pos[id(node)]


def test_toposort_follows_creation_order_not_input_order():
    g = Graph("g")
    p = g.add_parameter("p")
    first = g.apply(P["neg"], p, name="first")
    second = g.apply(P["pos"], p, name="second")
    g.output = g.apply(P["add"], second, first, name="out")  # inputs name `second` first
    assert applies(g) == [first, second, g.output]


GENERATED_SOURCE = """
import hashlib, importlib.util, sys
sys.path.insert(0, {root!r})
import myir
from bench import scaling_programs
path = {path!r}
spec = importlib.util.spec_from_file_location("chains", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
f = myir.grad(module.f, *scaling_programs.WRT["D50"], backend="python")
source = f.lower(*scaling_programs.INPUTS["D50"]()).source
print(hashlib.sha1(source.encode()).hexdigest())
"""


def test_toposort_orders_alike_in_every_process(tmp_path):
    """Chains of helper calls inlined into one another subdivide node ids until some tie:
    the order of tied nodes is the graph's own, not their addresses', so two processes
    generate the same code (and raise the same first exception)."""
    from bench import scaling_programs
    path = tmp_path / "chains.py"
    path.write_text(scaling_programs.source("D50", 100))
    script = GENERATED_SOURCE.format(root=str(pathlib.Path(__file__).parents[1]),
                                     path=str(path))
    env = {**os.environ, "MYIR_CACHE_DIR": "off"}
    digests = {subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, check=True, timeout=300).stdout for _ in range(3)}
    assert len(digests) == 1, digests


def test_toposort_leaves_out_dead_nodes():
    g = Graph("g")
    p = g.add_parameter("p")
    dead = g.apply(P["neg"], p, name="dead")
    g.output = g.apply(P["pos"], p, name="live")
    assert dead not in applies(g)
    assert applies(g) == [g.output]


def test_toposort_of_parsed_function_is_source_order():
    g = parse(independent)
    names = [n.debug.name for n in applies(g)]
    assert names[:4] == ["p", "q", "r", "s"]
    lines = [n.location.line for n in applies(g)]
    assert lines == sorted(lines)
    assert lines[0] == line_of(independent, "p = x + 1")


def test_toposort_puts_closure_after_the_values_it_captures():
    outer, inner, (x, y, k, z, call) = build_nested()
    order = analysis.toposort(outer)
    (closure,) = [n for n in order if isinstance(n, Constant) and n.value is inner]
    assert order.index(k) < order.index(closure) < order.index(call)


@st.composite
def random_dags(draw):
    """A graph whose applies each take earlier nodes (parameters or applies) as inputs, in
    creation order; returns (graph, applies in creation order, live applies)."""
    g = Graph("dag")
    nodes = [g.add_parameter(f"p{i}") for i in range(draw(st.integers(1, 3)))]
    created = []
    for i in range(draw(st.integers(1, 12))):
        arity = draw(st.integers(1, 3))
        ins = [nodes[draw(st.integers(0, len(nodes) - 1))] for _ in range(arity)]
        node = g.apply(P["make_tuple"], *ins, name=f"n{i}")
        nodes.append(node)
        created.append(node)
    roots = draw(st.lists(st.sampled_from(created), min_size=1, max_size=4))
    g.output = g.apply(P["make_tuple"], *roots, name="out")
    live, stack = set(), [g.output]
    while stack:
        n = stack.pop()
        if id(n) not in live and isinstance(n, Apply):
            live.add(id(n))
            stack.extend(n.inputs)
    return g, created + [g.output], live


@given(random_dags())
def test_toposort_random_dags(case):
    g, created, live = case
    order = applies(g)
    # Exactly the live applies, each once, inputs first, and in creation order (creation
    # order is a valid order here, and toposort picks the valid order closest to it).
    assert {id(n) for n in order} == live
    assert len(order) == len(live)
    seen = set()
    for node in order:
        assert all(id(i) in seen for i in node.inputs if isinstance(i, Apply))
        seen.add(id(node))
    assert order == [n for n in created if id(n) in live]


@given(random_dags(), st.randoms(use_true_random=False))
def test_kahn_places_the_first_ready_node(case, rng):
    """`_kahn` on any order of a graph's nodes (ids out of order: inlining many levels deep
    runs out of a float's precision) gives the smallest valid order by place in it, as
    Kahn's algorithm with a heap of every ready node's place does."""
    import heapq

    g, created, live = case
    order = [n for n in created if id(n) in live]
    rng.shuffle(order)
    deps_of = {id(n): [i for i in n.inputs if id(i) in live] for n in order}
    place = {id(n): k for k, n in enumerate(order)}
    waiting = {k: len({id(i) for i in deps_of[id(n)]}) for k, n in enumerate(order)}
    users: dict = {}
    for k, n in enumerate(order):
        for key in {id(i) for i in deps_of[id(n)]}:
            users.setdefault(place[key], []).append(k)
    ready = [k for k, w in waiting.items() if w == 0]
    heapq.heapify(ready)
    expected = []
    while ready:
        k = heapq.heappop(ready)
        expected.append(order[k])
        for u in users.get(k, ()):
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    assert analysis._kahn(order, deps_of) == expected


# --------------------------------------------------------------------------------------------
# free variables, scope, reachability


def test_free_variables_hand_built():
    outer, inner, (x, y, k, z, call) = build_nested()
    assert analysis.free_variables(outer) == []
    fvs = analysis.free_variables(inner)
    assert fvs == [k, x]            # discovery order, from inner's output
    assert z not in fvs


def test_free_variables_parsed_closure():
    g = parse(nested)
    inner = graph_named(g, "inner")
    assert analysis.free_variables(inner) == [g.parameters[0]]
    assert analysis.free_variables(g) == []
    assert analysis.is_closure(inner) and not analysis.is_closure(g)


def test_free_variables_across_two_levels():
    g = parse(three_levels)
    mid, innermost = graph_named(g, "mid"), graph_named(g, "innermost")
    (x,) = g.parameters
    (y,) = mid.parameters
    assert set(analysis.free_variables(innermost)) == {x, y}
    # mid's body does not mention x, but the closure it makes captures x: mid needs x too.
    assert analysis.free_variables(mid) == [x]
    assert analysis.ancestors(innermost) == [mid, g]


def test_free_variables_transitive_through_sibling_closure_parsed():
    g = parse(siblings)
    a, b = graph_named(g, "a"), graph_named(g, "b")
    (x,) = g.parameters
    assert analysis.free_variables(a) == [x]
    # b's own code uses no variable of `siblings`; it calls a, which captures x.
    assert analysis.free_variables(b) == [x]


def test_free_variables_transitive_through_sibling_closure_hand_built():
    outer = Graph("outer")
    x = outer.add_parameter("x")
    a = Graph("a", outer)
    ta = a.add_parameter("t")
    a.output = a.apply(P["add"], ta, x)
    b = Graph("b", outer)
    tb = b.add_parameter("t")
    b.output = b.apply(P["mul"], b.apply(a, tb), 2.0)
    outer.output = outer.apply(b, 1.0)
    assert analysis.free_variables(b) == [x]
    # A sibling without free variables passes nothing on.
    c = Graph("c", outer)
    tc = c.add_parameter("t")
    c.output = c.apply(P["neg"], tc)
    d = Graph("d", outer)
    td = d.add_parameter("t")
    d.output = d.apply(c, td)
    assert analysis.free_variables(d) == []


def test_top_level_callee_is_not_a_free_variable_source():
    g = parse(calls_helper)
    assert analysis.free_variables(g) == []
    helper_graph = graph_named(g, "helper")
    assert helper_graph.parent is None
    assert analysis.free_variables(helper_graph) == []


def test_reachable_graphs():
    outer, inner, _ = build_nested()
    unused = Graph("unused", outer)
    unused.output = unused.add_parameter("u")
    assert analysis.reachable_graphs(outer) == [outer, inner]
    assert unused not in analysis.reachable_graphs(outer)

    g = parse(is_even)
    names = [h.name for h in analysis.reachable_graphs(g)]
    assert analysis.reachable_graphs(g)[0] is g
    assert "is_odd" in names                      # through a call to another function
    assert [h.name for h in analysis.reachable_graphs(g) if h.parent is None] == \
        ["is_even", "is_odd"]

    g = parse(calls_helper)
    assert [h.name for h in analysis.reachable_graphs(g)] == ["calls_helper", "helper"]


def test_reachable_graphs_of_nested_graph_is_its_own_scope():
    outer, inner, _ = build_nested()
    assert analysis.reachable_graphs(inner) == [inner]
    g = parse(nested)
    inner = graph_named(g, "inner")
    assert str(inner).startswith("graph inner(%z) {")
    assert inner.stats()["graphs"] == 1


def test_children_and_scope():
    g = parse(three_levels)
    mid, innermost = graph_named(g, "mid"), graph_named(g, "innermost")
    kids = analysis.children(g)
    assert kids[g] == [mid]
    assert kids[mid] == [innermost]
    assert kids[innermost] == []
    assert analysis.scope(g) == [g, mid, innermost]
    assert analysis.scope(mid) == [mid, innermost]
    assert analysis.scope(innermost) == [innermost]


def test_scope_lists_parents_before_children():
    g = parse(mixed)
    sc = analysis.scope(g)
    assert sc[0] is g
    assert len(sc) == len(set(sc)) == len(analysis.reachable_graphs(g))
    for h in sc[1:]:
        assert sc.index(h.parent) < sc.index(h)


def test_scope_does_not_include_top_level_callees():
    g = parse(calls_helper)
    assert analysis.scope(g) == [g]


# --------------------------------------------------------------------------------------------
# users


def test_users_hand_built():
    g, (x, y), (a, b, c) = build_straight()
    u = analysis.users(g)
    assert len(u[x]) == 2 and set(u[x]) == {(a, 1), (c, 2)}
    assert u[y] == [(a, 2)]
    assert u[a] == [(b, 1)]
    assert u[c] == [(g, OUTPUT)]                # the output use


def test_users_same_node_twice_and_output_of_nested_graph():
    outer, inner, (x, y, k, z, call) = build_nested()
    sq = Graph("sq")
    p = sq.add_parameter("p")
    sq.output = sq.apply(P["mul"], p, p)
    assert analysis.users(sq)[p] == [(sq.output, 1), (sq.output, 2)]

    u = analysis.users(outer)
    assert (inner, OUTPUT) in u[inner.output]
    assert (outer, OUTPUT) in u[call]
    # x is used by `k` in outer and, as a free variable, by inner's `t`.
    assert {user.debug.name for user, _ in u[x]} == {"k", "t"}
    # graph constants are users' inputs too
    (use,) = analysis.graph_uses(outer)[inner]
    assert use == (call, 0)


def test_users_parsed_output_use():
    g = parse(straight)
    u = analysis.users(g)
    assert u[g.output] == [(g, OUTPUT)]
    x, y = g.parameters
    assert [user.debug.name for user, _ in u[y]] == ["a"]


# --------------------------------------------------------------------------------------------
# recursion


def test_recursive_graphs_self_loop_hand_built():
    g = Graph("loop")
    n = g.add_parameter("n")
    g.output = g.apply(g, g.apply(P["sub"], n, 1))
    assert analysis.recursive_graphs(g) == {g}
    assert isinstance(analysis.call_graph(g), nx.DiGraph)
    assert analysis.call_graph(g).has_edge(g, g)


def test_recursive_graphs_none():
    assert analysis.recursive_graphs(parse(straight)) == set()
    assert analysis.recursive_graphs(parse(nested)) == set()
    assert analysis.recursive_graphs(parse(calls_helper)) == set()


def test_recursive_graphs_while_loop():
    g = parse(counting_loop)
    rec = analysis.recursive_graphs(g)
    assert g not in rec
    loop_graphs = [h for h in rec if h.parent is g]
    assert len(loop_graphs) == 1                 # the loop header, which calls itself
    header = loop_graphs[0]
    assert all(h is header or header in analysis.ancestors(h) for h in rec)


def test_recursive_graphs_recursion():
    g = parse(fact)
    rec = analysis.recursive_graphs(g)
    assert g in rec
    # The graph that makes the recursive call is on the cycle too.
    assert any(isinstance(n, Apply) and isinstance(n.fn, Constant) and n.fn.value is g
               for h in rec for n in applies(h))


def test_recursive_graphs_mutual_recursion():
    g = parse(is_even)
    odd = graph_named(g, "is_odd")
    rec = analysis.recursive_graphs(g)
    assert g in rec and odd in rec
    cg = analysis.call_graph(g)
    assert any(g in c and odd in c for c in nx.strongly_connected_components(cg))


def test_recursive_graphs_mutual_hand_built():
    f = Graph("f")
    h = Graph("h")
    fp = f.add_parameter("n")
    hp = h.add_parameter("n")
    f.output = f.apply(h, fp)
    h.output = h.apply(f, hp)
    leaf = Graph("leaf")
    leaf.output = leaf.add_parameter("m")
    top = Graph("top")
    tp = top.add_parameter("n")
    top.output = top.apply(P["add"], top.apply(f, tp), top.apply(leaf, tp))
    assert analysis.recursive_graphs(top) == {f, h}


# --------------------------------------------------------------------------------------------
# edits and cache invalidation


def test_replace_rewires_users_and_invalidates_toposort():
    g, (x, y), (a, b, c) = build_straight()
    assert applies(g) == [a, b, c]
    before = analysis.users(g)
    replace(g, b, a)                          # c = a - x
    assert c.inputs[1] is a
    assert applies(g) == [a, c]
    after = analysis.users(g)
    assert after is not before
    assert (c, 1) in after[a] and b not in after
    assert run(g, 3.0, 5.0) == 3.0 * 5.0 - 3.0


def test_replace_output_use():
    g, (x, y), (a, b, c) = build_straight()
    replace(g, c, b)
    assert g.output is b
    assert analysis.users(g)[b] == [(g, OUTPUT)]
    assert run(g, 2.0, 4.0) == 2.0 * 4.0 + 1.0


def test_replace_invalidates_free_variables():
    outer, inner, (x, y, k, z, call) = build_nested()
    assert analysis.free_variables(inner) == [k, x]
    replace(outer, k, y)
    assert analysis.free_variables(inner) == [y, x]
    assert k not in analysis.toposort(outer)
    assert run(outer, 1.0, 10.0) == 10.0 + 10.0 + 1.0


def test_set_output_invalidates():
    g = Graph("g")
    p = g.add_parameter("p")
    g.output = p
    assert applies(g) == []
    stats = g.stats()
    assert stats["applies"] == 0
    edit.set_output(g, g.apply(P["neg"], p))
    assert len(applies(g)) == 1
    assert g.stats()["applies"] == 1
    assert analysis.users(g)[p] == [(g.output, 1)]


def test_one_graph_analyses_follow_edits_of_the_graphs_they_read():
    """toposort and free_variables are cached by the stamps of the graphs they read: an
    edit of a sibling closure (b reads a's free variables through the call) invalidates b's
    free variables and outer's node order, and an edit elsewhere keeps them."""
    outer = Graph("outer")
    x, y = outer.add_parameter("x"), outer.add_parameter("y")
    a = Graph("a", outer)
    a.output = a.apply(P["add"], a.add_parameter("t"), x)
    b = Graph("b", outer)
    b.output = b.apply(a, b.add_parameter("t"))
    outer.output = outer.apply(b, 1.0)
    other = Graph("other")
    other.output = other.apply(P["neg"], other.add_parameter("p"))
    order, fvs = analysis.toposort(outer), analysis.free_variables(b)
    assert fvs == [x] and y not in order
    other.output.set_inputs([Constant(P["neg"]), Constant(2.0)])
    assert analysis.toposort(outer) is order and analysis.free_variables(b) is fvs
    a.output.set_inputs([Constant(P["add"]), a.parameters[0], y])   # a now captures y
    assert analysis.free_variables(b) == [y]
    assert y in analysis.toposort(outer) and x not in analysis.toposort(outer)
    a.output = a.parameters[0]                                      # and nothing
    assert analysis.free_variables(b) == [] and y not in analysis.toposort(outer)


def test_inputs_change_only_through_set_inputs():
    """Passes never assign a node's `inputs` (or an item of it) directly: `set_inputs`
    changes the graph's stamp, which the cached analyses rely on."""
    root = pathlib.Path(__file__).resolve().parent.parent
    direct = re.compile(r"\.inputs(\[[^\]]*\])?\s*(=|\+=)(?!=)")
    found = [f"{path.relative_to(root)}:{n}: {line.strip()}"
             for folder in ("myir", "frontend", "passes", "backends")
             for path in sorted((root / folder).rglob("*.py"))
             if path.name != "graph.py"
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if direct.search(line) and "self.inputs = inputs" not in line]
    assert found == []


def test_clone_nested_graph_shares_free_variables():
    g = parse(nested)
    inner = graph_named(g, "inner")
    copy = clone(inner)
    assert copy is not inner
    assert copy.parent is g                    # same parent
    assert analysis.free_variables(copy) == [g.parameters[0]]   # the same node, shared
    assert copy.parameters[0] is not inner.parameters[0]
    assert copy.debug.relation == "copy of" and copy.debug.origin is inner.debug
    # The original is untouched.
    assert analysis.free_variables(inner) == [g.parameters[0]]


def test_clone_copies_nested_graphs_with_parents_remapped():
    g = parse(three_levels)
    copy = clone(g)
    originals = analysis.reachable_graphs(g)
    copies = analysis.reachable_graphs(copy)
    assert [h.name for h in copies] == [h.name for h in originals]
    assert not set(map(id, copies)) & set(map(id, originals))
    mid, innermost = graph_named(copy, "mid"), graph_named(copy, "innermost")
    assert copy.parent is None
    assert mid.parent is copy and innermost.parent is mid
    assert set(analysis.free_variables(innermost)) == {copy.parameters[0], mid.parameters[0]}
    # No node of the copy belongs to an original graph.
    for h in copies:
        for node in analysis.toposort(h):
            if not isinstance(node, Constant):
                assert node.graph in copies
    assert str(copy) == str(g)                 # same text: same names, order, locations
    assert copy.stats() == g.stats()


def test_copy_is_in_creation_order(monkeypatch):
    """A copy is made in its original's node order, closures' constants included (each a
    new id): sorting it by creation is a valid order, and `toposort` needs no Kahn's heap
    for it (it did for every copied graph with a closure, a closure's constant keeping the
    original's id, below those of the copies of the values it captures)."""
    g = parse(three_levels)
    expected = [str(n) for h in analysis.reachable_graphs(g) for n in analysis.toposort(h)]

    def no_kahn(*_):
        raise AssertionError("a copy's creation order was not a valid order")

    monkeypatch.setattr(analysis, "_kahn", no_kahn)
    copy = edit.clone_program(g)
    closures = [n for h in analysis.reachable_graphs(copy) for n in analysis.toposort(h)
                if isinstance(n, Constant) and isinstance(n.value, Graph)
                and analysis.free_variables(n.value)]
    assert closures and all(c.debug.relation == "copy of" for c in closures)
    assert [str(n) for h in analysis.reachable_graphs(copy)
            for n in analysis.toposort(h)] == expected


@pytest.mark.parametrize("fn, args", [
    (straight, (2.0, 3.0)),
    (nested, (1.5, 4)),
    (three_levels, (0.25,)),
    (siblings, (3.0,)),
    (counting_loop, (17,)),
    (fact, (8,)),
    (is_even, (7,)),
    (mixed, (1.5, 6)),
    (mixed, (-2.0, 4)),
])
def test_clone_compiles_to_the_same_function(fn, args):
    copy = clone(parse(fn))
    assert run(copy, *args) == fn(*args)


def test_clone_of_recursive_graph_calls_the_clone():
    g = parse(fact)
    copy = clone(g)
    callees = {n.fn.value for h in analysis.reachable_graphs(copy) for n in applies(h)
               if isinstance(n.fn, Constant) and isinstance(n.fn.value, Graph)
               and n.fn.value.parent is None}
    assert callees == {copy}
    assert g not in analysis.reachable_graphs(copy)


def test_inline_binds_parameters_hand_built():
    callee, _, (a, b, c) = build_straight()
    main = Graph("main")
    u = main.add_parameter("u")
    v = main.add_parameter("v")
    w = main.apply(P["add"], u, v, name="w")
    result = inline(callee, [w, u], main)
    main.output = main.apply(P["mul"], result, 10.0)
    body = applies(main)
    assert len(body) == 1 + 3 + 1
    assert all(n.graph is main for n in body)
    # parameters are bound: no node of main uses callee's parameters
    for n in body:
        assert not any(isinstance(i, Parameter) and i.graph is callee for i in n.inputs)
    assert result.debug.relation == "inlined from" and result.debug.origin is c.debug
    uu, vv = 2.0, 3.0
    assert run(main, uu, vv) == straight(uu + vv, uu) * 10.0
    # The callee is untouched.
    assert applies(callee) == [a, b, c]


def test_inline_nested_graphs_move_into_target():
    g = parse(nested)
    main = Graph("main")
    p = main.add_parameter("p")
    main.output = inline(g, [p, main.apply(P["mul"], p, 3)], main)
    kids = analysis.children(main)[main]
    assert [k.name for k in kids] == ["inner"]
    assert kids[0] is not graph_named(g, "inner")
    assert analysis.free_variables(kids[0]) == [p]
    assert run(main, 5) == nested(5, 15)


@pytest.mark.parametrize("fn, args", [
    (counting_loop, (10,)),
    (siblings, (0.5,)),
    (mixed, (2.0, 5)),
    (is_even, (6,)),
])
def test_inline_compiles_to_the_same_function(fn, args):
    g = parse(fn)
    main = Graph("main")
    params = [main.add_parameter(f"a{i}") for i in range(len(args))]
    main.output = main.apply(P["make_tuple"], inline(g, params, main), 1)
    assert run(main, *args) == (fn(*args), 1)


def test_inline_recursive_graph_keeps_recursion_on_callee():
    g = parse(fact)
    main = Graph("main")
    p = main.add_parameter("p")
    main.output = main.apply(P["mul"], 10, inline(g, [p], main))
    assert run(main, 3) == 10 * fact(3)


def build_closures_made_in_a_loop():
    """graph f(n) { graph loop(i, acc) {
                      graph k() { return i }                    # one per iteration
                      graph h() { return k() + k() + acc() }    # calls that iteration's k
                      return switch(i < n, () -> loop(i + 1, h), () -> acc())() }
                    return loop(0, zero) }    with zero() = 0: f(n) = 2 * (0 + 1 + ... + n-1)"""
    zero = Graph("zero")
    zero.output = Constant(0)
    f = Graph("f")
    n = f.add_parameter("n")
    loop = Graph("loop", f)
    i, acc = loop.add_parameter("i"), loop.add_parameter("acc")
    k = Graph("k", loop)
    k.output = i
    h = Graph("h", loop)
    h.output = h.apply(P["add"], h.apply(P["add"], h.apply(k), h.apply(k)), h.apply(acc))
    again = Graph("again", loop)
    again.output = again.apply(loop, again.apply(P["add"], i, 1), h)
    done = Graph("done", loop)
    done.output = done.apply(acc)
    loop.output = loop.apply(loop.apply(P["switch"], loop.apply(P["lt"], i, n), again, done))
    f.output = f.apply(loop, 0, zero)
    return f


def test_a_closure_made_in_a_loop_calls_the_closures_of_its_iteration():
    """The backend emits the loop as `while True:` and k and h as `def`s in its body: h must
    call the k of its own iteration, not the one the last iteration bound to the name."""
    source = generate(build_closures_made_in_a_loop()).source
    assert source.count("while True:") == 1, source
    assert run(build_closures_made_in_a_loop(), 4) == 2 * (0 + 1 + 2 + 3)


# --------------------------------------------------------------------------------------------
# the text printer


def test_printer_hand_built_exact():
    g, _, _ = build_straight()
    assert str(g) == (
        "graph straight(%x, %y) {\n"
        "  %a = mul(%x, %y)\n"
        "  %b = add(%a, 1.0)\n"
        "  %c = sub(%b, %x)\n"
        "  return %c\n"
        "}"
    )


def test_printer_location_and_unique_names():
    g = Graph("f", location=Location("model.py", 12, 5))
    x = g.add_parameter("x")
    t1 = g.apply(P["neg"], x, name="t")
    t2 = g.apply(P["exp"], t1, name="t")
    g.output = t2
    text = str(g)
    first = text.splitlines()[0]
    assert first == "graph f(%x) {  # model.py:12:5"
    assert "  %t = neg(%x)" in text.splitlines()
    assert "  %t.2 = exp(%t)" in text.splitlines()


def test_printer_parsed_function():
    g = parse(straight)
    lines = str(g).splitlines()
    def_line = line_of(straight, "def straight")
    assert lines[0] == f"graph straight(%x, %y) {{  # {__file__}:{def_line}:1"
    apply_lines = [l for l in lines if re.fullmatch(r"\s*%[\w.]+ = [\w.%@]+\(.*\)", l)]
    assert len(apply_lines) == g.stats()["applies"] == 3
    assert apply_lines == ["  %a = mul(%x, %y)", "  %b = add(%a, 1.0)", "  %c = sub(%b, %x)"]
    assert lines[-2:] == ["  return %c", "}"]


def test_printer_nested_graphs_indented():
    g = parse(three_levels)
    lines = str(g).splitlines()
    mid_header = next(l for l in lines if "graph mid(" in l)
    inner_header = next(l for l in lines if "graph innermost(" in l)
    assert mid_header.startswith("  graph mid(%y) {")
    assert inner_header.startswith("    graph innermost(%z) {")
    assert inner_header.endswith(f"# {__file__}:{line_of(three_levels, 'def innermost')}:9")
    assert mid_header.endswith(f"# {__file__}:{line_of(three_levels, 'def mid')}:5")
    # innermost's body is indented one level more than its header; nested graphs are
    # printed inside their parent's braces
    i = lines.index(inner_header)
    assert lines[i + 1].startswith("      %")
    assert lines.index(mid_header) < i < len(lines) - 1
    assert lines[-1] == "}"
    # one `%name = fn(args)` line per apply over all graphs
    n_apply_lines = sum(bool(re.fullmatch(r"\s*%[\w.]+ = [\w.%@]+\(.*\)", l)) for l in lines)
    assert n_apply_lines == g.stats()["applies"]


def test_printer_shows_called_top_level_functions():
    text = str(parse(is_even))
    assert len(re.findall(r"^graph ", text, re.M)) == 2   # is_even, then is_odd
    assert text.index("graph is_even(") < text.index("graph is_odd(")


# --------------------------------------------------------------------------------------------
# Graph.stats()


def test_stats_straight_line():
    s = parse(straight).stats()
    assert set(s) == {"graphs", "applies", "closures", "primitives"}
    assert s["graphs"] == 1
    assert s["applies"] == 3
    assert s["closures"] == 0
    assert dict(s["primitives"]) == {"mul": 1, "add": 1, "sub": 1}


def test_stats_closure():
    # nested: `inner(y)` in nested, `z + x` in inner; inner captures x.
    s = parse(nested).stats()
    assert (s["graphs"], s["applies"], s["closures"]) == (2, 2, 1)
    assert dict(s["primitives"]) == {"add": 1}


def test_stats_sibling_closures_and_callee():
    # siblings: b(1.0) | a(t), mul(., 2.0) | add(t, x): 4 applies, 3 graphs, a and b capture x
    s = parse(siblings).stats()
    assert (s["graphs"], s["applies"], s["closures"]) == (3, 4, 2)
    assert dict(s["primitives"]) == {"mul": 1, "add": 1}
    # calls_helper: helper(x), add | mul: helper is top level, not a closure
    s = parse(calls_helper).stats()
    assert (s["graphs"], s["applies"], s["closures"]) == (2, 3, 0)
    assert dict(s["primitives"]) == {"add": 1, "mul": 1}


def test_stats_hand_built():
    outer, inner, _ = build_nested()
    s = outer.stats()
    assert (s["graphs"], s["applies"], s["closures"]) == (2, 4, 1)
    assert dict(s["primitives"]) == {"mul": 1, "add": 2}
    # A primitive passed as an argument is not a call of it.
    g = Graph("g")
    p = g.add_parameter("p")
    g.output = g.apply(P["make_tuple"], P["sin"], p)
    assert dict(g.stats()["primitives"]) == {"make_tuple": 1}
