"""The only ways passes change graphs: `replace`, `set_output`, `clone` and `inline` (and
`move_inline`, which inlines a graph by moving its body rather than copying it).

Each edit bumps the IR version, which invalidates every cached analysis.
"""

from __future__ import annotations

from myir.ir.analysis import OUTPUT, bump_version, is_nested_in, scope, toposort, users
from myir.ir.graph import Apply, Constant, Graph, Node, Parameter


def replace(root: Graph, old: Node, new: Node) -> None:
    """Make every use of `old` in graphs reachable from `root` (and outputs) use `new`."""
    redirect(users(root).get(old, ()), new)
    bump_version()


def redirect(uses: list, new: Node) -> None:
    """Make the uses `uses` (`(user, index)` pairs, as `users` gives them) use `new`: the
    uses a node had before new uses of it were made (by `new` itself, say)."""
    for user, i in uses:
        if i == OUTPUT:
            user.output = new
        else:
            inputs = list(user.inputs)
            inputs[i] = new
            user.set_inputs(inputs)


def set_output(graph: Graph, node: Node) -> None:
    graph.output = node
    bump_version()


def set_inputs(node: Apply, inputs: list[Node]) -> None:
    node.set_inputs(inputs)
    bump_version()


class Cloner:
    """Copies a graph and every graph nested in it.  Nodes of enclosing graphs (free
    variables) are shared, unless `mapping` says otherwise.  `relation` is recorded in the
    copies' debug info ("copy of", "inlined from")."""

    def __init__(self, mapping: dict | None = None, relation: str = "copy of"):
        self.mapping: dict[Node | Graph, Node | Graph] = dict(mapping or {})
        self.relation = relation
        self.into: Graph | None = None

    def graph(self, graph: Graph, into: Graph | None = None) -> Graph:
        """Clone `graph`'s scope.  With `into`, the root's nodes go into that existing graph
        (its parameters must already be in `mapping`)."""
        self.scopes([graph], into)
        return self.mapping[graph]

    def scopes(self, roots: list[Graph], into: Graph | None = None):
        """Clone the scopes of several graphs at once, so references between them (calls,
        recursion) point at the copies."""
        graphs = [g for root in roots for g in scope(root)]
        for g in graphs:
            if g.moved_into is not None:
                raise GraphMoved(g)
        graph = roots[0]
        self.into = into
        for g in graphs:
            if g in self.mapping:
                continue
            if g is graph and into is not None:
                self.mapping[g] = into
                continue
            new = Graph(g.name, None, g.location)
            new.debug = g.debug.derive(self.relation)
            new.unrolled = g.unrolled
            new.entry_leaves = g.entry_leaves
            self.mapping[g] = new
            for p in g.parameters:
                q = Parameter(new, p.debug.derive(self.relation))
                new.parameters.append(q)
                self.mapping[p] = q
        for g in graphs:
            new = self.mapping[g]
            if new is not into:
                new.parent = self.mapping.get(g.parent, g.parent)
                new.defaults = {k: self.node(v) for k, v in g.defaults.items()}
                if getattr(g, "custom_grad", None) is not None:    # myir.custom_grad's rule
                    new.custom_grad = g.custom_grad
        copy = self.node
        for g in graphs:
            for node in toposort(g):    # (constants and parameters: copied as they are met)
                if type(node) is Apply or type(node) is Constant and type(node.value) is Graph:
                    copy(node)
        for g in graphs:
            if self.mapping[g] is not into:
                self.mapping[g].output = self.node(g.output)
        if into is None:
            self._copy_orders(graphs)
        bump_version()

    def _copy_orders(self, graphs: list[Graph]) -> None:
        """Give each copy its original's node order (`toposort`), mapped, rather than have
        it sorted again: the copies of the original's nodes are made, and their ids drawn,
        in that order, which sorting them finds again.  (Only the graph's parameters and
        the values it captures, which it does not compute, may sit elsewhere in the order
        sorting finds: their copies are made first.)  Sorting the 1,600 graphs of the
        optimizer's copy of a gradient of 800 helper functions cost a tenth of its time."""
        mapping = self.mapping
        for g in graphs:
            toposort.copied(g, mapping[g], mapping,
                            lambda order: [mapping.get(n, n) for n in order])

    def node(self, node: Node) -> Node:
        mapping = self.mapping
        hit = mapping.get(node)
        if hit is not None:
            return hit
        kind = type(node)
        if kind is Apply:
            graph = mapping.get(node.graph)
            if graph is not None:
                # (a constant other than a graph is shared: met as the function of nearly
                # every apply, it is taken as it is without a call)
                new = Apply([mapping.get(i) or (i if type(i) is Constant
                                                and type(i.value) is not Graph
                                                else self.node(i))
                             for i in node.inputs], graph, node.debug.derive(self.relation))
                mapping[node] = new
                return new
        elif kind is Constant and type(node.value) is Graph:
            copy = mapping.get(node.value)
            if copy is not None and copy is not self.into:  # inlined: calls stay calls
                # a new id, as the copies of applies have: made in the order of the nodes
                # copied, a closure comes after the copies of the values it captures, and
                # the copy's creation order stays a valid order (`toposort` sorts it, no
                # more)
                new = Constant(copy, node.debug.derive(self.relation))
                mapping[node] = new
                return new
        return node


def clone(graph: Graph) -> Graph:
    """A copy of `graph` and the graphs nested in it, with the same parent."""
    return Cloner().graph(graph)


def clone_program(root: Graph) -> Graph:
    """A copy of `root` and of every top-level graph it reaches, calling each other."""
    from myir.ir.analysis import reachable_graphs

    cloner = Cloner()
    cloner.scopes([g for g in reachable_graphs(root) if g.parent is None])
    return cloner.mapping[root]


def inline(graph: Graph, args: list[Node], into: Graph, at: Node | None = None,
           after: float | None = None, relocated: frozenset = frozenset(),
           copies: dict | None = None) -> Node:
    """Copy `graph`'s body into `into` with its parameters bound to `args`; return the node
    that computes its output.  Graphs nested in `graph` become nested in `into`.  With `at`
    (the call being replaced), the copies are ordered just before it, so code keeps running
    in the order it did (and raising the exception it did).  `after` is the largest node id
    of `into` below at's, if the caller knows it (finding it sorts `into`: a caller that
    inlines many calls keeps its own sorted ids).  Copies (nested graphs' included) located
    in a file of `relocated`, or located nowhere, take at's location: code myir wrote for an
    operation of the user's (a gradient rule, the primitive call of its J graph) reports the
    user's line.  `copies`, if given, is filled with the copy of each node and graph of
    graph's scope (its parameters: their arguments)."""
    assert len(args) == len(graph.parameters), (graph, args)
    cloner = Cloner(dict(zip(graph.parameters, args)), "inlined from")
    cloner.graph(graph, into=into)
    if copies is not None:
        copies.update(cloner.mapping)
    if relocated and at is not None and at.location is not None \
            and at.location.filename not in relocated:
        _relocate(_copies(cloner.mapping, into), relocated, at.location)
    if at is not None:
        copies = [cloner.mapping[n] for n in toposort(graph)
                  if isinstance(n, Apply) and n.graph is graph and n in cloner.mapping]
        if after is None:
            before = [n.debug.id for n in toposort(into) if n.debug.id < at.debug.id]
            after = max(before, default=at.debug.id - 1)
        step = (at.debug.id - after) / (len(copies) + 1)
        for k, node in enumerate(copies):  # ids strictly between the call's and the one before
            node.debug.id = after + (k + 1) * step
    return cloner.node(graph.output)


class GraphMoved(Exception):
    """A graph whose body `move_inline` moved elsewhere is still used: the optimizer, which
    moved it believing its call the only use, starts again copying instead (`passes.opt`)."""

    def __init__(self, graph: Graph):
        super().__init__(f"{graph.name} is used after its body was moved")


def move_inline(graph: Graph, args: list[Node], into: Graph, at: Node, after: float,
                relocated: frozenset = frozenset()) -> Node:
    """`inline` for a graph no other node uses and that is not used again: its nodes become
    `into`'s, placed as `inline` places copies, and the graphs nested in it are nested in
    `into`, rather than copied (a chain of calls, each called once, is otherwise copied
    once per level it is inlined through).  Uses of its parameters become `args`.  The
    graph is left empty (no output, no parameters) and marked `moved_into`: code that
    meets it again raises `GraphMoved`."""
    assert len(args) == len(graph.parameters), (graph, args)
    mapping = dict(zip(graph.parameters, args))
    order = toposort(graph)
    own = [n for n in order if type(n) is Apply and n.graph is graph]
    nested, others = _nested(graph, order)
    # the nested graphs' node orders, kept through the edit (see below)
    inside = set(nested)
    orders = [hit for hit in map(toposort.held, nested)
              if hit is not None and inside.issuperset(hit[2])]
    out = mapping.get(graph.output, graph.output)
    for n in own:
        n.graph = into
    params = mapping.keys()
    for n in own + others:
        if not params.isdisjoint(n.inputs):
            n.set_inputs([mapping.get(i, i) for i in n.inputs])
    for h in nested:
        if h.parent is graph:
            h.parent = into
        if h.output in mapping:
            h.output = mapping[h.output]
        if h.defaults:
            h.defaults = {k: mapping.get(v, v) for k, v in h.defaults.items()}
        h.touch()   # its free variables are into's now
    into.touch()
    # A nested graph keeps its nodes, in their order, where their inputs are what the
    # parameters were (`toposort`, had it read only graphs nested in `graph`; those
    # inputs, which it does not compute, may sit elsewhere in the order sorting finds):
    # sorting the backpropagators of a chain of calls again, as each is moved in turn, was
    # a twelfth of the optimization of a gradient of 800 helper functions.
    for hit in orders:
        toposort.kept(hit, [mapping.get(n, n) for n in hit[1]])
    if relocated and at.location is not None and at.location.filename not in relocated:
        _relocate([*(a for a in args if a.graph is not None), *own, *nested, *others,
                         *(p for h in nested for p in h.parameters)], relocated, at.location)
    step = (at.debug.id - after) / (len(own) + 1)
    for k, node in enumerate(own):   # ids strictly between the call's and the one before
        node.debug.id = after + (k + 1) * step
    graph.output = None
    graph.parameters = []
    graph.moved_into = into
    bump_version()
    return out


def _nested(graph: Graph, order: list[Node]) -> tuple[list[Graph], list[Apply]]:
    """The graphs nested in `graph` (`scope(graph)` but graph) and their applies, found
    from the node orders `move_inline` reads anyway (`order`: graph's), not by another walk
    of the scope."""
    nested: list[Graph] = []
    applies: list[Apply] = []
    found = {graph}
    pending = [(graph, order)]
    while pending:
        g, nodes = pending.pop()
        for n in nodes:
            if type(n) is Constant and type(n.value) is Graph and n.value not in found \
                    and is_nested_in(n.value, graph):
                h = n.value
                found.add(h)
                nested.append(h)
                h_order = toposort(h)
                applies += [m for m in h_order if type(m) is Apply and m.graph is h]
                pending.append((h, h_order))
    return nested, applies


def _relocate(made, files: frozenset, location) -> None:
    """Give the nodes and graphs `made` that are located in one of `files`, or nowhere,
    `location`."""
    for n in made:
        debug = n.debug
        if debug.location is None or debug.location.filename in files:
            debug.location = location


def _copies(mapping: dict, into: Graph) -> list:
    """The copies a Cloner made (graphs other than `into`, and nodes of graphs).  (A list,
    not a generator: inlining the gradient rules of 800 helper functions relocates 35,000
    copies.)"""
    return [new for old, new in mapping.items()
            if (new is not into if type(new) is Graph else
                new is not old and new.graph is not None)]
