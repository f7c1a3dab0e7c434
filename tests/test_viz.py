"""Pictures of graphs: `myir.viz.to_networkx`, `to_dot` and `to_svg`."""

import dataclasses
import re
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

import myir
from frontend import parse
from myir import viz
from myir.ir import PRIMITIVES as P
from myir.ir import Apply, Graph
from myir.ir.analysis import scope, toposort
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
    dot = to_dot(parse(scale), fold=False)
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
    dot = to_dot(graph, fold=False)
    declared = re.findall(r"^\s*(n\d+) \[label=", dot, re.M)
    assert len(declared) == len(set(declared)) == g.number_of_nodes()
    assert len(re.findall(r"^\s*n\d+ -> n\d+", dot, re.M)) == g.number_of_edges()
    assert sum(len(c[3]) for c in clusters(dot)) == g.number_of_nodes()


def declared(dot):
    """{dot node id: label} for every node statement."""
    return {m.group(1): m.group(2) for m in re.finditer(r'^\s*(\w+) \[label="([^"]*)"', dot, re.M)}


def test_dot_folds_constants_into_their_apply():
    dot = to_dot(parse(scale))
    labels = set(declared(dot).values())
    assert "add(·, 1.0)" in labels                     # z + 1.0
    assert "%z = @helper" in labels                    # a call named by its callee
    assert "1.0" not in labels and "mul" in labels     # no separate constant nodes


@pytest.mark.parametrize("fn", [straight, scale, nested, fact, counting_loop, compose],
                         ids=lambda f: f.__name__)
def test_dot_folded_draws_one_box_per_apply(fn):
    graph = parse(fn)
    dot = to_dot(graph)
    applies = re.findall(r'^\s*n\d+ \[label="[^"]*" shape=box style="rounded,filled" '
                         r'fillcolor="#f3f4f6"', dot, re.M)
    assert len(applies) == graph.stats()["applies"]
    assert len(re.findall(r"^\s*subgraph cluster_", dot, re.M)) == graph.stats()["graphs"]


def test_dot_returned_closure_is_drawn_and_feeds_the_return():
    dot = to_dot(parse(compose))
    ids = {label: key for key, label in declared(dot).items()}
    assert re.search(rf"^\s*{ids['@lambda']} -> n\d+", dot, re.M)


def test_dot_names_from_the_source():
    dot = to_dot(parse(scale))
    labels = set(declared(dot).values())
    assert "%y = @lambda" in labels                    # y = f(k), f the lambda
    assert "%z = @helper" in labels
    assert {"%x", "%k", "%t"} <= labels


def test_dot_argument_positions_only_where_order_matters():
    dot = to_dot(parse(straight))                      # gamma = alpha * beta; gamma - alpha
    edges = re.findall(r"-> n\d+ \[[^\]]*\]", dot)
    labelled = [e for e in edges if "label=" in e]
    assert len(labelled) == 2                          # sub's two arguments; mul commutes


def test_dot_collapse_draws_nested_graph_as_a_box():
    dot = to_dot(parse(scale), collapse=True)
    labels = [c[2] for c in clusters(dot)]
    assert "lambda(t)" not in labels and "scale(x, k)" in labels
    (box,) = re.findall(r'^\s*(box\d+) \[label="lambda\(t\)\\n1 applies \(collapsed\)"', dot,
                        re.M)
    dashed = [l for l in dot.splitlines() if "style=dashed" in l]
    assert len(dashed) == 1 and f"-> {box} " in dashed[0]


def test_dot_collapse_by_name_counts_the_whole_scope():
    graph = parse(counting_loop)
    (loop,) = [x for x in scope(graph) if x.parent is graph]
    total = sum(1 for x in scope(loop) for n in toposort(x)
                if isinstance(n, Apply) and n.graph is x)
    dot = to_dot(graph, collapse=[loop.name])
    assert f"\\n{total} applies (collapsed)" in dot
    assert len(clusters(dot)) == 1


def test_dot_one_graph_and_no_callees():
    graph = parse(scale)
    assert [c[2] for c in clusters(to_dot(graph, callees=False))] == ["scale(x, k)", "lambda(t)"]
    lam = to_dot(graph, graph="lambda")
    assert [c[2] for c in clusters(lam)] == ["lambda(t)"]
    # what the lambda captures from scale is drawn outside its cluster, with the dashed edge
    (x,) = [key for key, label in declared(lam).items() if label == "%x"]
    assert x not in clusters(lam)[0][3]
    assert re.search(rf"^\s*{x} -> n\d+ \[style=dashed", lam, re.M)
    assert [c[2] for c in clusters(to_dot(graph, graph="helper"))] == ["helper(t)"]
    with pytest.raises(myir.MyirError, match="no graph named 'nope'") as e:
        to_dot(graph, graph="nope")
    assert "helper" in str(e.value)


# --------------------------------------------------------------------------------------------
# SVG and Jupyter

needs_renderer = pytest.mark.skipif(
    viz.renderer() is None, reason="neither Graphviz's dot nor graphviz-pure is installed "
                                   "(pip install -e '.[notebooks]')")


@needs_renderer
def test_svg_parses_and_names_the_functions():
    graph = parse(scale)
    svg = to_svg(graph)
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    texts = {t.text for t in root.iter() if t.tag.endswith("text")}
    assert {"scale(x, k)", "lambda(t)", "helper(t)", "%z = @helper"} <= texts
    assert graph._repr_svg_() == svg


def test_without_a_renderer_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setattr(viz, "renderer", lambda: None)
    graph = parse(scale)
    with pytest.raises(myir.MyirError, match="graphviz-pure") as e:
        to_svg(graph)
    assert "notebooks" in str(e.value)
    assert graph._repr_svg_() is None                  # Jupyter then shows the text form


def lowered_of_grad():
    return myir.grad(scale, "x").lower(2.0, 3.0)


@needs_renderer
@pytest.mark.usefixtures("optimizer_on")
def test_lowered_html_shows_every_stage_side_by_side():
    page = lowered_of_grad()._repr_html_()
    stages = list(lowered_of_grad().stages)
    assert {"parsed", "expanded", "optimized"} <= set(stages)
    assert page.count('class="myir-col"') == len(stages) + 1     # and the generated code
    for title in stages + ["generated Python"]:
        assert f"<h4>{title}</h4>" in page
    assert page.count('<img src="data:image/svg+xml;base64,') == len(stages)
    assert "def grad_scale(x, k):" in page


def test_lowered_html_without_renderer_shows_text_and_regions(monkeypatch):
    monkeypatch.setattr(viz, "renderer", lambda: None)
    lowered = dataclasses.replace(lowered_of_grad(), regions=[
        SimpleNamespace(inputs=["a", "b"], outputs=["c"], ir="@main(a, b) <ir>",
                        source="void kernel() {}\n" + "; llvm\n" * 500)])
    page = lowered._repr_html_()
    assert "<img" not in page
    assert "graph scale(%x, %k) {" in page             # the text form instead
    assert "TVM region 0" in page and "inputs a, b → outputs c" in page
    assert "@main(a, b) &lt;ir&gt;" in page and "void kernel() {}" in page
    assert "... 381 more lines" in page                # long LLVM IR is cut
