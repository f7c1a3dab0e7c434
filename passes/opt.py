"""The optimizer: inlining and local simplification until gradients look hand-written.

A rewrite is a function `(node, ctx) -> replacement node or None`.  `optimize` runs every
rewrite of `REWRITES` over every apply node of the program, sweep after sweep, then the
graph-level passes of `PRUNES` (dead parameters and tuple elements; closures that a loop's
records, a loop's result or a parameter hold, of one graph wherever made, turned into the
values they read and rebuilt where called: a nested loop's gradient, passes/ad.py), until
nothing changes.
Within a sweep, replacements are recorded in a substitution map and applied to later nodes'
inputs as they are visited (inputs come before users), so no sweep pays for a global use-def
update per rewrite.  `optimize_typed` adds the rewrites of `TYPED_REWRITES`, which need the
types and shapes that `passes.infer` finds for one argument signature.

Rewrites keep floating-point results bit for bit: no reassociation, no `x * 0 -> 0` (NaN and
inf would change), no `x + 0.0 -> x` (-0.0 + 0.0 is 0.0); each rewrite's docstring says why
it is exact.  The one exception is documented where it is made: `gadd` with the AD's zeros
may turn a -0.0 gradient into +0.0.  Dead code goes (as the frontend already drops unused
assignments), but never an effect: `raise_`, the checks (`check_bound`, `grad_check_input`,
`grad_seed`) and what `depend` waits for, nor a call of a graph (which may raise), are only
dropped with the code that reads them when something else still evaluates them.  What
`depend` waits for because it can raise (`passes.raising`) narrows, once types are known,
to the operations that can.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import operator
from collections import deque

import numpy as np

from myir.ir.analysis import OUTPUT, bump_version, callees, free_variables, graph_uses, \
    is_nested_in, primitive_name, reachable_graphs, recursive_graphs, scope, scope_size, \
    switch_call, tail_calls, tail_targets, toposort, users
from myir.ir.edit import Cloner, GraphMoved, clone_program, inline, move_inline, replace
from myir.ir.graph import Apply, Constant, Graph, Node, Parameter, id_mark, is_graph_constant
from myir.ir.primitives import PRIMITIVES, UNBOUND, Primitive, plain_operator
from myir.ir.values import EMPTY_STACK, NEWENV, Env
from myir.tree import is_namedtuple
from passes.abstract import (ANY, BOTTOM, AArray, ADict, AEnv, AFunction, AList, ANone, AObject,
                             ARecord, AScalar, AStack, ATuple, AUnion, abstract_of, containers,
                             holds_stack, join, options, with_items)
from passes import grad_rules
from passes.defunctionalise import defunctionalise
from passes.raising import READS_ONLY, evaluates, may_raise
from passes.vectorize import vectorized_may_raise
from passes.type_rules import TYPE_RULES, RuleError

P = PRIMITIVES
INLINE_SIZE = 24      # graphs with at most this many applies are inlined wherever called
CLOSURE_INLINE_SIZE = 100  # and those returning a closure, with at most this many
MAX_SWEEPS = 40

# Primitives whose evaluation is an effect (or a check that raises): never dropped unless
# something else still evaluates them.
EFFECTS = frozenset({"raise_", "check_bound", "grad_check_input", "grad_seed", "depend",
                     "jvp_check_tangent",
                     "print_"})

# Primitives whose result is a float, a complex or an array of them, or which raise: the
# operand of `neg(neg(x))` needs no types when it comes from one of these.
FLOAT_RESULTS = frozenset("""
    truediv exp log log1p expm1 sqrt sin cos tan arcsin arccos arctan sinh cosh tanh
    reciprocal arctan2 math_exp math_log math_log1p math_expm1 math_sqrt math_sin math_cos
    math_tan math_asin math_acos math_atan math_sinh math_cosh math_tanh math_fabs math_pow
    math_atan2 math_hypot to_float
""".split())


def _const(node: Node, cls=object) -> bool:
    return isinstance(node, Constant) and isinstance(node.value, cls)


def _real(node: Node) -> bool:
    """A constant real number (a Python or numpy int or float; True is not 1 here)."""
    return _const(node, (int, float, np.integer, np.floating)) and not isinstance(node.value, bool)


def _same_constant(a: Node, b: Node) -> bool:
    """Two constants that hold the same value: the same object, or scalars of one type with
    one repr (0.0 and -0.0 differ)."""
    if not (isinstance(a, Constant) and isinstance(b, Constant)):
        return False
    if a.value is b.value:
        return True
    return type(a.value) is type(b.value) and type(a.value) in (int, float, bool, str) \
        and repr(a.value) == repr(b.value)


def effect_free(node: Node, known: set | None = None, raises=None) -> bool:
    """Whether dropping `node` drops no effect: nothing it computes in its graph is an effect
    primitive or a call of something other than a primitive (a graph may raise), nor an
    operation that `raises(apply)` says may raise, where that test is given.  `known`:
    nodes found effect free before, not walked again; a walk that finds no effect adds the
    nodes it met (a caller asking about many values of one program, which share most of
    what they compute, walks each node once)."""
    known = set() if known is None else known
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n in seen or n in known or not isinstance(n, Apply):
            continue
        seen.add(n)
        name = primitive_name(n)
        if name is None or name in EFFECTS or (raises is not None and raises(n)):
            return False
        stack.extend(i for i in n.args if i.graph is n.graph)
    known.update(seen)
    return True


def raising(types: dict | None):
    """The test of `effect_free(..., raises=)` for the values a program computes and then
    passes on or returns: the operations that can raise (`passes.raising`; on values of
    their operands' types, where `types` are known).  The frontend keeps a computation
    that can raise although its value is unused (`depend`), but not one whose value is
    passed to a loop's next iteration or returned in a tuple: dropping such a value where
    nothing reads it must not drop the ZeroDivisionError that computing it raises."""
    def kind(a: Node):
        t = types.get(a)
        if t is None and isinstance(a, Constant) and type(a.value) in (bool, int, float):
            t = abstract_of(a.value)    # a number a rewrite made (an index renumbered)
        return t

    def test(n: Apply) -> bool:
        name = primitive_name(n)
        if types is None or name == "vectorize_call":
            return may_raise(name) or name == "vectorize_call"
        return may_raise(name, [kind(a) for a in n.args], types.get(n))
    return test


# ------------------------------------------------------------------ local rewrites

def getitem_of_tuple(node: Apply, ctx) -> Node | None:
    """getitem(make_tuple(a, b, ...), i) -> the i-th element.  An unnamed element takes the
    getitem's name: the AD reads each value of the program as an item of a primitive's J
    graph's result, named as the program's variable, so that once the J graph is inlined
    the computation carries the variable's name (error messages name it)."""
    if primitive_name(node) == "getitem" and primitive_name(node.args[0]) == "make_tuple" \
            and _const(node.args[1], int) and not isinstance(node.args[1].value, bool):
        elements = node.args[0].args
        i = node.args[1].value
        if -len(elements) <= i < len(elements):
            element = elements[i]
            if isinstance(element, Apply) and element.debug.name is None:
                element.debug.name = node.debug.name
            return element
    return None


def unpack_of_tuple(node: Apply, ctx) -> Node | None:
    """unpack(make_tuple(a, b), 2) -> make_tuple(a, b): the length is right by construction."""
    if primitive_name(node) == "unpack" and primitive_name(node.args[0]) == "make_tuple" \
            and _const(node.args[1], int) and len(node.args[0].args) == node.args[1].value:
        return node.args[0]
    return None


def depend_satisfied(node: Apply, ctx) -> Node | None:
    """depend(x, e) -> x when computing x evaluates e anyway, or e is a constant or a
    parameter of an enclosing graph (evaluating them does nothing; a parameter of x's own
    graph stands for an argument that inlining puts in its place, as in the gradient
    rule of `depend` itself); depend(x, depend(a, b)) waits for a and b
    one by one.  Otherwise x must surely evaluate e (`passes.raising.evaluates`), whether
    e is an effect (a check, a print) or an operation that can raise: e only carried in a
    tuple or passed to a graph may be dropped by later rewrites (grad's seed, which
    checks the output's type, passed to a backpropagator that ignores it for a string)."""
    if primitive_name(node) != "depend":
        return None
    x, effect = node.args
    if isinstance(effect, Constant) or (isinstance(effect, Parameter)
                                        and effect.graph is not node.graph):
        return x
    if primitive_name(effect) == "depend" and effect.graph is node.graph:
        inner = node.graph.apply(P["depend"], x, effect.args[0], location=node.location)
        ctx.replaced(node, inner)
        return node.graph.apply(P["depend"], inner, effect.args[1], location=node.location)
    return x if evaluates(x, effect) else None


def env_get_after_set(node: Apply, ctx) -> Node | None:
    """env_getitem(env_setitem(e, k, v), k, d) -> v; with another key, look in e; in an
    empty env, the default."""
    if primitive_name(node) != "env_getitem":
        return None
    env, key, default = node.args
    if _const(env, Env) and not env.value.items:
        return default
    if not _const(key):
        return None
    # down the chain of sets of other keys at once: a step at a time, an env of m keys
    # read m times made m * m nodes (a loop's gradient, whose env holds its captures)
    inner = env
    while primitive_name(inner) == "env_setitem" and _const(inner.args[1]):
        if inner.args[1].value is key.value:
            return inner.args[2]
        inner = inner.args[0]
    if inner is env:
        return None
    if _const(inner, Env) and not inner.value.items:
        return default
    return node.graph.apply(P["env_getitem"], inner, key, default, location=node.location)


def gadd_zero(node: Apply, ctx) -> Node | None:
    """gadd(x, zeros) -> x and gadd(zeros, x) -> x, for the zeros the AD makes (grad_zeros,
    empty envs, the empty stack): adding them changes nothing (not even -0.0: AD zeros are +0.0 and
    x + 0.0 == x except for x = -0.0, where gradients' signs carry no meaning)."""
    if primitive_name(node) != "gadd":
        return None
    x, y = node.args
    if _is_zero(y) or _zero_of_type(y, x, node, ctx):
        return x
    if _is_zero(x) or _zero_of_type(x, y, node, ctx):
        return y
    return None


def _zero_of_type(zero: Node, other: Node, node: Apply, ctx) -> bool:
    """Whether `zero` is the number 0 (an AD zero inference folded: `grad_zeros` of a
    float) and `other` has gadd's type, so that the sum is `other` as it is."""
    if not (isinstance(zero, Constant) and type(zero.value) in (int, float)
            and zero.value == 0):
        return False
    t = ctx.type_of(node)
    return isinstance(t, AScalar) and ctx.type_of(other) == t


def _is_zero(node: Node) -> bool:
    return primitive_name(node) == "grad_zeros" or (_const(node, Env) and not node.value.items) \
        or (isinstance(node, Constant) and node.value is EMPTY_STACK)


# ------------------------------------------------------------------ gradients of containers
# A container's gradient is a container of the same kind (grad_zeros, gadd and getitem_grad
# walk any myir.tree container: backends/python/impls.py).  Where the optimizer knows a
# container's items, the rewrites below do these operations item by item: the getitems of
# the result then fold, and the containers go (the gradient of `a, b = x * y, x + y; return
# a * b` is the hand-written one).  A container kind whose items are indexed by position is
# one entry here: the primitive building it from its items in order -> the abstract value
# that describes it with its items (`.items`); make_list and AList join the same way.
MADE_BY = {"make_tuple": ATuple}


def _made(node: Node) -> bool:
    return primitive_name(node) in MADE_BY


def _position(index: Node, n: int) -> int | None:
    """The position a constant int index names among n items (negative ones from the end)."""
    if _const(index, int) and type(index.value) is int and -n <= index.value < n:
        return index.value % n
    return None


def _apply_typed(ctx, graph: Graph, name: str, *args: Node, location=None) -> Apply:
    """name(*args) in graph, typed by its rule where ctx has types (a rewrite's
    intermediate nodes; the node a rewrite returns takes the type of the one it replaces)."""
    node = graph.apply(P[name], *args, location=location)
    if ctx.types is not None:
        types = [abstract_of(a.value) if isinstance(a, Constant) else ctx.type_of(a)
                 for a in node.args]
        if None not in types:
            try:
                ctx.types[node] = TYPE_RULES[name](*types)
            except RuleError:
                pass
    return node


def _placed(ctx, node: Apply, make: str, zeros_of: list, d: Node, at: range) -> Apply:
    """make(...) of grad_zeros(z) for each z of zeros_of, but at the positions `at`, which
    take d's items (d itself for one position given as an index: see callers)."""
    g, loc = node.graph, node.location
    items = [_apply_typed(ctx, g, "grad_zeros", z, location=loc) for z in zeros_of]
    for k, i in enumerate(at):
        items[i] = d[k] if isinstance(d, list) else d
    return g.apply(P[make], *items, location=loc)


def getitem_grad_of_made(node: Apply, ctx) -> Node | None:
    """getitem_grad(make(a, b, c), i, d) -> make(grad_zeros(a), d, grad_zeros(c)) for a
    constant position i (here 1) of a container built by its make primitive: what
    getitem_grad computes, zeros like each item but d at i."""
    if primitive_name(node) != "getitem_grad" or not _made(node.args[0]):
        return None
    x, index, d = node.args
    i = _position(index, len(x.args))
    if i is None:
        return None
    return _placed(ctx, node, primitive_name(x), list(x.args), d, range(i, i + 1))


def gadd_of_made(node: Apply, ctx) -> Node | None:
    """gadd(make(a1, a2), make(b1, b2)) -> make(gadd(a1, b1), gadd(a2, b2)) for two
    containers of one kind and length built by their make primitive: gadd adds containers
    item by item."""
    if primitive_name(node) != "gadd":
        return None
    x, y = node.args
    if not (_made(x) and primitive_name(y) == primitive_name(x) and len(x.args) == len(y.args)):
        return None
    g, loc = node.graph, node.location
    return g.apply(x.fn, *(_apply_typed(ctx, g, "gadd", a, b, location=loc)
                           for a, b in zip(x.args, y.args)), location=loc)


def switch_on_constant(node: Apply, ctx) -> Node | None:
    """switch(True, a, b) -> a; switch(0, a, b) -> b (the truth of a Python bool or int)."""
    if primitive_name(node) != "switch":
        return None
    cond, a, b = node.args
    if _const(cond, (bool, int)) and type(cond.value) in (bool, int):
        return a if cond.value else b
    return None


def switch_equal_branches(node: Apply, ctx) -> Node | None:
    """switch(c, a, a) -> a, also for two constants holding the same value, or two branch
    graphs that return the same thing (one node, equal constants, or their parameter at one
    position): either way the result is a's.  Not when computing c has an effect
    (`if check_bound(x): ...` must still raise for an unbound x)."""
    if primitive_name(node) != "switch":
        return None
    cond, a, b = node.args
    if _same_branch(a, b) and effect_free(cond):
        return a
    return None


def closure_eta(node: Apply, ctx) -> Node | None:
    """make_tuple(..., @g, ...) -> make_tuple(..., f, ...) where the closure g is
    `lambda *xs: f(*xs)` for a function value f of an enclosing graph (eta reduction).
    J makes such closures where a graph's backpropagator only forwards to the one of the
    call it ends with (`return h(x)`, a branch calling a function it does not inline);
    once reduced, the graph returns its callee's pair itself (`tuple_rebuilt`).  (A
    recursion's J graphs do without closures: `defunctionalise`.)
    f is a node of a graph enclosing g: computed wherever g is made (g captures it)."""
    if primitive_name(node) not in ("make_tuple", "switch"):
        return None
    inputs = [_eta_reduced(x) for x in node.inputs]
    if all(a is b for a, b in zip(inputs, node.inputs)):
        return None
    made = node.graph.apply(*inputs, location=node.location)
    made.debug.name = node.debug.name
    return made


def _eta_reduced(x: Node) -> Node:
    if not is_graph_constant(x) or x.value.parent is None or x.value.defaults:
        return x
    g = x.value
    out = g.output
    if not isinstance(out, Apply) or out.graph is not g or list(out.args) != g.parameters \
            or getattr(g, "custom_grad", None) is not None:
        return x
    f = out.fn
    if isinstance(f, Constant) or f.graph is None or is_nested_in(f.graph, g):
        return x
    return f


def _same_branch(a: Node, b: Node) -> bool:
    if a is b or _same_constant(a, b):
        return True
    if not (is_graph_constant(a) and is_graph_constant(b)):
        return False
    g, h = a.value, b.value
    x, y = g.output, h.output
    if len(g.parameters) != len(h.parameters) or isinstance(x, Apply) and x.graph is g:
        return False
    if x in g.parameters and y in h.parameters:
        return g.parameters.index(x) == h.parameters.index(y)
    return x is y or _same_constant(x, y)


def neg_neg(node: Apply, ctx) -> Node | None:
    """neg(neg(x)) -> x for numbers and arrays of non-bool numbers: negation flips the sign
    bit, twice gives x back (-0.0, inf and NaN included; integers wrap around the same way).
    Not for bools (-(-True) is 1) nor values that neg rejects (tuples): without types, only
    when x comes from an operation that gives floats (or raises itself)."""
    if primitive_name(node) != "neg" or primitive_name(node.args[0]) != "neg":
        return None
    x = node.args[0].args[0]
    if primitive_name(x) in FLOAT_RESULTS or (_const(x, float) and type(x.value) is float) \
            or is_number(ctx.type_of(x)):
        return x
    return None


_FOLDABLE = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "neg": operator.neg, "pos": operator.pos, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge, "eq": operator.eq, "ne": operator.ne,
    "not_": operator.not_, "truth": bool, "floordiv": operator.floordiv, "mod": operator.mod,
    "len": len, "math_sqrt": math.sqrt, "math_exp": math.exp, "math_log": math.log,
}


def constant_fold(node: Apply, ctx) -> Node | None:
    """A scalar primitive of number constants -> its value, exactly as the run would compute
    it: Python numbers with Python's operators, numpy scalars (np.float64(0.0) + 1.0, which
    gradients of numpy code make) with numpy's, which give the same value and type at run
    time.  Operations that raise, or that numpy would warn about (division by zero,
    overflow, invalid), are left to do so at run time."""
    fold = _FOLDABLE.get(primitive_name(node))
    if fold is None or not all(type(a) is Constant and _foldable(a.value) for a in node.args):
        return None
    try:
        with np.errstate(all="raise"):
            value = fold(*(a.value for a in node.args))
    except (ArithmeticError, ValueError, TypeError):
        return None
    if not _foldable(value) or type(value) is tuple \
            or (isinstance(value, (int, np.integer)) and abs(int(value)) > 2**62):
        return None
    return Constant(value, node.debug)


def _foldable(value) -> bool:
    return type(value) in (int, float, bool, tuple) \
        or (isinstance(value, np.generic) and value.dtype.kind in "biuf")


# Gradient rules are code in these files; inlined where the AD used them, they take the
# location of the operation they differentiate (tracebacks then name the user's line).
RULE_FILES = frozenset({grad_rules.__file__})


def call_inline(node: Apply, ctx) -> Node | None:
    """A call of a graph constant -> the graph's body (beta reduction), when the graph is
    small, called once, or returns a closure and is not large (a J graph's backpropagator:
    only inlining lets the closure and its tuple go; the bound keeps higher derivatives,
    where J graphs nest J graphs, from growing without end); never for recursive graphs
    (loops stay loops).  Calls
    made in this sweep (copies of inlined calls) do not count as the only call: the call
    they were copied from may remain.  The only call of a graph takes the graph's own body
    (`move_inline`) where the context allows moves: nothing is copied.  Only graphs of the
    program the sweep started with move (the optimizer's copy, or graphs inference made):
    a graph taken out of a constant may be shared."""
    if not is_graph_constant(node.fn):
        return None
    g = node.fn.value
    if g.moved_into is not None:
        raise GraphMoved(g)
    if ctx.is_recursive(g) or len(node.args) != len(g.parameters):
        return None
    if g.parent is not None and not is_nested_in(node.graph, g.parent):
        return None  # its free variables are not visible here
    once = ctx.calls.get(g, 0) == 1 and (node in ctx.present or node in ctx.sole)
    ctx.passing(node.args)
    if not once:    # (the size of a graph called once is not needed: finding it walks it)
        size = ctx.size(g)
        if not (size <= INLINE_SIZE or (size <= CLOSURE_INLINE_SIZE and _returns_closure(g))):
            return None
    if once and ctx.moves and g in ctx.graphs and g not in ctx.copied:
        return move_inline(g, list(node.args), node.graph, node, ctx.id_before(node),
                           RULE_FILES)
    ctx.copying(g)
    copies = {} if once else None
    out = inline(g, list(node.args), node.graph, at=node, after=ctx.id_before(node),
                 relocated=RULE_FILES, copies=copies)
    if once:
        ctx.take_over(copies)
    ctx.inherit_types(out)
    return out


def _returns_closure(g: Graph) -> bool:
    out = g.output
    values = out.args if primitive_name(out) == "make_tuple" else [out]
    return any(is_graph_constant(v) and v.value.parent is not None
               and free_variables(v.value) for v in values)


def specialize_call(node: Apply, ctx) -> Node | None:
    """g(..., f, ...) with f a constant function (a primitive or a top-level graph) -> a call
    of a copy of g in which that parameter is f, so that calls of it inside g become direct
    calls, which inlining and the other rewrites then see through (`map(f, xs)`-style
    recursion, `compose(f, g)` too large to inline).  Recursive calls passing f on call the
    same copy.  The now unused parameter goes with `drop_unused_parameters`."""
    if not is_graph_constant(node.fn):
        return None
    g = node.fn.value
    if len(node.args) != len(g.parameters):
        return None
    fixed = tuple((i, a.value) for i, a in enumerate(node.args)
                  if _is_closed_function(a) and users(ctx.root).get(g.parameters[i]))
    if fixed:
        fixed = _passed_on(g, node, fixed, users(ctx.root))
    if not fixed:
        return None
    copy = ctx.specialised.get((g, fixed))
    if copy is g:
        return None
    if copy is None:
        ctx.copying(g)
        copy = Cloner(relation="specialised from").graph(g)
        for i, value in fixed:
            replace(copy, copy.parameters[i], Constant(value))
        ctx.inherit_types(copy.output)
        ctx.specialised[(g, fixed)] = ctx.specialised[(copy, fixed)] = copy
    return node.graph.apply(copy, *node.args, location=node.location)


def _passed_on(g: Graph, call: Apply, fixed: tuple, uses: dict) -> tuple:
    """The positions of `fixed` (those where `call` passes g a constant function) whose
    parameter every call of g from inside its scope (the next iteration of a loop, a
    recursive call) passes on unchanged: its own parameter, the same function, or a
    parameter of a graph of the scope (an `if`'s branch, the code after it) that every
    call of that graph passes such a value.  Those calls call the copy too, which takes
    the fixed value for the parameter, so it must be what they pass.  A loop may carry a
    function that starts as a constant and changes: wrapped in a closure at each step (a
    linear recursion's ascent building `compose(k - 1)` into a new closure), or swapped
    with another (`f, g = g, f`): only its first iteration takes the constant.  `uses`:
    the program's `users`."""
    inside = scope(g)
    members = set(inside)
    calls: dict[Graph, list] = {h: [] for h in inside}
    calls[g].append(call.args)
    for h in inside:
        for n in toposort(h):
            if not isinstance(n, Apply) or n.graph is not h:
                continue
            for t in tail_targets(n):
                if t in members:
                    calls[t].append(n.args)
            for k, x in enumerate(n.inputs):
                if not (is_graph_constant(x) and x.value in members) or k == 0 or (
                        primitive_name(n) == "switch" and k in (2, 3)
                        and all(j == 0 for _, j in uses.get(n, ()))):
                    continue
                if x.value is g:        # g passed as a value: its calls are not all known
                    return ()
                calls.pop(x.value, None)
    kept = []
    for i, value in fixed:
        # the greatest set of parameters that hold the value: shrink until every call of
        # a member's graph passes a member or the value
        same = {p for h, args in calls.items() if args for p in h.parameters}
        shrinking = True
        while shrinking:
            shrinking = False
            for h, args in calls.items():
                for j, p in enumerate(h.parameters):
                    if p in same and not all(
                            len(a) == len(h.parameters) and (a[j] in same or (
                                _is_closed_function(a[j]) and a[j].value is value))
                            for a in args):
                        same.discard(p)
                        shrinking = True
        if g.parameters[i] in same:
            kept.append((i, value))
    return tuple(kept)


def _is_closed_function(node: Node) -> bool:
    return _const(node, Primitive) or (is_graph_constant(node) and node.value.parent is None)


# ------------------------------------------------------------------ dicts and records
# A dict of known keys (make_dict) and a record of known class (make_record) taken apart
# where built, so a gradient of a dict of parameters keeps no container but its result.

def _fields(node: Node) -> tuple[tuple, list[Node]] | None:
    """The keys (or field names) and values of a make_dict / make_record node."""
    name = primitive_name(node)
    if name == "make_dict" and all(isinstance(k, Constant) for k in node.args[::2]):
        keys, values = [k.value for k in node.args[::2]], list(node.args[1::2])
        merged: dict = {}
        for k, v in zip(keys, values):     # a repeated key: the last value, first place
            merged[_key(k)] = (k, v)
        return tuple(k for k, _ in merged.values()), [v for _, v in merged.values()]
    if name == "make_record" and _const(node.args[0], type):
        return tree_fields(node.args[0].value), list(node.args[1:])
    return None


def _key(k):
    return type(k), k


def tree_fields(cls: type) -> tuple:
    return cls._fields if is_namedtuple(cls) else tuple(f.name for f in dataclasses.fields(cls))


def _rebuilt(like: Node, keys: tuple, values: list, at: Apply) -> Apply:
    """A make_dict / make_record of `like`'s kind (a node of one) with `values`."""
    if primitive_name(like) == "make_record":
        return at.graph.apply(P["make_record"], like.args[0], *values, location=at.location)
    return at.graph.apply(P["make_dict"], *(x for kv in zip(keys, values) for x in kv),
                          location=at.location)


def item_of_container(node: Apply, ctx) -> Node | None:
    """getitem(make_dict(k, v, ...), k) -> v; getattr_(make_record(C, a, b), 'b') -> b (and
    a NamedTuple's position); children(make_dict(...)) -> the tuple of its values."""
    name = primitive_name(node)
    if name not in ("getitem", "getattr_", "children"):
        return None
    fields = _fields(node.args[0])
    if fields is None:
        return None
    keys, values = fields
    if name == "children":
        return node.graph.apply(P["make_tuple"], *values, location=node.location)
    index = node.args[1]
    if primitive_name(node.args[0]) == "make_record" and name == "getitem":
        if not (_const(index, int) and is_namedtuple(node.args[0].args[0].value)):
            return None
        return values[index.value] if -len(values) <= index.value < len(values) else None
    if not isinstance(index, Constant):
        return None
    for k, v in zip(keys, values):
        if _key(k) == _key(index.value):
            return v
    return None


def update_of_container(node: Apply, ctx) -> Node | None:
    """dict_setitem / record_replace / dict_cons of a make_dict or make_record with a
    constant key -> the make_dict or make_record it gives; gadd of two of the same keys ->
    one of their values' gadds."""
    name = primitive_name(node)
    if name == "gadd":
        a, b = (_fields(x) for x in node.args)
        if a is None or b is None or a[0] != b[0] \
                or primitive_name(node.args[0]) != primitive_name(node.args[1]):
            return None
        sums = [node.graph.apply(P["gadd"], x, y, location=node.location)
                for x, y in zip(a[1], b[1])]
        return _rebuilt(node.args[0], a[0], sums, node)
    if name == "dict_cons":
        key, value, rest = node.args
        fields = _fields(rest)
        if fields is None or not isinstance(key, Constant) \
                or any(_key(k) == _key(key.value) for k in fields[0]):
            return None
        return _rebuilt(rest, (key.value,) + fields[0], [value] + fields[1], node)
    if name not in ("dict_setitem", "record_replace"):
        return None
    x, key, value = node.args
    fields = _fields(x)
    if fields is None or not isinstance(key, Constant):
        return None
    keys, values = fields
    hits = [i for i, k in enumerate(keys) if _key(k) == _key(key.value)]
    if hits:
        values[hits[0]] = value
    elif name == "dict_setitem":
        keys, values = keys + (key.value,), values + [value]
    else:
        return None
    return _rebuilt(x, keys, values, node)


def _typed_apply(ctx, at: Apply, abstract, prim: str, *args) -> Apply:
    """A new node, with its type where types are known (so typed rewrites see it)."""
    new = at.graph.apply(P[prim], *args, location=at.location)
    if ctx.types is not None:
        ctx.types[new] = abstract
    return new


def gradient_of_container(node: Apply, ctx) -> Node | None:
    """With types, the gradient ops of a dict of known keys or a record, taken apart:
    getitem_grad(d, k, dout) -> make_dict of zeros and dout at k; grad_cast(make_dict(...),
    x) -> make_dict of the values' casts; grad_check_input of a dict or record -> the value
    (the check looks at numbers and arrays only); iter_keys(x) -> x's keys, or x itself
    where it is no dict; iter_keys_grad likewise; rebuild(like, make_tuple(...)) -> the
    dict or record."""
    name = primitive_name(node)
    if name not in _CONTAINER_GRADIENT_OPS:
        return None
    if name == "dict_pick":
        return _picked(node, ctx)
    t = ctx.type_of(node.args[1] if name == "grad_cast" else node.args[0])   # the container
    if name == "iter_keys_grad" and t is not None and t is not ANY and not any(
            isinstance(o, (ADict, AObject)) for o in options(t)):
        return node.args[1]
    if name == "iter_keys" and t is not None and t is not ANY:
        if isinstance(t, ADict):
            return Constant(tuple(t.keys))
        view = primitive_name(node.args[0])
        if view in _VIEWS:      # a dict's view: the tuple of what it holds
            d = node.args[0].args[0]
            dt = ctx.type_of(d)
            if not isinstance(dt, ADict):
                return None
            items = [_VIEWS[view](node, k, _typed_apply(ctx, node, v, "getitem", d, k))
                     for k, v in zip(dt.keys, dt.items)]
            return node.graph.apply(P["make_tuple"], *items, location=node.location)
        if not any(isinstance(o, AObject) for o in options(t)):
            return node.args[0]
        return None
    if not isinstance(t, (ADict, ARecord)):
        return None
    x = node.args[0]
    keys = t.keys if isinstance(t, ADict) else t.fields
    read = "getitem" if isinstance(t, ADict) else "getattr_"

    def build(values):
        if isinstance(t, ADict):
            return node.graph.apply(P["make_dict"], *(v for kv in zip(keys, values) for v in kv),
                                    location=node.location)
        return node.graph.apply(P["make_record"], t.cls, *values, location=node.location)

    if name == "grad_check_input":
        return x
    if name == "rebuild" and primitive_name(node.args[1]) == "make_tuple":
        return build(list(node.args[1].args))
    if name == "getitem_grad" and isinstance(node.args[1], Constant):
        index = node.args[1].value
        if isinstance(t, ARecord) and type(index) is int:
            index = t.fields[index]
        if index not in keys:
            return None
        values = [node.args[2] if k == index else _typed_apply(
            ctx, node, TYPE_RULES["grad_zeros"](item), "grad_zeros",
            _typed_apply(ctx, node, item, read, x, k)) for k, item in zip(keys, t.items)]
        return build(values)
    if name == "grad_cast":
        d, x = node.args
        fields = _fields(d)
        if fields is None or fields[0] != tuple(keys):
            return None
        return build([_typed_apply(ctx, node, TYPE_RULES["grad_cast"](ctx.type_of(v), item),
                                   "grad_cast", v, _typed_apply(ctx, node, item, read, x, k))
                      for v, k, item in zip(fields[1], keys, t.items)])
    return None


def _picked(node: Apply, ctx) -> Node | None:
    """dict_pick(d, like) -> d where like is no dict (an array's setitem gradient) or d has
    like's keys in like's order; of a make_dict, the make_dict of like's keys (zeros for
    those d has not)."""
    d, like = node.args
    lt, dt = ctx.type_of(like), ctx.type_of(d)
    if lt is None or lt is ANY:
        return None
    if not any(isinstance(o, ADict) for o in options(lt)):
        return d
    if not isinstance(lt, ADict):
        return None
    keys = tuple(map(_key, lt.keys))
    if isinstance(dt, ADict) and tuple(map(_key, dt.keys)) == keys:
        return d
    fields = _fields(d)
    if fields is None:
        return None
    held = dict(zip(map(_key, fields[0]), fields[1]))
    values = [held[_key(k)] if _key(k) in held else _typed_apply(
        ctx, node, TYPE_RULES["grad_zeros"](item), "grad_zeros",
        _typed_apply(ctx, node, item, "getitem", like, k)) for k, item in zip(lt.keys, lt.items)]
    return node.graph.apply(P["make_dict"], *(v for kv in zip(lt.keys, values) for v in kv),
                            location=node.location)


_CONTAINER_GRADIENT_OPS = frozenset({"iter_keys", "iter_keys_grad", "grad_check_input",
                                     "rebuild", "getitem_grad", "grad_cast", "dict_pick"})
_VIEWS = {
    "dict_keys": lambda at, k, v: Constant(k),
    "dict_values": lambda at, k, v: v,
    "dict_items": lambda at, k, v: at.graph.apply(P["make_tuple"], k, v, location=at.location),
}


CONTAINER_REWRITES = [item_of_container, update_of_container]
CONTAINER_TYPED_REWRITES = [gradient_of_container]


REWRITES = [getitem_of_tuple, unpack_of_tuple, depend_satisfied, env_get_after_set, gadd_zero,
            getitem_grad_of_made, gadd_of_made, switch_on_constant, switch_equal_branches, neg_neg, constant_fold, call_inline,
            specialize_call, closure_eta, *CONTAINER_REWRITES]


# ------------------------------------------------------------------ typed rewrites
# Types are what `passes.infer` gives each node for one argument signature (abstract values:
# AScalar, AArray, ATuple, ...); these rewrites do nothing where a type is missing.

def is_float(t) -> bool:
    """A float scalar (Python or numpy) or an array of floats or complex numbers."""
    return is_kind(t, "fc")


def is_number(t) -> bool:
    """A number or array of numbers that is not a bool."""
    if isinstance(t, AArray):
        return t.dtype.kind in "iufc"
    return isinstance(t, AScalar) and issubclass(t.pytype, (int, float, complex, np.number)) \
        and not issubclass(t.pytype, (bool, np.bool_))


_KIND_TYPES = {"f": (float, np.floating), "c": (complex, np.complexfloating),
               "b": (bool, np.bool_)}


def is_kind(t, kinds: str) -> bool:
    """An array whose dtype's kind is one of `kinds` ("f": real floats, "c": complex, "b":
    bools), or a scalar (Python or numpy) of such a type: `is_kind(t, "f")` is a float but
    not a complex number, whose products and sums mix real and imaginary parts (x * -1.0
    multiplies by -1 + 0j: the sign of a zero part and inf * 0 differ from negating)."""
    if isinstance(t, AArray):
        return t.dtype.kind in kinds
    return isinstance(t, AScalar) \
        and issubclass(t.pytype, tuple(c for k in kinds for c in _KIND_TYPES[k]))


def _shape(t) -> tuple | None:
    """The shape of an array type when every dimension is known."""
    return t.shape if isinstance(t, AArray) and None not in t.shape else None


def _dtype(t) -> np.dtype:
    """The dtype of an array type, or numpy's for a scalar type (float64 for float)."""
    return t.dtype if isinstance(t, AArray) else np.dtype(t.pytype)


def grad_check_passes(node: Apply, ctx) -> Node | None:
    """grad_check_input(x, name) -> x when x is known to be a float or float array, or a
    tuple (the check looks at numbers and arrays only, not into tuples): it cannot fail."""
    if primitive_name(node) == "grad_check_input":
        t = ctx.type_of(node.args[0])
        if is_float(t) or isinstance(t, (ATuple, AList)):
            return node.args[0]
    return None


def array_like_of_array(node: Apply, ctx) -> Node | None:
    """np.asarray(x) -> x for an array x; array_grad(x, d) -> grad_cast(d, x) where x is
    no list or tuple (the rules that take lists as numpy does, bprop_dot's, on arrays)."""
    name = primitive_name(node)
    if name == "asarray":
        x, dtype = node.args
        if isinstance(ctx.type_of(x), AArray) and _const(dtype, type(None)):
            return x
    elif name == "array_grad":
        x, d = node.args
        t = ctx.type_of(x)
        if isinstance(t, (AArray, AScalar)):
            return node.graph.apply(P["grad_cast"], d, x, location=node.location)
    return None


def setitem_slot_of_no_list_slice(node: Apply, ctx) -> Node | None:
    """setitem_slot(x, index, value) -> (index, value) where x is no list or index no
    slice: setitem's gradient of an array or dict is as before lists could change length."""
    if primitive_name(node) != "setitem_slot":
        return None
    x, index, value = node.args
    if isinstance(ctx.type_of(x), (AArray, ADict, ARecord, AScalar)) or \
            isinstance(ctx.type_of(x), AList) and isinstance(ctx.type_of(index), AScalar):
        return node.graph.apply(P["make_tuple"], index, value, location=node.location)
    return None


def seq_grad_of_same_kind(node: Apply, ctx) -> Node | None:
    """seq_grad(d, x) -> d when d is already a sequence of x's kind (the gradient of
    np.stack of a tuple is unstack's tuple)."""
    if primitive_name(node) != "seq_grad":
        return None
    d, x = (ctx.type_of(a) for a in node.args)
    if isinstance(d, (ATuple, AList)) and type(d) is type(x):
        return node.args[0]
    return None


def grad_cast_by_type(node: Apply, ctx) -> Node | None:
    """grad_cast(d, x) -> d when d already has the type the cast gives it (x's, without
    its value): the usual case, where nothing mixed a parameter's dtype with another; and
    -> to_float(d), a plain `float(d)`, for a real numpy scalar d of a Python float x (numpy
    functions of a float give np.float64), exactly what the cast computes, minus a call."""
    if primitive_name(node) != "grad_cast":
        return None
    d, x = (ctx.type_of(a) for a in node.args)
    if d is None or x is None:
        return None
    if _is_cast_of(d, x):
        return node.args[0]
    if isinstance(x, AScalar) and x.pytype is float and isinstance(d, AScalar) \
            and issubclass(d.pytype, (np.floating, np.integer)):
        return node.graph.apply(P["to_float"], node.args[0], location=node.location)
    return None


def _is_cast_of(d, x) -> bool:
    """Whether d is already what grad_cast(d, x) makes of it: never for a d of unknown type
    (a dict's gradient of unknown type may hold numpy scalars for its floats)."""
    if d in (ANY, BOTTOM) or type(d) is AUnion:
        return False
    if containers(d) and type(d) is type(x):
        return len(d.items) == len(x.items) and with_items(x, d.items) == d \
            and all(map(_is_cast_of, d.items, x.items))
    cast = TYPE_RULES["grad_cast"](d, x)
    if isinstance(cast, AArray):
        return isinstance(d, AArray) and d.dtype == cast.dtype and d.shape == cast.shape \
            and None not in d.shape
    if isinstance(cast, AScalar):
        return isinstance(d, AScalar) and d.pytype is cast.pytype
    return cast is d


def ieee_on_numpy(node: Apply, ctx) -> Node | None:
    """ieee_truediv / ieee_pow (myir/ir/ieee.py) -> `/` and `**` when an operand is an
    array or a numpy scalar: numpy answers as IEEE does (inf, nan) without raising, and the
    other rewrites know `/` and `**`."""
    name = primitive_name(node)
    if name not in ("ieee_truediv", "ieee_pow"):
        return None
    for t in map(ctx.type_of, node.args):
        if isinstance(t, AArray) or isinstance(t, AScalar) and issubclass(t.pytype, np.generic):
            return node.graph.apply(P[name[len("ieee_"):]], *node.args, location=node.location)
    return None


def checks_proved(node: Apply, ctx) -> Node | None:
    """The run-time checks of Python's semantics that the types prove cannot fail -> the
    value checked, so the generated code does not test what inference already knows:
    check_bound(x) for an x that is never unbound, unpack(x, n) for a tuple of n items, and
    `x op= y` (aug_op, which refuses to update a shared array in place) -> `x op y` for an
    x that is no array, and `y[i] op= v`'s operation (inplace_op, which keeps the indexed
    part's dtype and shape) -> `x op v` where that gives x's dtype and shape anyway."""
    name = primitive_name(node)
    if name is None or name not in ("check_bound", "unpack") and plain_operator(name) == name:
        return None
    t = ctx.type_of(node.args[0])
    if t is None or t is ANY or t is BOTTOM:
        return None
    if name == "check_bound":
        unbound = type(UNBOUND)
        if any(isinstance(o, AObject) and o.pytype is unbound for o in options(t)):
            return None
        return node.args[0]
    if name == "unpack":
        n = node.args[1]
        if isinstance(t, ATuple) and _const(n, int) and len(t.items) == n.value:
            return node.args[0]
        return None
    plain = plain_operator(name)
    if name.startswith("inplace_"):
        if any(isinstance(o, AArray) for o in options(t)) and not (
                isinstance(t, AArray) and TYPE_RULES[plain](t, ctx.type_of(node.args[1])) == t):
            return None
    elif not all(isinstance(o, (AScalar, ATuple)) for o in options(t)):
        return None
    return node.graph.apply(P[plain], *node.args, location=node.location)


def depend_on_what_raises(node: Apply, ctx) -> Node | None:
    """depend(x, e) -> depend(depend(x, r1), r2) for r1, r2 the operations that can raise
    (`passes.raising`) among e and what it is computed from through operations that cannot
    raise on values of their operands' types: what is kept because it can raise (an unused
    `1 / x`, the forward of a gradient) narrows to the operations that can, and goes where
    none can.  The operands are walked once, each node once: a computation whose values are
    read several times (a chain of statements each reading the two before it) has
    exponentially many paths but linearly many nodes."""
    if primitive_name(node) != "depend":
        return None
    x, e = node.args
    if not isinstance(e, Apply) or e.graph is not node.graph:
        return None
    kept, seen, stack = [], set(), [e]
    while stack:
        n = stack.pop()
        if not isinstance(n, Apply) or n.graph is not node.graph or id(n) in seen:
            continue
        seen.add(id(n))
        name = primitive_name(n)
        if name is None or name in EFFECTS or (
                vectorized_may_raise(n, ctx.type_of) if name == "vectorize_call" else
                may_raise(name, [ctx.type_of(a) for a in n.args], ctx.type_of(n))):
            kept.append(n)
        else:
            stack.extend(reversed(n.args))
    if kept == [e]:
        return None
    new = x
    for n in kept:
        new = node.graph.apply(P["depend"], new, n, location=node.location)
        ctx.replaced(node, new)
    return new


def grad_seed_of_float(node: Apply, ctx) -> Node | None:
    """grad_seed(out) -> the constant type(out)(1.0) for a float scalar out: what grad_seed
    returns for it, and its check cannot fail."""
    if primitive_name(node) != "grad_seed":
        return None
    t = ctx.type_of(node.args[0])
    if isinstance(t, AScalar) and is_float(t) and not issubclass(t.pytype, complex):
        return Constant(t.pytype(1.0), node.debug)
    return None


def zeros_of_number(node: Apply, ctx) -> Node | None:
    """grad_zeros(x) -> its value for a number x (0 for a bool or an int, the 0.0 of x's
    float or complex type), a residual stack (the empty stack) or a gradient env (the
    empty env): the type rule knows it exactly, and a closure that only read x for its
    zero captures nothing (a loop's exit adjoint, moved out of the loop by
    `drop_unused_outputs`)."""
    if primitive_name(node) != "grad_zeros":
        return None
    t = ctx.type_of(node)
    if isinstance(t, AScalar) and t.known and is_number(t):
        return Constant(t.value, node.debug)
    x = ctx.type_of(node.args[0])
    if isinstance(x, AStack) and isinstance(t, AStack):
        return Constant(EMPTY_STACK, node.debug)
    if isinstance(x, AEnv) and isinstance(t, AEnv):
        return Constant(NEWENV, node.debug)
    return None


def sensitivity_of_nothing(node: Apply, ctx) -> Node | None:
    """grad_zeros(x), getitem_grad(x, i, d), gadd(x, y) -> None where inference types the
    result None: the sensitivity of a value with nothing to differentiate (a `range`, whose
    keys a `for` loop's gradient reads; a `None`).  None is what the primitive computes
    then, and folded, a loop no longer calls it at every iteration to carry it."""
    if isinstance(ctx.type_of(node), ANone):
        return Constant(None, node.debug)
    return None


def shape_facts(node: Apply, ctx) -> Node | None:
    """ndim(x), size(x), shape(x) -> their value, for an array whose rank (ndim) or shape
    (size, shape) is known, or a scalar (0, 1, ()): `x.ndim == 1` dispatches in gradient
    rules and mean's element count then fold."""
    name = primitive_name(node)
    if name not in ("ndim", "size", "shape"):
        return None
    t = ctx.type_of(node.args[0])
    if isinstance(t, AScalar) and is_number(t):
        return Constant({"ndim": 0, "size": 1, "shape": ()}[name], node.debug)
    if name == "ndim" and isinstance(t, AArray):
        return Constant(t.ndim, node.debug)
    shape = _shape(t)
    if shape is None:
        return None
    return Constant(math.prod(shape) if name == "size" else tuple(shape), node.debug)


def known_integer(node: Apply, ctx) -> Node | None:
    """A pure primitive whose value inference knows to be an int or a bool -> that
    constant (integers are exact: no rounding can differ from the run's)."""
    t = ctx.type_of(node)
    name = primitive_name(node)
    if isinstance(t, AScalar) and t.known and t.pytype in (int, bool) and name is not None \
            and name not in EFFECTS and P[name].pure:
        return Constant(t.value, node.debug)
    return None


def mul_one(node: Apply, ctx) -> Node | None:
    """mul(x, 1) and mul(1, x) -> x when the product has x's type (shape and dtype), also
    for the ones that `reduce_grad` spreads over an array (the seed of a sum's gradient):
    x * 1.0 == x exactly in IEEE arithmetic (-0.0, inf and NaN included); the type check
    excludes int * 1.0 (a float), bool * 1 (an int) and broadcasting."""
    if primitive_name(node) != "mul":
        return None
    for one, x in (node.args, list(reversed(node.args))):
        if _is_number(one, 1) and same_type(ctx.type_of(node), ctx.type_of(x)):
            return x
    return None


def strong_zero_of_nonzero(node: Apply, ctx) -> Node | None:
    """strong_zero(d, x) -> x for a constant d that is not 0 (a gradient's seed 1.0, also
    spread over an array), when the result has x's type: there is no zero to keep."""
    if primitive_name(node) != "strong_zero":
        return None
    d, x = node.args
    while primitive_name(d) in ("reduce_grad", "broadcast_to_like"):
        d = d.args[0]
    if _real(d) and d.value != 0 and same_type(ctx.type_of(node), ctx.type_of(x)):
        return x
    return None


def strong_zero_of_finite_slope(node: Apply, ctx) -> Node | None:
    """strong_zero(d, d * s) -> d * s (and `s * d`, `-(d * s)`, `d / y`) where the slope s
    is finite for every value the program may compute: 0 * s is then 0 already.  Finite:
    a finite constant, a negation, product or quotient of finite values whose divisors are
    bounded away from 0 (`_away_from_zero`).  The sigmoid's `1 / (1 + exp(-z))` has the
    slope `-(1 / y) / y` with y >= 1, and needs no zero kept.  (Where d is 0 the product may
    be -0.0 where strong_zero gives 0.0: a sensitivity's sign of zero means nothing.)"""
    if primitive_name(node) != "strong_zero":
        return None
    d, x = node.args
    body = x.args[0] if primitive_name(x) == "neg" else x
    name = primitive_name(body)
    finite = False
    if name == "mul":
        a, b = body.args
        finite = (a is d and _finite(b)) or (b is d and _finite(a))
    elif name in ("truediv", "ieee_truediv"):
        finite = body.args[0] is d and _away_from_zero(body.args[1])
    if finite and same_type(ctx.type_of(node), ctx.type_of(x)):
        return x
    return None


def _finite(node: Node) -> bool:
    """Whether node is finite whatever the program's inputs (see strong_zero_of_finite_slope)."""
    name = primitive_name(node)
    if name == "neg":
        return _finite(node.args[0])
    if name == "mul":
        return _finite(node.args[0]) and _finite(node.args[1])
    if name in ("truediv", "ieee_truediv"):
        return _finite(node.args[0]) and _away_from_zero(node.args[1])
    return _real(node) and bool(np.isfinite(node.value))


def _away_from_zero(node: Node) -> bool:
    """Whether |node| >= some c > 0 for every value the program may compute: a nonzero
    constant, or a positive constant plus a value that is never negative (an exp, which may
    be inf: 1 / inf is 0, still finite)."""
    if _real(node):
        return node.value != 0 and bool(np.isfinite(node.value))
    return primitive_name(node) == "add" and any(
        _real(c) and c.value > 0 and primitive_name(e) in ("exp", "math_exp")
        for c, e in (node.args, node.args[::-1]))


def _is_number(node: Node, value: int) -> bool:
    """The number `value` (1 is not True), or that number spread by reduce_grad /
    broadcast_to_like."""
    if primitive_name(node) in ("reduce_grad", "broadcast_to_like"):
        return _is_number(node.args[0], value)
    return _real(node) and node.value == value


def negation_absorbed(node: Apply, ctx) -> Node | None:
    """A negation merged into the operation that uses it, for real floats (not complex:
    see `is_kind`), each form exact in IEEE arithmetic:

    - mul(x, -1) and mul(-1, x) -> neg(x) when the product has x's type (as `mul_one`;
      also for -1s spread over an array): x * -1.0 is x with its sign flipped, -0.0 and
      inf included;
    - mul(neg(x), c) and mul(c, neg(x)) -> mul(x, -c) for a float constant c (-c of c's
      type): rounding to nearest is symmetric and a product's sign is the xor of its
      operands' (zeros included), so (-x) * c == -(x * c) == x * (-c); a conversion of c
      to x's precision is symmetric too;
    - add(neg(a), b) -> sub(b, a), add(a, neg(b)) -> sub(a, b), sub(a, neg(b)) -> add(a,
      b): IEEE defines a - b as a + (-b) (signed zeros included), and addition commutes.

    The neg must have its operand's type, so each operand keeps its type and numpy's
    promotion (symmetric in the operands) gives the node's type.  The sign of a NaN
    result may differ (which NaN operand's sign a machine returns); IEEE 754 gives it no
    meaning, and nothing but the NaN's bits can tell.  Not neg(a) + neg(b) -> neg(a + b)
    nor neg(a) - b -> neg(a + b): x + (-x) is +0.0, and -(x - x) is -0.0."""
    name = primitive_name(node)
    if name not in ("mul", "add", "sub"):
        return None
    args = node.args
    apply = node.graph.apply
    if name == "mul":
        for c, y in (args, args[::-1]):
            if _is_number(c, -1) and is_kind(ctx.type_of(y), "f") \
                    and same_type(ctx.type_of(node), ctx.type_of(y)):
                return apply(P["neg"], y, location=node.location)
            if _const(c, (float, np.floating)) and _real_negation(y, ctx):
                minus_c = Constant(-c.value)
                if ctx.types is not None:
                    ctx.types[minus_c] = abstract_of(minus_c.value)
                return apply(P["mul"], y.args[0], minus_c, location=node.location)
        return None
    a, b = args
    if not (primitive_name(b) == "neg" or name == "add" and primitive_name(a) == "neg") \
            or not (is_kind(ctx.type_of(a), "f") and is_kind(ctx.type_of(b), "f")):
        return None     # (the cheaper test first: most additions negate nothing)
    if _real_negation(b, ctx):
        other = "sub" if name == "add" else "add"
        return apply(P[other], a, b.args[0], location=node.location)
    if name == "add" and _real_negation(a, ctx):
        return apply(P["sub"], b, a.args[0], location=node.location)
    return None


def _real_negation(node: Node, ctx) -> bool:
    """neg(x) of a real float x, with x's type."""
    return primitive_name(node) == "neg" and is_kind(ctx.type_of(node.args[0]), "f") \
        and same_type(ctx.type_of(node), ctx.type_of(node.args[0]))


def add_zero(node: Apply, ctx) -> Node | None:
    """add(x, -0.0), add(-0.0, x), sub(x, 0.0) -> x for floats (x + -0.0 == x for every
    x, -0.0 included; x + 0.0 is not: -0.0 + 0.0 is 0.0), and add(x, 0), sub(x, 0) -> x for
    integers; when the result has x's type."""
    name = primitive_name(node)
    if name not in ("add", "sub"):
        return None
    pairs = [node.args] if name == "sub" else [node.args, list(reversed(node.args))]
    for x, zero in pairs:
        if not (_const(zero) and type(zero.value) in (int, float) and zero.value == 0):
            continue
        negative = math.copysign(1.0, zero.value) < 0
        exact = (negative if name == "add" else not negative) or not is_float(ctx.type_of(x))
        if exact and same_type(ctx.type_of(node), ctx.type_of(x)):
            return x
    return None


def add_at_index(node: Apply, ctx) -> Node | None:
    """add(acc, getitem_grad(x, i, d)) -> setitem(acc, i, acc[i] + d) for an array acc, an
    int i and d of acc's dtype: a loop over an array's rows (`for v in x`) accumulates its
    gradient one row per iteration, and adding a full array of zeros but there made the
    loop's gradient quadratic in its length; the update is written in place where nothing
    else sees acc (backends/python/codegen.py's `InPlace`), else it copies, as before.  The
    values are the same but for the sign of a zero (-0.0 + 0.0 is 0.0; a gradient's zero
    carries no sign)."""
    if primitive_name(node) != "add" or ctx.types is None:
        return None
    t = ctx.type_of(node)
    if not (isinstance(t, AArray) and t.ndim >= 1):
        return None
    for acc, spread in (node.args, node.args[::-1]):
        if primitive_name(spread) != "getitem_grad" \
                or not (same_type(t, ctx.type_of(acc)) and same_type(t, ctx.type_of(spread))):
            continue
        _, i, d = spread.args
        ti, td = ctx.type_of(i), ctx.type_of(d)
        integer = isinstance(ti, AScalar) and issubclass(ti.pytype, (int, np.integer)) \
            and not issubclass(ti.pytype, (bool, np.bool_))
        if integer and all(_a_row(o, t) for o in options(td)):
            g, loc = node.graph, node.location
            item = _apply_typed(ctx, g, "getitem", acc, i, location=loc)
            return g.apply(P["setitem"], acc, i, _apply_typed(ctx, g, "add", item, d,
                                                              location=loc), location=loc)
    return None


def _a_row(d, t: AArray) -> bool:
    """Whether d is a row of the array type t, as `t[i] + d` adds it exactly as numpy adds
    the array of zeros but there (d of t's dtype, or a Python float in a float64 vector:
    its value is the float64)."""
    if t.ndim > 1:
        return isinstance(d, AArray) and d.dtype == t.dtype and d.shape == t.shape[1:]
    return isinstance(d, AScalar) and (d.pytype is t.dtype.type
                                       or d.pytype is float and t.dtype == np.float64)


def gadd_of_numbers(node: Apply, ctx) -> Node | None:
    """gadd(x, y) -> add(x, y) for numbers and arrays: what gadd computes for them."""
    if primitive_name(node) != "gadd":
        return None
    if all(_numeric(ctx.type_of(a)) for a in node.args):
        return node.graph.apply(P["add"], *node.args, location=node.location)
    return None


def _numeric(t, kinds=(AScalar, AArray)) -> bool:
    """Whether t is a number or an array (of `kinds`), or a union of them (a recursion
    returning its float argument at the bottom and a numpy scalar above it): gadd and the
    sum primitives compute the same for each."""
    return t is not None and all(isinstance(o, kinds) for o in options(t))


def tuple_rebuilt(node: Apply, ctx) -> Node | None:
    """make_tuple(getitem(t, 0), ..., getitem(t, n - 1)) -> t, for a tuple t of n items; an
    item may also be a constant that t's item is known to equal (the empty env a
    backpropagator returns first, an integer's zero).  A graph whose result is its
    callee's, item by item, returns the callee's tuple itself."""
    if primitive_name(node) != "make_tuple":
        return None     # (a call passing a tuple's items on is not the tuple)
    items = node.args
    read = [a for i, a in enumerate(items) if _item_of(a, i)]
    if not read:
        return None
    t = read[0].args[0]
    tt = ctx.type_of(t)
    if not isinstance(tt, ATuple) or len(tt.items) != len(items):
        return None
    for i, a in enumerate(items):
        if _item_of(a, i) and a.args[0] is t:
            continue
        if not (isinstance(a, Constant) and _singleton(tt.items[i])
                and abstract_of(a.value) == tt.items[i]):
            return None
    return t


def _item_of(node: Node, i: int) -> bool:
    """Whether node is getitem(t, i) of some t."""
    return primitive_name(node) == "getitem" and type(node.args[1]) is Constant \
        and type(node.args[1].value) is int and node.args[1].value == i


def _singleton(t) -> bool:
    """Whether the type t has one value: a known scalar, the empty env."""
    return (isinstance(t, AScalar) and t.known) or (isinstance(t, AEnv) and not t.items
                                                    and t.complete)


def sum_to_like_same_shape(node: Apply, ctx) -> Node | None:
    """sum_to_like(d, x) -> d when d already has x's shape, or both are scalars: there is
    nothing to sum (sum_to_like returns d itself then)."""
    if primitive_name(node) != "sum_to_like":
        return None
    d, x = (ctx.type_of(a) for a in node.args)
    same = _shape(d) is not None and _shape(d) == _shape(x)
    if same or (_numeric(d, AScalar) and _numeric(x, AScalar)):
        return node.args[0]
    return None


SIDES = {"sum_to_side": "sum_to_like", "broadcast_to_side": "broadcast_to_like"}


def side_of_number(node: Apply, ctx) -> Node | None:
    """sum_to_side(d, x, right) -> sum_to_like(d, x), and broadcast_to_side ->
    broadcast_to_like, for a number or array x: `+` adds them, and the side of a sum does
    not matter (what the side primitives compute for them)."""
    name = SIDES.get(primitive_name(node))
    if name is None or not _numeric(ctx.type_of(node.args[1])):
        return None
    return node.graph.apply(P[name], *node.args[:2], location=node.location)


def _typed_items(node: Node, ctx, at: Apply) -> tuple[str, list] | None:
    """(the make primitive, node's items) for a container whose type lists its items: the
    make node's operands, or getitems of node (in the graph of `at`, which reads them:
    node may be a constant)."""
    if _made(node):
        return primitive_name(node), list(node.args)
    t = ctx.type_of(node)
    make = next((m for m, kind in MADE_BY.items() if type(t) is kind), None)
    if make is None:
        return None
    return make, [_apply_typed(ctx, at.graph, "getitem", node, Constant(j))
                  for j in range(len(t.items))]


def _typed_length(node: Node, ctx) -> int | None:
    if _made(node):
        return len(node.args)
    t = ctx.type_of(node)
    return len(t.items) if type(t) in MADE_BY.values() else None


def container_grads_by_type(node: Apply, ctx) -> Node | None:
    """The rewrites of `getitem_grad_of_made` and `gadd_of_made`, and the sides of a
    concatenation's sensitivity (`sum_to_side`, `broadcast_to_side`), for containers whose
    type lists their items (a tuple argument, a concatenation), read item by item with
    getitem: getitem_grad(x, 1, d) -> make(grad_zeros(x[0]), d, ...); gadd(make(a, b), y)
    -> make(gadd(a, y[0]), gadd(b, y[1])); sum_to_side(d, x, right) -> make of d's items at
    x's side; broadcast_to_side(d, x, right) -> zeros like x's items but d's at its side.
    Each is what the primitive computes for such containers (impls.py)."""
    name = primitive_name(node)
    args = node.args
    if name == "getitem_grad":
        n = _typed_length(args[0], ctx)
        i = None if n is None else _position(args[1], n)
        if i is None:
            return None
        make, items = _typed_items(args[0], ctx, node)
        return _placed(ctx, node, make, items, args[2], range(i, i + 1))
    if name == "gadd":
        x, y = args
        if not (_made(x) or _made(y)) or _typed_length(x, ctx) != _typed_length(y, ctx) \
                or _typed_length(x, ctx) is None:
            return None
        (make, xs), (_, ys) = _typed_items(x, ctx, node), _typed_items(y, ctx, node)
        return node.graph.apply(P[make], *(
            _apply_typed(ctx, node.graph, "gadd", a, b, location=node.location)
            for a, b in zip(xs, ys)), location=node.location)
    if name not in SIDES or not _const(args[2], bool):
        return None
    d, x, right = args[0], args[1], args[2].value
    n, total = _typed_length(x if name == "sum_to_side" else d, ctx), \
        _typed_length(d if name == "sum_to_side" else x, ctx)
    if n is None or total is None or n > total:
        return None
    side = range(total - n, total) if right else range(n)
    if name == "sum_to_side":
        make, items = _typed_items(d, ctx, node)
        return node.graph.apply(P[make], *(items[k] for k in side), location=node.location)
    make, items = _typed_items(x, ctx, node)
    _, parts = _typed_items(d, ctx, node)
    return _placed(ctx, node, make, items, parts, side)


SHAPE_ONLY = {"reduce_grad": 1, "sum_to_like": 1, "broadcast_to_like": 1}


def shape_from_input(node: Apply, ctx) -> Node | None:
    """reduce_grad / sum_to_like / broadcast_to_like read only the shape of their argument
    x (and that it is an array): x = f(y, ...) with y an array of x's shape -> y, so that f
    (the `log` of a loss whose mean is differentiated, say) may become dead code."""
    k = SHAPE_ONLY.get(primitive_name(node))
    if k is None:
        return None
    x = node.args[k]
    shape = _shape(ctx.type_of(x))
    name = primitive_name(x)
    if shape is None or name is None or name in EFFECTS or not P[name].pure:
        return None
    for y in x.args:
        t = ctx.type_of(y)
        if not isinstance(y, Constant) and isinstance(t, AArray) and _shape(t) == shape:
            args = list(node.args)
            args[k] = y
            return node.graph.apply(node.fn, *args, location=node.location)
    return None


# Primitives whose array operands numpy broadcasts against each other.
BROADCASTING = frozenset("add sub mul truediv floordiv mod pow power lt le gt ge eq ne "
                         "maximum minimum arctan2 where np_add np_subtract np_multiply "
                         "np_divide np_remainder np_floor_divide".split())
SPREADS = frozenset({"reduce_grad", "broadcast_to_like"})
# Elementwise primitives of numbers (and arrays, elementwise).
ELEMENTWISE = BROADCASTING | frozenset("neg exp log log1p expm1 sqrt sin cos tan tanh sinh "
                                       "cosh arcsin arccos arctan abs square reciprocal "
                                       "negative".split())


def implicit_broadcast(node: Apply, ctx) -> Node | None:
    """op(..., spread, ...) -> op(..., d, ...) for an op that broadcasts its operands and a
    `spread` of a value d (see `_spread`: reduce_grad / broadcast_to_like of a number
    or of an array that kept the reduced axes, or grad_zeros of an array), when d spreads to
    the result's shape by broadcasting alone, and to the same dtype: a gradient's
    `x == max(x)` or `dmax * hit` then reads the reduced value instead of first copying it
    out to a full array.  Broadcasting is exact, so values are unchanged.  A Python number
    is weakly typed (it does not promote float32 to float64 as the float64 array did), so it
    is taken only where every other array operand already has the result's dtype."""
    name = primitive_name(node)
    t = ctx.type_of(node)
    if name not in BROADCASTING or _shape(t) is None:
        return None
    shapes = [_operand_shape(ctx.type_of(a)) for a in node.args]
    if None in shapes:
        return None
    for k, spread in enumerate(node.args):
        found = _spread(spread, ctx)
        if found is None:
            continue
        d = found[0]
        td = ctx.type_of(d)
        dshape = _operand_shape(td)
        if dshape is None:
            continue
        rest = shapes[:k] + shapes[k + 1:]
        try:
            same_shape = np.broadcast_shapes(*rest, dshape) == t.shape
        except ValueError:
            continue
        weak = isinstance(td, AScalar) and not issubclass(td.pytype, np.generic)
        if same_shape and (not weak or all(
                ctx.type_of(a).dtype == t.dtype for i, a in enumerate(node.args)
                if i != k and isinstance(ctx.type_of(a), AArray))):
            args = list(node.args)
            args[k] = d
            return node.graph.apply(node.fn, *args, location=node.location)
    return None


def _spread(node: Node, ctx) -> tuple[Node, Node] | None:
    """(d, x) when `node` spreads the value d over the shape of the array x, else None:
    reduce_grad(d, x, axis, keepdims) without inserted axes, broadcast_to_like(d, x), and
    grad_zeros(x) of an array (d is the 0 of its dtype, a numpy scalar: as strongly typed as
    the array)."""
    name = primitive_name(node)
    if name == "broadcast_to_like" or (name == "reduce_grad" and _keeps_axes(node)):
        return node.args[0], node.args[1]
    t = ctx.type_of(node.args[0]) if name == "grad_zeros" else None
    if isinstance(t, AArray) and t.dtype.kind in "biufc" and ctx.types is not None:
        zero = Constant(t.dtype.type(0))
        ctx.types[zero] = AScalar(t.dtype.type, t.dtype.type(0))
        return zero, node.args[0]
    return None


def spread_late(node: Apply, ctx) -> Node | None:
    """op(spread, c) -> reduce_grad(op(d, c), x, None, False) for an elementwise op of a
    spread (see `_spread`) of a numpy scalar d over x, and numbers c (`dloss / n` of a
    mean's gradient): one operation on a number instead of one per element, then the same
    spread.  The values are the same, element by element; d must have the spread's dtype
    and so must the result, so numpy's promotion is the same for the number as for the
    array (NEP 50: both are strong)."""
    name = primitive_name(node)
    t = ctx.type_of(node)
    if name not in ELEMENTWISE or not isinstance(t, AArray):
        return None
    spreads = [(k, found) for k, found in enumerate(_spread(a, ctx) for a in node.args)
               if found is not None]
    if len(spreads) != 1:
        return None
    [(k, (d, x))] = spreads
    spread = node.args[k]
    td = ctx.type_of(d)
    numbers = all(isinstance(ctx.type_of(a), AScalar) and is_number(ctx.type_of(a))
                  for i, a in enumerate(node.args) if i != k)
    if not (numbers and isinstance(td, AScalar) and issubclass(td.pytype, np.generic)
            and np.dtype(td.pytype) == t.dtype and ctx.type_of(spread) == t):
        return None
    args = list(node.args)
    args[k] = d
    inner = node.graph.apply(node.fn, *args, location=node.location)
    ctx.types[inner] = AScalar(td.pytype)
    return node.graph.apply(P["reduce_grad"], inner, x, None, False, location=node.location)


# Broadcasting primitives whose every element is one correctly rounded IEEE operation, a
# comparison or a choice: an element's value does not depend on the shape the operation runs
# over (not pow or arctan2, whose array loops may use vector approximations that differ in
# the last bit from the scalar functions).
ROUNDED_ONCE = frozenset("add sub mul truediv lt le gt ge eq ne maximum minimum "
                         "where".split())


def spread_out(node: Apply, ctx) -> Node | None:
    """op(..., spread, ...) -> broadcast_to_like(op(..., d, ...), x) for an op of
    `ROUNDED_ONCE`, when putting every spread operand's value d in its place (see `_spread`)
    shrinks the result's shape to one that broadcasts to it, and one of the spreads is over
    an array x of the result's shape: broadcasting commutes with elementwise operations, so
    every element is the same, and the op runs on the smaller shape (a gradient's where(mask,
    0.0, ones) of a mask of one row, then read by full-shape operations that take the row
    by `implicit_broadcast`).  The inner op's type is what the type rules give (as
    inference would), with the result's dtype: so a weakly typed Python number that took
    the place of a float64 array cannot change numpy's promotion, and numpy computes it (a
    number of Python's, as 1.0 / 0.0 would be, raises).  Operands and result are bools and
    real floats only: no integer arithmetic, which numpy's scalars and arrays do not treat
    alike (overflow warns for one only).  Where the shape is unchanged, `implicit_broadcast`
    applies instead; each rewrite here makes an operation smaller, so none undoes
    another."""
    name = primitive_name(node)
    t = ctx.type_of(node)
    shape = _shape(t)
    if name not in ROUNDED_ONCE or not shape or t.dtype.kind not in "bf":
        return None
    args, full = list(node.args), None
    for k, a in enumerate(node.args):
        found = _spread(a, ctx)
        if found is not None:
            args[k] = found[0]
            if _shape(ctx.type_of(found[1])) == shape:
                full = found[1]
    types = [ctx.type_of(a) for a in args]
    if full is None or not all(is_kind(u, "bf") for u in types):
        return None
    try:
        inner_t = TYPE_RULES[name](*types)
    except RuleError:
        return None
    inner_shape = _operand_shape(inner_t)
    numpy_value = isinstance(inner_t, AArray) \
        or (isinstance(inner_t, AScalar) and issubclass(inner_t.pytype, np.generic))
    if not numpy_value or inner_shape in (None, shape) or _dtype(inner_t) != t.dtype:
        return None
    try:
        if np.broadcast_shapes(inner_shape, shape) != shape:
            return None
    except ValueError:
        return None
    inner = node.graph.apply(node.fn, *args, location=node.location)
    ctx.types[inner] = inner_t
    return node.graph.apply(P["broadcast_to_like"], inner, full, location=node.location)


def spread_of_spread(node: Apply, ctx) -> Node | None:
    """reduce_grad(reduce_grad(d, x, None, False), y, axis, keepdims) -> reduce_grad(d, y,
    None, False) for a number d: every element is d either way."""
    if primitive_name(node) != "reduce_grad" or primitive_name(node.args[0]) != "reduce_grad":
        return None
    inner = node.args[0]
    td = ctx.type_of(inner.args[0])
    if not (isinstance(td, AScalar) and is_number(td) and _const(inner.args[2], type(None))
            and _const(inner.args[3], bool) and not inner.args[3].value):
        return None
    return node.graph.apply(node.fn, inner.args[0], node.args[1], None, False,
                            location=node.location)


def _operand_shape(t) -> tuple | None:
    """The shape a broadcasting op sees: an array's, () for a number, None if unknown."""
    if isinstance(t, AScalar) and is_number(t):
        return ()
    return _shape(t)


def _keeps_axes(spread: Apply) -> bool:
    """reduce_grad(d, x, axis, keepdims) is d broadcast to x's shape, without inserting
    axes first: the sum it undoes was over every axis, or kept its axes."""
    axis, keepdims = spread.args[2], spread.args[3]
    return _const(axis, type(None)) or (_const(keepdims, bool) and keepdims.value)


def same_type(a, b) -> bool:
    """Whether inference knows both values to be numbers of one type: scalars of one Python
    or numpy type, or arrays of one dtype and shape.  Unknown (None, ANY) or a union is no
    knowledge: an ANY beside an ANY may be a bool beside the int that `bool + 0` makes."""
    if isinstance(a, AScalar) and isinstance(b, AScalar):
        return a.pytype is b.pytype
    return isinstance(a, AArray) and isinstance(b, AArray) and a.dtype == b.dtype \
        and a.shape == b.shape


TYPED_REWRITES = [checks_proved, grad_check_passes, grad_cast_by_type, seq_grad_of_same_kind,
                  array_like_of_array, setitem_slot_of_no_list_slice,
                  ieee_on_numpy,
                  depend_on_what_raises, grad_seed_of_float, zeros_of_number,
                  sensitivity_of_nothing, shape_facts,
                  known_integer, mul_one, strong_zero_of_nonzero, strong_zero_of_finite_slope,
                  add_zero, negation_absorbed, gadd_of_numbers,
                  add_at_index,
                  side_of_number, container_grads_by_type, sum_to_like_same_shape, tuple_rebuilt,
                  shape_from_input, implicit_broadcast, spread_late,
                  spread_out, spread_of_spread, *CONTAINER_TYPED_REWRITES]


# The primitives each rewrite can apply to: a rewrite is only tried on a call of one of
# them (`CALLS`: a call of something other than a primitive; `ANY_PRIMITIVE`: any), so a
# node meets the few rewrites that may match it, not every rewrite's test of its primitive.
# A rewrite missing here (a test's wrapper) is tried on every node.
CALLS = "calls of graphs"
ANY_PRIMITIVE = "calls of any primitive"
MATCHES = {
    getitem_of_tuple: {"getitem"}, unpack_of_tuple: {"unpack"}, depend_satisfied: {"depend"},
    env_get_after_set: {"env_getitem"}, gadd_zero: {"gadd"},
    getitem_grad_of_made: {"getitem_grad"}, gadd_of_made: {"gadd"},
    switch_on_constant: {"switch"}, switch_equal_branches: {"switch"}, neg_neg: {"neg"},
    constant_fold: set(_FOLDABLE), call_inline: CALLS, specialize_call: CALLS,
    checks_proved: {"check_bound", "unpack"} | {n for n in P if plain_operator(n) != n},
    grad_check_passes: {"grad_check_input"}, grad_seed_of_float: {"grad_seed"},
    zeros_of_number: {"grad_zeros"},
    sensitivity_of_nothing: {"grad_zeros", "getitem_grad", "gadd"},
    shape_facts: {"ndim", "size", "shape"}, known_integer: ANY_PRIMITIVE, mul_one: {"mul"},
    strong_zero_of_nonzero: {"strong_zero"},
    strong_zero_of_finite_slope: {"strong_zero"},
    add_zero: {"add", "sub"}, negation_absorbed: {"mul", "add", "sub"}, add_at_index: {"add"},
    gadd_of_numbers: {"gadd"}, side_of_number: set(SIDES),
    container_grads_by_type: {"getitem_grad", "gadd"} | set(SIDES),
    sum_to_like_same_shape: {"sum_to_like"}, tuple_rebuilt: {"make_tuple"},
    closure_eta: {"make_tuple", "switch"},
    shape_from_input: set(SHAPE_ONLY), implicit_broadcast: BROADCASTING,
    spread_late: ELEMENTWISE, spread_out: ROUNDED_ONCE, spread_of_spread: {"reduce_grad"},
    grad_cast_by_type: {"grad_cast"}, ieee_on_numpy: {"ieee_truediv", "ieee_pow"},
    item_of_container: {"getitem", "getattr_", "children"},
    update_of_container: {"gadd", "dict_cons", "dict_setitem", "record_replace"},
    gradient_of_container: _CONTAINER_GRADIENT_OPS,
    depend_on_what_raises: {"depend"}, seq_grad_of_same_kind: {"seq_grad"},
    array_like_of_array: {"asarray", "array_grad"},
    setitem_slot_of_no_list_slice: {"setitem_slot"},
}


def _may_match(rewrite, name: str | None) -> bool:
    matches = MATCHES.get(rewrite)
    if matches is None:
        return True
    if matches is CALLS:
        return name is None
    if matches is ANY_PRIMITIVE:
        return name is not None
    return name in matches


class Dispatch(dict):
    """Primitive name (None for other calls) -> the rewrites of a list to try on its calls,
    in the list's order."""

    def __init__(self, rewrites: list):
        super().__init__()
        self.rewrites = rewrites

    def __missing__(self, name):
        tried = self[name] = [r for r in self.rewrites if _may_match(r, name)]
        return tried


# ------------------------------------------------------------------ dead code

def _call_sites(root: Graph, uses: dict) -> dict[Graph, list[Apply]]:
    """Graph -> the calls that run it, for the graphs (not root) whose every use is such a
    call: a call of the graph constant, or of a switch between two graph constants whose
    every use is a call (an `if`'s branches, a loop's test).  So every caller is known, and
    the graphs one call may run are known too (`tail_targets`)."""
    sites: dict[Graph, list[Apply]] = {}
    for g, found in graph_uses(root).items():
        calls: dict[Apply, None] = {}
        for user, i in found:
            if i == 0:
                calls[user] = None
            elif i in (2, 3) and primitive_name(user) == "switch" \
                    and is_graph_constant(user.inputs[5 - i]) and uses.get(user) \
                    and all(j == 0 for _, j in uses[user]):
                calls.update((u, None) for u, _ in uses[user])
            else:
                break
        else:
            if g is not root and calls:
                sites[g] = list(calls)
    return sites


def _calls_known(root: Graph) -> bool:
    """Whether the program may have graphs whose every call is known (`_call_sites`): it
    has a graph other than root.  The prunes that edit such graphs and their calls find
    nothing to do in a program inlined into one graph, and skip finding the users of its
    every node (a tenth of the untyped optimization of a gradient of 800 helper
    functions)."""
    return len(reachable_graphs(root)) > 1


def drop_unused_parameters(root: Graph, types: dict | None = None) -> bool:
    """Remove the parameters whose value reaches nothing the program returns or does, of
    graphs whose every caller is known (`_call_sites`: direct calls, and the branches of an
    `if` or a loop's test, which one call passes the same arguments), with the arguments
    that fed them where those have no effect.  A parameter only passed on, as it is or
    computed on, to a parameter that is itself unread (a loop's next iteration, a branch)
    is unread too: liveness flows back from outputs and effects through what live nodes
    read, and into an argument only where its parameter is live; a position is kept or
    dropped alike in all the graphs one call may run.  An argument whose computation can
    raise stays (`raising`, with the `types` of the typed optimizer where known).

    Likewise the elements of the tuple a recursion returns (`_returned_tuples`) that only
    its own calls read, to compute the same elements or parameters that are themselves
    unread (the sensitivity of an integer parameter, which each call of a backpropagator
    adds to its callees' and returns, a stack passed on empty: passes/defunctionalise.py)
    go: an element is live where a live node reads it, and what computes it is live
    then; `drop_unused_outputs`, which keeps every element some call reads, cannot see
    that.  Returns whether anything changed."""
    if not _calls_known(root):
        return False
    uses = users(root)
    sites = _call_sites(root, uses)
    # the result families whose elements are live one by one, with each read's element
    families = [found for family, external in _result_families(root, uses)
                if (found := _returned_tuples(family, external, uses, types)) is not None]
    element_of = {r: (f, r.args[1].value % n) for f, (_, n, reads, _) in enumerate(families)
                  for rs in reads.values() for r in rs}
    live_elements: list[set] = [set() for _ in families]
    returning = {h: f for f, (tuples, *_) in enumerate(families) for h in tuples}
    runs = {c: tail_targets(c) for calls in sites.values() for c in calls}
    # graphs whose parameters may go: every call known, running only such graphs
    prunable = {g for g, calls in sites.items() if not g.defaults
                and all(len(c.args) == len(g.parameters) for c in calls)}
    shrinking = True
    while shrinking:
        shrinking = False
        for g in list(prunable):
            if any(h not in prunable for c in sites[g] for h in runs[c]):
                prunable.discard(g)
                shrinking = True
    owner = {p: (g, k) for g in prunable for k, p in enumerate(g.parameters)}
    live: set[Node] = set()
    pending: list[Node] = []

    def mark(n: Node):
        if n not in live and not isinstance(n, Constant):
            live.add(n)
            pending.append(n)

    def mark_element(f: int, k: int):
        if k not in live_elements[f]:
            live_elements[f].add(k)
            for h in families[f][0]:
                mark(h.output.args[k])

    known: set = set()
    quiet = raising(types)
    for f, (tuples, n, reads, _) in enumerate(families):
        read = {r.args[1].value % n for rs in reads.values() for r in rs}
        for k in set(range(n)) - read:  # (drop_unused_outputs drops them)
            mark_element(f, k)
    for g in reachable_graphs(root):    # what is returned, and every effect, is live
        if g not in returning:
            mark(g.output)
        for node in toposort(g):
            if isinstance(node, Apply) and node.graph is g \
                    and (primitive_name(node) is None or primitive_name(node) in EFFECTS):
                mark(node)
    while pending:
        while pending:  # what a live node reads is live; an argument, where its parameter is
            n = pending.pop()
            if n in element_of:
                mark_element(*element_of[n])
            if isinstance(n, Parameter):
                if n in owner:
                    g, k = owner[n]
                    for c in sites[g]:
                        mark(c.inputs[k + 1])
                        for h in runs[c]:   # one call passes the same arguments to each
                            mark(h.parameters[k])
                continue
            passing = n in runs and all(h in prunable for h in runs[n])
            for i, x in enumerate(n.inputs):
                if not (passing and i >= 1):
                    mark(x)
        # an argument that may raise stays, and so its parameter; what is computed anyway
        # (`_computed_anyway`) raises where it is whether the argument stays or not
        known.update(_computed_anyway(root, runs, prunable, live, {
            h: [h.output.args[k] for k in live_elements[f]] for h, f in returning.items()}))
        for p, (g, k) in owner.items():
            if p not in live and any(not effect_free(c.inputs[k + 1], known, quiet)
                                     for c in sites[g]):
                mark(p)
        for h, f in returning.items():  # likewise an element that may raise stays
            for k, x in enumerate(h.output.args):
                if k not in live_elements[f] and not effect_free(x, known, quiet):
                    mark_element(f, k)
    changed = False
    for g in prunable:
        dead = {k for k, p in enumerate(g.parameters) if p not in live}
        if not dead:
            continue
        for c in sites[g]:
            if len(c.args) == len(g.parameters):   # not already done for another callee
                c.set_inputs([x for j, x in enumerate(c.inputs) if j - 1 not in dead])
        g.parameters = [p for k, p in enumerate(g.parameters) if k not in dead]
        changed = True
    whole: dict = {}
    for (tuples, n, reads, calls), kept in zip(families, live_elements):
        if kept and len(kept) < n:
            _keep_results(tuples, calls, reads, sorted(kept), types, whole)
            changed = True
    if whole:
        substitute(root, whole)
    elif changed:
        bump_version()
    return changed


def _computed_anyway(root: Graph, runs: dict, prunable: set, live: set,
                     returned: dict) -> set[Node]:
    """The nodes each graph computes whichever of the unread parameters `drop_unused_parameters`
    drops: those its output reads through operands whose values are read (`evaluates`'
    rule: not a tuple element or an operand only a shape is read from, a branch's
    condition but not the branches), and of a call whose parameters may go, only the
    arguments of `live` parameters.  A loop's exit adjoint, say, is called for the
    sensitivities the backward loop carries on; its other results, unread, go without
    keeping their parameters for the call's sake.  `returned`: the elements of their
    output tuples that the graphs of result families keep."""
    out: set[Node] = set()
    for g in reachable_graphs(root):
        stack = list(returned[g]) if g in returned else [g.output]
        while stack:
            n = stack.pop()
            if n in out or not isinstance(n, Apply) or n.graph is not g:
                continue
            out.add(n)
            name = primitive_name(n)
            if name is None:
                passing = n in runs and all(h in prunable for h in runs[n])
                stack.append(n.fn)
                stack.extend(x for k, x in enumerate(n.args)
                             if not passing or runs[n][0].parameters[k] in live)
            elif name in READS_ONLY:
                stack.extend(n.args[i] for i in READS_ONLY[name])
            else:
                stack.extend(n.args)
    return out


def _result_family(g: Graph, sites: dict) -> tuple[list[Graph], list[Apply]] | None:
    """The graphs whose result is g's result, and the calls of them that are not in tail
    position of one of them (the calls reading that result): g, the graphs they call in
    tail position (a loop's iterations, an `if`'s branches), the graphs a call of one of
    them may run instead (the other branch), and the graphs calling one of them in tail
    position.  None where one of them has a caller that is not known."""
    family, external, i = [g], {}, 0
    while i < len(family):
        h = family[i]
        i += 1
        more = tail_calls(h)
        for c in sites[h]:     # and the graphs the same call may run instead
            more = more + tail_targets(c)
            if c is c.graph.output:
                more.append(c.graph)
            else:
                external[c] = None
        for m in more:
            if m not in sites:
                return None
            if m not in family:
                family.append(m)
    return family, list(external)


def _result_families(root: Graph, uses: dict):
    """Each `_result_family` of the program whose every caller is known, once: (its
    graphs, the calls reading their result)."""
    sites = _call_sites(root, uses)
    seen: set[Graph] = set()
    for g in sites:
        if g in seen:
            continue
        found = _result_family(g, sites)
        if found is None:
            seen.add(g)
            continue
        seen.update(found[0])
        yield found


def drop_unused_outputs(root: Graph, types: dict | None = None) -> bool:
    """Remove the elements of the tuple a graph returns that no caller reads, where every
    use of the graph is a known call (`_call_sites`) whose result is only indexed with
    constants (or waited for, by `depend`); a tuple left with one element is replaced by
    it.  The tuple may be returned through calls in tail position: a loop returns it from
    its exit, after its iterations, so its elements are those of every graph of its
    `_result_family` that returns one.  An element that is the same constant at every such
    return, and not a closure, is that constant where it is read, where the call is still
    evaluated for another element or by `depend` (a loop's exit passing its adjoint out: the
    adjoint is then called and inlined after the loop).  An element whose computation can
    raise stays (`raising`).  Returns whether anything changed."""
    if not _calls_known(root):
        return False
    uses = users(root)
    whole: dict[Node, Node] = {}  # getitem(call, k) -> call, where one element is left
    changed = False
    for family, external in _result_families(root, uses):
        changed |= _drop_results(family, external, uses, types, whole)
    if whole:
        substitute(root, whole)
    elif changed:
        bump_version()
    return changed


def _returned_tuples(family: list[Graph], external: list[Apply], uses: dict, types):
    """(the graphs of the family returning the tuple, its length, {external call: its
    reads `call[k]`}, the calls whose result is the tuple) where every graph of the family
    that returns, returns a tuple of one length (or raises) whose every external call is only
    indexed with constants (or waited for by `depend`), typed as such where typed; None
    otherwise."""
    ends = [h for h in family if not (isinstance(h.output, Apply) and h.output.graph is h
                                      and tail_calls(h))]
    tuples = [h for h in ends if primitive_name(h.output) != "raise_"]
    if not tuples or any(primitive_name(h.output) != "make_tuple" for h in tuples):
        return None
    n = len(tuples[0].output.args)
    reads: dict[Apply, list] = {}
    for c in external:
        reads[c] = []
        for r, i in uses.get(c, ()):
            if primitive_name(r) == "depend" and i == 2:
                continue
            if not (primitive_name(r) == "getitem" and i == 1 and _const(r.args[1], int)
                    and type(r.args[1].value) is int and -n <= r.args[1].value < n):
                return None
            reads[c].append(r)
    if any(len(h.output.args) != n for h in tuples):
        return None
    calls = external + [h.output for h in family if h not in ends]
    if types is not None and not all(isinstance(types.get(c), ATuple)
                                     and len(types[c].items) == n for c in calls):
        return None
    return tuples, n, reads, calls


def _drop_results(family: list[Graph], external: list[Apply], uses: dict, types,
                  whole: dict) -> bool:
    found = _returned_tuples(family, external, uses, types)
    if found is None:
        return False
    tuples, n, reads, calls = found
    flat = _flatten_results(tuples, calls, reads, uses, n, types)
    changed = flat is not None
    if changed:
        n = flat
    # the elements that are one constant at every return, and no closure
    fixed = {k for k in range(n)
             if all(_same_constant(h.output.args[k], tuples[0].output.args[k]) for h in tuples)
             and not (is_graph_constant(tuples[0].output.args[k])
                      and free_variables(tuples[0].output.args[k].value))}
    for c in external:
        evaluated = [r for r in reads[c] if r.args[1].value % n not in fixed] \
            or any(primitive_name(r) == "depend" for r, _ in uses.get(c, ()))
        if not evaluated:
            continue     # the constant read would drop the call: keep reading it
        for r in [r for r in reads[c] if r.args[1].value % n in fixed]:
            value = tuples[0].output.args[r.args[1].value % n].value
            if isinstance(value, Graph):
                value.parent = None     # captures nothing: defined at the top, read anywhere
            const = Constant(value, r.debug)
            if types is not None and r in types:
                types[const] = types[r]
            whole[r] = const
            reads[c].remove(r)
            changed = True
    known: set = set()
    kept = sorted({r.args[1].value % n for rs in reads.values() for r in rs}
                  | {k for h in tuples for k, x in enumerate(h.output.args)
                     if not effect_free(x, known, raising(types))})
    if len(kept) == n:
        return changed
    _keep_results(tuples, calls, reads, kept, types, whole)
    return True


def _keep_results(tuples: list[Graph], calls: list[Apply], reads: dict, kept: list,
                  types: dict | None, whole: dict) -> None:
    """Make the graphs `tuples` of a result family return only the elements `kept` of
    their tuple (the element itself where one is left), retype the `calls` whose result
    it is, and index the reads that read a kept element anew (`whole`: read -> call, where
    one is left)."""
    n = len(tuples[0].output.args)
    for h in tuples:
        old = h.output
        elements = [old.args[k] for k in kept]
        h.output = elements[0] if len(kept) == 1 else \
            h.apply(P["make_tuple"], *elements, location=old.location)
        if types is not None and len(kept) != 1 and isinstance(types.get(old), ATuple):
            types[h.output] = ATuple(tuple(types[old].items[k] for k in kept))
    if types is not None:
        for c in calls:
            items = types[c].items
            types[c] = items[kept[0]] if len(kept) == 1 else ATuple(tuple(items[k] for k in kept))
    for rs in reads.values():
        for r in rs:
            if r.args[1].value % n not in kept:
                continue    # (unread: only what is dropped reads it)
            if len(kept) == 1:
                whole[r] = r.args[0]
            else:
                r.set_inputs([*r.inputs[:2], Constant(kept.index(r.args[1].value % n))])


def lift_result_closures(root: Graph, types: dict | None = None) -> bool:
    """An element of the tuple a loop returns that is, at every return, a closure of one
    graph G (of copies alike, `_one_closure`) becomes the tuple of G's free variables, and
    each read of it a copy of G reading that tuple's items, nested where it is read: a
    loop's gradient returns its exit's adjoint so, and an outer loop's gradient would push
    the closure in its records (`lift_record_closures` lifts it once it is made in the
    outer iteration, where it is inlined into the inner backpropagator).  The calls of the
    loop are known, their results only indexed (`_returned_tuples`), and each tuple made
    for its return alone.  Returns whether anything changed."""
    typed = types is not None
    types = types if typed else {}
    if not any(primitive_name(g.output) == "make_tuple" and any(
            is_graph_constant(x) and x.value.parent is not None for x in g.output.args)
            for g in reachable_graphs(root)):
        return False    # (no graph returns a closure in a tuple)
    if not _stacks_followed(root, types if typed else None):
        return False
    uses = users(root)
    whole: dict = {}
    edited: set[Graph] = set()
    for family, external in _result_families(root, uses):
        returned = _returned_tuples(family, external, uses, types if typed else None)
        if returned is None or any(uses.get(h.output) != [(h, OUTPUT)] for h in returned[0]):
            continue    # (a tuple read elsewhere too keeps its shape)
        tuples, n, reads, calls = returned
        for k in range(n if _loops(family) else 0):
            lifted = _one_closure([h.output.args[k] for h in tuples], types)
            if lifted is None or not lifted[1] or not _untouched(
                    edited, lifted[0], tuples + [c.graph for c in reads]):
                continue
            graph, fvs, values = lifted
            held = ATuple(tuple(types.get(x, ANY) for x in fvs))
            for h, vs in zip(tuples, values):
                old = h.output
                inner = h.apply(P["make_tuple"], *vs, location=old.location)
                h.output = h.apply(P["make_tuple"], *old.args[:k], inner, *old.args[k + 1:],
                                   location=old.location)
                types[inner] = held
                if isinstance(types.get(old), ATuple):
                    types[h.output] = with_items(types[old], _put(types[old].items, k, held))
            for c in calls:
                if isinstance(types.get(c), ATuple):
                    types[c] = with_items(types[c], _put(types[c].items, k, held))
            for c, rs in reads.items():
                mine = [r for r in rs if r.args[1].value % n == k]
                if mine:
                    tup = c.graph.apply(P["getitem"], c, k, location=mine[0].location)
                    types[tup] = held
                    const = _rebuilt_closure(graph, fvs, tup, 0, mine[0], types)
                    whole.update((r, const) for r in mine)
            break   # one element per family per call: the family's tuples changed
    if whole:
        substitute(root, whole)
    return bool(whole)


def lift_parameter_closures(root: Graph, types: dict | None = None) -> bool:
    """A parameter to which every call passes a closure of one graph G (of copies alike,
    `_one_closure`) becomes parameters for G's free variables, and reads a copy of G made
    in its graph: an iteration of a loop of several paths passes an inner loop's
    backpropagator, a residual of its path, on through the graphs of the path to the one
    that pushes its record (passes/ad.py), and these graphs, on the loop's cycle, are not
    inlined; so lifted, the push holds a closure made where it is, which
    `lift_record_closures` lifts in turn.  The graphs that one call may run (an `if`'s
    branches) change alike; their every call is known (`_call_sites`).  One parameter of
    a family of graphs per call.  Returns whether anything changed."""
    if not _calls_known(root):
        return False
    typed = types is not None
    types = types if typed else {}
    uses = users(root)
    sites = _call_sites(root, uses)
    if not any(is_graph_constant(a) and a.value.parent is not None
               for calls in sites.values() for c in calls for a in c.args) \
            or not _stacks_followed(root, types if typed else None):
        return False
    family = {g: g for g in sites}

    def find(g):
        while family[g] is not g:
            g = family[g]
        return g
    for calls in sites.values():
        for c in calls:
            targets = tail_targets(c)
            if any(t not in family for t in targets):
                return False
            for t in targets[1:]:
                family[find(t)] = find(targets[0])
    members: dict = {}
    for g in sites:
        members.setdefault(find(g), []).append(g)
    edited: set[Graph] = set()
    whole: dict = {}
    for graphs in members.values():
        calls = list({c: None for g in graphs for c in sites[g]})
        n = len(graphs[0].parameters)
        if any(g.defaults or len(g.parameters) != n for g in graphs) \
                or any(len(c.args) != n for c in calls):
            continue
        for k in range(n):
            if not any(is_graph_constant(c.args[k]) for c in calls):
                continue
            lifted = _one_closure([c.args[k] for c in calls], types)
            if lifted is None or not _untouched(edited, lifted[0],
                                                 [c.graph for c in calls] + graphs):
                continue
            graph, fvs, values = lifted
            for c, vs in zip(calls, values):
                c.set_inputs([*c.inputs[:k + 1], *vs, *c.inputs[k + 2:]])
            for g in graphs:
                old = g.parameters[k]
                params = [Parameter(g, fv.debug.derive("free variable of")) for fv in fvs]
                for q, fv in zip(params, fvs):
                    types[q] = types.get(fv, ANY)
                g.parameters = [*g.parameters[:k], *params, *g.parameters[k + 1:]]
                whole[old] = _closure_copy(graph, fvs, params, g, old, types)
            break
    if whole:
        substitute(root, whole)
    return bool(whole)


def _stacks_followed(root: Graph, types: dict | None) -> bool:
    """Whether the program's residual stacks, if it has any, are followed from push to pop
    (`_pushes_of`) and none holds sensitivities (a gradient of a gradient, whose stacks of
    sensitivities are built by the positions of the records they mirror: the liftings
    leave such a program as it is, the gradient it differentiates lifted already)."""
    if not any(primitive_name(n) == "stack_push" for g in reachable_graphs(root)
               for n in toposort(g)):
        return True
    provenance = _pushes_of(root, types)
    return provenance is not None and not provenance.summed


def _untouched(edited: set, graph: Graph, graphs: list[Graph]) -> bool:
    """Whether a lifting that copies `graph` and edits `graphs` meets no graph that another
    lifting of this call copied or edited (`edited`, which it joins if not): a copy made
    before an edit of a graph it copies would miss that edit (a three-deep loop's middle
    pops, in the outer backpropagator copied at the outer pop)."""
    touched = set(scope(graph)) | set(graphs)
    if not edited.isdisjoint(touched):
        return False
    edited |= touched
    return True


def _loops(family: list[Graph]) -> bool:
    """Whether the graphs of a result family go round: one calls itself through calls in
    tail position (a loop; a recursion's `if` leaves its closures to `closure_eta`)."""
    edges = {h: [t for t in tail_calls(h) if t in family]
             if isinstance(h.output, Apply) and h.output.graph is h else [] for h in family}
    state: dict = {}

    def cycle(h) -> bool:   # a graph on the walk's path met again
        if state.get(h) == "done":
            return False
        if state.get(h) == "open":
            return True
        state[h] = "open"
        found = any(cycle(t) for t in edges[h])
        state[h] = "done"
        return found
    return any(cycle(h) for h in family)


def _put(items: tuple, k: int, item) -> tuple:
    return items[:k] + (item,) + items[k + 1:]


def _flatten_results(tuples: list[Graph], calls: list[Apply], reads: dict, uses: dict,
                     n: int, types) -> int | None:
    """Where element k of the tuple every graph of `tuples` returns is itself a tuple (of
    one length) at each of them, and is only indexed with constants where it is read, its
    items become elements of the outer tuple: a gradient's forward loop of a forward loop
    returns `((value, adjoint, stack), stack)`, whose inner elements are then dropped or
    moved out one by one.  Edits the returns, the reads (`reads`, call -> its getitems)
    and the types of `calls`; returns the new length, or None where nothing is nested."""
    widths = {}
    for k in range(n):
        inner = [h.output.args[k] for h in tuples]
        if not all(primitive_name(x) == "make_tuple" and len(x.args) == len(inner[0].args)
                   for x in inner):
            continue
        m = len(inner[0].args)
        if types is not None and not all(isinstance(types[c].items[k], ATuple)
                                         and len(types[c].items[k].items) == m for c in calls):
            continue
        if all(primitive_name(u) == "getitem" and i == 1 and _const(u.args[1], int)
               and type(u.args[1].value) is int and -m <= u.args[1].value < m
               for rs in reads.values() for r in rs if r.args[1].value % n == k
               for u, i in uses.get(r, ())):
            widths[k] = m
    if not widths:
        return None
    start, at = [], 0
    for k in range(n):
        start.append(at)
        at += widths.get(k, 1)
    for h in tuples:
        old = h.output
        items = [y for k, x in enumerate(old.args)
                 for y in (x.args if k in widths else [x])]
        h.output = h.apply(P["make_tuple"], *items, location=old.location)
        if types is not None and isinstance(types.get(old), ATuple):
            types[h.output] = ATuple(tuple(y for k, t in enumerate(types[old].items)
                                           for y in (t.items if k in widths else [t])))
    if types is not None:
        for c in calls:
            types[c] = ATuple(tuple(y for k, t in enumerate(types[c].items)
                                    for y in (t.items if k in widths else [t])))
    for c, rs in reads.items():
        now = []
        for r in rs:
            k = r.args[1].value % n
            if k not in widths:
                r.set_inputs([*r.inputs[:2], Constant(start[k])])
                now.append(r)
                continue
            for u, _ in uses.get(r, ()):
                u.set_inputs([u.inputs[0], c, Constant(start[k] + u.args[1].value % widths[k])])
                now.append(u)
        rs[:] = now
    return at


def drop_unread_residuals(root: Graph, types: dict) -> bool:
    """Remove the fields of a loop gradient's residual records (passes/ad.py) that no pop
    of their stack reads, where they are pushed: the AD pushes every operand that a gradient
    rule may read, and once types are known most rules read fewer (`sum_to_like(d, i)` of a
    scalar i is d, so the counter `i` is unread).  A record left with one field is pushed as
    that value, without a tuple.

    Which pushes a pop's records come from is followed through the program (`_pushes_of`):
    pushes whose records one pop may see are changed alike, to the fields any of their pops
    reads (`_record_groups`).  Nothing is dropped where a stack goes anywhere but stack
    operations, tuples and calls of known graphs (a grad of grad adds stacks of
    sensitivities), where a record is not a tuple built at its push, or where a pop's
    record is used other than by `record[k]`, nor in a program whose stacks hold
    sensitivities (`_stacks_followed`); nor a field whose computation has an effect
    (`effect_free`) that nothing else evaluates (`_evaluated_elsewhere`: the value an
    inner loop returns, which the outer iteration reads too, is dropped from the record)."""
    provenance = _pushes_of(root, types)
    groups = _record_groups(provenance, users(root)) \
        if provenance is not None and not provenance.summed else None
    if groups is None:
        return False
    uses = users(root)
    effect_free_nodes: set = set()
    changed, whole = False, {}
    for pushed, records in groups:
        n = _record_length(pushed, records, uses)
        if not n:
            continue
        read = [_indexed_by(u, i) for r in records for u, i in uses.get(r, ())]
        made = {p.args[1] for p in pushed}
        kept = sorted({k % n for k in read} | {
            k for p in pushed for k, x in enumerate(p.args[1].args)
            if not effect_free(x, effect_free_nodes) and not _evaluated_elsewhere(x, made, uses)})
        if len(kept) == n:
            continue
        if kept or not _drop_stack(pushed, provenance, uses, whole):
            whole.update(_drop_fields(types, kept, pushed, records, uses))
        changed = True
    if changed:
        substitute(root, whole)
        _retype_stacks(root, types)
    return changed


def _drop_stack(pushed: list, provenance: "_Provenance", uses: dict, whole: dict) -> bool:
    """Where no field of a group's records is read and no `stack_empty` tests a stack they
    may be on, the pushes and pops go, each a use of its stack (a defunctionalised
    backpropagator's records of a branch that reads nothing once types are known: its
    tag says all, passes/defunctionalise.py); fills `whole` with these substitutions.
    Whether it did."""
    group = set(pushed)
    if any(primitive_name(n) == "stack_empty" and group & (provenance.of(n.args[0]) or set())
           for n in uses):
        return False
    whole.update((p, p.args[0]) for p in pushed)
    for pop in provenance.pops:
        if (provenance.of(pop.args[0]) or set()) & group:
            whole.update((u, pop.args[0]) for u, i in uses.get(pop, ()) if _indexed_by(u, i) == 1)
    return True


def _record_length(pushed: list, records: list, uses: dict) -> int | None:
    """The length of the records of a group of pushes, where each is a tuple made for its
    push alone, of one length, and each record popped is only read as `record[k]`: then
    changing the records at the pushes and their reads at the pops changes every reader.
    (A gradient of a gradient keeps a record in its own records too, whose sensitivity
    must keep the record's shape.)  None otherwise."""
    if any(primitive_name(p.args[1]) != "make_tuple" or uses.get(p.args[1]) != [(p, 2)]
           for p in pushed) \
            or any(_indexed_by(u, i) is None for r in records for u, i in uses.get(r, ())):
        return None
    n = len(pushed[0].args[1].args)
    return n if all(len(p.args[1].args) == n for p in pushed) else None


def _evaluated_elsewhere(x: Node, made: set, uses: dict) -> bool:
    """Whether x, used by the nodes `made`, is evaluated by another user too, or is an item
    of a tuple that is (`loop(...)[k]`, which cannot raise once the loop has returned)."""
    while True:
        if any(u not in made for u, _ in uses.get(x, ())):
            return True
        if _indexed_by(x, 1) is None:
            return False
        made, x = {x}, x.args[0]


def lift_record_closures(root: Graph, types: dict | None = None) -> bool:
    """A field of a loop gradient's residual records that holds, at every push, a closure of
    one graph G becomes G's free variables, and each pop's `record[k]` a copy of G reading
    the popped values in their place: what a nested loop's iteration pushes is the inner
    loop's backpropagator, a closure of the inner stacks and what the inner adjoints read,
    and the outer backward loop calls it.  So lifted, no closure is made per outer
    iteration, and the copy, called once, is inlined into the outer backward loop, which
    runs the inner one in place.  Inference makes a copy of G for each signature of the
    graphs around it (an outer loop's first iteration, whose inner counter is still
    unbound); a field holding copies of G at its pushes is lifted where each copy computes
    what G does from free variables of the same types (`_alike`).  A graph G whose copies
    differ, or that reads a closure made outside it, stays a closure (a tag per push,
    choosing among several graphs at the pop, is not made).  One field of a group of
    pushes is lifted per call (the optimizer calls again while anything changes), and a
    free variable that is itself such a closure (the inner loop's exit adjoint) is lifted
    in a later call in turn."""
    typed = types is not None
    types = types if typed else {}
    if not any(primitive_name(n) == "stack_push" and primitive_name(n.args[1]) == "make_tuple"
               and any(map(is_graph_constant, n.args[1].args))
               for g in reachable_graphs(root) for n in toposort(g)):
        return False    # (no record holds a closure: the provenance is not needed)
    provenance = _pushes_of(root, types if typed else None)
    groups = _record_groups(provenance, users(root)) \
        if provenance is not None and not provenance.summed else None
    if groups is None:
        return False
    uses = users(root)
    changed, whole, edited = False, {}, set()
    for pushed, records in groups:
        n = _record_length(pushed, records, uses)
        for k in range(n or 0):
            lifted = _one_closure([p.args[1].args[k] for p in pushed], types)
            if lifted is not None and _untouched(edited, lifted[0],
                                                 [n.graph for n in pushed + records]):
                whole.update(_lift_field(k, *lifted, pushed, records, uses, types))
                changed = True
                break
    if changed:
        substitute(root, whole)
        if typed:
            _retype_stacks(root, types)
    return changed


def _one_closure(values: list[Node], types: dict) -> tuple | None:
    """(G, G's free variables, for each value the nodes its copy of G reads in their place)
    where each of `values` is a closure of G or of a copy alike (`_alike`), G reads no
    closure made outside its scope (which a copy made elsewhere could not see), and G's
    free variables are typed as the join of the copies' (so that G's types, which
    inference found for those, hold for every copy's values: of the copies for an outer
    loop's first iteration, whose inner counter may be unbound, and for the others, the
    first)."""
    if not all(is_graph_constant(v) for v in values):
        return None
    for candidate in {v.value: None for v in values}:
        inner = scope(candidate)
        if any(h.defaults for h in inner) or any(
                is_graph_constant(x) and x.value.parent is not None
                and not is_nested_in(x.value, candidate)
                for h in inner for n in toposort(h) if isinstance(n, Apply) and n.graph is h
                for x in n.inputs):
            return None
        fvs = free_variables(candidate)
        reads = []
        for v in values:
            pairs = _alike(candidate, v.value)
            if pairs is None:
                return None
            if not all(_covers(types.get(x, ANY), types.get(pairs[x], ANY)) for x in fvs):
                break
            reads.append([pairs[x] for x in fvs])
        else:
            return candidate, fvs, reads
    return None


def _covers(wide, narrow) -> bool:
    """Whether type `wide` describes every value `narrow` does, taking functions for one
    kind (no pass reads which closures a function value may be, and the closures in a
    record, lifted or not, are copies per signature)."""
    def plain(t):
        if isinstance(t, AFunction):
            return ANY
        if containers(t):
            return with_items(t, tuple(map(plain, t.items)))
        if isinstance(t, AStack):
            return AStack(plain(t.item))
        if type(t) is AUnion:
            return AUnion(tuple(map(plain, t.options)), t.origin)
        return t
    wide = plain(wide)
    return join(wide, plain(narrow)) == wide


def _rebuilt_closure(graph: Graph, fvs: list, held: Node, at: int, like: Node,
                     types: dict) -> Constant:
    """A constant of a copy of `graph` (a closure of `fvs`) nested in held's graph, reading
    `held[at + i]` in place of fvs[i], typed as `like` (what it replaces)."""
    items = []
    for i, fv in enumerate(fvs):
        items.append(held.graph.apply(P["getitem"], held, at + i, name=fv.debug.name,
                                      location=like.location))
        types[items[-1]] = types.get(fv, ANY)
    return _closure_copy(graph, fvs, items, held.graph, like, types)


def _closure_copy(graph: Graph, fvs: list, values: list, parent: Graph, like: Node,
                  types: dict) -> Constant:
    """A constant of a copy of `graph` nested in `parent`, reading values[i] in place of
    its free variable fvs[i], typed as `like` (what it replaces); `graph` itself where it
    reads nothing and is defined at the top."""
    if not fvs and graph.parent is None:
        copy = graph
    else:
        cloner = Cloner(dict(zip(fvs, values)))
        copy = cloner.graph(graph)
        copy.parent = parent if fvs else None
        for old, new in list(cloner.mapping.items()):
            if old in types and new is not old:
                types[new] = types[old]
    const = Constant(copy, like.debug)
    types[const] = types.get(like, ANY)
    return const


def _alike(a: Graph, b: Graph) -> dict | None:
    """{node of a's scope, or free variable of a: its counterpart in b} where b computes
    what a does: the same operations on the same constants, b's own graphs in place of a's,
    one free variable of b for each of a's; None otherwise.  (Inference's copies of a graph
    for the signatures of the graphs around it are alike where types changed nothing.)"""
    if a is b:
        return {x: x for x in free_variables(a)}
    pairs: dict = {}
    graphs = {a: b}
    stack = [(a.output, b.output)]
    while stack:
        x, y = stack.pop()
        if x in pairs:
            if pairs[x] is not y:
                return None
            continue
        pairs[x] = y
        if is_graph_constant(x):
            g = x.value
            if not is_graph_constant(y):
                return None
            if not is_nested_in(g, a):
                if y.value is not g:
                    return None
                continue
            h = y.value
            if graphs.setdefault(g, h) is not h or not is_nested_in(h, b) \
                    or len(g.parameters) != len(h.parameters):
                return None
            stack += [(g.output, h.output), *zip(g.parameters, h.parameters)]
        elif isinstance(x, Constant):
            if not (isinstance(y, Constant) and (x.value is y.value or _same_constant(x, y))):
                return None
        elif x.graph is not None and is_nested_in(x.graph, a):   # a node of a's scope
            if type(x) is not type(y) or y.graph is not graphs.get(x.graph):
                return None
            if isinstance(x, Apply):
                if len(x.inputs) != len(y.inputs):
                    return None
                stack += zip(x.inputs, y.inputs)
            elif x.graph.parameters.index(x) != y.graph.parameters.index(y):
                return None
        elif y.graph is None or is_nested_in(y.graph, b):   # a free variable: b's own
            return None
    fvs = [pairs[x] for x in free_variables(a)]
    return pairs if len(set(fvs)) == len(fvs) else None


def _lift_field(k: int, graph: Graph, fvs: list, reads: list, pushed: list, records: list,
                uses: dict, types: dict) -> dict:
    """Push, in field k's place, the values each push's copy of `graph` reads; at each pop,
    read field k as a copy of `graph` nested in the pop's graph, reading the popped values
    (or as `graph` itself, where it reads none and is defined at the top).  Returns
    {read of field k: the copy}, to substitute."""
    n, m = len(pushed[0].args[1].args), len(fvs)
    for push, values in zip(pushed, reads):
        record = push.args[1]
        fields = [*record.args[:k], *values, *record.args[k + 1:]]
        made = push.graph.apply(P["make_tuple"], *fields, location=record.location)
        types[made] = ATuple(tuple(types.get(v, ANY) for v in fields))
        push.set_inputs([push.fn, push.args[0], made])
    whole = {}
    for record in records:
        reads_k = []
        for field, _ in uses.get(record, ()):
            j = field.args[1].value % n
            if j == k:
                reads_k.append(field)
            else:
                field.set_inputs([*field.inputs[:2], Constant(j if j < k else j + m - 1)])
        for field in reads_k:   # one copy per pop
            whole[field] = _rebuilt_closure(graph, fvs, record, k, field, types) \
                if field is reads_k[0] else whole[reads_k[0]]
    return whole


def _record_groups(provenance: "_Provenance", uses: dict) -> list | None:
    """The pushes whose records one pop may see, in groups (a pop sees records of one group
    only), each with the records its pops give (`pop[0]`), for the groups whose every pop
    is used only as `pop[0]` and `pop[1]`, and whose records are not summed or zeroed as
    sensitivities: a gradient of a gradient reads some pops whole, and builds the
    sensitivities of a gradient's records by their positions, which must not change; None
    where the pushes of a pop's stack are not known."""
    group = {p: p for p in provenance.pushes}

    def find(p):
        while group[p] is not p:
            p = group[p]
        return p
    popped = []
    for pop in provenance.pops:
        source = provenance.of(pop.args[0]) or frozenset()
        if not isinstance(source, frozenset):
            return None
        pushed = sorted(source, key=lambda p: p.debug.id)
        for p in pushed[1:]:
            group[find(p)] = find(pushed[0])
        records = [u for u, i in uses.get(pop, ()) if _indexed_by(u, i) == 0]
        whole = any(_indexed_by(u, i) not in (0, 1) for u, i in uses.get(pop, ()))
        if pushed:
            popped.append((pushed[0], records, whole))
    members: dict = {}
    for p in provenance.pushes:
        members.setdefault(find(p), ([], []))[0].append(p)
    read_whole = {find(p) for p in provenance.summed}
    for first, records, whole in popped:
        members[find(first)][1].extend(records)
        if whole:
            read_whole.add(find(first))
    return [m for rep, m in members.items() if rep not in read_whole]


class _Provenance:
    """For each node holding residual stacks, the pushes that may have made their cells: a
    frozenset for a stack, a tuple of these for a tuple (a record holding an inner loop's
    stacks too), None for a value holding none."""

    def __init__(self):
        self.values: dict = {}
        self.pushes: list = []
        self.pops: list = []
        self.summed: set = set()    # pushes whose records are summed or zeroed as
        #                             sensitivities (a gradient of a gradient)

    def of(self, node):
        if isinstance(node, Constant):
            return frozenset() if node.value is EMPTY_STACK else None
        return self.values.get(node)


def _merged(a, b):
    """The provenance of a value that is a or b (None: it holds no stack, or its provenance
    is not known yet); raises ValueError where their shapes differ."""
    if a == b or b is None:
        return a
    if a is None:
        return b
    if isinstance(a, frozenset) and isinstance(b, frozenset):
        return a | b
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(map(_merged, a, b))
    raise ValueError


class _Unfollowed(Exception):
    """A call whose callee takes another number of arguments: `_pushes_of` gives up."""


def _pushes_of(root: Graph, types: dict) -> _Provenance | None:
    """The provenance of every node (`_Provenance`), found to a fixed point over the
    program; None where a stack goes where it cannot be followed.  A call of a function
    value holds no stack where `types` say so; without types, where no graph used as a
    value takes or returns one (the backpropagators and exit adjoints a gradient calls
    return sensitivities); it may be passed empty stacks (a zero sensitivity).  The sum of
    two stacks of sensitivities (`gadd`, in a gradient of a gradient) holds sums of
    records of either."""
    prov = _Provenance()
    order = [(n, primitive_name(n)) for g in reachable_graphs(root) for n in toposort(g)
             if isinstance(n, Apply) and n.graph is g]
    prov.pushes = [n for n, name in order if name == "stack_push"]
    prov.pops = [n for n, name in order if name == "stack_pop"]
    if not prov.pushes or any(_const(a, Primitive) and a.value.name in ("stack_push", "stack_pop")
                              for n, _ in order for a in n.args):
        return None     # no stack, or a stack operation as a value
    uses = graph_uses(root)
    kept = ("switch",) if types is None else ("switch", "make_tuple")
    readers: dict = {}  # node -> the nodes of `order` to visit again when its value changes
    for node, name in order:
        for a in node.args:
            readers.setdefault(a, []).append((node, name))
        sc = switch_call(node) if name is None else None
        for g in [sc.then, sc.else_] if sc is not None else \
                [node.fn.value] if name is None and is_graph_constant(node.fn) else ():
            readers.setdefault(g.output, []).append((node, name))
    pops = [(n, "stack_pop") for n in prov.pops]
    for push in prov.pushes:    # a pop gives what the pushes of its stack pushed
        readers.setdefault(push.args[1], []).extend(pops)
    queue = deque(order)
    queued = set(order)

    def set_(node, value):
        nonlocal changed
        old = prov.values.get(node, value)
        new = _merged(old, value)
        if node not in prov.values or new != old:
            prov.values[node] = new
            changed = True
            for reader in readers.get(node, ()):
                if reader not in queued:
                    queued.add(reader)
                    queue.append(reader)

    def visit(node, name) -> bool:
        """Update `node`'s provenance from its inputs'; whether it loses a stack."""
        args = [prov.of(a) for a in node.args]
        if name == "stack_push":
            set_(node, frozenset({node}) | (args[0] or frozenset()))
        elif name == "stack_pop":   # (what the pushes pushed, the stack)
            item = None
            for push in args[0] or ():
                item = _merged(item, prov.of(push.args[1]))
            set_(node, (item, args[0] or frozenset()))
        elif name == "make_tuple":
            if any(a is not None for a in args):
                set_(node, tuple(args))
        elif name == "getitem" and isinstance(args[0], tuple):
            if _indexed_by(node, 1) is None:
                return True
            set_(node, args[0][node.args[1].value])
        elif name == "depend":  # its effect operand is evaluated, not read
            if args[0] is not None:
                set_(node, args[0])
        elif name in ("gadd", "grad_zeros", "getitem_grad"):
            prov.summed.update(p for a in args for p in _pushes_in(a))
            if name == "gadd":  # stacks of sensitivities: pops see records of
                if args[0] is not None or args[1] is not None:  # either, or sums
                    set_(node, _merged(args[0], args[1]))
            elif name == "grad_zeros":  # a stack's zero is the empty stack
                if args[0] is not None:
                    set_(node, _emptied(args[0]))
            elif isinstance(args[0], tuple):
                if not (_const(node.args[1], int) and type(node.args[1].value) is int):
                    return True     # (x's zeros, with d at k)
                set_(node, _put(_emptied(args[0]), node.args[1].value, args[2]))
            elif args[0] is not None or args[2] is not None:
                return True
        elif name == "stack_empty" or (name is not None and all(a is None for a in args)):
            return False
        elif name is not None:
            return True     # a stack where it cannot be followed
        else:
            sc = switch_call(node)
            callees = [sc.then, sc.else_] if sc is not None else \
                [node.fn.value] if is_graph_constant(node.fn) else None
            if callees is None:     # a function value: without types, one of
                return any(map(_pushed, args)) or types is not None and (
                    types.get(node, ANY) is ANY or holds_stack(types[node]))
                #                     (the graphs used as values: checked below)
            for g in callees:
                if len(g.parameters) != len(args):
                    raise _Unfollowed
                for p, a in zip(g.parameters, args):
                    if a is not None:
                        set_(p, a)
                out = prov.of(g.output)
                if out is not None:
                    set_(node, out)
        return False

    # A worklist to the fixed point, then a pass over every node that changes nothing (or
    # goes round again) and tells whether a stack is lost where it cannot be followed.
    changed = True
    try:
        while changed:
            while queue:
                item = queue.popleft()
                queued.discard(item)
                visit(*item)
            changed = lost = False
            for item in order:
                lost |= visit(*item)
            for g, calls in uses.items():   # a graph used as a value: its stacks are lost,
                holds = any(prov.of(p) is not None for p in g.parameters) \
                    or prov.of(g.output) is not None    # where typed, unless in a tuple
                if holds and any(i != 0 and primitive_name(c) not in kept for c, i in calls):
                    lost = True     # (called as a function value, as checked above)
        if lost:
            return None
    except (ValueError, IndexError, _Unfollowed):  # shapes that differ; a tuple indexed
        return None                                # out of range; a call of another arity
    return prov


def _pushes_in(v) -> set:
    """The pushes whose records a value of provenance v may hold, at any depth."""
    if isinstance(v, frozenset):
        return set(v)
    return set().union(*map(_pushes_in, v)) if isinstance(v, tuple) else set()


def _pushed(v) -> bool:
    """Whether a value of provenance v may hold a pushed record (not only empty stacks)."""
    if isinstance(v, frozenset):
        return bool(v)
    return isinstance(v, tuple) and any(map(_pushed, v))


def _emptied(v):
    """The provenance of the zero of a value of provenance v: empty stacks for its stacks."""
    if isinstance(v, frozenset):
        return frozenset()
    return tuple(map(_emptied, v)) if isinstance(v, tuple) else v


def _indexed_by(user, i: int) -> int | None:
    """k where `user` is `value[k]` (value its input i) with an int constant k, else None."""
    if i == 1 and isinstance(user, Apply) and primitive_name(user) == "getitem" \
            and _const(user.args[1], int) and type(user.args[1].value) is int:
        return user.args[1].value
    return None


def _drop_fields(types: dict, kept: list, pushed: list, records: list, uses) -> dict:
    """Push only the fields `kept` of the records of `pushed`, and read them so from
    `records` (the records their pops give).  Returns {read of the one field kept: the
    record}, to substitute."""
    n = len(pushed[0].args[1].args)
    for push in pushed:
        record = push.args[1]
        values = [record.args[k] for k in kept]
        if len(kept) == 1:
            made = values[0]
        else:
            made = push.graph.apply(P["make_tuple"], *values, location=record.location)
            types[made] = ATuple(tuple(types.get(v, ANY) for v in values))
        push.set_inputs([push.fn, push.args[0], made])
    whole = {}
    for record in records:
        for field, _ in uses.get(record, ()):
            k = kept.index(field.args[1].value % n)
            if len(kept) == 1:
                whole[field] = record
            else:
                field.set_inputs([*field.inputs[:2], Constant(k)])
    return whole


def _retype_stacks(root: Graph, types: dict) -> None:
    """Give the stacks whose records changed, and what holds them, their records' new
    types, so that the types still tell the truth about the values (tests/test_infer.py
    checks it at run time): a stack's item is the join of what its pushes push, and a
    record holding an inner loop's stacks changes with them.  Provenance is found again on
    the program as it is now."""
    provenance = _pushes_of(root, types)
    if provenance is None:
        return
    items: dict = {}

    def item(pushes: frozenset):
        if pushes not in items:
            items[pushes] = BOTTOM     # (a stack holding itself: not made)
            t = BOTTOM
            for p in pushes:
                t = join(t, retyped(types.get(p.args[1], ANY), provenance.of(p.args[1])))
            items[pushes] = t
        return items[pushes]

    def retyped(t, v):
        if isinstance(v, frozenset):
            return AStack(item(v)) if isinstance(t, AStack) and v else t
        if isinstance(v, tuple) and isinstance(t, ATuple) and len(t.items) == len(v):
            return ATuple(tuple(ti if vi is None else retyped(ti, vi)
                                for ti, vi in zip(t.items, v)))
        return t

    new = {}
    for node, v in provenance.values.items():
        if node not in types:
            continue
        if primitive_name(node) == "stack_pop":
            popped = item(v[1])
            new[node] = ATuple((popped, AStack(popped)))
        elif v is not None:
            new[node] = retyped(types[node], v)
    uses = users(root)
    for pop in provenance.pops:     # the records popped
        for user, i in uses.get(pop, ()):
            if _indexed_by(user, i) == 0 and provenance.of(pop.args[0]):
                new[user] = item(provenance.of(pop.args[0]))
    types.update(new)


# drop_unused_outputs leaves work to drop_unused_parameters; lifting a result's closure comes
# before the tuple holding it is dropped for an unread element (a bare closure stays).
PRUNES = [lift_result_closures, drop_unused_outputs, drop_unused_parameters,
          lift_parameter_closures, lift_record_closures, defunctionalise]
TYPED_PRUNES = [drop_unread_residuals]


# ------------------------------------------------------------------ driver

class Context:
    """What rewrites may ask about the program during one sweep: the call counts, sizes and
    recursion of graphs and the nodes `present` when it started, node order (for inlining),
    the types if known, and the graphs already specialised (kept from sweep to sweep)."""

    def __init__(self, root: Graph, types: dict | None = None,
                 specialised: dict | None = None, moves: bool = False):
        self.root = root
        self.moves = moves  # whether a graph called once is moved where called (not copied)
        self.recursive = recursive_graphs(root)
        uses = graph_uses(root)
        self.calls = {g: len(u) for g, u in uses.items()}
        self.types = types
        if types is not None:   # (asked of nearly every node a typed rewrite meets)
            self.type_of = types.get
        self.specialised = {} if specialised is None else specialised
        self._sizes: dict[Graph, int] = {}
        self._ids: dict[Graph, SortedIds] = {}
        graphs = reachable_graphs(root)
        self.present: set[Node] = set()
        for g in graphs:
            self.present.update(toposort(g))
        self.graphs = set(graphs)   # those a sweep may move (`move_inline`)
        self._graphs = {id(g.debug): g for g in graphs}
        self._typed_debug: dict | None = None
        self.constant_parts: dict[Constant, tuple] = {}     # (for `_cse_key`)
        # calls copied from the only call of a graph by inlining it there: they are the only
        # calls of their callees, as the calls they were copied from were (those are gone)
        self.sole: set[Node] = set()
        # graphs that copies made in this sweep use (or the specialised copies kept from
        # earlier sweeps, which may be used again), and graphs passed to inlined graphs:
        # their count of calls is out of date, and they are not moved
        self.copied: set[Graph] = set()
        for copy in self.specialised.values():
            self.copying(copy)

    def passing(self, args: list[Node]) -> None:
        """Note that `args` take the place of the parameters of a graph being inlined: a
        graph among them gains a use for each use of its parameter (see `copied`)."""
        if self.moves:
            self.copied.update(a.value for a in args if is_graph_constant(a))

    def copying(self, g: Graph) -> None:
        """Note that a copy of g's scope is made (or may be): see `copied`."""
        if self.moves:
            for h in scope(g):
                self.copied.update(callees(h))

    def take_over(self, copies: dict) -> None:
        """The copies that inlining the only call of a graph made (old -> new) take the
        place of the originals, which no longer run: the calls among them count as the
        calls present, and the graphs nested in it have the originals' call counts.  A
        chain of such graphs (a gradient's J graph inlined into the gradient, then its
        backpropagator) is then inlined in one sweep, not one link per sweep."""
        for old, new in copies.items():
            if isinstance(old, Graph):
                if old in self.calls and new is not old:
                    self.calls[new] = self.calls[old]
            elif isinstance(old, Apply) and (old in self.present or old in self.sole):
                self.sole.add(new)

    def is_recursive(self, g: Graph) -> bool:
        """Whether g is on a cycle of calls, or is a copy made in this sweep (by inlining
        or specialisation) of a graph that is, or of one this sweep did not start with."""
        debug = g.debug
        while debug is not None:
            h = self._graphs.get(id(debug))
            if h is not None:
                return h in self.recursive
            debug = debug.origin
        return True

    def size(self, g: Graph) -> int:
        if g not in self._sizes:
            self._sizes[g] = scope_size(g)
        return self._sizes[g]

    def type_of(self, node: Node):
        """node's type, None where unknown (`types.get` itself where there are types)."""
        return None

    def inherit_types(self, made: Node) -> None:
        """Type the nodes that copying a graph's scope made (those `made` depends on, in
        its graph and the graphs nested in it) as the nodes they were copied from (their
        debug info's origin): inference specialises a graph where its signatures differ,
        so one graph has one typing."""
        if self.types is None:
            return
        if self._typed_debug is None:
            self._typed_debug = {id(n.debug): n for n in self.types}
        originals = self._typed_debug
        stack, seen = [made], set()
        while stack:
            n = stack.pop()
            if n in seen or (n in self.types and not is_graph_constant(n)):
                continue
            seen.add(n)
            origin = originals.get(id(n.debug.origin))
            if origin is not None and origin in self.types:
                self.types.setdefault(n, self.types[origin])
                originals[id(n.debug)] = n  # copies of this copy find it
            if isinstance(n, Apply):
                stack.extend(n.inputs)
            elif is_graph_constant(n) and n.value.parent is not None:
                stack.append(n.value.output)

    def replaced(self, old: Node, new: Node) -> None:
        """`new` computes what `old` did: it has old's type."""
        if self.types is not None and old in self.types:
            self.types.setdefault(new, self.types[old])

    def id_before(self, node: Node) -> float:
        """The largest id below node's among the nodes of its graph visited in this sweep:
        inlined copies go between that node and `node`."""
        ids = self._ids.get(node.graph)
        before = ids.below(node.debug.id) if ids is not None else None
        return before if before is not None else node.debug.id - 1

    def visited(self, g: Graph) -> "SortedIds":
        """The ids of g's nodes visited in this sweep, to which g's sweep adds each node's
        as it visits it."""
        ids = self._ids.get(g)
        if ids is None:
            ids = self._ids[g] = SortedIds()
        return ids


class SortedIds:
    """A sorted collection of numbers, in runs of at most `2 * RUN` (each sorted, the runs
    in order), so that adding one costs a search and a move of at most one run's items.  In
    one sorted list, a sweep over a gradient of 800 calls added ids 8,000 places from the
    end on average: time in the square of the graph's size.  `add` only notes a number
    (a sweep adds one per node it visits, and asks `below` far less often): those noted
    are sorted in when `below` is next asked, without a call each."""

    RUN = 256

    def __init__(self):
        self.runs: list[list[float]] = [[]]
        self.firsts: list[float] = [-math.inf]  # each run's smallest (the first's: none)
        self.added: list[float] = []
        self.add = self.added.append

    def below(self, x: float) -> float | None:
        """The largest number added that is below x, or None."""
        if self.added:
            self._sort_in()
        i = bisect.bisect_left(self.firsts, x) - 1     # the last run starting below x
        run = self.runs[i]
        j = bisect.bisect_left(run, x) - 1
        return run[j] if j >= 0 else None   # (only the first run may start at x or above)

    def _sort_in(self) -> None:
        runs, firsts, limit = self.runs, self.firsts, 2 * self.RUN
        last = runs[-1]
        for x in self.added:
            if not last or x >= last[-1]:   # a sweep visits many nodes in id order
                i, run = len(runs) - 1, last
                run.append(x)
            else:
                i = bisect.bisect_right(firsts, x) - 1
                run = runs[i]
                bisect.insort(run, x)
            if len(run) > limit:
                runs[i:i + 1] = [run[:self.RUN], run[self.RUN:]]
                firsts[i + 1:i + 1] = [run[self.RUN]]
                last = runs[-1]
        self.added.clear()


def _resolve(node: Node, subst: dict) -> Node:
    while node in subst:
        node = subst[node]
    return node


COMMUTATIVE = frozenset({"mul"})
_NOT_SHARED = frozenset({"raise_", "make_exception", "print_"})   # each call does its own
_SCALARS = (int, float, bool, str, type(None))


def _cse_key(node: Apply, name: str | None, constant_parts: dict):
    """What identifies node's value: its function and inputs (constants by type and repr,
    so 0.0 and -0.0 differ; other inputs by identity).  `mul` commutes exactly in IEEE
    arithmetic (x * y == y * x bit for bit, and for sequences n * s == s * n), so its
    operands are keyed as a set; `add` does not commute for strings and tuples, and nothing
    is reassociated.  `constant_parts` keeps the part of each constant node met (a sweep
    meets the shared constants of primitives at every call)."""
    if name in _NOT_SHARED:
        return None
    parts = []
    for inp in node.inputs:
        if type(inp) is Constant:
            part = constant_parts.get(inp)
            if part is None:
                part = constant_parts[inp] = _constant_part(inp.value)
            if not part:
                return None
            parts.append(part)
        else:
            parts.append(inp)   # (nodes hash and compare by identity)
    if name in COMMUTATIVE:
        return (parts[0], frozenset(parts[1:]))
    return tuple(parts)


def _constant_part(v) -> tuple:
    """A constant's part of a key, or () if calls of it are not shared."""
    if type(v) in _SCALARS:
        return ("c", type(v), repr(v))  # repr: 0.0 and -0.0 differ
    if isinstance(v, (Graph, Primitive, Env)):
        return ("o", id(v))
    return ()


def sweep(root: Graph, rewrites=None, ctx: Context | None = None) -> bool:
    """One pass of every rewrite and of common subexpression elimination over every node
    of the graphs reachable from root, each graph simplified before the graphs it uses are
    found (`_graphs_used`): what its inlining made unreachable is not simplified, and the
    graphs that inlining copied (branches nested in an inlined graph) are.  Nodes that
    rewrites make (the copies of an inlined graph, say) are simplified as soon as they are
    made, inputs first, rather than in the next sweep.  Returns whether anything
    changed."""
    dispatch = Dispatch(REWRITES if rewrites is None else rewrites)
    ctx = ctx or Context(root)
    subst: dict[Node, Node] = {}  # keyed by node (not id): replaced nodes stay alive
    changed = False
    pending = deque([root])
    found = {root}
    walked: set[Node] = set()
    while pending:
        g = pending.popleft()
        changed |= _sweep_graph(g, dispatch, ctx, subst)
        for h in _graphs_used(g, subst, walked):
            if h.moved_into is not None:
                raise GraphMoved(h)
            if h not in found:
                found.add(h)
                pending.append(h)
    bump_version()
    if changed:  # nodes made by inlining may use nodes replaced later in the sweep
        substitute(root, subst)
        if ctx.moves and any(g.moved_into is not None for g in reachable_graphs(root)):
            raise GraphMoved(root)  # a graph moved was used elsewhere too
    return changed


def _graphs_used(g: Graph, subst: dict, seen: set) -> list[Graph]:
    """The graphs whose constants the simplified g uses, directly or through the nodes of
    other graphs that g's closures capture, in discovery order; `seen`: the nodes walked
    before in this sweep, not walked again.  Inputs are read through `subst` (a closure not
    swept yet still reads the node its free variable was before simplification).  A sweep
    walks the program from its root through these, each graph once it is simplified: a
    graph whose every call was inlined is no longer found, and is not simplified for
    nothing (in a chain of calls, simplifying each function of it after inlining the rest
    of the chain into the first cost time in the square of the chain's length)."""
    found = []
    stack = [g.output]
    while stack:
        node = _resolve(stack.pop(), subst)
        if node in seen:
            continue
        seen.add(node)
        if isinstance(node, Apply) and node.graph is not None:
            stack.extend(reversed(node.inputs))
        elif is_graph_constant(node):
            found.append(node.value)
    return found


def _sweep_graph(g: Graph, dispatch: Dispatch, ctx: Context, subst: dict) -> bool:
    """Simplify g's nodes (a sweep's work on one graph); record replacements in subst.
    The nodes are g's at the start, in `toposort`'s order, each after its inputs and
    with the nodes rewrites make (or inlining moves into g) as they are made; then those
    that closures made in this sweep read (`_captured`), and what simplifying them makes."""
    changed = False
    seen: dict = {}
    done: set[Node] = set()
    captured: list[Node] = []
    order = toposort(g)
    initial = set(order)
    visited = ctx.visited(g).add
    replaced = subst.keys()     # (a view: it follows subst)
    # (The loop's body is written out, rather than in helpers, for speed: it runs for
    # every node of the program, tens of thousands of times per sweep.)
    for start in [*order, None]:
        if start is not None and (type(start) is not Apply or start.graph is not g
                                  or start in done):
            continue    # (as the loop below would: not one of g's nodes to simplify)
        stack = [start] if start is not None else captured
        while stack:
            node = stack[-1]
            if type(node) is not Apply or node.graph is not g or node in done:
                stack.pop()
                continue
            inputs = node.inputs
            if not replaced.isdisjoint(inputs):     # (`_resolve_inputs`)
                node.set_inputs([_resolve(i, subst) for i in inputs])
                inputs = node.inputs
            fresh = None    # (a loop, not a comprehension: no call for the usual none)
            for i in inputs:
                if type(i) is Apply and i.graph is g and i not in done:
                    if fresh is None:
                        fresh = [i]
                    else:
                        fresh.append(i)
            if fresh is not None:
                stack.extend(fresh)
                continue
            stack.pop()
            done.add(node)
            visited(node.debug.id)
            for i in inputs:
                if type(i) is Constant and type(i.value) is Graph:
                    captured += _captured(node, g, initial)
                    break
            new = _simplify(node, dispatch, ctx, seen)
            if new is not None:
                subst[node] = new
                changed = True
                stack.append(new)
    _resolve_output(g, subst)
    return changed


def _captured(node: Apply, g: Graph, initial: set) -> list[Node]:
    """The nodes of g that the closures `node` uses read, where this sweep made them or
    moved them into g (those `initial`, in `toposort(g)` when g's sweep started, are
    visited in that order).  A closure that inlining copied reads the
    copies of the inlined graph's nodes: simplified in the same sweep, a backpropagator
    reads the next one of a chain of calls as a graph constant, and inlining goes on down
    the chain in this sweep, not one link per sweep.  A graph `move_inline` emptied met
    here, before any rewrite reads it, raises `GraphMoved` (see `_moving_or_copying`)."""
    found = []
    for i in node.inputs:
        if type(i) is Constant and type(i.value) is Graph:
            h = i.value
            if h.moved_into is not None:
                raise GraphMoved(h)
            if h.parent is not None:
                found += [v for v in free_variables(h)
                          if type(v) is Apply and v.graph is g and v not in initial]
    return found


def _resolve_inputs(node: Apply, subst: dict) -> None:
    """Make node use subst[i] for each input i, changing it (and its graph's stamp) only if
    one is replaced: a sweep leaves the analyses of graphs it does not change valid."""
    if not subst.keys().isdisjoint(node.inputs):
        node.set_inputs([_resolve(i, subst) for i in node.inputs])


def _resolve_output(g: Graph, subst: dict) -> None:
    out = _resolve(g.output, subst)
    if out is not g.output:
        g.output = out


def _simplify(node: Apply, dispatch: Dispatch, ctx: Context, seen: dict) -> Node | None:
    """The node that replaces `node`: an equal one seen before (CSE), or the first
    rewrite's result; None if none applies."""
    name = primitive_name(node)
    key = _cse_key(node, name, ctx.constant_parts)
    if key is not None and key in seen:
        return seen[key]
    for rewrite in dispatch[name]:
        mark = id_mark()
        new = rewrite(node, ctx)
        if new is not None and new is not node:
            ctx.replaced(node, new)
            _in_place_of(node, new, mark, ctx)
            return new
    if key is not None:
        seen[key] = node
    return None


def _in_place_of(node: Apply, new: Node, mark: int, ctx: Context) -> None:
    """Order the nodes of node's graph that a rewrite made (ids above mark) for `new` where
    node was: ids between node's and the one before it, as inlining does (`edit.inline`).
    With fresh ids they would run after everything made before them: `k %= 3` made `k % 3`
    late, and an unused `2.5 // k` then raised after a later `math.log(x)`."""
    made, stack = {}, [new]
    while stack:
        n = stack.pop()
        if isinstance(n, Apply) and n.graph is node.graph and n.debug.id > mark \
                and id(n) not in made:
            made[id(n)] = n
            stack.extend(n.inputs)
    if not made:
        return
    before = ctx.id_before(node)
    step = (node.debug.id - before) / (len(made) + 1)
    for k, n in enumerate(sorted(made.values(), key=lambda n: n.debug.id)):
        n.debug.id = before + (k + 1) * step


def substitute(root: Graph, subst: dict) -> None:
    """Make every graph reachable from root use subst[n] (resolved) for each node n.  (A
    walk over inputs, not `toposort`: the order does not matter here, and sorting every
    graph after each sweep cost as much as the sweep.)"""
    seen: set[Node] = set()
    for g in reachable_graphs(root):
        _resolve_output(g, subst)
        stack = [g.output]
        while stack:  # into other graphs' nodes too: those only closures read
            node = stack.pop()
            if node in seen or not isinstance(node, Apply):
                continue
            seen.add(node)
            _resolve_inputs(node, subst)
            stack.extend(node.inputs)
    bump_version()


def _run(root: Graph, rewrites: list, types: dict | None, moves: bool,
         settle: bool = True, prunes: list | None = None) -> Graph:
    """Sweeps and prunes (`prunes`, by default `PRUNES`) until a sweep and the prunes after
    it change nothing (a fixpoint), or, if not `settle`, until the prunes after a sweep
    find nothing."""
    specialised: dict = {}
    pruned = False
    for _ in range(MAX_SWEEPS):
        changed = sweep(root, rewrites, Context(root, types, specialised, moves))
        if changed and settle and _alone(root):
            changed = False     # (another sweep would find nothing)
        # prunes look at the whole program: once the rewrites are done, and after each
        # sweep that follows prunes that found something (which mostly leaves them more to
        # find: no sweep that changes nothing between)
        if not changed or pruned or not settle:
            pruned = False
            for prune in PRUNES if prunes is None else prunes:
                pruned |= prune(root, types)
            if types is not None:
                for prune in TYPED_PRUNES:
                    pruned |= prune(root, types)
            changed = changed | pruned if settle else pruned
        if not changed:
            break
    return root


def _alone(root: Graph) -> bool:
    """Whether the program is `root` alone, holding no graph constant (no call of a graph,
    no closure).  A sweep of it leaves nothing for another to do: it simplifies each node
    after its inputs (`_sweep_graph`), and only the rewrites of calls and closures read
    anything but a node, its inputs (simplified before it, and not changed after) and their
    types (call counts, users, other graphs' bodies); no rewrite edits another node.  The typed
    optimization of a gradient of 800 helper functions, inlined into one graph, spent a
    fifth of its time confirming that."""
    return reachable_graphs(root) == [root] and not callees(root)


def optimize(root: Graph, in_place: bool = False, moves: bool = True,
             settle: bool = True, prunes: list | None = None) -> Graph:
    """An optimized copy of the program rooted at `root`.  (A copy: the program may hold
    graphs that caches share between compiles, the parsed functions and gradient rules, and
    the caller may show it as it is.)  `in_place`: the caller has no more use for root's
    program, and root itself is optimized if the program holds no shared graph
    (`Graph.shared`), as that of a transform (`passes.expand`) does not; moves
    (`move_inline`) then happen as `moves` says, and a moved graph used again raises
    `GraphMoved` for the caller to start over without (see `_moving_or_copying`).  Copying
    the 1,600 graphs of the gradient of 800 helper functions was an eighth of its
    optimization.

    Not `settle`: no sweep confirms that the last one left nothing to do (see `_run`), for
    the program inference is about to read, which the typed optimization, running every
    rewrite again, takes to a fixpoint.  Of the 4,200 untyped optimizations of a run of
    tests/test_grad.py, test_loops.py and test_constructs.py, 7 had something left to do;
    the gradient of 800 helper functions spent a sixth of its optimization confirming it
    had nothing left.  `prunes`: the graph-level passes to run, if not `PRUNES`."""
    if in_place and not any(g.shared for g in reachable_graphs(root)):
        return _run(root, REWRITES, None, moves, settle, prunes)
    return _moving_or_copying(
        lambda moves: _run(clone_program(root), REWRITES, None, moves, settle, prunes))


def _moving_or_copying(run):
    """`run(moves=True)`: inlining moves the body of a graph called once rather than copying
    it (`move_inline`).  The count of calls it goes by is taken at the start of a sweep, and
    a rewrite may since have made another use of the graph (a call through a tuple element
    resolved, say): a moved graph met again raises `GraphMoved`, and the optimization runs
    again on a fresh copy with every inlining a copy, as it would have without moves."""
    try:
        return run(True)
    except GraphMoved:
        return run(False)


def optimize_typed(root: Graph, types: dict, entry: bool = False, in_place: bool = False,
                   moves: bool = True) -> tuple[Graph, dict]:
    """An optimized copy of the program rooted at `root`, with the types `passes.infer`
    found for it (node -> abstract value): the rewrites of `TYPED_REWRITES` as well as the
    others.  Returns the copy and its types: the nodes rewrites make have the type of the
    node they replace, copies of inlined graphs that of their original.  `entry`: root is
    the program's entry, called by the caller with its arguments, whose dicts are taken
    apart (`flatten_dict_parameters`).  `in_place`: root itself is optimized, for a
    program whose every graph is the caller's to edit (as inference makes them); moves
    (`move_inline`) then happen as `moves` says, and a moved graph used again raises
    `GraphMoved` for the caller to start over without (see `_moving_or_copying`)."""
    def run(moves: bool):
        if in_place:
            graph, copied = root, dict(types)
        else:
            cloner = Cloner()
            cloner.scopes([g for g in reachable_graphs(root) if g.parent is None])
            graph, copied = cloner.mapping[root], {cloner.mapping.get(n, n): t
                                                    for n, t in types.items()}
        if entry:
            flatten_dict_parameters(graph, copied)
        return _run(graph, REWRITES + TYPED_REWRITES, copied, moves), copied
    return run(moves) if in_place else _moving_or_copying(run)


# How a program may use a dict argument that is taken apart on entry: uses that read it
# (input position -> primitives), and those that pass it on (`grad`'s check of its input).
_DICT_READS = {1: {"getitem", "getitem_grad", "grad_zeros", "dict_pick", "iter_keys",
                   "iter_keys_grad", "dict_keys", "dict_values", "dict_items", "children",
                   "rebuild", "len", "dict_get"},
               2: {"grad_cast", "dict_pick", "contains"}}
_DICT_PASSED_ON = {"grad_check_input"}


def _only_read(node: Node, uses: dict) -> bool:
    """Whether the program only reads node's dict (and what passes it on): no result, call,
    container or closure holds the object itself, whose identity the caller could see."""
    for user, i in uses.get(node, ()):
        name = primitive_name(user) if i != OUTPUT else None
        if name in _DICT_PASSED_ON and i == 1:
            if not _only_read(user, uses):
                return False
        elif name not in _DICT_READS.get(i, ()):
            return False
    return True


def flatten_dict_parameters(root: Graph, types: dict) -> None:
    """Each parameter of the program that is a dict of known keys (a dict of parameters)
    and is only read becomes one parameter per value, and the dict a make_dict of them, so
    that reading `params['W']` is the parameter itself (`item_of_container`) and the
    program is the positional one.  `root.entry_leaves` tells the backend to take the dict
    apart on entry: the function keeps the caller's signature."""
    specs, parameters = [], []
    for p in root.parameters:
        t = types.get(p)
        name = p.debug.name
        if not isinstance(t, ADict) or not t.keys or name in root.defaults \
                or not _only_read(p, users(root)):
            specs.append(None)
            parameters.append(p)
            continue
        leaves = []
        for k, item in zip(t.keys, t.items):
            debug = p.debug.derive("value of")
            debug.name = f"{name}_{k}" if isinstance(k, str) and k.isidentifier() else name
            leaf = Parameter(root, debug)
            types[leaf] = item
            leaves.append(leaf)
        made = root.apply(P["make_dict"], *(x for kv in zip(t.keys, leaves) for x in kv),
                          location=p.location)
        types[made] = t
        replace(root, p, made)
        specs.append((name, tuple(t.keys)))
        parameters += leaves
    if any(specs):
        root.parameters = parameters
        root.entry_leaves = tuple(specs)
