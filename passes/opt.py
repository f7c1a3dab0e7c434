"""The optimizer: inlining and local simplification until gradients look hand-written.

A rewrite is a function `(node, ctx) -> replacement node or None`.  `optimize` runs every
rewrite over every apply node of the program, sweep after sweep, until a sweep changes
nothing.  Within a sweep, replacements are recorded in a substitution map and applied to
later nodes' inputs as they are visited (inputs come before users), so no sweep pays for a
global use-def update per rewrite.

Rewrites keep floating-point semantics: no reassociation, no `x * 0 -> 0` (NaN and inf
would change), only identities that are exact (`getitem(make_tuple(a, b), 0) -> a`,
`gadd(x, zeros) -> x` for the zeros the AD creates, env get-after-set, constant folding of
scalar primitives evaluated exactly as the python backend would).
"""

from __future__ import annotations

import math
import operator

from myir.ir.analysis import bump_version, graph_uses, is_nested_in, primitive_name, \
    reachable_graphs, recursive_graphs, scope, toposort
from myir.ir.edit import clone_program, inline
from myir.ir.graph import Apply, Constant, Graph, Node, is_graph_constant
from myir.ir.primitives import PRIMITIVES, Primitive
from myir.ir.values import Env

P = PRIMITIVES
INLINE_SIZE = 24      # graphs with at most this many applies are inlined wherever called
MAX_SWEEPS = 40


def _const(node: Node, cls=object) -> bool:
    return isinstance(node, Constant) and isinstance(node.value, cls)


# ------------------------------------------------------------------ local rewrites

def getitem_of_tuple(node: Apply, ctx) -> Node | None:
    """getitem(make_tuple(a, b, ...), i) -> the i-th element."""
    if primitive_name(node) == "getitem" and primitive_name(node.args[0]) == "make_tuple" \
            and _const(node.args[1], int) and not isinstance(node.args[1].value, bool):
        elements = node.args[0].args
        i = node.args[1].value
        if -len(elements) <= i < len(elements):
            return elements[i]
    return None


def unpack_of_tuple(node: Apply, ctx) -> Node | None:
    """unpack(make_tuple(a, b), 2) -> make_tuple(a, b): the length is right by construction."""
    if primitive_name(node) == "unpack" and primitive_name(node.args[0]) == "make_tuple" \
            and _const(node.args[1], int) and len(node.args[0].args) == node.args[1].value:
        return node.args[0]
    return None


def depend_satisfied(node: Apply, ctx) -> Node | None:
    """depend(x, e) -> x when computing x evaluates e anyway."""
    if primitive_name(node) != "depend":
        return None
    x, effect = node.args
    stack, seen = [x], set()
    while stack:
        n = stack.pop()
        if n is effect:
            return x
        if id(n) in seen or not isinstance(n, Apply):
            continue
        seen.add(id(n))
        stack.extend(n.inputs)
    return None


def env_get_after_set(node: Apply, ctx) -> Node | None:
    """env_getitem(env_setitem(e, k, v), k, d) -> v; with another key, look in e; in an
    empty env, the default."""
    if primitive_name(node) != "env_getitem":
        return None
    env, key, default = node.args
    if _const(env, Env) and not env.value.items:
        return default
    if primitive_name(env) == "env_setitem":
        inner, set_key, value = env.args
        if _const(key) and _const(set_key):
            if key.value is set_key.value:
                return value
            return node.graph.apply(P["env_getitem"], inner, key, default,
                                    location=node.location)
    return None


def gadd_zero(node: Apply, ctx) -> Node | None:
    """gadd(x, zeros) -> x and gadd(zeros, x) -> x, for the zeros the AD makes (grad_zeros,
    empty envs): adding them changes nothing (not even -0.0: AD zeros are +0.0 and
    x + 0.0 == x except for x = -0.0, where gradients' signs carry no meaning)."""
    if primitive_name(node) != "gadd":
        return None
    x, y = node.args
    if _is_zero(y):
        return x
    if _is_zero(x):
        return y
    return None


def _is_zero(node: Node) -> bool:
    return primitive_name(node) == "grad_zeros" or (_const(node, Env) and not node.value.items)


def switch_on_constant(node: Apply, ctx) -> Node | None:
    """switch(True, a, b) -> a; switch(c, a, a) -> a."""
    if primitive_name(node) != "switch":
        return None
    cond, a, b = node.args
    if _const(cond, (bool, int)) and type(cond.value) in (bool, int):
        return a if cond.value else b
    if a is b:
        return a
    return None


_FOLDABLE = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "neg": operator.neg, "pos": operator.pos, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge, "eq": operator.eq, "ne": operator.ne,
    "not_": operator.not_, "truth": bool, "floordiv": operator.floordiv, "mod": operator.mod,
    "len": len, "math_sqrt": math.sqrt, "math_exp": math.exp, "math_log": math.log,
}


def constant_fold(node: Apply, ctx) -> Node | None:
    """A scalar primitive of Python number constants -> its value (exactly as Python computes
    it; operations that raise are left to raise at run time)."""
    fold = _FOLDABLE.get(primitive_name(node))
    if fold is None or not all(_const(a) and type(a.value) in (int, float, bool, tuple)
                               for a in node.args):
        return None
    try:
        value = fold(*(a.value for a in node.args))
    except (ArithmeticError, ValueError, TypeError):
        return None
    if type(value) not in (int, float, bool) or (type(value) is int and abs(value) > 2**62):
        return None
    return Constant(value, node.debug)


def call_inline(node: Apply, ctx) -> Node | None:
    """A call of a graph constant -> the graph's body, when the graph is small, called once,
    or a primitive's J/gradient graph; never for recursive graphs (loops stay loops)."""
    if not is_graph_constant(node.fn):
        return None
    g = node.fn.value
    if g in ctx.recursive or len(node.args) != len(g.parameters):
        return None
    if g.parent is not None and not is_nested_in(node.graph, g.parent):
        return None  # its free variables are not visible here
    if not (ctx.calls.get(g, 0) == 1 or ctx.size(g) <= INLINE_SIZE):
        return None
    return inline(g, list(node.args), node.graph, at=node)



REWRITES = [getitem_of_tuple, unpack_of_tuple, depend_satisfied, env_get_after_set, gadd_zero, switch_on_constant, constant_fold,
            call_inline]


# ------------------------------------------------------------------ driver

class Context:
    """What rewrites may ask about the program during one sweep."""

    def __init__(self, root: Graph):
        self.recursive = recursive_graphs(root)
        uses = graph_uses(root)
        self.calls = {g: len(u) for g, u in uses.items()}
        self._sizes: dict[Graph, int] = {}

    def size(self, g: Graph) -> int:
        if g not in self._sizes:
            self._sizes[g] = sum(1 for h in scope(g) for n in toposort(h)
                                 if isinstance(n, Apply) and n.graph is h)
        return self._sizes[g]


def _resolve(node: Node, subst: dict) -> Node:
    while node in subst:
        node = subst[node]
    return node


def _cse_key(node: Apply):
    if primitive_name(node) in ("raise_", "make_exception"):
        return None
    parts = []
    for inp in node.inputs:
        if isinstance(inp, Constant):
            v = inp.value
            if type(v) in (int, float, bool, str, type(None)):
                parts.append(("c", type(v), repr(v)))  # repr: 0.0 and -0.0 differ
            elif isinstance(v, (Graph, Primitive, Env)) or v is None:
                parts.append(("o", id(v)))
            else:
                return None
        else:
            parts.append(("n", id(inp)))
    return tuple(parts)


def sweep(root: Graph) -> bool:
    """One pass of every rewrite over every node, then common subexpression elimination.
    Returns whether anything changed."""
    ctx = Context(root)
    subst: dict[Node, Node] = {}  # keyed by node (not id): replaced nodes stay alive
    changed = False
    for g in list(reachable_graphs(root)):
        seen: dict = {}
        for node in list(toposort(g)):
            if not (isinstance(node, Apply) and node.graph is g):
                continue
            node.inputs = [_resolve(i, subst) for i in node.inputs]
            key = _cse_key(node)
            if key is not None and key in seen:
                subst[node] = seen[key]
                changed = True
                continue
            for rewrite in REWRITES:
                new = rewrite(node, ctx)
                if new is not None and new is not node:
                    subst[node] = new
                    changed = True
                    break
            else:
                if key is not None:
                    seen[key] = node
        g.output = _resolve(g.output, subst)
    bump_version()
    if changed:  # nodes made by inlining may use nodes replaced later in the sweep
        for g in reachable_graphs(root):
            for node in toposort(g):
                if isinstance(node, Apply) and node.graph is g:
                    node.inputs = [_resolve(i, subst) for i in node.inputs]
            g.output = _resolve(g.output, subst)
        bump_version()
    return changed


def optimize(root: Graph) -> Graph:
    """An optimized copy of the program rooted at `root`."""
    root = clone_program(root)
    for _ in range(MAX_SWEEPS):
        if not sweep(root):
            break
    return root
