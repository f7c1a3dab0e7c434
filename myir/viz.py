"""Graphs as pictures: `to_networkx`, `to_dot`, `to_svg`, and the HTML Jupyter shows for a
`Lowered` (every stage side by side).

`to_networkx` is the faithful structure: every node, every constant use, every edge, with
kinds.  Node kinds: parameter, apply, constant, graph (a graph constant), closure (a graph
constant that captures free variables), return (one per graph).  Edge kinds: "fn" (the
function an apply calls), "arg" (an argument), "fv" (a nested graph's use of a node owned by
an enclosing graph: a free variable).

`to_dot` is the picture, tuned to be read: constants are folded into the label of the apply
that uses them (`pow(·, 3)`), graphs nested in another are clusters inside their parent's
cluster, free-variable edges are dashed red, and large programs can be cut down (one graph,
no callees, nested graphs collapsed to a box).

SVG comes from Graphviz's `dot` when it is on PATH, else from `graphviz-pure` (a pip-installed
Rust port of Graphviz that ships the same layout engine as a binary: the `notebooks` extra
installs it), else a MyirError says what to install.
"""

from __future__ import annotations

import base64
import html
import os
import shutil
import subprocess
import sysconfig

import networkx as nx

from myir.errors import MyirError
from myir.ir.analysis import ancestors, free_variables, reachable_graphs, scope_size, toposort
from myir.ir.graph import Apply, Constant, Graph, Node, is_graph_constant
from myir.ir.printer import Namer, constant_text, node_label

# ---------------------------------------------------------------------------------------------
# Structure


def _constant_kind(node: Constant) -> str:
    if is_graph_constant(node):
        return "closure" if free_variables(node.value) else "graph"
    return "constant"


def _where(node_or_graph) -> str | None:
    loc = node_or_graph.location
    return f"{os.path.basename(loc.filename)}:{loc.line}" if loc else None


def to_networkx(root: Graph, namer: Namer | None = None) -> nx.MultiDiGraph:
    """Every graph reachable from `root` as one networkx MultiDiGraph.

    Nodes carry `kind`, `label` (the name the text printer uses: `%x`, `@g`, `mul`, `3.0`)
    and `graph` (the owning graph's printed name); parameters and applies also carry `name`
    (from the source, or None) and `where` (`file:line`, or None).  Edges carry `kind` and
    `index` (0 for the function, i for argument i; 0 for the edge into a return node).
    Constants get one node per use, so a primitive used twice is drawn twice.  When `root` is
    nested in another graph, the nodes of enclosing graphs it uses are nodes of kind "free"."""
    namer = namer or Namer()
    g = nx.MultiDiGraph(name=root.name)

    def add_constant(key, const: Constant, gname: str):
        g.add_node(key, kind=_constant_kind(const), label=constant_text(const.value, namer),
                   graph=gname)

    graphs = reachable_graphs(root)
    reached = {id(x) for x in graphs}
    for graph in graphs:  # graphs named first, in the order the text printer meets them
        namer(graph, graph.name)

    def add_outer(node: Node):
        """A node of a graph enclosing `root` (not drawn) that a graph in it uses."""
        if id(node) not in g and id(node.graph) not in reached:
            g.add_node(id(node), kind="free", label=node_label(node, namer),
                       graph=namer(node.graph, node.graph.name), name=node.debug.name,
                       where=_where(node))

    for graph in graphs:
        gname = namer(graph, graph.name)
        for p in graph.parameters:
            g.add_node(id(p), kind="parameter", label=node_label(p, namer), graph=gname,
                       name=p.debug.name, where=_where(p))
        for node in toposort(graph):
            if not (isinstance(node, Apply) and node.graph is graph):
                continue
            g.add_node(id(node), kind="apply", label=node_label(node, namer), graph=gname,
                       name=node.debug.name, where=_where(node))
            for i, inp in enumerate(node.inputs):
                edge = "fn" if i == 0 else "arg"
                if isinstance(inp, Constant):
                    key = ("const", id(node), i)
                    add_constant(key, inp, gname)
                    g.add_edge(key, id(node), kind=edge, index=i)
                else:
                    if inp.graph is not graph:
                        add_outer(inp)
                    g.add_edge(id(inp), id(node), kind="fv" if inp.graph is not graph else edge,
                               index=i)
        ret = ("return", id(graph))
        g.add_node(ret, kind="return", label="return", graph=gname)
        out = graph.output
        if isinstance(out, Constant):
            key = ("const", id(graph), -1)
            add_constant(key, out, gname)
            g.add_edge(key, ret, kind="arg", index=0)
        else:
            add_outer(out)
            g.add_edge(id(out), ret, kind="fv" if out.graph is not graph else "arg", index=0)
    return g


# ---------------------------------------------------------------------------------------------
# Drawing

_STYLE = {
    "parameter": 'shape=box style="rounded,filled" fillcolor="#dbeafe" color="#3b82f6"',
    "apply": 'shape=box style="rounded,filled" fillcolor="#f3f4f6" color="#6b7280"',
    "constant": 'shape=plaintext fontcolor="#6b7280"',
    "graph": 'shape=component style=filled fillcolor="#fef3c7" color="#b45309"',
    "closure": 'shape=component style=filled fillcolor="#fcd34d" color="#b45309" penwidth=1.5',
    "return": 'shape=invhouse style=filled fillcolor="#dcfce7" color="#16a34a" fontsize=9',
    "free": 'shape=box style="rounded,dashed" color="#dc2626" fontcolor="#dc2626"',
    "collapsed": 'shape=box3d style=filled fillcolor="#e5e7eb" color="#6b7280"',
}
_EDGE = {
    "fn": 'style=bold color="#6b7280" arrowhead=empty',
    "arg": 'color="#374151"',
    "fv": 'style=dashed color="#dc2626" penwidth=1.3',
}
_MAX_LABEL = 36


def _short(text: str) -> str:
    return text if len(text) <= _MAX_LABEL else text[:_MAX_LABEL - 1] + "…"


def _pick(root: Graph, nested: bool, callees: bool) -> list[Graph]:
    """The graphs to draw, `root` first."""
    if not nested:
        return [root]
    reached = reachable_graphs(root)
    return reached if callees else [x for x in reached if x is root or root in ancestors(x)]


def _graph_named(root: Graph, name: str) -> Graph:
    namer = Namer()
    found = {namer(x, x.name): x for x in reachable_graphs(root)}
    if name not in found:
        raise MyirError(f"no graph named {name!r} in {root.name}",
                        hint=f"graphs: {', '.join(found)}")
    return found[name]


def to_dot(root: Graph, *, nested: bool = True, callees: bool = True, graph=None,
           collapse=(), fold: bool = True) -> str:
    """Graphviz source for `root` and the graphs it reaches.

    Each graph is a cluster labelled with its name and parameters; a graph nested in another
    (a closure, a branch, a loop body) is a cluster inside its parent's.  Options that keep
    large programs legible:

    - `graph`: draw this graph (a Graph, or its printed name such as "bprop_f") instead of
      `root`.
    - `nested=False`: the graph alone, nested graphs and callees left out (they still show
      as `@name` constants).
    - `callees=False`: leave out top-level graphs that are called (other functions,
      primitives' gradient rules); keep nested ones.
    - `collapse`: True, or names of graphs: each such nested graph (True: every nested
      graph) is one box in its parent; free-variable edges then end at the box.
    - `fold=False`: draw every constant as its own node, as `to_networkx` has them.
    """
    if graph is not None:
        root = graph if isinstance(graph, Graph) else _graph_named(root, graph)
    namer = Namer()
    g = to_networkx(root, namer)
    drawn = _pick(root, nested, callees)
    names = {id(x): namer(x, x.name) for x in drawn}
    drawn_ids = {id(x) for x in drawn}
    if collapse is True:
        boxed = {id(x) for x in drawn if x.parent is not None and id(x.parent) in drawn_ids}
    else:
        boxed = {id(x) for x in drawn if names[id(x)] in set(collapse)}
    by_name = {names[id(x)]: x for x in drawn}

    def home(gname: str) -> str | None:
        """The dot node or cluster that stands for a node owned by `gname`: the graph itself,
        the outermost collapsed graph around it, or None when it is not drawn."""
        x = by_name.get(gname)
        if x is None:
            return None
        outer = [a for a in [x, *ancestors(x)] if id(a) in boxed]
        return names[id(outer[-1])] if outer else gname

    ids = {key: f"n{i}" for i, key in enumerate(g.nodes)}
    box_ids = {names[i]: f"box{k}" for k, i in enumerate(sorted(boxed))}
    folded = set()
    if fold:
        folded = {key for key, d in g.nodes(data=True)
                  if d["kind"] == "constant" or (d["kind"] in ("graph", "closure")
                                                 and _called(g, key))}

    def endpoint(key):
        d = g.nodes[key]
        if d["kind"] == "free":
            return ids[key]
        where = home(d["graph"])
        if where is None or key in folded:
            return None
        return box_ids[where] if where in box_ids else ids[key]

    members: dict[str | None, list[str]] = {}
    for key, d in g.nodes(data=True):
        where = None if d["kind"] == "free" else home(d["graph"])
        if (where is None and d["kind"] != "free") or where in box_ids or key in folded:
            continue
        if d["kind"] == "apply":
            label = _apply_label(g, key, folded)
        elif d["kind"] in ("parameter", "free") and d["name"]:
            label = "%" + d["name"]
        else:
            label = d["label"]
        tip = f' tooltip="{_esc(d["where"])}"' if d.get("where") else ""
        members.setdefault(where, []).append(
            f'{ids[key]} [label="{_esc(_short(label))}" {_STYLE[d["kind"]]}{tip}];')

    kids: dict = {}
    for x in drawn:
        parent = x.parent if x.parent is not None and id(x.parent) in drawn_ids else None
        kids.setdefault(id(parent) if parent else None, []).append(x)

    lines = ["digraph myir {",
             '  rankdir=TB; nodesep=0.25; ranksep=0.3; fontname="Helvetica"; fontsize=12;',
             '  node [fontname="Helvetica" fontsize=11 height=0.3 margin="0.12,0.04"];',
             '  edge [fontname="Helvetica" fontsize=9 arrowsize=0.6];']

    def cluster(x: Graph, indent: str):
        name = names[id(x)]
        params = ", ".join(p.debug.name or "_" for p in x.parameters)
        title = f"{name}({params})"
        if id(x) in boxed:
            size = scope_size(x)
            lines.append(f'{indent}{box_ids[name]} [label="{_esc(title)}\\n{size} applies '
                         f'(collapsed)" {_STYLE["collapsed"]}];')
            return
        lines.append(f"{indent}subgraph cluster_{len(lines)} {{")
        lines.append(f'{indent}  label="{_esc(title)}"; style=rounded; color="#9ca3af"; '
                     'fontcolor="#111827";')
        lines.extend(f"{indent}  {m}" for m in members.get(name, ()))
        for kid in kids.get(id(x), ()):
            cluster(kid, indent + "  ")
        lines.append(f"{indent}}}")

    lines.extend(f"  {m}" for m in members.get(None, ()))  # captured from outside `root`
    for top in kids.get(None, ()):
        cluster(top, "  ")
    seen_edges = set()
    for a, b, d in g.edges(data=True):
        ea, eb = endpoint(a), endpoint(b)
        if ea is None or eb is None or ea == eb:
            continue
        if (ea, eb, d["kind"]) in seen_edges and (ea.startswith("box") or eb.startswith("box")):
            continue
        seen_edges.add((ea, eb, d["kind"]))
        label = ""
        if d["kind"] != "fn" and g.nodes[b]["kind"] == "apply" and \
                not eb.startswith("box") and _order_matters(g, b, folded):
            label = f' label="{d["index"]}"'
        lines.append(f"  {ea} -> {eb} [{_EDGE[d['kind']]}{label}];")
    lines.append("}")
    return "\n".join(lines)


def _called(g: nx.MultiDiGraph, key) -> bool:
    """Whether a constant is the function of its (only) use: an apply's input 0."""
    return any(d["index"] == 0 and g.nodes[b]["kind"] == "apply"
               for _, b, d in g.out_edges(key, data=True))


def _inputs(g: nx.MultiDiGraph, key) -> list:
    return [a for a, _, d in sorted(g.in_edges(key, data=True), key=lambda e: e[2]["index"])]


_COMMUTATIVE = {"add", "mul", "gadd", "eq", "ne", "maximum", "minimum"}


def _order_matters(g: nx.MultiDiGraph, key, folded) -> bool:
    """Whether the argument edges into this apply need their positions written on them:
    when two or more arrive, and the function is not a commutative primitive."""
    fn, *args = _inputs(g, key)
    commutative = fn in folded and g.nodes[fn]["label"] in _COMMUTATIVE
    return not commutative and sum(1 for a in args if a not in folded) > 1


def _apply_label(g: nx.MultiDiGraph, key, folded) -> str:
    """`%name = op(args)`: the name only when the source gave one (a node with a source
    location: names the AD gives its temporaries, like `out`, would only add noise), the op
    when it is a constant (a primitive, `@graph`), else "call" (a closure computed in the graph); the
    argument list only when a constant was folded into it, edges standing in as `·`.  Names
    are the source's, not made unique: edges already tell two `%out`s apart."""
    d = g.nodes[key]
    fn, *args = _inputs(g, key)
    op = g.nodes[fn]["label"] if fn in folded else "call"
    if any(a in folded for a in args):
        op += "(" + ", ".join(g.nodes[a]["label"] if a in folded else "·" for a in args) + ")"
    return f"%{d['name']} = {op}" if d["name"] and d["where"] else op


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# ---------------------------------------------------------------------------------------------
# Rendering

_INSTALL_HINT = ("pip install the `notebooks` extra (`pip install -e '.[notebooks]'`, which "
                 "brings graphviz-pure), or install Graphviz; or render `myir.viz.to_dot(graph)` "
                 "elsewhere")


def renderer() -> str | None:
    """The program that lays out dot source: Graphviz's `dot` on PATH, else `graphviz-pure`
    on PATH or beside this Python (a kernel's PATH may lack its virtualenv's bin/)."""
    for name in ("dot", "graphviz-pure"):
        found = shutil.which(name) or shutil.which(name, path=sysconfig.get_path("scripts"))
        if found:
            return found
    return None


def render(dot: str, fmt: str = "svg") -> bytes:
    """Lay out Graphviz source and draw it (`fmt`: svg, png, pdf, ...)."""
    exe = renderer()
    if exe is None:
        raise MyirError("drawing graphs needs Graphviz's `dot` or graphviz-pure, and neither "
                        "was found", hint=_INSTALL_HINT)
    done = subprocess.run([exe, f"-T{fmt}"], input=dot.encode(), capture_output=True,
                          timeout=120)
    if done.returncode != 0:
        raise MyirError(f"{os.path.basename(exe)} failed: "
                        f"{done.stderr.decode(errors='replace')[:500]}")
    return done.stdout


def to_svg(root: Graph, **options) -> str:
    """The graph as SVG (`options` as for `to_dot`); a MyirError says what to install when
    no renderer is found."""
    return render(to_dot(root, **options)).decode()


# ---------------------------------------------------------------------------------------------
# Jupyter

_HTML_STYLE = """<style>
.myir-row {display: flex; gap: 12px; align-items: flex-start; flex-wrap: wrap;}
.myir-col {flex: 1 1 auto; min-width: 200px; max-width: 100%; border: 1px solid #d1d5db;
           border-radius: 6px; padding: 6px; overflow: auto;}
.myir-col h4 {margin: 0 0 4px 0; font-family: sans-serif; font-size: 13px;}
.myir-col .myir-stats {color: #6b7280; font-size: 11px; font-family: sans-serif;}
.myir-col img {max-width: 100%; height: auto;}
.myir-col pre {font-size: 11px; margin: 0; white-space: pre;}
</style>"""


def _stats_line(graph: Graph) -> str:
    s = graph.stats()
    return (f"{s['graphs']} graph{'s' * (s['graphs'] != 1)}, {s['applies']} applies, "
            f"{s['closures']} closure{'s' * (s['closures'] != 1)}")


def _picture(graph: Graph) -> str:
    """An <img> of the graph, or its text form when nothing can draw it."""
    try:
        svg = render(to_dot(graph))
    except MyirError:
        return f"<pre>{html.escape(str(graph))}</pre>"
    return f'<img src="data:image/svg+xml;base64,{base64.b64encode(svg).decode()}">'


def _column(title: str, subtitle: str, body: str) -> str:
    return (f'<div class="myir-col"><h4>{html.escape(title)}</h4>'
            f'<div class="myir-stats">{html.escape(subtitle)}</div>{body}</div>')


def lowered_html(lowered) -> str:
    """Every stage of a `Lowered` side by side (parsed → expanded → optimized), then the
    generated source and, when the TVM backend made any, each region with its inputs,
    outputs, IR and source."""
    graphs = [_column(stage, _stats_line(graph), _picture(graph))
              for stage, graph in lowered.stages.items()]
    code = [_column("generated Python", f"{len(lowered.source.splitlines())} lines",
                    f"<pre>{html.escape(lowered.source)}</pre>")]
    for i, region in enumerate(lowered.regions):
        body = "".join(f"<b>{part}</b><pre>{html.escape(_head(str(getattr(region, part))))}</pre>"
                       for part in ("ir", "source"))
        code.append(_column(f"TVM region {i}",
                            f"inputs {_names(region.inputs)} → outputs {_names(region.outputs)}",
                            body))
    name = getattr(lowered.function, "__name__", "?")
    return (f"{_HTML_STYLE}<div><b>{html.escape(name)}</b>: "
            f"{' → '.join(lowered.stages)} → code"
            f'<div class="myir-row">{"".join(graphs)}</div>'
            f'<div class="myir-row" style="margin-top: 8px">{"".join(code)}</div></div>')


_HEAD_LINES = 120


def _head(text: str) -> str:
    """The first lines of a long text (a region's LLVM IR runs to thousands of lines)."""
    lines = text.splitlines()
    if len(lines) <= _HEAD_LINES:
        return text
    return "\n".join(lines[:_HEAD_LINES] + [f"... {len(lines) - _HEAD_LINES} more lines"])


def _names(nodes) -> str:
    return ", ".join(n.debug.name or repr(n) if isinstance(n, Node) else str(n) for n in nodes)
