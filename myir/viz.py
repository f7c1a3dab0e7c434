"""Graphs as pictures: `to_networkx`, `to_dot`, and `to_svg` (for Jupyter).

Node kinds: parameter, constant, apply, graph (a graph constant; "closure" when it captures
free variables).  Edge kinds: "fn" (the function an apply calls), "arg" (an argument), and
"fv" (a nested graph's use of a node owned by an enclosing graph: a free variable).
"""

from __future__ import annotations

import shutil
import subprocess

import networkx as nx

from myir.errors import MyirError
from myir.ir.analysis import free_variables, reachable_graphs, toposort
from myir.ir.graph import Apply, Constant, Graph, is_graph_constant
from myir.ir.printer import Namer, constant_text, node_label


def _constant_kind(node: Constant) -> str:
    if is_graph_constant(node):
        return "closure" if free_variables(node.value) else "graph"
    return "constant"


def to_networkx(root: Graph, namer: Namer | None = None) -> nx.MultiDiGraph:
    """Every graph reachable from `root` as one networkx MultiDiGraph.  Nodes carry `kind`,
    `label` and `graph` (the owning graph's name); edges carry `kind` and, for arguments,
    `index`.  Constants get one node per use, so a primitive used twice is drawn twice."""
    namer = namer or Namer()
    g = nx.MultiDiGraph(name=root.name)
    for graph in reachable_graphs(root):
        gname = namer(graph, graph.name)
        for p in graph.parameters:
            g.add_node(id(p), kind="parameter", label=node_label(p, namer), graph=gname)
        for node in toposort(graph):
            if not (isinstance(node, Apply) and node.graph is graph):
                continue
            g.add_node(id(node), kind="apply", label=node_label(node, namer), graph=gname)
            for i, inp in enumerate(node.inputs):
                edge = "fn" if i == 0 else "arg"
                if isinstance(inp, Constant):
                    key = ("const", id(node), i)
                    g.add_node(key, kind=_constant_kind(inp), label=constant_text(inp.value, namer),
                               graph=gname)
                    g.add_edge(key, id(node), kind=edge, index=i)
                else:
                    cross = inp.graph is not graph
                    g.add_edge(id(inp), id(node), kind="fv" if cross else edge, index=i)
        out = graph.output
        g.add_node(("return", id(graph)), kind="return", label="return", graph=gname)
        if isinstance(out, Constant):
            key = ("const", id(graph), -1)
            g.add_node(key, kind=_constant_kind(out), label=constant_text(out.value, namer),
                       graph=gname)
            g.add_edge(key, ("return", id(graph)), kind="arg", index=0)
        else:
            kind = "fv" if out.graph is not graph else "arg"
            g.add_edge(id(out), ("return", id(graph)), kind=kind, index=0)
    return g


_STYLE = {
    "parameter": 'shape=box style="rounded,filled" fillcolor="#dbeafe"',
    "apply": 'shape=ellipse style=filled fillcolor="#f3f4f6"',
    "constant": 'shape=plaintext fontcolor="#6b7280"',
    "graph": 'shape=component style=filled fillcolor="#fef3c7"',
    "closure": 'shape=component style=filled fillcolor="#fde68a"',
    "return": 'shape=doublecircle style=filled fillcolor="#dcfce7" label="ret"',
}
_EDGE = {"fn": 'style=bold color="#9ca3af"', "arg": "", "fv": 'style=dashed color="#dc2626"'}


def to_dot(root: Graph, nested: bool = True) -> str:
    """Graphviz source: each graph a cluster drawn inside its parent's cluster, free-variable
    edges dashed red, function edges bold grey.  `nested=False` draws `root` alone."""
    namer = Namer()
    g = to_networkx(root, namer)
    graphs = reachable_graphs(root) if nested else [root]
    names = {id(x): namer(x, x.name) for x in reachable_graphs(root)}
    wanted = {names[id(x)] for x in graphs}
    by_graph: dict[str, list] = {}
    for key, data in g.nodes(data=True):
        if data["graph"] in wanted:
            by_graph.setdefault(data["graph"], []).append((key, data))
    ids = {key: f"n{i}" for i, key in enumerate(g.nodes)}
    kids: dict = {}
    for x in graphs:
        parent = x.parent if x.parent is not None and x.parent in graphs else None
        kids.setdefault(id(parent) if parent else None, []).append(x)

    lines = ["digraph myir {", '  rankdir=TB; fontname="Helvetica"; '
             'node [fontname="Helvetica" fontsize=11]; edge [fontsize=9];']

    def cluster(x: Graph, indent: str):
        name = names[id(x)]
        params = ", ".join(p.debug.name or "_" for p in x.parameters)
        lines.append(f'{indent}subgraph cluster_{ids_of_graph(x)} {{')
        lines.append(f'{indent}  label="{_esc(name)}({_esc(params)})"; style=rounded; '
                     'color="#9ca3af";')
        for key, data in by_graph.get(name, ()):
            label = data["label"] if data["kind"] != "return" else "ret"
            lines.append(f'{indent}  {ids[key]} [label="{_esc(label)}" {_STYLE[data["kind"]]}];')
        for kid in kids.get(id(x), ()):
            cluster(kid, indent + "  ")
        lines.append(f"{indent}}}")

    graph_ids = {id(x): i for i, x in enumerate(reachable_graphs(root))}

    def ids_of_graph(x):
        return graph_ids[id(x)]

    for top in kids.get(None, ()):
        cluster(top, "  ")
    for a, b, data in g.edges(data=True):
        if a in ids and b in ids and g.nodes[a]["graph"] in wanted and g.nodes[b]["graph"] in wanted:
            label = f' label="{data["index"]}"' if data["kind"] == "arg" and data["index"] > 1 else ""
            lines.append(f"  {ids[a]} -> {ids[b]} [{_EDGE[data['kind']]}{label}];")
    lines.append("}")
    return "\n".join(lines)


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def render_svg(dot: str) -> str:
    """SVG from Graphviz source, with the `dot` program on PATH."""
    exe = shutil.which("dot")
    if exe is None:
        raise MyirError("drawing graphs needs Graphviz's `dot` program, which is not on PATH",
                        hint="install Graphviz (e.g. `apt-get install graphviz`), or use "
                             "`myir.viz.to_dot(graph)` and render it elsewhere")
    done = subprocess.run([exe, "-Tsvg"], input=dot.encode(), capture_output=True, timeout=60)
    if done.returncode != 0:
        raise MyirError(f"Graphviz failed: {done.stderr.decode(errors='replace')[:500]}")
    return done.stdout.decode()


def to_svg(root: Graph, nested: bool = True) -> str:
    """The graph as SVG (raises a MyirError saying what to install if Graphviz is missing)."""
    return render_svg(to_dot(root, nested))
