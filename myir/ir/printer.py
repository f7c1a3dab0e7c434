"""Graphs as readable text: one `%name = fn(args)` line per node, nested graphs indented.

    graph pow_loop(%x, %n) {                          # programs.py:96
      %r.1 = while(1.0, 0)
      return %r.1
      graph while(%r, %i) { ... }
    }
"""

from __future__ import annotations

import numpy as np

from myir.ir.analysis import children, toposort
from myir.ir.graph import Apply, Constant, Graph, Node
from myir.ir.primitives import Primitive


class Namer:
    """Stable, unique, readable names for nodes and graphs within one printout."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.taken: set[str] = set()

    def __call__(self, thing, base: str | None) -> str:
        key = id(thing)
        if key not in self.names:
            base = base or "_"
            name, k = base, 1
            while name in self.taken:
                k += 1
                name = f"{base}.{k}"
            self.taken.add(name)
            self.names[key] = name
        return self.names[key]


def _default_base(node: Node) -> str | None:
    if node.debug.name:
        return node.debug.name
    if isinstance(node, Apply) and isinstance(node.fn, Constant):
        fn = node.fn.value
        if isinstance(fn, Primitive):
            return fn.name
        if isinstance(fn, Graph):
            return fn.name
    return None


def constant_text(value, namer: Namer | None = None) -> str:
    if isinstance(value, Graph):
        return "@" + (namer(value, value.name) if namer else value.name)
    if isinstance(value, Primitive):
        return value.name
    if isinstance(value, np.ndarray):
        return f"array{value.shape}:{value.dtype}"
    if isinstance(value, tuple):
        inner = ", ".join(constant_text(v, namer) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, type):
        return value.__name__
    return repr(value)


def node_label(node: Node, namer: Namer | None = None) -> str:
    if isinstance(node, Constant):
        return constant_text(node.value, namer)
    base = _default_base(node)
    return "%" + (namer(node, base) if namer else (base or f"n{node.debug.id}"))


def _type_suffix(node: Node) -> str:
    return f" : {node.abstract}" if node.abstract is not None else ""


def format_graph(graph: Graph, namer: Namer | None = None, indent: str = "",
                 nested: bool = True) -> str:
    namer = namer or Namer()
    kids = children(graph) if nested else {}
    lines = []
    params = ", ".join(node_label(p, namer) + _type_suffix(p) for p in graph.parameters)
    where = f"  # {graph.location}" if graph.location else ""
    name = namer(graph, graph.name)
    lines.append(f"{indent}graph {name}({params}) {{{where}")
    body = indent + "  "
    for node in toposort(graph):
        if isinstance(node, Apply) and node.graph is graph:
            args = ", ".join(node_label(i, namer) for i in node.args)
            fn = node_label(node.fn, namer)
            lines.append(f"{body}{node_label(node, namer)} = {fn}({args}){_type_suffix(node)}")
    lines.append(f"{body}return {node_label(graph.output, namer)}")
    for kid in kids.get(graph, ()):
        lines.append(format_graph(kid, namer, body, nested))
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def format_program(root: Graph) -> str:
    """`root` and every top-level graph it reaches (callees, recursion), each with the graphs
    nested in it."""
    from myir.ir.analysis import reachable_graphs

    namer = Namer()
    tops = [root] + [g for g in reachable_graphs(root)[1:] if g.parent is None]
    return "\n\n".join(format_graph(g, namer) for g in tops)

