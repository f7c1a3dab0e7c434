"""Forward-mode automatic differentiation by source transformation, and the Jacobians and
Hessians built on it and on reverse mode.

`F(g)` is a graph taking g's parameters, then one tangent per parameter, and returning
`(value, tangent of the value)`.  Every node x of g has two counterparts in F(g): its value
and its tangent.  A primitive call is applied in place, its tangent computed next to it by
the primitive's tangent rule (below).  A call of a graph or of a function value `f(a, b)`
becomes `F(f)(a, b, da, db)`, read back as (value, tangent).  Function values are the
transformed functions (their tangent is the empty env, a function has no tangent of its
own: a closure's transform reads the tangents of what it captured from its enclosing
transform, as a nested graph).  Control flow needs nothing special: `switch` picks a
transformed branch, a call in tail position stays in tail position (F(g) returns the callee's
pair), so loops stay loops.  A value from a graph outside the transformed ones (a function
differentiated inside another) is a constant to the derivative: its tangent is zero.

Tangent rules, one kind per primitive (tests/test_primitive_tables.py checks they cover every
primitive, or say why not):

* `ZERO`: piecewise constant (comparisons, integer results): the zero of the output;
* `LINEAR`: linear in the operands at the positions given (`sum(x, axis)`, `getitem`, the
  reverse mode's own `gadd`, `env_setitem`, `stack_push`, ...): the primitive applied to
  their tangents, the other operands as they are;
* `MULTILINEAR`: linear in each of the operands at the positions given (`mul`, `matmul`,
  `einsum`): the sum over those operands of the primitive with one replaced by its tangent;
* `ELEMENTWISE`: a function of one operand applied element by element: its Jacobian is
  diagonal, so J·v is Jᵀ·v, the gradient rule (passes/grad_rules.py) applied to the tangent;
* the rest have `jvp_<name>(inputs..., out, tangents...)` in passes/jvp_rules.py, written in
  the subset; `builtin_min`/`builtin_max` are built here (any number of operands).

Tangents known to be zero (a constant's, a `ZERO` primitive's) are tracked, so the terms they
would make are not built: forward mode with respect to one input computes only what depends
on it.
"""

from __future__ import annotations

import functools

from frontend import parse
from myir.errors import MyirError
from myir.ir.analysis import graph_uses, primitive_name, reachable_graphs, toposort, users
from myir.ir.edit import clone_program
from myir.ir.graph import Apply, Constant, Graph, Node
from myir.ir.primitives import PRIMITIVES, Primitive, plain_operator
from myir.ir.values import NEWENV, JacobianMacro, JvpMacro
from passes import ad, jvp_rules

P = PRIMITIVES

ZERO = ad.NON_DIFFERENTIABLE | frozenset({"grad_zeros", "grad_seed", "floordiv"})

LINEAR: dict[str, tuple[int, ...]] = {
    **{name: (0,) for name in """neg pos negative sum mean cumsum transpose reshape broadcast_to
        expand_dims squeeze swapaxes concatenate stack unstack getitem check_bound unpack depend
        to_float cast asarray astype take take_along_axis sum_to_like broadcast_to_like
        reduce_grad grad_check_input grad_cast sum_to_side broadcast_to_side copy
        not_a_view array getattr_ dict_values children iter_keys dict_pick""".split()},
    **{name: (1,) for name in ("rebuild", "dict_items_grad", "iter_keys_grad")},
    **{name: (0, 2) for name in ("record_replace", "dict_setitem", "dict_get")},
    "dict_cons": (1, 2), "dict_items": (0,),
    **{name: (0,) for name in ("seq_repeat", "list_pop", "to_list", "to_tuple", "seq_grad",
                                "list_of_length", "list_permute")},
    **{name: (0, 1) for name in ("list_append", "list_extend", "builtin_sum")},
    **{name: (1,) for name in ("sum_grad", "array_grad")}, "list_unpop": (0, 2),
    **{name: (0, 1) for name in ("add", "sub", "np_add", "np_subtract", "gadd", "stack_push")},
    "where": (1, 2), "switch": (1, 2), "env_getitem": (0, 2), "env_setitem": (0, 2),
    "getitem_grad": (2,), "concat_grad": (2,), "select_grad": (2,), "take_grad": (3,),
    "take_along_axis_grad": (3,), "jvp_check_tangent": (1,), "setitem": (0, 2),
    "tree_ravel": (0,), "tree_unravel": (1,), "jacobian_blocks": (2,), "strong_zero": (1,),
    "jacobian_unblocks": (2,),
}

MULTILINEAR: dict[str, tuple[int, ...]] = {
    name: (0, 1) for name in ("mul", "np_multiply", "matmul", "dot", "tensordot", "convolve")}

ELEMENTWISE = frozenset("""exp expm1 log log1p sqrt sin cos tan tanh sinh cosh arcsin arccos arctan
    abs builtin_abs square reciprocal cbrt log2 log10 exp2 arcsinh arccosh arctanh math_exp
    math_expm1 math_log math_log1p math_sqrt math_tan math_tanh math_atan math_fabs math_sin
    math_cos math_sinh math_cosh math_asin math_acos math_log2 math_log10 math_exp2 math_cbrt
    math_asinh math_acosh math_atanh math_erf math_erfc math_degrees math_radians""".split())

VARIADIC = frozenset({"make_tuple", "make_list", "builtin_min", "builtin_max", "einsum",
                      "einsum_grad"})
# Contractions, linear in every operand but the first (the subscripts).
CONTRACTIONS = frozenset({"einsum", "einsum_grad"})

# Containers built from keys or a class and values: the tangent is the container of the
# values' tangents, under the same keys or class.
VALUES_AT: dict[str, slice] = {"make_dict": slice(1, None, 2), "make_record": slice(1, None)}

# Primitives without a tangent rule, and why (checked by tests/test_primitive_tables.py):
# none today; a primitive added without one is listed here with what to write instead.
NO_TANGENT_RULE: dict[str, str] = {}


def has_tangent_rule(name: str) -> bool:
    name = plain_operator(name)
    return (name in ZERO or name in LINEAR or name in MULTILINEAR or name in ELEMENTWISE
            or name in VARIADIC or name in VALUES_AT or name == "vectorize_call"
            or hasattr(jvp_rules, "jvp_" + name))


@functools.cache
def _rule(name: str) -> Graph:
    return parse(getattr(jvp_rules, "jvp_" + name))


class ForwardTransform:
    """F of graphs, sharing one map from primal nodes to their values and tangents, so that a
    nested graph's F is nested in its parent's F and reads its free variables there."""

    def __init__(self):
        self.graphs: dict[Graph, Graph] = {}
        self.values: dict[Node, Node] = {}
        self.tangents: dict[Node, Node] = {}
        self.zero: set[Node] = set()       # tangents known to be zero
        self.pending: list[Graph] = []

    def transform(self, g: Graph) -> Graph:
        """F of g and of every graph it reaches, from a worklist (a chain of calls may be as
        deep as the program); a graph's body after its parent's."""
        self.constant = constant_parameters(g)
        fg = self.graph(g)
        while self.pending:
            self.body(self.pending.pop())
        return fg

    def graph(self, g: Graph) -> Graph:
        if g in self.graphs:
            return self.graphs[g]
        if getattr(g, "custom_grad", None) is not None and not getattr(g, "vectorized", False):
            return self.custom(g)
        parent = self.graphs.get(g.parent, g.parent)
        fg = Graph(f"F_{g.name}", parent, g.location)
        fg.debug = g.debug.derive("jvp of")
        fg.debug.name = f"F_{g.name}"
        self.graphs[g] = fg
        for p in g.parameters:
            self.values[p] = fg.add_parameter(p.debug.name, p.location)
        for p in g.parameters:
            self.tangents[p] = fg.add_parameter(f"d{p.debug.name or ''}", p.location)
            if p in self.constant:      # zero wherever g is called: known zero in F(g)
                self.tangents[p] = fg.apply(P["grad_zeros"], self.values[p])
                self.zero.add(self.tangents[p])
        self.pending.append(g)
        return fg

    def custom(self, g: Graph) -> Graph:
        """F of a function with a gradient rule of the user's (`myir.custom_grad`): the
        tangent from the rule, transposed: `(J·v)_k = <Jᵀ·e_k, v>`, one call of the rule per
        element of the output (one for a scalar), so forward mode agrees with the rule."""
        rule = g.custom_grad
        ad.check_rule_arity(g, rule)
        fg = Graph(f"F_{g.name}", self.graphs.get(g.parent, g.parent), g.location)
        fg.debug = g.debug.derive("jvp of")
        self.graphs[g] = fg
        xs = [fg.add_parameter(p.debug.name, p.location) for p in g.parameters]
        dxs = [fg.add_parameter(f"d{p.debug.name or ''}", p.location) for p in g.parameters]
        out = fg.apply(Constant(g), *xs, name="out", location=g.location)
        pull = Graph(f"pull_{g.name}", fg, g.location)
        e = pull.add_parameter("e")
        res = pull.apply(P["unpack"], pull.apply(Constant(clone_program(rule)), *xs, out, e,
                                                 location=rule.location), len(xs))
        dots = [pull.apply(P["sum"], pull.apply(P["mul"], pull.apply(P["getitem"], res, i), d),
                           None, False) for i, d in enumerate(dxs)]
        total = dots[0]
        for d in dots[1:]:
            total = pull.apply(P["add"], total, d)
        pull.output = total
        tangent = fg.apply(Constant(_loops()["transposed"]), Constant(pull), out,
                           location=g.location)
        fg.output = fg.apply(P["make_tuple"], out, tangent)
        return fg

    def value(self, node: Node, fg: Graph) -> Node:
        if isinstance(node, Constant):
            if isinstance(node.value, Graph):
                return Constant(self.graph(node.value))
            if isinstance(node.value, Primitive):
                return Constant(self.primitive_value(node.value))
            return node
        return self.values.get(node, node)   # not mapped: from outside the transform

    def tangent(self, node: Node, fg: Graph) -> Node:
        if not isinstance(node, Constant) and node in self.tangents:
            return self.tangents[node]
        if isinstance(node, Constant) and isinstance(node.value, (Graph, Primitive)):
            t = Constant(NEWENV)
        else:
            t = fg.apply(P["grad_zeros"], node)
        self.zero.add(t)
        return t

    def primitive_value(self, prim: Primitive) -> Graph:
        """F of a primitive used as a value (`apply_to(np.exp, x)`): a graph of its
        parameters and their tangents."""
        if prim.varargs:
            raise MyirError(f"forward mode through `{prim.name}` passed as a value is not "
                            "supported", hint="call it directly, or wrap it in a lambda")
        fg = Graph(f"F_{prim.name}")
        xs = [fg.add_parameter(n) for n in prim.params]
        dxs = [fg.add_parameter("d" + n) for n in prim.params]
        out = fg.apply(prim, *xs)
        fg.output = fg.apply(P["make_tuple"], out,
                             self.rule(fg, prim, xs, out, dxs, [False] * len(xs), None))
        return fg

    def body(self, g: Graph) -> None:
        fg = self.graphs[g]
        for node in toposort(g):
            if not (isinstance(node, Apply) and node.graph is g):
                continue
            xs = [self.value(a, fg) for a in node.args]
            dxs = [self.tangent(a, fg) for a in node.args]
            if primitive_name(node) == "vectorize_call" and isinstance(node.args[0], Constant):
                self.vectorized(fg, node, dxs[1:])
                continue
            if isinstance(node.fn, Constant) and isinstance(node.fn.value, Primitive):
                prim = node.fn.value
                out = fg.apply(prim, *xs, name=node.debug.name, location=node.location)
                self.values[node] = out
                self.tangents[node] = self.rule(fg, prim, xs, out, dxs,
                                        [d in self.zero for d in dxs], node.location)
                continue
            call = fg.apply(self.value(node.fn, fg), *xs, *dxs, location=node.location)
            if node is g.output:     # a tail call stays one: F(g) returns the callee's pair
                fg.output = call
                return
            self.values[node] = fg.apply(P["getitem"], call, 0, name=node.debug.name,
                                         location=node.location)
            self.tangents[node] = fg.apply(P["getitem"], call, 1, location=node.location)
        if primitive_name(g.output) == "raise_":
            fg.output = self.value(g.output, fg)
            return
        fg.output = fg.apply(P["make_tuple"], self.value(g.output, fg),
                             self.tangent(g.output, fg), location=g.location)

    def vectorized(self, fg: Graph, node: Apply, dxs: list) -> None:
        """`vectorize_call(f, *xs)`: its tangent is a broadcast too, of f's tangent, a
        scalar function of the elements and their tangents (`T_f(*xs, *dxs)`, the second
        of F(f)'s pair): one more kernel, forward mode inside it."""
        f = node.args[0].value
        xs = [self.value(a, fg) for a in node.args[1:]]
        self.values[node] = fg.apply(P["vectorize_call"], node.args[0], *xs,
                                     name=node.debug.name, location=node.location)
        if all(d in self.zero for d in dxs):
            self.tangents[node] = fg.apply(P["grad_zeros"], self.values[node])
            self.zero.add(self.tangents[node])
            return
        t = Graph(f"tangent_{f.name}", None, f.location)
        params = [t.add_parameter(p.debug.name, p.location) for p in f.parameters]
        tangents = [t.add_parameter(f"d{p.debug.name or ''}", p.location) for p in f.parameters]
        t.output = t.apply(P["getitem"], t.apply(Constant(ForwardTransform().transform(f)),
                                                 *params, *tangents), 1)
        self.tangents[node] = fg.apply(P["vectorize_call"], Constant(t), *xs, *dxs,
                                       location=node.location)

    @staticmethod
    def einsum_grad_term(fg: Graph, xs: list, dxs: list, k: int, location) -> Node:
        """The tangent of `einsum_grad(subscripts, *operands, dout)` along its input k alone:
        each gradient it returns is linear in dout and in the other operands, and does not
        depend on its own operand, whose entry the term leaves at zero."""
        res = fg.apply(P["einsum_grad"], *(dxs[i] if i == k else x for i, x in enumerate(xs)),
                       location=location)
        if k == len(xs) - 1:       # dout
            return res
        parts = [fg.apply(P["getitem"], res, i) for i in range(len(xs) - 2)]
        parts[k - 1] = fg.apply(P["grad_zeros"], parts[k - 1])
        return fg.apply(P["make_tuple"], *parts)

    def rule(self, fg: Graph, prim: Primitive, xs: list, out: Node, dxs: list, zero: list,
             location) -> Node:
        """The tangent of `out = prim(*xs)` given the operands' tangents (`zero[i]` where
        dxs[i] is known to be zero)."""
        name = plain_operator(prim.name)
        base = P[name]

        def zeros() -> Node:
            t = fg.apply(P["grad_zeros"], out)
            self.zero.add(t)
            return t

        def total(terms: list) -> Node:
            if not terms:
                return zeros()
            t = terms[0]
            for term in terms[1:]:
                t = fg.apply(P["gadd" if name == "einsum_grad" else "add"], t, term)
            return t

        if not has_tangent_rule(name):
            raise MyirError(f"`{prim.name}` has no tangent rule, so forward mode cannot go "
                            "through it", location,
                            hint=NO_TANGENT_RULE.get(prim.name) or "take the tangent with "
                            "respect to inputs that do not flow through it")
        if name in ZERO:
            return zeros()
        if name in ("make_tuple", "make_list"):
            return fg.apply(base, *dxs)
        if name in VALUES_AT:
            inputs = list(xs)
            values = range(len(xs))[VALUES_AT[name]]
            inputs[VALUES_AT[name]] = [dxs[i] for i in values]
            return fg.apply(base, *inputs, location=location)
        positions = range(1, len(xs)) if name in CONTRACTIONS else \
            range(len(xs)) if name in VARIADIC else LINEAR.get(name) or MULTILINEAR.get(name)
        live = [i for i in (positions or range(len(xs))) if not zero[i]]
        if not live:
            return zeros()
        if name in LINEAR:
            return fg.apply(base, *(dxs[i] if i in positions else x for i, x in enumerate(xs)),
                            location=location)
        if name == "einsum_grad":
            return total([self.einsum_grad_term(fg, xs, dxs, k, location) for k in live])
        if name in MULTILINEAR or name in CONTRACTIONS:
            return total([fg.apply(base, *(dxs[i] if i == k else x for i, x in enumerate(xs)),
                                   location=location) for k in live])
        if name in ("builtin_min", "builtin_max"):
            ties = [fg.apply(P["eq"], x, out) for x in xs]
            count = total(ties)
            return total([fg.apply(P["select_grad"], out, xs[i], dxs[i], count) for i in live])
        if name in ELEMENTWISE:
            rule = ad.gradient_rule(name)
            res = fg.apply(Constant(rule), xs[0], out, dxs[0], location=location)
            return fg.apply(P["getitem"], res, 0)
        return fg.apply(Constant(_rule(name)), *xs, out, *dxs, location=location)


def constant_parameters(root: Graph) -> set:
    """The parameters of the graphs reached from root (root's own excepted) whose tangent is
    zero at every call: what every call passes them is a constant, the result of a `ZERO`
    primitive (`range(n)`, `len(x)`), of a `LINEAR` one of such values (`iter_keys` of a
    range) or such a parameter (a loop passing its counter on).
    A graph used otherwise than called (directly or as a branch of a called switch) keeps
    all its tangents.  The greatest fixpoint: a loop's own tail call does not make its
    counter's tangent nonzero.  This keeps forward mode from computing what is zero, and
    from indexing the tangent of a `range` (which has none) in a loop over it."""
    uses, graphs = users(root), graph_uses(root)
    sites: dict[Graph, list] = {}
    for g in reachable_graphs(root):
        if g is root or getattr(g, "custom_grad", None) is not None:
            continue
        calls = []
        for user, index in graphs.get(g, ()):
            if index == 0:
                calls.append(user)
            elif index in (2, 3) and primitive_name(user) == "switch" and \
                    all(i == 0 for _, i in uses.get(user, ())):
                calls.extend(u for u, _ in uses.get(user, ()))
            else:
                calls = None
                break
        if calls:
            sites[g] = calls
    constant = {p for g in sites for p in g.parameters}

    def known(node: Node) -> bool:
        name = plain_operator(primitive_name(node) or "")
        return isinstance(node, Constant) or node in constant or name in ZERO or (
            name in LINEAR and all(known(node.args[i]) for i in LINEAR[name]
                                   if i < len(node.args)))

    changed = True
    while changed:
        changed = False
        for g, calls in sites.items():
            for i, p in enumerate(g.parameters):
                if p in constant and not all(i < len(c.args) and known(c.args[i])
                                             for c in calls):
                    constant.discard(p)
                    changed = True
    return constant


def jvp_graph(g: Graph, location=None) -> Graph:
    """`jvp_g(primals, tangents)`: `(g(*primals), J·tangents)`, with each tangent checked
    against its primal.  Nested in g's parent, so it closes over what g closes over."""
    n = len(g.parameters)
    jg = Graph(f"jvp_{g.name}", g.parent, location or g.location)
    primals = jg.apply(P["unpack"], jg.add_parameter("primals"), n)
    tangents = jg.apply(P["unpack"], jg.add_parameter("tangents"), n)
    xs = [jg.apply(P["getitem"], primals, i) for i in range(n)]
    ts = [jg.apply(P["jvp_check_tangent"], x, jg.apply(P["getitem"], tangents, i), i,
                   location=location) for i, x in enumerate(xs)]
    jg.output = jg.apply(Constant(ForwardTransform().transform(g)), *xs, *ts, location=location)
    return jg


_LOOPS = None


def _loops():
    """The loops that assemble Jacobians, parsed from passes/jacobian_loops.py."""
    global _LOOPS
    if _LOOPS is None:
        from passes import jacobian_loops
        _LOOPS = {name: parse(getattr(jacobian_loops, name))
                  for name in ("jacobian_columns", "jacobian_rows", "transposed")}
    return _LOOPS


def jacobian_graph(g: Graph, spec: JacobianMacro, location=None) -> Graph:
    """`jacfwd`, `jacrev` or `hessian` of g with respect to the parameters `spec.wrt`: a
    graph of g's parameters returning the Jacobian as JAX gives it: a tree of the output's
    structure whose leaves are trees of the input's (for several parameters, the tuple of
    them), each block of shape `out.shape + in.shape` (passes/jacobian_loops.py).  A Hessian
    is the forward-mode Jacobian of the gradient: a tuple of tuples of blocks for several
    parameters."""
    positions = ad.wrt_positions(g, spec.wrt, location)
    jg = Graph(f"{spec.kind}_{g.name}", g.parent, location or g.location)
    params = [jg.add_parameter(p.debug.name, p.location) for p in g.parameters]
    jg.defaults = dict(g.defaults)
    x = params[positions[0]] if len(positions) == 1 else \
        jg.apply(P["make_tuple"], *(params[i] for i in positions))
    if spec.kind == "hessian":
        jg.output = _columns(jg, ad.grad_graph(g, tuple(positions), False, location), params,
                             positions, x, location)
    elif spec.kind == "jacfwd":
        jg.output = _columns(jg, g, params, positions, x, location)
    else:
        jg.output = _rows(jg, g, params, positions, x, location)
    return jg


def _columns(jg: Graph, g: Graph, params: list, positions: list, x: Node, location) -> Node:
    """In jg, the Jacobian of g with respect to x, its parameters at `positions` (one, or a
    tuple of several), by forward mode: one tangent per number of x."""
    fg = ForwardTransform().transform(g)
    push = Graph(f"push_{g.name}", jg, location)
    v = push.add_parameter("v")
    parts = {positions[0]: v} if len(positions) == 1 else \
        {pos: push.apply(P["getitem"], v, k) for k, pos in enumerate(positions)}
    tangents = [parts[i] if i in parts else push.apply(P["grad_zeros"], p)
                for i, p in enumerate(params)]
    push.output = push.apply(P["getitem"], push.apply(Constant(fg), *params, *tangents,
                                                      location=location), 1)
    out = jg.apply(Constant(g), *params, location=location)
    return jg.apply(Constant(_loops()["jacobian_columns"]), Constant(push), x, out,
                    *_raveled(jg, x, out, location), location=location)


def _rows(jg: Graph, g: Graph, params: list, positions: list, x: Node, location) -> Node:
    """In jg, the Jacobian of g with respect to x, its parameters at `positions`, by reverse
    mode: one backpropagator call per number of the output."""
    pair = jg.apply(Constant(ad.JTransform().transform(g)), *params, location=location)
    out = jg.apply(P["getitem"], pair, 0, name="value")
    bprop = jg.apply(P["getitem"], pair, 1, name="bprop")
    pull = Graph(f"pull_{g.name}", jg, location)
    grads = pull.apply(bprop, pull.add_parameter("e"))
    parts = [pull.apply(P["grad_cast"], pull.apply(P["getitem"], grads, 1 + pos), params[pos])
             for pos in positions]
    pull.output = parts[0] if len(parts) == 1 else pull.apply(P["make_tuple"], *parts)
    return jg.apply(Constant(_loops()["jacobian_rows"]), Constant(pull), x, out,
                    *_raveled(jg, x, out, location), location=location)


def _raveled(jg: Graph, x: Node, out: Node, location) -> list:
    """The numbers of the Jacobian's input and output trees, as vectors (`tree_ravel`), at
    the user's call: a tree that is not one of numbers and arrays is reported there."""
    return [jg.apply(P["tree_ravel"], t, location=location) for t in (x, out)]


def check_jvp_calls(node: Apply, uses: list, target: Graph) -> None:
    """`jvp(f, primals, tangents)` written with tuples (as it nearly always is): one primal
    and one tangent per parameter of f, or a located error before anything runs."""
    n = len(target.parameters)
    for call, index in uses:
        if index != 0:
            continue
        for what, arg in zip(("primals", "tangents"), call.args):
            if primitive_name(arg) == "make_tuple" and len(arg.args) != n:
                raise MyirError(f"jvp(): {target.name}() takes {n} argument"
                                f"{'s' * (n != 1)}, and the {what} are {len(arg.args)}",
                                call.location or node.location,
                                hint=f"give {n} primals and {n} tangents, one per parameter "
                                     f"({', '.join(p.debug.name for p in target.parameters)})")


def expand_macro(spec, target: Graph, location) -> Graph:
    """The graph a forward-mode or Jacobian macro applied to `target` stands for."""
    if isinstance(spec, JvpMacro):
        return jvp_graph(target, location)
    return jacobian_graph(target, spec, location)
