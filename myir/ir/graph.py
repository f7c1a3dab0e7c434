"""The graph IR: functions as graphs of nodes, closures as graphs nested in their parent.

A `Graph` is a function: `parameters`, one `output` node, and an explicit `parent` (the graph
it is nested in, or None for a top-level function).  Nodes are `Apply` (a call: `inputs[0]` is
the function, the rest are arguments), `Parameter` and `Constant`.  A graph that uses a node
owned by another graph has a *free variable*; a `Constant` holding a graph with free variables,
evaluated inside its parent, makes a closure.  Control flow is expressed with graphs too: an
`if` calls the result of `switch(cond, then_graph, else_graph)`, a loop is a graph that calls
itself in tail position.

Nodes print themselves like `%name`; graphs print as readable text (see `printer`).
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field
from typing import Any

from myir.errors import Location
from myir.ir.primitives import Primitive

_ids = itertools.count()
# Stamps version each graph's structure (see `Graph.stamp`).
_stamps = itertools.count(1)


# `id_mark()`: an id below every id made after this call (the nodes made since have larger
# ids).  The counter's own method: the optimizer takes a mark before each rewrite it tries.
id_mark = _ids.__next__


@dataclass(slots=True)
class Debug:
    """Where a node or graph came from: a name from the source, its location, and for derived
    nodes the node or graph it was derived from (`relation` says how: "grad of", "inlined
    from", "copy of")."""

    name: str | None = None
    location: Location | None = None
    origin: Any = None
    relation: str | None = None
    id: float = field(default_factory=_ids.__next__)  # orders nodes (see toposort)

    def derive(self, relation: str) -> "Debug":
        return Debug(self.name, self.location, self, relation)


class Node:
    """A value in a graph.  `graph` is the owning graph (None for constants); `abstract` is
    filled by type inference; `debug` carries name and location."""

    __slots__ = ("graph", "abstract", "debug")

    def __init__(self, graph: "Graph | None", debug: Debug | None = None):
        self.graph = graph
        self.abstract = None
        self.debug = debug if debug is not None else Debug()

    @property
    def location(self) -> Location | None:
        return self.debug.location

    def __repr__(self) -> str:
        from myir.ir.printer import node_label

        return node_label(self)


class Apply(Node):
    """A call: `inputs[0]` applied to `inputs[1:]`.  Change the inputs of an existing node
    with `set_inputs` (never by assigning to `inputs` or its items): the graph's stamp must
    change with them."""

    __slots__ = ("inputs",)

    def __init__(self, inputs: list[Node], graph: "Graph", debug: Debug | None = None):
        super().__init__(graph, debug)
        self.inputs = list(inputs)

    def set_inputs(self, inputs: list[Node]) -> None:
        self.inputs = list(inputs)
        self.graph.touch()

    @property
    def fn(self) -> Node:
        return self.inputs[0]

    @property
    def args(self) -> list[Node]:
        return self.inputs[1:]


class Parameter(Node):
    """A parameter of its graph."""

    __slots__ = ()


class Constant(Node):
    """A constant: a Primitive, a Graph, a Python scalar, None, a string, a numpy array, or a
    tuple of these."""

    __slots__ = ("value",)

    def __init__(self, value: Any, debug: Debug | None = None):
        super().__init__(None, debug)
        self.value = value


class Graph:
    """A function.  Build one with `Graph(name)`, add parameters with `add_parameter`, make
    calls with `apply`, and set `output`.

    `stamp` changes whenever the graph's structure may have: its `output` is set or one of
    its nodes' inputs is (`Apply.set_inputs`).  Analyses of one graph (node order, free
    variables) are cached with the stamps of the graphs they read, so an edit invalidates
    only what depends on the edited graph (see myir.ir.analysis).  A graph's `parent` is
    fixed when it is made.  `unrolled` marks a recursion that inference follows step by step
    rather than widening (a dict comprehension: frontend/parser.py), kept by copies and
    by its gradient's J."""

    unrolled = False
    # The program's entry whose dict parameters were taken apart (passes.opt.
    # flatten_dict_parameters): per parameter of the caller's signature, None, or the
    # (name, keys) of a dict whose values are the next len(keys) parameters.
    entry_leaves = None
    # Set when inlining moved the graph's body into another (`myir.ir.edit.move_inline`):
    # the graph is then empty, and any use of it left is an error (`GraphMoved`).
    moved_into = None
    # Set on the graphs that caches keep for every compile (`shared_graphs`): a pass edits
    # a copy of a program that holds one (`passes.opt.optimize`), never the graph itself.
    shared = False

    def __init__(self, name: str = "g", parent: "Graph | None" = None,
                 location: Location | None = None):
        self.parameters: list[Parameter] = []
        self.output: Node | None = None
        self.parent = parent
        self.debug = Debug(name, location)
        # Keyword-argument defaults the frontend resolves at call sites: name -> Node/constant.
        self.defaults: dict[str, Node] = {}
        self.stamp = next(_stamps)
        if _making_shared[0]:
            self.shared = True

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        if name == "output":
            object.__setattr__(self, "stamp", next(_stamps))

    def touch(self) -> None:
        """Record that the graph's structure changed (a node's inputs)."""
        object.__setattr__(self, "stamp", next(_stamps))

    @property
    def name(self) -> str:
        return self.debug.name or "g"

    @property
    def location(self) -> Location | None:
        return self.debug.location

    def add_parameter(self, name: str | None = None, location: Location | None = None) -> Parameter:
        p = Parameter(self, Debug(name, location))
        self.parameters.append(p)
        return p

    def apply(self, fn: Any, *args: Any, name: str | None = None,
              location: Location | None = None) -> Apply:
        """A call node owned by this graph; non-node arguments become constants."""
        inputs = [as_node(x) for x in (fn, *args)]
        return Apply(inputs, self, Debug(name, location))

    def __repr__(self) -> str:
        return f"<Graph {self.name}>"

    def __str__(self) -> str:
        from myir.ir.printer import format_program

        return format_program(self)

    def stats(self) -> dict:
        """Sizes of this graph and everything it reaches: `graphs`, `applies`, `closures`
        (graph constants with free variables), `primitives` (a Counter by primitive name)."""
        from myir.ir.analysis import graph_stats

        return graph_stats(self)

    def _repr_svg_(self) -> str | None:
        """Jupyter's picture of the graph; None (Jupyter then shows the text) without
        Graphviz."""
        from myir.errors import MyirError
        from myir.viz import to_svg

        try:
            return to_svg(self)
        except MyirError:
            return None


_making_shared = [0]    # how many `shared_graphs` blocks are running


@contextlib.contextmanager
def shared_graphs():
    """Mark the graphs made inside `shared`: for code that makes graphs a cache keeps for
    every compile (the parser, the gradient rules).  (Graphs another thread makes meanwhile
    are marked too: a pass then copies them before editing, which costs time only.)"""
    _making_shared[0] += 1
    try:
        yield
    finally:
        _making_shared[0] -= 1


def as_node(x: Any) -> Node:
    """x if it is a node, else a constant holding it.  A primitive's constant is shared
    (`_PRIMITIVE_CONSTANTS`): a node that only names a primitive has nothing that depends on
    where it is used (its type is the primitive's, and it computes nothing), and one per
    use was a third of the constants of a compile (19,000 in the gradient of 800 helper
    functions), each with a debug record for the garbage collector to scan."""
    if isinstance(x, Node):
        return x
    if type(x) is Primitive:
        shared = _PRIMITIVE_CONSTANTS.get(x)
        if shared is None:
            shared = _PRIMITIVE_CONSTANTS[x] = Constant(x)
        return shared
    return Constant(x)


_PRIMITIVE_CONSTANTS: dict = {}


def is_constant(node: Node, cls: type | tuple = object) -> bool:
    return isinstance(node, Constant) and isinstance(node.value, cls)


def is_graph_constant(node: Node) -> bool:
    return type(node) is Constant and type(node.value) is Graph
