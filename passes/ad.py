"""Reverse-mode automatic differentiation by source transformation (Myia's J transform).

`J(g)` is a graph taking what g takes and returning `(value, backpropagator)`.  The
backpropagator is a closure nested in J(g): given the sensitivity of g's output it returns
`(env, d_param_1, ..., d_param_n)`, where `env` holds the gradients of g's free variables
(a closure's gradient is the env of what it captured).  Each call `f(a, b)` in g becomes
`(v, bp) = J(f)(a, b)` in J(g), and the backpropagator calls the `bp`s in reverse order,
adding up sensitivities with `gadd`.  Control flow needs nothing special: `switch` picks a
J-transformed branch, recursion is calls, and the chain of backpropagators is the tape.
A call of a primitive is applied in J(g) as it is, and its gradient rule (a graph too, from
passes/grad_rules.py) applied to its operands in the backpropagator: no J graph and
backpropagator closure per primitive call, which the optimizer would only inline again
(`primitive_j` builds such a J graph where a primitive is a value: `map(np.sin, xs)`).
Rules being graphs, the output of J can be transformed again (grad of grad).

Loops: adjoints as loops over a residual stack.  A loop parses to a graph L that calls
itself in tail position, through graphs it tail-calls: the branches of an `if` and the
code after it (`loop_region` finds them: the *region*, one iteration).  Transformed like
any other graph, each iteration would wrap the next one's result (J of the body is not tail
recursive), so the forward pass and the chain of backpropagators would both recurse as
deep as the loop runs.  Instead J(L) runs two loops, each a graph that calls itself in tail
position, so the backends emit a `while` loop for each and nothing recurses:

* the forward loop `J_L_forward(params, stack)` has L's shape: each graph h of the region
  becomes `J_h`, which computes h's values and tail-calls the next graph of the iteration
  without wrapping its result.  Where the call starts the next iteration, J_h pushes one
  record onto the stack; where the loop exits, it returns `(value, adjoint of the
  iteration so far, stack)`;
* the backward loop `L_backward(stack, d...)` pops the records and applies each
  iteration's adjoint to d, the sensitivities `(env, d params...)` of L's parameters at
  iteration k+1, giving those at k; when the stack is empty, d is what J(L)'s
  backpropagator returns.

What a record holds depends on the region's shape.  Where the paths of an iteration
through the region form a tree (each graph of it has one caller), the records are
*residuals*: each graph h's adjoint up to its tail call (`A_h`: it takes what that call's
backpropagator would return, `(d callee, d args...)`) is lifted out of the forward loop, a
graph of J(L) taking the values it reads as parameters; the forward loop passes those
values along the path and pushes them as one tuple where the path calls L again, and the
backward loop applies the lifted adjoints of that path in reverse order to them
(`record_segment`).  Where h ends in a switch, each branch's path gets its own A_h, which
hands the sensitivity to that branch without reading the condition.  The optimizer
inlines the adjoints into the backward loop, so no closure is made per iteration.

A loop nested in an iteration is a call of the region like any other: J of it returns
its value and its backpropagator, a closure of the inner stacks and of what the inner
adjoints read, which the outer record holds.  The optimizer turns that field into the
closure's free variables, and the pop's call of it into a copy of the closure reading the
popped values, which it inlines (`lift_record_closures` in passes/opt.py; before it,
`lift_result_closures` turns the inner loop's exit adjoint, which the inner loop returns,
into the values it reads, and `lift_parameter_closures` does the same for a closure that
a path of several passes on to the graph that pushes): the outer forward loop pushes the
inner stacks in its records, and the outer backward loop runs the inner backward loop in
place, at any depth of nesting, with no closure per outer iteration.  A gradient of a
gradient differentiates the gradient so lifted; its own records, whose stacks of
sensitivities mirror them field by field, are left as they are, so its outer loops still
make the inner loops' backpropagators, one per iteration.

A loop with several paths back to its head (a `continue`; an `if`, of either kind, inside
the body) keeps, per path, a stack of records of that path's one shape, and a stack of
tags: the number of the path each iteration took, pushed with its record.  The backward
loop pops a tag and goes to that path's step (`tag_dispatch`, passes/defunctionalise.py),
which pops the path's stack and applies the path's adjoints.  Each stack holds one type, so inference keeps the
records' types precise, `drop_unread_residuals` prunes each path's records, and the
python backend keeps every stack as a list.  This is defunctionalisation per path
(rather than Zygote's per block, a record per block and a tag where blocks join): a path
is a record of one push, applied by straight-line code that the optimizer inlines whole.
To have a tree, J transforms a copy of L (`loop_tree`): an `if` whose value the rest of
its graph reads (`r = a if c else b`, written as statements, which parses to a call of
the two branches returning a value) is split there, the rest becoming a graph that both
branches tail-call (`_split_at`), and a graph with several callers (the code after an
`if` that joins) is copied for each (`_duplicate`).  The paths double with each `if`
one after the other, and the code after them is copied along: past `PATH_CAP` paths (or
`GROWTH` in size), L is transformed as it is.  Then records of a tree hold the
backpropagators of its `if`s' calls, and elsewhere J_h takes `cont`, the adjoint from its
start back to the iteration's start, and passes on the closure `lambda d: cont(A_h(d))`;
the record is that closure: a closure per iteration.  Either way, the primitives and
switches of the region are applied in place, their gradient rules in the adjoint, so that
residuals are the operands the rules read rather than backpropagator closures.  The
gradient of a gradient differentiates its loops of several paths again as such: they are
trees already, whose paths each push on stacks of their own, so its program is larger
than for one path.

The stack (`stack_push`, `stack_pop`, `stack_empty`, `EMPTY_STACK`) is an ordinary value
with gradient rules, so grad of grad differentiates these loops too: a stack's sensitivity
is a stack of its items' sensitivities, and `EMPTY_STACK` is its zero.  The forward and
backward loops of a gradient are loops like any other: J of them is again a forward loop
and a backward loop, at every order.

A linear self-recursion (`f(n) = g(f(n - 1))`) reaches this transform as two loops
(passes/linear_recursion.py).  Other recursion (a tree walk, mutual recursion) is
transformed here like any other graph: its adjoint needs what each call computed after
its recursive call returned, in reverse, and the chain of backpropagators is that stack.
`lift` (passes/lift.py) closes the graphs of each call (the branches of its `if`, the
code after it), so their J return plain tuples of sensitivities, not envs; the
backpropagators of the branch and of the function then only forward to the one of the
code after the `if`.  The optimizer then replaces the closures by records on stacks and
one dispatching adjoint (passes/defunctionalise.py), each call's adjoint, once its rules
are inlined, straight-line code in a branch of that dispatch.

A record holds what the adjoints may read; once types are known, the optimizer drops the
fields that no pop reads (`drop_unread_residuals` in passes/opt.py: a loop counter's
`i + 1` reads nothing of i), and a record left with one field is pushed bare.  The python
backend keeps a stack as a list, appended to and popped in place, where the program hands
each stack on from push to push and pop to pop with nothing else seeing it, as a
gradient's forward and backward loops do, an inner loop's stacks held in the outer records
included (`InPlace.stacks_in_place` in backends/python/codegen.py); otherwise as cells of
tuples (myir/ir/values.py).
"""

from __future__ import annotations

from collections import Counter
import functools

from frontend import parse
from myir.errors import MyirError
from myir.ir.analysis import bump_version, free_variables, graph_uses, is_nested_in, \
    primitive_name, switch_call, tail_calls, tail_targets, toposort, users
from myir.ir.edit import Cloner, clone, clone_program, replace
from myir.ir.graph import Apply, Constant, Graph, Node, id_mark, is_graph_constant, shared_graphs
from myir.ir.primitives import PRIMITIVES, Primitive, plain_operator
from myir.ir.values import EMPTY_STACK, NEWENV, GradKey
from passes import grad_rules
from passes.defunctionalise import tag_dispatch
from passes.opt import EFFECTS, constant_fold
from passes.raising import may_raise

P = PRIMITIVES

# Primitives whose gradient is zero for every input (or that never return a value).
NON_DIFFERENTIABLE = frozenset("""
    lt le gt ge eq ne is_ is_not not_ truth invert floordiv np_floor_divide bitand bitor bitxor lshift rshift sign floor ceil argmax argmin
    argsort shape ndim size dtype len range make_slice to_int to_bool zeros ones empty full
    zeros_like ones_like arange eye make_exception raise_ format concat_str grad_seed
    math_floor math_ceil stack_empty isnan isinf isfinite print_ rint trunc builtin_round
    math_isnan math_isinf math_isfinite math_trunc
""".split()) | frozenset({"searchsorted"}) \
    | frozenset({"contains", "dict_keys", "comp_length", "comp_next"}) \
    | frozenset({"setitem_slot", "list_order"})   # keys, lengths, where an update wrote, an
#                                                   order

# Gradient rules built here rather than parsed, for primitives with any number of inputs.
VARIADIC_RULES = frozenset({"make_tuple", "builtin_min", "builtin_max", "einsum", "einsum_grad",
                            "make_dict", "make_list", "make_record"})

# Primitives without a gradient rule, and why (checked by tests/test_primitive_tables.py).
NO_RULE = {
    "vectorize_call": "vectorize(f) is differentiated by its own rule, forward mode inside "
                      "the broadcast (passes/vectorize.py); the derivative of that rule (a "
                      "second derivative through vectorize) is not supported: differentiate "
                      "the scalar function twice inside it instead",
}


# Rules for calls whose operand at a position is a number constant (`x ** 3`): rule name ->
# (position, rule of grad_rules).  The rule graph gets the constant in that parameter's
# place, with what it alone computes folded, so that a derived constant (the `y - 1` of
# `x ** (y - 1)`) is a constant again for the next derivative.
CONSTANT_OPERAND_RULES = {name: (1, grad_rules.pow_of_constant_exponent)
                          for name in ("pow", "power", "ieee_pow", "math_pow")}


def constant_operand(node: Apply) -> tuple[int, object] | None:
    """(position, value) of the number constant that a rule of `CONSTANT_OPERAND_RULES`
    takes for this call of a primitive, if it has one."""
    prim = node.fn.value if isinstance(node.fn, Constant) else None
    if not isinstance(prim, Primitive):
        return None
    entry = CONSTANT_OPERAND_RULES.get(plain_operator(prim.name))
    if entry is None or entry[0] >= len(node.args):
        return None
    arg = node.args[entry[0]]
    if isinstance(arg, Constant) and type(arg.value) in (int, float):
        return entry[0], arg.value
    return None


@functools.lru_cache(maxsize=256)
def _specialised_rule(rule, position: int, kind: type, text: str) -> Graph:
    """The graph of `rule` with the number `kind(text)` (1 and 1.0 differ, and so do 0.0
    and -0.0) in place of its parameter at `position` (which it keeps, unused: calls pass
    every operand), and the computations of constants alone folded."""
    with shared_graphs():   # (kept for every compile)
        g = clone_program(parse(rule))
    replace(g, g.parameters[position], Constant(kind(text)))
    for node in toposort(g):
        if isinstance(node, Apply) and node.graph is g:
            folded = constant_fold(node, None)
            if folded is not None:
                replace(g, node, folded)
    return g


@functools.cache
def gradient_rule(name: str):
    """The parsed rule graph of a primitive, or None if it has none."""
    fn = getattr(grad_rules, "bprop_" + plain_operator(name), None)
    return parse(fn) if fn is not None else None


def has_gradient_rule(name: str) -> bool:
    return (plain_operator(name) in NON_DIFFERENTIABLE or name in VARIADIC_RULES
            or hasattr(grad_rules, "bprop_" + plain_operator(name)))


_PRIMITIVE_J: dict[tuple[str, int], Graph] = {}


def require_gradient_rule(prim: Primitive, location) -> None:
    """Refuse to differentiate a call of a primitive that has no gradient rule."""
    if not has_gradient_rule(prim.name):
        raise MyirError(f"`{prim.name}` has no gradient rule, so this function cannot be "
                        "differentiated", location,
                        hint=NO_RULE.get(prim.name) or "differentiate with respect to "
                        "inputs that do not flow through it")


def primitive_j(prim: Primitive, arity: int, location=None) -> Graph:
    """J of a primitive called with `arity` arguments: `(prim(xs), bprop)`."""
    key = (prim.name, arity)
    if key in _PRIMITIVE_J:
        return _PRIMITIVE_J[key]
    require_gradient_rule(prim, location)
    names = list(prim.params) if not prim.varargs else [f"x{i}" for i in range(arity)]
    with shared_graphs():   # (kept for every compile)
        jg = Graph(f"J_{prim.name}")
        bp = Graph(f"bprop_{prim.name}", parent=jg)
    xs = [jg.add_parameter(n) for n in names[:arity]]
    out = jg.apply(prim, *xs)  # unnamed: once inlined, it takes the program's name (opt)
    dout = bp.add_parameter("dout")
    grads = _rule_gradients(prim, bp, xs, out, dout)
    bp.output = bp.apply(P["make_tuple"], NEWENV, *grads)
    jg.output = jg.apply(P["make_tuple"], out, Constant(bp))
    _PRIMITIVE_J[key] = jg
    return jg


def _rule_gradients(prim: Primitive, bp: Graph, xs: list, out: Node, dout: Node,
                    constant=None, own=None) -> list:
    """The gradients of the operands `xs` of a call of `prim` whose result is `out`, made
    in `bp` from the sensitivity `dout`; `constant`: as `constant_operand` gives it.  `own`
    (a rule graph -> the graph to call) gives a transform's private copy of a rule."""
    name = prim.name
    if plain_operator(name) in NON_DIFFERENTIABLE:
        return [bp.apply(P["grad_zeros"], x) for x in xs]
    if name in ("make_tuple", "make_list"):
        return [bp.apply(P["getitem"], dout, i) for i in range(len(xs))]
    if name == "make_dict":     # make_dict(k0, v0, ...): the keys' zeros, dout[k] for v
        return [bp.apply(P["grad_zeros"], x) if i % 2 == 0 else
                bp.apply(P["getitem"], dout, xs[i - 1]) for i, x in enumerate(xs)]
    if name == "make_record":   # make_record(cls, *fields): dout's fields, in order
        fields = bp.apply(P["children"], dout)
        return [bp.apply(P["grad_zeros"], xs[0])] + [
            bp.apply(P["getitem"], fields, i) for i in range(len(xs) - 1)]
    if name in ("builtin_min", "builtin_max"):
        ties = [bp.apply(P["eq"], x, out) for x in xs]
        count = ties[0]
        for t in ties[1:]:
            count = bp.apply(P["add"], count, t)
        return [bp.apply(P["select_grad"], out, x, dout, count) for x in xs]
    if name == "einsum":  # einsum(subscripts, *operands): einsums of dout and the others
        res = bp.apply(P["einsum_grad"], *xs, dout)
        return [bp.apply(P["grad_zeros"], xs[0])] + [
            bp.apply(P["getitem"], res, i) for i in range(len(xs) - 1)]
    if name == "einsum_grad":
        return _einsum_grad_gradients(bp, xs, dout)
    if constant is not None:
        position, value = constant
        rule = _specialised_rule(CONSTANT_OPERAND_RULES[plain_operator(name)][1], position,
                                 type(value), repr(value))
    else:
        rule = gradient_rule(name)
    if own is not None:
        rule = own(rule)
    res = bp.apply(Constant(rule), *xs, out, dout, name="grads", location=rule.location)
    return [bp.apply(P["getitem"], res, i) for i in range(len(xs))]


def _einsum_grad_gradients(bp: Graph, xs: list, dout: Node) -> list:
    """The gradients of `einsum_grad(subscripts, *operands, d)`, as einsums again.

    einsum_grad gives the gradients g_i of F = <d, einsum(subscripts, *operands)>, which is
    linear in each operand and in d; so <c_i, g_i> is F with c_i in operand i's place, and
    the gradient of the sum of the <c_i, g_i> (dout = (c_1, ..., c_n)) is: for d, the sum of
    the einsums with c_i in operand i's place; for operand j, the sum over i != j of
    einsum_grad with c_i in operand i's place, at j.  Being einsum and einsum_grad, these
    have gradients in turn."""
    subscripts, operands, d = xs[0], xs[1:-1], xs[-1]
    grads: list = [[] for _ in operands]
    values = []
    for i in range(len(operands)):
        swapped = [bp.apply(P["getitem"], dout, i) if k == i else x
                   for k, x in enumerate(operands)]
        values.append(bp.apply(P["einsum"], subscripts, *swapped))
        if len(operands) > 1:
            res = bp.apply(P["einsum_grad"], subscripts, *swapped, d)
            for j in range(len(operands)):
                if j != i:
                    grads[j].append(bp.apply(P["getitem"], res, j))

    def total(terms: list, like: Node) -> Node:
        if not terms:
            return bp.apply(P["grad_zeros"], like)
        t = terms[0]
        for term in terms[1:]:
            t = bp.apply(P["gadd"], t, term)
        return t
    return ([bp.apply(P["grad_zeros"], subscripts)]
            + [total(g, x) for g, x in zip(grads, operands)] + [total(values, d)])


class JTransform:
    """J of graphs, sharing one map from primal to transformed nodes and graphs, so that a
    nested graph's J is nested in its parent's J and reads its free variables there."""

    def __init__(self, location=None):
        # where an error with no place of its own points: the differentiated function (a
        # node of a gradient rule's graph, differentiated again, has no place in the source)
        self.location = location
        self.graphs: dict[Graph, Graph] = {}
        self.nodes: dict[Node, Node] = {}
        self.keys: dict[Node, GradKey] = {}
        self.primitives: dict[tuple[str, int], Graph] = {}
        self.rules: dict[Graph, Graph] = {}     # gradient rule -> its private copy
        self.pending: list[Graph] = []   # graphs whose J has parameters but no body yet
        self.entries: dict[Graph, Graph] = {}    # loop L -> J(L), which runs its two loops
        self.loop_of: dict[Graph, Graph] = {}    # graph of a loop's region -> the loop
        self.extra: dict[Graph, tuple] = {}      # its forward graph's (cont, stack) parameters
        self.records: dict[Graph, list] = {}     # loop whose stacks hold residuals -> its
        #                                          backward loop's steps, one per path
        self.chain: dict[Graph, list] = {}       # region graph -> the lifted adjoints of the
        #                                          graphs before it in the iteration, and
        self.residuals: dict[Graph, list] = {}   # the parameters bringing their residuals
        self.invariant: dict[Graph, dict] = {}   # loop -> {node of its region: k} for the
        #                                          nodes that are its unchanging parameter k
        self.kinds: dict[Graph, list] = {}       # loop whose stacks hold residuals -> the
        #                                          graphs ending each path (calling it again)
        self.backward: dict[Graph, Graph] = {}   # loop -> its backward loop

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
            self.primitives[key] = clone_program(
                primitive_j(prim, arity, location or self.location))
        return self.primitives[key]

    def rule(self, rule: Graph) -> Graph:
        """A private copy of a gradient rule's graph (the rules are shared by every
        compile): the program the transform makes is then all its own, which the
        optimizer edits in place rather than copying it (`passes.opt.optimize`)."""
        if rule not in self.rules:
            self.rules[rule] = clone_program(rule)
        return self.rules[rule]

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
        if g in self.entries:
            return self.entries[g]
        if g in self.graphs:
            return self.graphs[g]
        if g in self.loop_of:
            return self.segment(g)
        if getattr(g, "custom_grad", None) is not None:
            return self.custom(g)
        # a loop inference follows step by step (its values' types change each step: a dict
        # gaining keys) has no stack of one type: its J is that of the recursion it is
        region = loop_region(g) if not g.unrolled else None
        if region is not None:
            if not _tree(g, region) or any(_value_ifs(h, region) for h in region) \
                    or sum(tail_calls(h) == [g] for h in region) > 1:
                tree = loop_tree(g)     # several paths: a kind of record for each
                if tree is not None:
                    self.entries[g] = self.loop(*tree)
                    return self.entries[g]
            return self.loop(g, region)
        parent = self.graphs.get(g.parent, g.parent)
        gj = Graph(f"J_{g.name}", parent, g.location)
        gj.unrolled = g.unrolled
        gj.debug = g.debug.derive("grad of")
        gj.debug.name = f"J_{g.name}"
        self.graphs[g] = gj
        for p in g.parameters:
            self.nodes[p] = gj.add_parameter(p.debug.name, p.location)
        self.pending.append(g)
        return gj

    def custom(self, g: Graph) -> Graph:
        """J of a function with a gradient rule of the user's (`myir.custom_grad`): g called
        as it is, and a backpropagator calling the rule `(inputs..., out, dout)`.  J of this
        graph is again J of g (the same rule) and of the rule: a rule written in the subset
        is differentiated like any code."""
        rule = g.custom_grad
        check_rule_arity(g, rule)
        gj = Graph(f"J_{g.name}", self.graphs.get(g.parent, g.parent), g.location)
        gj.debug = g.debug.derive("grad of")
        self.graphs[g] = gj
        xs = [gj.add_parameter(p.debug.name, p.location) for p in g.parameters]
        out = gj.apply(Constant(g), *xs, name="out", location=g.location)
        bp = Graph(f"bprop_{g.name}", gj, g.location)
        dout = bp.add_parameter("dout")
        res = bp.apply(Constant(clone_program(rule)), *xs, out, dout, location=rule.location)
        res = bp.apply(P["unpack"], res, len(xs), location=rule.location)
        bp.output = bp.apply(P["make_tuple"], NEWENV,
                             *(bp.apply(P["getitem"], res, i) for i in range(len(xs))))
        gj.output = gj.apply(P["make_tuple"], out, Constant(bp))
        return gj

    def body(self, g: Graph) -> None:
        if g in self.loop_of:
            return self.segment_body(g)
        gj = self.graphs[g]
        # a call of the closure as a value may leave them to Python (`lambda t, i=i: ...`)
        gj.defaults = {k: self.value(v) for k, v in g.defaults.items()}
        bprops: dict[Node, Node] = {}
        for node in toposort(g):
            if not (isinstance(node, Apply) and node.graph is g):
                continue
            if isinstance(node.fn, Constant) and isinstance(node.fn.value, Primitive):
                # applied here, its rule applied in the backpropagator (`_adjoint_of`), as
                # in a loop's region: no J graph and backpropagator closure per call for
                # the optimizer to inline, which took most of its time on long programs
                require_gradient_rule(node.fn.value, node.location)
                self.nodes[node] = gj.apply(node.fn, *(self.value(a) for a in node.args),
                                            name=node.debug.name, location=node.location)
                bprops[node] = node.fn.value
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

    def backpropagator(self, g: Graph, gj: Graph, bprops: dict, tail: Apply | None = None,
                       parent: Graph | None = None, taken: int | None = None) -> Graph:
        """The backpropagator of g; with `tail` (g's output, a call continuing a loop), the
        adjoint of g up to that call: it takes what the call's backpropagator would return,
        `(d callee, d args...)`, instead of the sensitivity of g's output.  With `taken`,
        the branch (0: then, 1: else) that tail, a call of a switch, takes on the path this
        adjoint is for: the switch's adjoint hands the sensitivity to it without reading
        the condition."""
        bg = Graph(f"bprop_{g.name}", parent or gj, g.location)
        dout = bg.add_parameter("dout" if tail is None else "dtail")
        sens: dict[Node, Node] = {}

        def add(node: Node, contribution: Node):
            if isinstance(node, Constant) and not (is_graph_constant(node)
                                                   and free_variables(node.value)):
                return  # constants have no gradient
            sens[node] = contribution if node not in sens else \
                bg.apply(P["gadd"], sens[node], contribution)

        if tail is None:
            add(g.output, dout)
        else:
            for i, inp in enumerate(tail.inputs):
                add(inp, bg.apply(P["getitem"], dout, i))
        for node in reversed(toposort(g)):
            if node not in sens or node is tail:
                continue
            if isinstance(node, Apply) and node.graph is g:
                if isinstance(bprops[node], Primitive) \
                        and plain_operator(bprops[node].name) in NON_DIFFERENTIABLE:
                    continue    # zeros add nothing; the operands need not be kept for them
                # What `depend` waits for is only evaluated: no gradient flows into it (its
                # rule's zero would run the effect's backward, which can raise or give nan).
                waited = 2 if primitive_name(node) == "depend" else None
                res = self._adjoint_of(bg, node, bprops[node], sens[node], waited,
                                       taken if tail is not None and node is tail.fn else None)
                for i, inp in enumerate(node.inputs):
                    if i != waited and res[i] is not None:
                        add(inp, res[i])
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

    # ------------------------------------------------------------------ loops (see the top)

    def loop(self, g: Graph, region: list[Graph]) -> Graph:
        """J(g) of a loop g: runs the forward loop from an empty stack, and returns the
        value with a backpropagator that runs the backward loop over the stack."""
        for h in region:
            self.loop_of[h] = g
        parent = self.graphs.get(g.parent, g.parent)
        entry = Graph(f"J_{g.name}", parent, g.location)
        entry.debug = g.debug.derive("grad of")
        entry.debug.name = f"J_{g.name}"
        self.entries[g] = entry
        params = [entry.add_parameter(p.debug.name, p.location) for p in g.parameters]
        if _tree(g, region):
            self.kinds[g] = [h for h in region if tail_calls(h) == [g]]
        n = len(_stack_names(self.kinds.get(g, [g])))
        forward = self.segment(g, entry)
        res = entry.apply(Constant(forward), *params, *[EMPTY_STACK] * n, location=g.location)
        value = entry.apply(P["getitem"], res, 0, name=g.name)
        bg = Graph(f"bprop_{g.name}", entry, g.location)
        dout = bg.add_parameter("dout")
        last = bg.apply(entry.apply(P["getitem"], res, 1), dout)
        stacks = [entry.apply(P["getitem"], res, 2 + i, name="stack") for i in range(n)]
        backward, step = self.backward_loop(g, bg, n)
        if g in self.kinds:
            self.records[g] = tag_dispatch(step, backward, len(self.kinds[g]))
            self.invariant[g] = _invariants(g, region)
        else:
            _pop_and_apply(step, backward)
        bg.output = _next_backward(bg, backward, stacks, last)
        entry.output = entry.apply(P["make_tuple"], value, Constant(bg), location=g.location)
        return entry

    def segment(self, h: Graph, parent: Graph | None = None) -> Graph:
        """The forward graph of a graph h of a loop's region: h's parameters, then (except
        for the loop itself, and where records are residuals) `cont`, the adjoint from this
        point of the iteration back to its start, then the stack; where records are
        residuals, `record_segment` of h's caller adds the parameters that bring them."""
        loop = self.loop_of[h]
        if parent is None:
            parent = self.graphs[h.parent]
        hj = Graph(f"J_{h.name}" if h is not loop else f"J_{h.name}_forward", parent,
                   h.location)
        hj.debug = h.debug.derive("grad of")
        hj.debug.name = hj.name
        self.graphs[h] = hj
        for p in h.parameters:
            self.nodes[p] = hj.add_parameter(p.debug.name, p.location)
        cont = None if h is loop or loop in self.kinds else hj.add_parameter("cont")
        self.extra[h] = (cont, [hj.add_parameter(name)
                                for name in _stack_names(self.kinds.get(loop, [loop]))])
        self.pending.append(h)
        return hj

    def segment_body(self, h: Graph) -> None:
        loop = self.loop_of[h]
        hj = self.graphs[h]
        cont, stacks = self.extra[h]
        out = h.output
        tail = out if _continues(h, loop, self.loop_of) else None
        bprops: dict[Node, Node] = {}
        for node in toposort(h):
            if not (isinstance(node, Apply) and node.graph is h) or node is tail:
                continue
            args = [self.value(a) for a in node.args]
            if primitive_name(node) == "switch":
                # picking a branch, written as such: the forward loop keeps the shape of a
                # loop (for codegen, and for the J transform of this J), and the adjoint
                # hands the sensitivity to the branch taken (`_switch_adjoint`)
                self.nodes[node] = hj.apply(P["switch"], *args, location=node.location)
                bprops[node] = None
                continue
            if isinstance(node.fn, Constant) and isinstance(node.fn.value, Primitive):
                # applied here, its rule applied in the adjoint: the adjoint reads the
                # operands, not a backpropagator closure made at each iteration
                require_gradient_rule(node.fn.value, node.location)
                self.nodes[node] = hj.apply(node.fn, *args, name=node.debug.name,
                                            location=node.location)
                bprops[node] = node.fn.value
                continue
            fn = self.value(node.fn, arity=len(node.args), where=node)
            pair = hj.apply(fn, *args, location=node.location)
            self.nodes[node] = hj.apply(P["getitem"], pair, 0, name=node.debug.name,
                                        location=node.location)
            bprops[node] = hj.apply(P["getitem"], pair, 1, location=node.location)
        if tail is None and primitive_name(out) == "raise_":
            hj.output = self.value(out)
            return
        if loop in self.kinds:
            return self.record_segment(h, hj, bprops, tail, stacks)
        stack, = stacks
        adjoint = Constant(self.backpropagator(h, hj, bprops, tail))
        if cont is not None:
            adjoint = Constant(_compose(hj, cont, adjoint, h))
        if tail is None:    # the loop exits here
            hj.output = hj.apply(P["make_tuple"], self.value(out), adjoint, stack,
                                 location=h.location)
            return
        args = [self.value(a) for a in tail.args]
        if is_graph_constant(tail.fn) and tail.fn.value is loop:   # the next iteration
            pushed = hj.apply(P["stack_push"], stack, adjoint)
            hj.output = hj.apply(Constant(self.graphs[loop]), *args, pushed,
                                 location=tail.location)
        else:
            fn = self.value(tail.fn, arity=len(tail.args), where=tail)
            hj.output = hj.apply(fn, *args, adjoint, stack, location=tail.location)

    def record_segment(self, h: Graph, hj: Graph, bprops: dict, tail: Apply | None,
                       stacks: list[Node]) -> None:
        """The end of h's forward graph where the loop's stacks hold residuals: h's adjoint
        is a graph of the loop's J with the values it reads as parameters (lifted out of
        the forward loop), passed on as residuals to the rest of the iteration, pushed as
        one tuple where the next iteration starts: onto the stack of h's path, whose
        number goes onto the stack of tags, where the iteration has several."""
        loop = self.loop_of[h]
        chain, inherited = self.chain.get(h, []), self.residuals.get(h, [])
        if tail is None:    # the loop exits here: one closure, made once
            bp = self.backpropagator(h, hj, bprops)
            adjoint = Graph(f"adjoint_{h.name}", hj, h.location)
            d = adjoint.apply(Constant(bp), adjoint.add_parameter("d"))
            adjoint.output = _apply_chain(adjoint, chain, inherited, d)
            hj.output = hj.apply(P["make_tuple"], self.value(h.output), Constant(adjoint),
                                 *stacks, location=h.location)
            return
        forward = self.graphs[loop]
        targets = tail_targets(tail)
        # the adjoint of each path through a switch knows the branch it took
        bps = [self.backpropagator(h, hj, bprops, tail, forward.parent,
                                   None if len(targets) == 1 else taken)
               for taken in range(len(targets))]
        # a parameter the loop never changes is read where the loop starts, not pushed
        params = self.entries[loop].parameters
        for bp in bps:
            _replace_inputs(bp, {self.nodes[n]: params[k]
                                 for n, k in self.invariant[loop].items() if n in self.nodes})
        own = _lift(bps, forward)
        values = inherited + own
        args = [self.value(a) for a in tail.args]
        if targets == [loop]:   # the next iteration
            chain = chain + [(bps[0], len(own))]
            kinds = self.kinds[loop]
            k = kinds.index(h)
            at = 0 if len(kinds) == 1 else 1 + k     # the stack of h's path
            pushed = list(stacks)
            if values or len(kinds) == 1:   # a path that reads nothing: its tag says all
                pushed[at] = hj.apply(P["stack_push"], stacks[at],
                                      hj.apply(P["make_tuple"], *values))
            if len(kinds) > 1:
                pushed[0] = hj.apply(P["stack_push"], stacks[0], k)
            hj.output = hj.apply(Constant(forward), *args, *pushed, location=tail.location)
            step = self.records[loop][k]
            n = len(pushed)
            rest = list(step.parameters[:n])
            items = []
            if pushed[at] is not stacks[at]:
                popped = step.apply(P["stack_pop"], step.parameters[at])
                record = step.apply(P["getitem"], popped, 0, name="record")
                items = [step.apply(P["getitem"], record, i) for i in range(len(values))]
                rest[at] = step.apply(P["getitem"], popped, 1)
            d = step.apply(P["make_tuple"], *step.parameters[n:])
            applied = _apply_chain(step, chain, items, d)
            step.output = _next_backward(step, self.backward[loop], rest, applied)
            return
        fn = self.value(tail.fn, arity=len(tail.args), where=tail)
        for t, bp in zip(targets, bps):
            self.chain[t] = chain + [(bp, len(own))]
            self.residuals[t] = [self.graphs[t].add_parameter(v.debug.name or "residual")
                                 for v in values]
        hj.output = hj.apply(fn, *args, *stacks, *values, location=tail.location)

    def _adjoint_of(self, bg: Graph, node: Apply, bprop, dout: Node, waited: int | None,
                    taken: int | None = None) -> list[Node | None]:
        """The items of what the backpropagator of `node` returns for `dout` (`(d fn, d
        args...)`; None at position `waited`, which is not read, and for the condition of a
        switch whose branch `taken` is known, which has no gradient): those of a call of its
        backpropagator, or for a switch, the same computed in place, and for a primitive,
        its rule's gradients themselves (no tuple to take apart: the backpropagator of a
        chain of calls stays small enough to inline down the chain, `passes.opt`)."""
        if isinstance(bprop, Primitive):
            return [Constant(NEWENV), *self._rule_adjoint(bg, node, bprop, dout)]
        if bprop is None:
            if taken is not None:   # the branch taken known: nothing read of c, a or b
                return [Constant(NEWENV), None] + [dout if i == taken else Constant(NEWENV)
                                                   for i in range(2)]
            res = self._switch_adjoint(bg, node, dout)
        else:
            res = bg.apply(bprop, dout, location=node.location)
        return [None if i == waited else bg.apply(P["getitem"], res, i, location=node.location)
                for i in range(len(node.inputs))]

    def _rule_adjoint(self, bg: Graph, node: Apply, bprop: Primitive, dout: Node) -> list:
        """The gradients of a primitive's operands, its rule applied to them in place."""
        # operands the rule does not read are not kept for it (nor pushed as residuals)
        reads = _rule_reads(bprop.name)
        xs = [self.value(a) if reads is None or i in reads else Constant(None)
              for i, a in enumerate(node.args)]
        out = self.nodes[node] if reads is None or len(xs) in reads else Constant(None)
        mark = id_mark()
        grads = _rule_gradients(bprop, bg, xs, out, dout, constant_operand(node), self.rule)
        _locate(grads, mark, node.location)
        return grads

    def _switch_adjoint(self, bg: Graph, node: Apply, dout: Node) -> Node:
        """What the backpropagator of `switch(c, a, b)` returns: dout for the branch taken,
        zeros for the other (the empty env, for a function)."""
        c, a, b = (self.value(x) for x in node.args)
        zeros = [Constant(NEWENV) if is_graph_constant(x) else bg.apply(P["grad_zeros"], x)
                 for x in (a, b)]
        return bg.apply(P["make_tuple"], NEWENV, bg.apply(P["grad_zeros"], c),
                        bg.apply(P["switch"], c, dout, zeros[0]),
                        bg.apply(P["switch"], c, zeros[1], dout))

    def backward_loop(self, g: Graph, parent: Graph, n: int) -> tuple[Graph, Graph]:
        """`R(stacks..., d...)` (n stacks, the first of which has an item per iteration):
        while the stacks are not empty, pop an iteration's record and apply its adjoint to
        d, the sensitivities `(env, d params...)` of the loop's parameters; then the tuple
        d.  d's items are R's parameters, so that no tuple is made per iteration once the
        adjoints are inlined.  Returns R and its loop body, whose output is left to fill:
        with `_pop_and_apply` where the records are adjoints, by `tag_dispatch` and
        `record_segment` where they are residuals."""
        width = 1 + len(g.parameters)
        names = _stack_names(self.kinds.get(g, [g]))
        r = Graph(f"{g.name}_backward", parent, g.location)
        self.backward[g] = r
        stacks = [r.add_parameter(name) for name in names]
        d = _sensitivities(r, width)
        done = Graph(f"{g.name}_backward_exit", r, g.location)
        for name in names:
            done.add_parameter(name)
        done.output = done.apply(P["make_tuple"], *_sensitivities(done, width))
        step = Graph(f"{g.name}_backward_body", r, g.location)
        for name in names:
            step.add_parameter(name)
        _sensitivities(step, width)
        branch = r.apply(P["switch"], r.apply(P["stack_empty"], stacks[0]), Constant(done),
                         Constant(step))
        r.output = r.apply(branch, *stacks, *d)
        return r, step


def _locate(made: list[Node], mark: int, location) -> None:
    """The nodes `made` depend on that were made since `mark` take `location` where they
    have none or one in the gradient rules' file: a rule applied for an operation of the
    user's reports the user's line, as it does inlined from a J graph (passes.opt's
    `RULE_FILES`), and its call, so located, relocates the rule's body when inlined."""
    stack, seen = list(made), set()
    while stack:
        n = stack.pop()
        if not isinstance(n, Apply) or n.debug.id <= mark or id(n) in seen:
            continue
        seen.add(id(n))
        if n.debug.location is None or n.debug.location.filename == grad_rules.__file__:
            n.debug.location = location
        stack.extend(n.inputs)


def _sensitivities(g: Graph, width: int) -> list[Node]:
    return [g.add_parameter("d_env" if i == 0 else "d") for i in range(width)]


def _next_backward(g: Graph, backward: Graph, stacks: list[Node], d: Node) -> Apply:
    """In g, the call of the backward loop with the stacks and the items of the tuple d."""
    width = len(backward.parameters) - len(stacks)
    return g.apply(Constant(backward), *stacks,
                   *(g.apply(P["getitem"], d, i) for i in range(width)))


def _stack_names(kinds: list) -> list[str]:
    """The stacks a loop's gradient keeps for records of these kinds (the paths through an
    iteration): one, or the stack of tags (which path each iteration took) and one per
    kind, each holding records of one shape."""
    if len(kinds) == 1:
        return ["stack"]
    return ["tags"] + [f"stack_{k}" for k in range(len(kinds))]


@functools.cache
def _rule_reads(name: str) -> frozenset | None:
    """The positions of the parameters `(inputs..., out, dout)` that the gradient rule of
    primitive `name` reads; None where the rule is built here (any may be read)."""
    rule = gradient_rule(name) if name not in VARIADIC_RULES else None
    if rule is None:
        return None
    read = users(rule)
    return frozenset(i for i, p in enumerate(rule.parameters) if read.get(p))


def _pop_and_apply(step: Graph, backward: Graph) -> None:
    s, *d = step.parameters
    popped = step.apply(P["stack_pop"], s)
    adjoint = step.apply(P["getitem"], popped, 0, name="adjoint")
    rest = step.apply(P["getitem"], popped, 1, name="stack")
    applied = step.apply(adjoint, step.apply(P["make_tuple"], *d))
    step.output = _next_backward(step, backward, [rest], applied)


def _apply_chain(g: Graph, chain: list, residuals: list, d: Node) -> Node:
    """In g, the lifted adjoints of `chain` (pairs: graph, number of residuals it takes)
    applied to d from the last to the first, each with its residuals."""
    offsets = [0]
    for _, n in chain:
        offsets.append(offsets[-1] + n)
    for (adjoint, n), start in reversed(list(zip(chain, offsets))):
        d = g.apply(Constant(adjoint), d, *residuals[start:start + n])
    return d


def _invariants(g: Graph, region: list[Graph]) -> dict[Node, int]:
    """The nodes of loop g's region that are g's parameter k at every iteration, for each k
    that every call starting the next iteration passes on unchanged: {node: k}.  They are
    g's parameters and the parameters of the region's graphs that take them."""
    of = {p: k for k, p in enumerate(g.parameters)}
    changed = True
    while changed:   # a region's graphs are few: passing names along to a fixed point
        changed = False
        for h in region:
            for t in tail_calls(h):
                if t is g:
                    continue
                for p, a in zip(t.parameters, h.output.args):
                    if a in of and p not in of:
                        of[p] = of[a]
                        changed = True
    kept = set(range(len(g.parameters)))
    for h in region:
        if tail_calls(h) == [g]:
            kept &= {k for k, a in enumerate(h.output.args) if of.get(a) == k}
    return {n: k for n, k in of.items() if k in kept}


def _replace_inputs(bg: Graph, mapping: dict[Node, Node]) -> None:
    """Make bg's own nodes read mapping[x] where they read x."""
    if not mapping:
        return
    for node in toposort(bg):
        if isinstance(node, Apply) and node.graph is bg:
            node.set_inputs([mapping.get(x, x) for x in node.inputs])
    bump_version()


def _lift(bgs: list[Graph], forward: Graph) -> list[Node]:
    """Make the graphs bgs read the nodes of the forward loop they use (the residuals) as
    parameters instead, each a parameter for every residual of any of them; returns the
    residuals.  bgs are nested outside the forward loop (built so), and nothing nested in
    them reads these: what a backpropagator builds calls its closures, rules and
    primitives, and nests no graph."""
    residuals: dict[Node, None] = {}
    orders = [[n for n in toposort(bg) if isinstance(n, Apply) and n.graph is bg]
              for bg in bgs]
    for bg, order in zip(bgs, orders):
        for node in order:
            for x in node.inputs:
                if x.graph is not None and x.graph is not bg \
                        and is_nested_in(x.graph, forward):
                    residuals.setdefault(x)
    for bg, order in zip(bgs, orders):
        mapping = {x: bg.add_parameter(x.debug.name) for x in residuals}
        for node in order:
            node.set_inputs([mapping.get(x, x) for x in node.inputs])
    bump_version()
    return list(residuals)


def _tree(g: Graph, region: list[Graph]) -> bool:
    """Whether the paths of one iteration of loop g through its region form a tree: each
    graph but g has one caller.  Then the records pushed at the end of one path all have
    the same residuals, and the backward loop applies the same adjoints to them.  A graph
    has one use and one graph tail-calling it: a switch made once and called by two graphs
    (the code after an `if`, split into a copy per branch, calling the choice of a later
    `if` made before it) has two callers."""
    uses = graph_uses(g)
    callers = Counter(t for h in region for t in tail_calls(h))
    return all(len(uses.get(h, ())) == 1 and callers[h] == 1 for h in region[1:])


def _compose(gj: Graph, cont: Node, adjoint: Constant, h: Graph) -> Graph:
    """`lambda d: cont(adjoint(d))`, nested in gj."""
    c = Graph(f"adjoint_{h.name}", gj, h.location)
    d = c.add_parameter("d")
    c.output = c.apply(cont, c.apply(adjoint, d))
    return c


def _continues(h: Graph, loop: Graph, loop_of: dict) -> bool:
    targets = tail_calls(h)
    return bool(targets) and all(loop_of.get(t) is loop for t in targets)


def loop_region(g: Graph) -> list[Graph] | None:
    """The graphs of one iteration of a loop g, g first, if g is one: a graph that calls
    itself only in tail position, through graphs it tail-calls (an `if`'s branches, the code
    after it) that nothing else uses.  None otherwise (recursion that is not a loop)."""
    region, i = [g], 0
    calls_itself = False
    while i < len(region):
        targets = tail_calls(region[i])
        inside = [t for t in targets if t is g or is_nested_in(t, g)]
        if inside and len(inside) != len(targets):
            return None   # a switch between a graph of the iteration and another
        for t in inside:
            if t is g:
                calls_itself = True
                if len(targets) > 1:
                    return None   # a branch that is the loop itself: not the parsed shape
            elif t not in region:
                region.append(t)
        i += 1
    if not calls_itself:
        return None   # not a loop
    tails = {h.output for h in region}
    switches = {h.output.fn for h in region if switch_call(h.output) is not None}
    uses = graph_uses(g)
    for h in region:
        for user, index in uses.get(h, ()):
            if not ((index == 0 and user in tails) or (index in (2, 3) and user in switches)):
                return None   # used otherwise: as a value, or called not in tail position
    return region


# The most paths through one iteration (and out of the loop) that a loop's gradient records
# as kinds of records (`loop_tree`), and the most operations that copying the code after
# `if`s adds to one iteration, as a multiple of the iteration's own and a number: each
# `if` that joins again doubles the paths, and the code after it is copied for each (the
# gradient, its compile time, and those of higher derivatives grow with them), so that
# past these the records stay backpropagator closures.
PATH_CAP = 8
GROWTH = (2, 16)


def loop_tree(g: Graph) -> tuple[Graph, list[Graph]] | None:
    """A copy of loop g, with its region, where one iteration's paths form a tree: an `if`
    inside a graph of the region whose value the rest of the graph reads (`r = a if c else
    b`, written as statements) becomes one whose branches tail-call that rest
    (`_split_at`), and a graph of the region with several callers (the code after an `if`
    that joins, the rest just split off) is copied for each (`_duplicate`).  Each graph of
    the copy's region then has one caller, each path from the loop's head ends at its own
    graph, and the record of a path holds the values its graphs' adjoints read.  None where
    the copy would have more than `PATH_CAP` paths (a loop's exits count), or grow past
    `GROWTH`."""
    copy = clone(g)
    most = GROWTH[0] * _size(loop_region(g)) + GROWTH[1]
    while True:
        region = loop_region(copy)
        if region is None or _size(region) > most or sum(
                not [t for t in tail_calls(h) if t in region and t is not copy]
                for h in region) > PATH_CAP:
            return None
        if not (any(_split_at(h, region) for h in region) or _duplicate(copy, region)):
            return copy, region


def _size(region: list[Graph]) -> int:
    """The number of operations of the graphs of a loop's region."""
    return sum(1 for h in region for n in toposort(h) if isinstance(n, Apply) and n.graph is h)


def _value_ifs(h: Graph, region: list[Graph]) -> list[Apply]:
    """The calls `switch(c, a, b)(...)` in h, not its output, whose branches are graphs
    nested in h that nothing else uses and that are not the region's."""
    uses = graph_uses(h)
    found = []
    for node in toposort(h):
        sc = switch_call(node) if isinstance(node, Apply) and node.graph is h else None
        if sc is None or node is h.output or sc.then is sc.else_:
            continue
        if all(b.parent is h and b not in region and len(uses.get(b, ())) == 1
               for b in (sc.then, sc.else_)):
            found.append(node)
    return found


def _split_at(h: Graph, region: list[Graph]) -> bool:
    """Split h at its first `if` whose value it reads: the rest of h becomes a graph nested
    in h taking that value, which the two branches tail-call (a copy each) instead of
    returning their value.  The rest is what reads the value, and what comes after the
    `if` and has an effect or may raise, so that effects and exceptions keep their order,
    and the operations without effects that only the rest reads (the choice of a later
    `if`'s branch, so that its branches are nested in the rest); the other operations stay
    in h, computed before the `if` as they were or, if they came after it, with no effect
    to be seen."""
    for call in _value_ifs(h, region):
        order = [n for n in toposort(h) if isinstance(n, Apply) and n.graph is h]
        at = order.index(call)
        moved = {call}
        for n in order[at + 1:]:
            if not _pure(n) or any(i in moved or (is_graph_constant(i) and any(
                    fv in moved for fv in free_variables(i.value))) for i in n.inputs):
                moved.add(n)
        if h.output not in moved:
            continue
        uses = users(h)
        for n in reversed(order):
            if n not in moved and n not in call.inputs and _pure(n) \
                    and all(u in moved for u, _ in uses[n]):
                moved.add(n)
        rest = Graph("if_after", None, call.location)
        value = rest.add_parameter(call.debug.name, call.location)
        mapping: dict = {n: n for n in order if n not in moved}
        mapping.update({p: p for p in h.parameters})
        mapping[call] = value
        cloner = Cloner(mapping)
        cloner.graph(h, into=rest)
        rest.output = cloner.node(h.output)
        rest.parent = h
        sc = switch_call(call)
        for branch, after in ((sc.then, rest), (sc.else_, clone(rest))):
            branch.output = branch.apply(Constant(after), branch.output,
                                         location=call.location)
        h.output = call
        bump_version()
        return True
    return False


def _pure(node: Apply) -> bool:
    """Whether node is an operation with no effect that cannot raise (not a call of a
    graph, which may)."""
    name = primitive_name(node)
    return name is not None and name not in EFFECTS and not may_raise(name)


def _duplicate(g: Graph, region: list[Graph]) -> bool:
    """Give each graph of loop g's region after the first, used by several graphs of it, a
    copy of its own for every use but the first; whether any was."""
    uses = graph_uses(g)
    done = False
    for h in region[1:]:
        for user, index in uses.get(h, ())[1:]:
            inputs = list(user.inputs)
            inputs[index] = Constant(clone(h))
            user.set_inputs(inputs)
            done = True
    if done:
        bump_version()
    return done


def check_rule_arity(g: Graph, rule: Graph) -> None:
    """A gradient rule of the user's returns one sensitivity per input of g: a located error
    where its `return` says otherwise."""
    n, out = len(g.parameters), rule.output
    if primitive_name(out) == "make_tuple" and len(out.args) != n:
        raise MyirError(f"the gradient rule {rule.name}() of {g.name}() returns "
                        f"{len(out.args)} sensitivit{'y' if len(out.args) == 1 else 'ies'}; "
                        f"{g.name}() has {n} input{'s' * (n != 1)}",
                        out.location or rule.location,
                        hint=f"return a tuple of {n}: the sensitivity of each of "
                             f"{', '.join(p.debug.name for p in g.parameters)}, in order "
                             "(e.g. `return (dx,)` for one input)")


def wrt_positions(g: Graph, wrt: tuple, location=None) -> list[int]:
    """The positions of g's parameters named by `wrt` (names or positions; the first
    parameter when empty), as grad and the Jacobians take them."""
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
    return positions


def _check_no_parameter_called(g: Graph, positions: list[int]) -> None:
    """A located error where g calls one of its parameters (in its body, or in a branch or
    loop it passes the parameter to): the gradient passes its arguments as they are, and
    J of g would call J of that function, which a function made outside has not.  (A
    function known when compiling, passed where `grad(f)` is called inside compiled code,
    or f's default, was put in place of its parameter: passes/expand.py.)"""
    uses = users(g)
    pending = [(p, p.debug.name) for i, p in enumerate(g.parameters) if i not in positions]
    seen = set()
    while pending:
        node, name = pending.pop()
        if node in seen:
            continue
        seen.add(node)
        for user, i in uses.get(node, ()):
            if i == 0:
                raise MyirError(
                    f"cannot differentiate {g.name}(), which calls its parameter `{name}`, "
                    "with the function passed to it from outside compiled code",
                    user.location or g.location,
                    hint=f"call the gradient inside compiled code with the function by name "
                         f"(`grad({g.name})(..., {name}=np.tanh)`), or differentiate a "
                         f"function that calls {g.name}() with it")
            if not isinstance(user, Apply):
                continue
            callees = [user.inputs[0]]
            if primitive_name(user.inputs[0]) == "switch":   # a branch taken: either graph
                callees = user.inputs[0].inputs[2:]
            for callee in callees:
                if is_graph_constant(callee) and i - 1 < len(callee.value.parameters):
                    pending.append((callee.value.parameters[i - 1], name))


def grad_graph(g: Graph, wrt: tuple, with_value: bool, location=None) -> Graph:
    """A graph computing the gradient of g's scalar output with respect to the parameters
    `wrt` (names or positions): one gradient, or a tuple of them; with `with_value`, the pair
    (value, gradients).  Nested in g's parent, so it closes over what g closes over."""
    names = [p.debug.name for p in g.parameters]
    positions = wrt_positions(g, wrt, location)
    _check_no_parameter_called(g, positions)
    kind = "value_and_grad" if with_value else "grad"
    gg = Graph(f"{kind}_{g.name}", g.parent, location or g.location)
    params = [gg.add_parameter(n, g.location) for n in names]
    gg.defaults = dict(g.defaults)
    args = [gg.apply(P["grad_check_input"], p, p.debug.name) if i in positions else p
            for i, p in enumerate(params)]
    pair = gg.apply(Constant(JTransform(location or g.location).transform(g)), *args,
                    location=location)
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

