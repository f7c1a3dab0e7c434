"""Reverse-mode automatic differentiation by source transformation (Myia's J transform).

`J(g)` is a graph taking what g takes and returning `(value, backpropagator)`.  The
backpropagator is a closure nested in J(g): given the sensitivity of g's output it returns
`(env, d_param_1, ..., d_param_n)`, where `env` holds the gradients of g's free variables
(a closure's gradient is the env of what it captured).  Each call `f(a, b)` in g becomes
`(v, bp) = J(f)(a, b)` in J(g), and the backpropagator calls the `bp`s in reverse order,
adding up sensitivities with `gadd`.  Control flow needs nothing special: `switch` picks a
J-transformed branch, loops and recursion are calls, and the chain of backpropagators is
the tape.  Primitives get J graphs built from their gradient rules (`GRAD_RULES`), which
are graphs too, so the output of J can be transformed again (grad of grad).
"""

from __future__ import annotations

from frontend import parse
from myir.errors import MyirError
from myir.ir.analysis import free_variables, primitive_name, toposort
from myir.ir.edit import clone_program
from myir.ir.graph import Apply, Constant, Graph, Node, is_graph_constant
from myir.ir.primitives import PRIMITIVES, Primitive
from myir.ir.values import NEWENV, GradKey
from passes import grad_rules

P = PRIMITIVES

# Primitives whose gradient is zero for every input (or that never return a value).
NON_DIFFERENTIABLE = frozenset("""
    lt le gt ge eq ne is_ is_not not_ truth invert floordiv bitand bitor bitxor lshift rshift sign floor ceil argmax argmin
    argsort shape ndim size dtype len range make_slice to_int to_bool zeros ones empty full
    zeros_like ones_like arange eye make_exception raise_ format concat_str grad_seed
    math_floor math_ceil isnan isinf isfinite print_ rint trunc
""".split())

# Gradient rules built here rather than parsed, for primitives with any number of inputs.
VARIADIC_RULES = frozenset({"make_tuple", "builtin_min", "builtin_max"})

# Primitives without a gradient rule, and why (checked by tests/test_primitive_tables.py).
NO_RULE = {
    "array": "np.array of a tuple: differentiate with respect to the elements instead",
}


def _aug_rule_name(name: str) -> str:
    """`x += y` differentiates like `x + y`."""
    return name[4:] if name.startswith("aug_") else name


def gradient_rule(name: str):
    """The parsed rule graph of a primitive, or None if it has none."""
    fn = getattr(grad_rules, "bprop_" + _aug_rule_name(name), None)
    return parse(fn) if fn is not None else None


def has_gradient_rule(name: str) -> bool:
    return (name in NON_DIFFERENTIABLE or name in VARIADIC_RULES
            or hasattr(grad_rules, "bprop_" + _aug_rule_name(name)))


_PRIMITIVE_J: dict[tuple[str, int], Graph] = {}


def primitive_j(prim: Primitive, arity: int, location=None) -> Graph:
    """J of a primitive called with `arity` arguments: `(prim(xs), bprop)`."""
    key = (prim.name, arity)
    if key in _PRIMITIVE_J:
        return _PRIMITIVE_J[key]
    if not has_gradient_rule(prim.name):
        raise MyirError(f"`{prim.name}` has no gradient rule, so this function cannot be "
                        "differentiated", location,
                        hint=NO_RULE.get(prim.name) or "differentiate with respect to "
                        "inputs that do not flow through it")
    names = list(prim.params) if not prim.varargs else [f"x{i}" for i in range(arity)]
    jg = Graph(f"J_{prim.name}")
    xs = [jg.add_parameter(n) for n in names[:arity]]
    out = jg.apply(prim, *xs, name="out")
    bp = Graph(f"bprop_{prim.name}", parent=jg)
    dout = bp.add_parameter("dout")
    grads = _rule_gradients(prim, bp, xs, out, dout)
    bp.output = bp.apply(P["make_tuple"], NEWENV, *grads)
    jg.output = jg.apply(P["make_tuple"], out, Constant(bp))
    _PRIMITIVE_J[key] = jg
    return jg


def _rule_gradients(prim: Primitive, bp: Graph, xs: list, out: Node, dout: Node) -> list:
    name = prim.name
    if name in NON_DIFFERENTIABLE:
        return [bp.apply(P["grad_zeros"], x) for x in xs]
    if name == "make_tuple":
        return [bp.apply(P["getitem"], dout, i) for i in range(len(xs))]
    if name in ("builtin_min", "builtin_max"):
        ties = [bp.apply(P["eq"], x, out) for x in xs]
        count = ties[0]
        for t in ties[1:]:
            count = bp.apply(P["add"], count, t)
        return [bp.apply(P["select_grad"], out, x, dout, count) for x in xs]
    rule = gradient_rule(name)
    res = bp.apply(Constant(rule), *xs, out, dout, name="grads", location=rule.location)
    return [bp.apply(P["getitem"], res, i) for i in range(len(xs))]


class JTransform:
    """J of graphs, sharing one map from primal to transformed nodes and graphs, so that a
    nested graph's J is nested in its parent's J and reads its free variables there."""

    def __init__(self):
        self.graphs: dict[Graph, Graph] = {}
        self.nodes: dict[Node, Node] = {}
        self.keys: dict[Node, GradKey] = {}
        self.primitives: dict[tuple[str, int], Graph] = {}
        self.pending: list[Graph] = []   # graphs whose J has parameters but no body yet

    def transform(self, g: Graph) -> Graph:
        """J of g and of every graph it reaches, one after another from a worklist, not by
        recursion: a chain of calls may be as deep as the program.  A graph's body is
        transformed after its parent's (the parent queued it, or a graph nested in the
        parent did), so the nodes of enclosing graphs it reads are mapped by then."""
        gj = self.graph(g)
        while self.pending:
            self.body(self.pending.pop())
        return gj

    def primitive(self, prim: Primitive, arity: int, location) -> Graph:
        """A private copy of the primitive's J graph: later passes may edit it in place."""
        key = (prim.name, arity)
        if key not in self.primitives:
            self.primitives[key] = clone_program(primitive_j(prim, arity, location))
        return self.primitives[key]

    def key(self, node: Node) -> Constant:
        if node not in self.keys:
            self.keys[node] = GradKey(node)
        return Constant(self.keys[node])

    def value(self, node: Node, arity: int | None = None, where: Node | None = None) -> Node:
        """The transformed counterpart of a primal node (as callee when arity is given)."""
        if isinstance(node, Constant):
            v = node.value
            if isinstance(v, Graph):
                return Constant(self.graph(v))
            if isinstance(v, Primitive):
                n = arity if arity is not None else len(v.params)
                return Constant(self.primitive(v, n, where.location if where else None))
            return node
        mapped = self.nodes.get(node)
        if mapped is not None:
            return mapped
        if arity is not None:
            raise MyirError("cannot differentiate a call of a function value made outside "
                            "the function being differentiated",
                            where.location if where else None,
                            hint="differentiate the enclosing function, or pass the function "
                                 "by name")
        return node  # data from an enclosing, untransformed graph

    def graph(self, g: Graph) -> Graph:
        """J of g, with its parameters; its body is left to `transform`."""
        if g in self.graphs:
            return self.graphs[g]
        parent = self.graphs.get(g.parent, g.parent)
        gj = Graph(f"J_{g.name}", parent, g.location)
        gj.debug = g.debug.derive("grad of")
        gj.debug.name = f"J_{g.name}"
        self.graphs[g] = gj
        for p in g.parameters:
            self.nodes[p] = gj.add_parameter(p.debug.name, p.location)
        self.pending.append(g)
        return gj

    def body(self, g: Graph) -> None:
        gj = self.graphs[g]
        bprops: dict[Node, Node] = {}
        for node in toposort(g):
            if not (isinstance(node, Apply) and node.graph is g):
                continue
            fn = self.value(node.fn, arity=len(node.args), where=node)
            args = [self.value(a) for a in node.args]
            pair = gj.apply(fn, *args, location=node.location)
            self.nodes[node] = gj.apply(P["getitem"], pair, 0, name=node.debug.name,
                                        location=node.location)
            bprops[node] = gj.apply(P["getitem"], pair, 1, location=node.location)
        out = self.value(g.output)
        if primitive_name(g.output) == "raise_":
            gj.output = out     # never returns: no value, no backpropagator
            return gj
        bprop = self.backpropagator(g, gj, bprops)
        gj.output = gj.apply(P["make_tuple"], out, Constant(bprop), location=g.location)

    def backpropagator(self, g: Graph, gj: Graph, bprops: dict) -> Graph:
        bg = Graph(f"bprop_{g.name}", gj, g.location)
        dout = bg.add_parameter("dout")
        sens: dict[Node, Node] = {}

        def add(node: Node, contribution: Node):
            if isinstance(node, Constant) and not (is_graph_constant(node)
                                                   and free_variables(node.value)):
                return  # constants have no gradient
            sens[node] = contribution if node not in sens else \
                bg.apply(P["gadd"], sens[node], contribution)

        add(g.output, dout)
        for node in reversed(toposort(g)):
            if node not in sens:
                continue
            if isinstance(node, Apply) and node.graph is g:
                res = bg.apply(bprops[node], sens[node], location=node.location)
                # What `depend` waits for is only evaluated: no gradient flows into it (its
                # rule's zero would run the effect's backward, which can raise or give nan).
                waited = 2 if primitive_name(node) == "depend" else None
                for i, inp in enumerate(node.inputs):
                    if i != waited:
                        add(inp, bg.apply(P["getitem"], res, i, location=node.location))
            elif is_graph_constant(node):
                # a closure's gradient is an env: hand each captured value its share
                env = sens[node]
                for fv in free_variables(node.value):
                    zero = bg.apply(P["grad_zeros"], self.value(fv))
                    add(fv, bg.apply(P["env_getitem"], env, self.key(fv), zero))
        env = Constant(NEWENV)
        for fv in free_variables(g):
            if fv in sens:
                env = bg.apply(P["env_setitem"], env, self.key(fv), sens[fv])
        grads = [sens[p] if p in sens else bg.apply(P["grad_zeros"], self.nodes[p])
                 for p in g.parameters]
        bg.output = bg.apply(P["make_tuple"], env, *grads)
        return bg


def grad_graph(g: Graph, wrt: tuple, with_value: bool, location=None) -> Graph:
    """A graph computing the gradient of g's scalar output with respect to the parameters
    `wrt` (names or positions): one gradient, or a tuple of them; with `with_value`, the pair
    (value, gradients).  Nested in g's parent, so it closes over what g closes over."""
    names = [p.debug.name for p in g.parameters]
    positions = []
    for w in wrt or (0,):
        if isinstance(w, str):
            if w not in names:
                raise MyirError(f"{g.name}() has no parameter '{w}'", location,
                                hint=f"its parameters are: {', '.join(names)}")
            positions.append(names.index(w))
        elif isinstance(w, int) and not isinstance(w, bool) and -len(names) <= w < len(names):
            positions.append(w % len(names))
        else:
            raise MyirError(f"cannot differentiate {g.name}() with respect to {w!r}", location,
                            hint=f"name a parameter ({', '.join(names)}) or give its position")
    kind = "value_and_grad" if with_value else "grad"
    gg = Graph(f"{kind}_{g.name}", g.parent, location or g.location)
    params = [gg.add_parameter(n, g.location) for n in names]
    gg.defaults = dict(g.defaults)
    args = [gg.apply(P["grad_check_input"], p, p.debug.name) if i in positions else p
            for i, p in enumerate(params)]
    pair = gg.apply(Constant(JTransform().transform(g)), *args, location=location)
    out = gg.apply(P["getitem"], pair, 0, name="value")
    bprop = gg.apply(P["getitem"], pair, 1, name="bprop")
    seed = gg.apply(P["grad_seed"], out, location=location)
    grads = gg.apply(bprop, seed, name="grads")
    # a gradient has its parameter's type (a float32 array meeting float64 operands too)
    picked = [gg.apply(P["grad_cast"], gg.apply(P["getitem"], grads, 1 + i),
                       params[i], name=f"d{names[i]}") for i in positions]
    result = picked[0] if len(picked) == 1 else gg.apply(P["make_tuple"], *picked)
    result = gg.apply(P["depend"], result, seed)  # the seed checks the output: keep it
    result = gg.apply(P["depend"], result, out)   # and the forward raises where g does
    gg.output = gg.apply(P["make_tuple"], out, result) if with_value else result
    return gg

