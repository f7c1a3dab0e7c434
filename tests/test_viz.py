"""Pictures of graphs: `myir.viz.to_networkx`, `to_dot` and `to_svg`."""

import re
import shutil
import xml.etree.ElementTree as ET

import pytest

import myir
from frontend import parse
from myir.ir import PRIMITIVES as P
from myir.ir import Graph
from myir.viz import to_dot, to_networkx, to_svg


# --------------------------------------------------------------------------------------------
# Subjects (module level so that inspect.getsource finds them)


def helper(t):
    return t * 3.0


def scale(x, k):
    f = lambda t: t * x
    y = f(k)
    z = helper(y)
    return z + 1.0


def nested(x, y):
    def inner(z):
        return z + x
    return inner(y)


def fact(n):
    if n <= 1:
        return 1
    return n * fact(n - 1)


def counting_loop(n):
    i = 0
    s = 0
    while i < n:
        s = s + i
        i = i + 1
    return s


def compose(f, g):
    return lambda x: f(g(x))


def straight(alpha, beta):
    gamma = alpha * beta
    return gamma - alpha


def kinds(g, kind):
    return [n for n, d in g.nodes(data=True) if d["kind"] == kind]


def edges_of(g, kind):
    return [(a, b, d) for a, b, d in g.edges(data=True) if d["kind"] == kind]


# --------------------------------------------------------------------------------------------
# to_networkx


def test_networkx_node_kinds():
    g = to_networkx(parse(scale))
    labels = {d["label"]: d for _, d in g.nodes(data=True)}
    assert {d["kind"] for _, d in g.nodes(data=True)} == \
        {"parameter", "apply", "constant", "graph", "closure", "return"}
    assert labels["%x"]["kind"] == "parameter" and labels["%x"]["graph"] == "scale"
    assert labels["@lambda"]["kind"] == "closure"       # captures x
    assert labels["@helper"]["kind"] == "graph"         # top level: captures nothing
    assert labels["1.0"]["kind"] == "constant"
    assert labels["%z"]["kind"] == "apply"
    # one return node per graph: scale, lambda, helper
    assert sorted(d["graph"] for _, d in g.nodes(data=True) if d["kind"] == "return") == \
        ["helper", "lambda", "scale"]
    # every node has its attributes (no node was made implicitly by an edge)
    for _, d in g.nodes(data=True):
        assert {"kind", "label", "graph"} <= set(d)


def test_networkx_edge_kinds_and_free_variable_edge():
    g = to_networkx(parse(scale))
    assert {d["kind"] for _, _, d in g.edges(data=True)} == {"fn", "arg", "fv"}
    # fn edges go from the called thing to an apply, with index 0
    for a, b, d in edges_of(g, "fn"):
        assert g.nodes[b]["kind"] == "apply" and d["index"] == 0
    # the lambda's use of x is the one free-variable edge: from scale's parameter x to the
    # lambda's multiplication, as its argument 2
    (fv,) = edges_of(g, "fv")
    a, b, d = fv
    assert g.nodes[a]["label"] == "%x" and g.nodes[a]["graph"] == "scale"
    assert g.nodes[b]["kind"] == "apply" and g.nodes[b]["graph"] == "lambda"
    assert d["index"] == 2
    # arg edges stay within one graph
    for a, b, d in edges_of(g, "arg"):
        assert g.nodes[a]["graph"] == g.nodes[b]["graph"]


def test_networkx_hand_built():
    outer = Graph("outer")
    x = outer.add_parameter("x")
    inner = Graph("inner", outer)
    z = inner.add_parameter("z")
    inner.output = inner.apply(P["mul"], z, x, name="m")
    outer.output = outer.apply(inner, 2.0, name="call")
    g = to_networkx(outer)
    assert len(kinds(g, "parameter")) == 2
    assert len(kinds(g, "apply")) == 2
    assert len(kinds(g, "closure")) == 1
    assert len(kinds(g, "return")) == 2
    (fv,) = edges_of(g, "fv")
    assert fv[0] == id(x) and fv[1] == id(inner.output)
    assert g.has_edge(id(z), id(inner.output))


@pytest.mark.parametrize("fn", [scale, nested, fact, counting_loop, compose, straight],
                         ids=lambda f: f.__name__)
def test_networkx_apply_count_matches_stats(fn):
    graph = parse(fn)
    g = to_networkx(graph)
    assert len(kinds(g, "apply")) == graph.stats()["applies"]
    assert len(kinds(g, "return")) == graph.stats()["graphs"]


def test_networkx_returned_closure_is_a_closure_node():
    g = to_networkx(parse(compose))
    assert [g.nodes[n]["label"] for n in kinds(g, "closure")] == ["@lambda"]


# --------------------------------------------------------------------------------------------
# to_dot


def clusters(dot):
    """[(cluster id, depth, label, node ids declared directly in it)]; depth 1 is top."""
    result, stack, depth = [], [], 0
    for line in dot.splitlines():
        s = line.strip()
        m = re.match(r"subgraph (cluster_\w+) \{", s)
        if m:
            depth += 1
            stack.append([m.group(1), depth, None, []])
            result.append(stack[-1])
            continue
        if s.startswith("digraph"):
            continue
        if s == "}":
            if stack:
                stack.pop()
                depth -= 1
            continue
        m = re.match(r'label="([^"]*)"; style=rounded', s)
        if m and stack:
            stack[-1][2] = m.group(1)
            continue
        m = re.match(r"(n\d+) \[label=", s)
        if m and stack:
            stack[-1][3].append(m.group(1))
    return [tuple(c) for c in result]


def test_dot_nested_cluster_inside_parent_cluster():
    dot = to_dot(parse(scale))
    assert dot.startswith("digraph")
    found = clusters(dot)
    by_label = {label: (depth, nodes) for _, depth, label, nodes in found}
    assert by_label["scale(x, k)"][0] == 1
    assert by_label["helper(t)"][0] == 1               # a top-level callee: its own cluster
    assert by_label["lambda(t)"][0] == 2               # nested inside scale's cluster
    # textually inside: the lambda's cluster opens after scale's and before scale's closes
    lines = dot.splitlines()
    open_scale = next(i for i, l in enumerate(lines) if 'label="scale(x, k)"' in l) - 1
    open_lambda = next(i for i, l in enumerate(lines) if 'label="lambda(t)"' in l) - 1
    assert lines[open_scale].strip().startswith("subgraph cluster_")
    indent = len(lines[open_scale]) - len(lines[open_scale].lstrip())
    close_scale = next(i for i in range(open_scale + 1, len(lines))
                       if lines[i] == " " * indent + "}")
    assert open_scale < open_lambda < close_scale
    # the lambda's cluster holds the lambda's own nodes (parameter, mul, return)
    assert len(by_label["lambda(t)"][1]) == 4


def test_dot_free_variable_edge_is_dashed():
    dot = to_dot(parse(scale))
    edges = [l.strip() for l in dot.splitlines() if "->" in l]
    dashed = [e for e in edges if "style=dashed" in e]
    assert len(dashed) == 1
    # from x (a parameter of scale) to an apply in the lambda's cluster
    src, dst = re.match(r"(n\d+) -> (n\d+)", dashed[0]).groups()
    decl = {m.group(1): m.group(2) for m in re.finditer(r'(n\d+) \[label="([^"]*)"', dot)}
    assert decl[src] == "%x"
    (lam,) = [c for c in clusters(dot) if c[2] == "lambda(t)"]
    assert dst in lam[3]
    # other edges are not dashed
    assert all("dashed" not in e for e in edges if e not in dashed)


def test_dot_parameter_names():
    dot = to_dot(parse(straight))
    assert 'label="straight(alpha, beta)"' in dot
    assert '"%alpha"' in dot and '"%beta"' in dot


def test_dot_unnested_draws_root_alone():
    dot = to_dot(parse(scale), nested=False)
    labels = [c[2] for c in clusters(dot)]
    assert labels == ["scale(x, k)"]
    assert "style=dashed" not in dot


@pytest.mark.parametrize("fn", [
    straight, scale,
    nested, fact, counting_loop,
], ids=lambda f: getattr(f, "__name__", str(f)))
def test_dot_declares_every_node_and_edge(fn):
    graph = parse(fn)
    g = to_networkx(graph)
    dot = to_dot(graph)
    declared = re.findall(r"^\s*(n\d+) \[label=", dot, re.M)
    assert len(declared) == len(set(declared)) == g.number_of_nodes()
    assert len(re.findall(r"^\s*n\d+ -> n\d+", dot, re.M)) == g.number_of_edges()
    assert sum(len(c[3]) for c in clusters(dot)) == g.number_of_nodes()


# --------------------------------------------------------------------------------------------
# to_svg and Jupyter


def test_svg_or_clear_error():
    graph = parse(scale)
    if shutil.which("dot"):
        svg = to_svg(graph)
        root = ET.fromstring(svg)
        assert root.tag.endswith("svg")
        assert "scale" in svg
        assert graph._repr_svg_() == svg
    else:
        with pytest.raises(myir.MyirError, match="Graphviz"):
            to_svg(graph)
        # Jupyter falls back to the text form when there is no picture
        assert graph._repr_svg_() is None
