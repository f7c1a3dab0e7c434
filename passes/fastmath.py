"""Real-number algebra on float arithmetic, for `compile(f, fastmath=True)` only.

The optimizer (`passes/opt.py`) keeps every floating-point result bit for bit, so a gradient
keeps the arithmetic the AD wrote: the tie term of max's gradient, `(1 - sum(softmax)) *
ties / count`, which is zero only in real arithmetic, or the product rule's three terms for
`a*x*x*x`, which real arithmetic collects into one.  With `fastmath=True` (Numba's name for
the same choice; C compilers' -ffast-math) this pass may rewrite a program as real algebra
allows, assuming, like LLVM's `fast` flags, that no value is NaN or infinite, that no
division is by zero and that the sign of zero does not matter (so a Python float division
by zero that cancels away, as in x * y / x, no longer raises ZeroDivisionError), and that
no arithmetic raises: an operation kept only for the exception it may raise (an unused
`1 / x`, a gradient's forward `math.log(x)`) is not run:

* + and * reassociate and commute; a - b is a + (-1)b; a / b is a * b^-1; x / x is 1;
* like terms are collected and terms that cancel go, with what multiplies them (0 * x = 0);
* a sum over axes is linear: sum(a + b) = sum(a) + sum(b), and sum(c * a) = c * sum(a) for
  c constant along the summed axes;
* common factors are taken out: a*b + a*c = a*(b + c).

The design is LLVM's Reassociate pass: an expression tree of +, -, *, / and sums over float
values is read as a polynomial (a sum of terms, each a coefficient times a product of atoms
with integer powers), then rebuilt with factors taken out, sharing nodes that already
compute a part.  Products of sums are not multiplied out (that only grows programs): a
factor that is a sum of several terms is an atom of the product, and is simplified as a
tree of its own.  A tree is replaced only when the graph then costs less (operations, and
the elements they compute), so the pass shrinks programs and stops.  Results differ from the exact program's by rounding,
and by whatever a cancellation of large terms loses: a program that depends on the order of
its floating-point operations (compensated summation, say) must not use fastmath.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from myir.ir.analysis import primitive_name, reachable_graphs, toposort, users
from myir.ir.edit import replace
from myir.ir.graph import Apply, Constant, Graph, Node
from myir.ir.primitives import PRIMITIVES
from passes.abstract import AArray, AScalar, abstract_of
from passes.opt import is_kind, optimize_typed, same_type
from passes.raising import ARITHMETIC_ERRORS
from passes.type_rules import TYPE_RULES

ARITHMETIC = frozenset({"add", "sub", "neg", "mul", "truediv"})
REDUCTIONS = frozenset({"sum", "sum_to_like"})
MAX_TERMS = 32      # a tree whose polynomial has more terms is left alone
MAX_ROUNDS = 8
OP_COST = 64        # what running one operation costs, in elements' worth of arithmetic

# A monomial is a frozenset of (atom, power) pairs; a polynomial maps monomials to their
# coefficients (Python floats).  Rebuilding orders atoms by rank (toposort position).
Monomial = frozenset
Polynomial = dict


def optimize_fastmath(root: Graph, types: dict) -> tuple[Graph, dict]:
    """`simplify`, then the exact typed optimizer (which shares and drops what it left, and
    may open new trees to it), until `simplify` finds nothing.  Returns the graph and its
    types, as `optimize_typed` does."""
    drop_arithmetic_checks(root)
    drop_strong_zeros(root, types)
    for _ in range(MAX_ROUNDS):
        if not simplify(root, types):
            break
        root, types = optimize_typed(root, types)
    return root, types


def drop_arithmetic_checks(root: Graph) -> None:
    """Assuming no division by zero, no math function outside its domain and no overflow,
    an operation kept only for the exception it may raise (`depend` on one of
    `passes.raising.ARITHMETIC_ERRORS`: an unused `1 / x`, the forward `math.log(x)` of a
    gradient) goes."""
    for g in reachable_graphs(root):
        for node in toposort(g):
            if primitive_name(node) == "depend" and node.graph is g \
                    and primitive_name(node.args[1]) in ARITHMETIC_ERRORS:
                replace(root, node, node.args[0])


def drop_strong_zeros(root: Graph, types: dict) -> None:
    """Assuming no value is infinite or NaN, a gradient rule's `strong_zero(d, d * slope)`
    (passes/grad_rules.py) is `d * slope`, 0 where d is 0 anyway; and the product is then
    a term of the trees simplified below."""
    for g in reachable_graphs(root):
        for node in toposort(g):
            if primitive_name(node) == "strong_zero" and node.graph is g \
                    and same_type(types.get(node), types.get(node.args[1])):
                replace(root, node, node.args[1])


def simplify(root: Graph, types: dict) -> bool:
    """Rewrite the trees of every graph reachable from `root` as described above; `types`
    (node -> abstract value, as `passes.infer` gives them) gets the types of the nodes made.
    Returns whether anything changed."""
    changed = False
    for g in reachable_graphs(root):
        # a graph that an earlier rewrite left unused is skipped: `replace` edits only what
        # `root` reaches, so rewriting it again and again would change nothing
        while g in reachable_graphs(root) and _sweep(root, g, types):
            changed = True
    return changed


def _sweep(root: Graph, g: Graph, types: dict) -> bool:
    """Visit g's trees, users before their inputs (the largest tree first), and replace each
    whose rebuilt form costs less (`_Tree.gain`); of the two ways of reading sums, the one
    that gains more.  Returns whether any was replaced."""
    changed = False
    visited: set[Node] = set()
    order = toposort(g)
    state = _State(root, g, order, types)
    for node in reversed(order):
        if node in visited or node not in state.rank or not _is_candidate(node, g, types):
            continue
        visited.add(node)
        best, gain = None, 0
        for distribute in (True, False):
            tree = _Tree(state, node, distribute)
            try:
                new = tree.rebuild()
            except _Unsupported:
                continue
            if new is not node and (g_new := tree.gain(new)) > gain:
                best, gain = new, g_new
        if best is not None:
            types.update(state.made)
            replace(root, node, best)
            changed = True
            state = _State(root, g, toposort(g), types)
    return changed


def _is_candidate(node: Node, g: Graph, types: dict) -> bool:
    return isinstance(node, Apply) and node.graph is g \
        and primitive_name(node) in ARITHMETIC | REDUCTIONS and is_kind(types.get(node), "f")


class _Unsupported(Exception):
    """What a tree holds cannot be read or rebuilt (an unknown type, a reduction this pass
    does not model): the tree is left as it is."""


class _State:
    """What every tree of one graph shares until one is replaced: node ranks (toposort
    positions, which order factors and terms), users, the nodes that exist (so a rebuilt
    tree reuses them, also those a rejected tree made) with the types of those made, and how
    many applies are alive."""

    def __init__(self, root: Graph, g: Graph, order: list, types: dict):
        self.g, self.types = g, types
        self.rank = {n: i for i, n in enumerate(order)}
        self.uses = users(root)
        self.existing = {}
        self.made: dict[Node, object] = {}
        for n in order:
            if isinstance(n, Apply) and n.graph is g and primitive_name(n) is not None:
                key = _key(primitive_name(n), n.args)
                if key is not None:
                    self.existing.setdefault(key, n)
        # what g's output and its closures use: the applies toposort orders
        self.live = {n for n in order if isinstance(n, Apply) and n.graph is g}

    def cost(self, node: Apply) -> int:
        """What running `node` costs: OP_COST plus the elements it reads or makes,
        whichever are more (so that of two forms with as many operations, the one that
        computes on fewer elements wins: c * sum(v) over sum(c * v))."""
        return OP_COST + max(_size(self.made.get(x) or self.types.get(x))
                             for x in (node, *node.args))


def _key(name: str, args) -> tuple | None:
    """What identifies the value of `name(*args)` here: + and * commute."""
    parts = []
    for a in args:
        if isinstance(a, Constant):
            v = a.value
            if not (v is None or type(v) in (int, float, bool, tuple)
                    or isinstance(v, np.generic)):
                return None
            parts.append(("c", type(v), repr(v)))
        else:
            parts.append(("n", id(a)))
    if name in ("add", "mul"):
        parts = sorted(parts, key=repr)
    return (name, *parts)


class _Tree:
    """The expression tree rooted at one node: its polynomial and its rebuilt form."""

    def __init__(self, state: _State, root: Apply, distribute: bool):
        self.state, self.root, self.distribute = state, root, distribute
        self.exclusive = self._exclusive()
        self.memo: dict[Node, Polynomial] = {}
        self.made = state.made
        self.atoms: list[Node] = []

    def _exclusive(self) -> set:
        """The nodes of the tree that nothing outside it uses: sums among them may be
        taken apart, since the tree's rebuilt form replaces every use."""
        s = self.state
        exclusive = {self.root}
        for n in sorted(_applies_below(self.root, s.g), key=s.rank.__getitem__, reverse=True):
            if n is not self.root and all(u in exclusive for u, _ in s.uses.get(n, ())):
                exclusive.add(n)
        return exclusive

    def gain(self, new: Node) -> int:
        """How much less the graph costs with `new` in the root's place: the tree's
        exclusive nodes that `new` does not use go, the nodes `new` adds come."""
        s = self.state
        kept = _applies_below(new, s.g, lambda n: n not in s.live or n in self.exclusive)
        gone = sum(s.cost(n) for n in self.exclusive if n not in kept)
        return gone - sum(s.cost(n) for n in kept if n not in self.exclusive)

    # ------------------------------------------------------------------ reading

    def poly(self, node: Node) -> Polynomial:
        p = self.memo.get(node)
        if p is None:
            p = self._read(node)
            if p is None or len(p) > MAX_TERMS:
                p = self._atom(node)
            self.memo[node] = p
        return p

    def _atom(self, node: Node) -> Polynomial:
        if isinstance(node, Constant):
            raise _Unsupported(node)
        self.atoms.append(node)
        return {frozenset({(node, 1)}): 1.0}

    def _read(self, node: Node) -> Polynomial | None:
        if isinstance(node, Constant):
            v = node.value
            if not isinstance(v, (int, float, np.integer, np.floating)) \
                    or isinstance(v, (bool, np.bool_)):
                return None
            try:
                c = float(v)    # what arithmetic with a float makes of an int
            except OverflowError:
                return None
            return ({frozenset(): c} if c else {}) if math.isfinite(c) else None
        name = primitive_name(node)
        if not (isinstance(node, Apply) and node.graph is self.state.g
                and is_kind(self.state.types.get(node), "f")):
            return None
        sums_open = node in self.exclusive
        if name in ("add", "sub"):
            if not sums_open:
                return None
            a, b = (self.poly(x) for x in node.args)
            return _add(a, b, 1.0 if name == "add" else -1.0)
        if name == "neg":
            p = self.poly(node.args[0])
            return _scale(p, -1.0) if len(p) <= 1 or sums_open else None
        if name == "mul":
            a, b = (self.poly(x) for x in node.args)
            if not a or not b:
                return {}
            return _product(self._factor(a, node.args[0]), self._factor(b, node.args[1]))
        if name == "truediv":
            a, b = (self.poly(x) for x in node.args)
            if not b:
                return None
            if not a:
                return {}
            return _product(self._factor(a, node.args[0]),
                            _inverse(self._factor(b, node.args[1])))
        if name in REDUCTIONS:
            return self._sum(node, sums_open)
        return None

    def _factor(self, p: Polynomial, node: Node) -> Polynomial:
        """A factor of a product: a sum of several terms stays whole (an atom)."""
        return p if len(p) == 1 else self._atom(node)

    def _sum(self, node: Apply, sums_open: bool) -> Polynomial | None:
        """sum(Σ c·F·V) = Σ c·F·sum(V)·m: F the factors constant along the summed axes, V
        the others, m how many times broadcasting repeats V along them.  Taking a sum
        apart pays only when terms then cancel: without `self.distribute`, only what every
        term shares is taken out (c·F·sum(Σ V), one sum)."""
        spec = self._reduction(node)
        if spec is None:
            return None
        operand, axes, keepdims, full = spec
        p = self.poly(operand)
        if len(p) > 1 and not sums_open:
            return None
        outside = {mono: frozenset(f for f in mono
                                   if self._constant_along(f[0], axes, keepdims, full))
                   for mono in p}
        if self.distribute or len(p) <= 1:
            result: Polynomial = {}
            for mono, c in p.items():
                result = _add(result, self._summed(outside[mono], mono - outside[mono], c,
                                                   spec), 1.0)
            return result
        common = frozenset.intersection(*outside.values())
        k = abs(next(iter(p.values())))
        k = k if all(abs(c) == k for c in p.values()) else 1.0
        if not common and k == 1.0:
            return None
        inside = self._emit_sum([(mono - common, c / k) for mono, c in p.items()])
        return self._summed(common, frozenset({(inside, 1)}), k, spec)

    def _summed(self, outside: Monomial, inside: Monomial, c: float, spec) -> Polynomial:
        """c·outside·sum(inside) as a term: `outside` constant along the summed axes."""
        operand, axes, keepdims, full = spec
        v = self._emit_term(inside, 1.0) if inside else None
        vshape = () if v is None else _shape_of(self.type_of(v))
        offset = len(full) - len(vshape)
        repeat = math.prod(full[r] for r in axes if r < offset or vshape[r - offset] != full[r])
        own = tuple(r - offset for r in axes
                    if r >= offset and vshape[r - offset] == full[r] and full[r] != 1)
        if v is not None and own:
            if not keepdims and len(own) != len(vshape):
                raise _Unsupported(operand)
            axis = None if not keepdims else own[0] if len(own) == 1 else own
            v = self.make("sum", v, axis, keepdims)
        elif v is not None and not keepdims and vshape:
            raise _Unsupported(operand)
        return {_mono_product(outside, frozenset({(v, 1)} if v is not None else ())):
                c * repeat}

    def _reduction(self, node: Apply):
        """(operand, summed axes, keepdims, operand's shape) of sum(x, axis, keepdims) or
        sum_to_like(d, x) where this pass can model it, else None."""
        name = primitive_name(node)
        operand = node.args[0]
        full = _shape_of(self.type_of(operand))
        if full is None or None in full:
            return None
        if name == "sum":
            axis, keepdims = node.args[1], node.args[2]
            if not (isinstance(axis, Constant) and isinstance(keepdims, Constant)
                    and isinstance(keepdims.value, bool)):
                return None
            a = axis.value
            axes = tuple(range(len(full))) if a is None else (a,) if isinstance(a, int) else a
            if not all(isinstance(r, int) and -len(full) <= r < len(full) for r in axes):
                return None
            axes = tuple(sorted({r % len(full) for r in axes}))
            if not keepdims.value and len(axes) != len(full):
                return None
            return operand, axes, keepdims.value, full
        like = _shape_of(self.type_of(node.args[1]))
        if like == () and isinstance(self.type_of(node.args[1]), AScalar):
            return operand, tuple(range(len(full))), False, full
        if like is None or len(like) != len(full):
            return None
        axes = tuple(r for r, (n, m) in enumerate(zip(like, full)) if n == 1 and m != 1)
        return operand, axes, True, full

    def _constant_along(self, atom: Node, axes: tuple, keepdims: bool, full: tuple) -> bool:
        shape = _shape_of(self.type_of(atom))
        if shape is None:
            raise _Unsupported(atom)
        if not keepdims:
            return shape == ()
        offset = len(full) - len(shape)
        return all(r < offset or shape[r - offset] == 1 for r in axes)

    # ------------------------------------------------------------------ rebuilding

    def rebuild(self) -> Node:
        """The root's replacement (the root itself when the polynomial is one atom)."""
        p = self.poly(self.root)
        want = self.state.types[self.root]
        new = self._emit_sum(list(p.items())) if p else self._zeros(want)
        got = self.type_of(new)
        if isinstance(want, AArray) and isinstance(got, (AArray, AScalar)) \
                and _shape_of(got) != want.shape and got.dtype == want.dtype:
            new = self.make("broadcast_to_like", new, self._like(want))
            got = self.type_of(new)
        if not same_type(got, want):
            raise _Unsupported(self.root)
        return new

    def _zeros(self, want) -> Node:
        if isinstance(want, AScalar):
            return self.constant(want.pytype(0.0))
        return self.make("broadcast_to_like", self.constant(want.dtype.type(0)), self._like(want))

    def _like(self, want: AArray) -> Node:
        """A node the tree reads that has the root's shape, for broadcast_to_like."""
        for atom in self.atoms:
            if _shape_of(self.type_of(atom)) == want.shape:
                return atom
        raise _Unsupported(self.root)

    def _emit_sum(self, terms: list) -> Node:
        """Σ c·m, with factors that several terms share taken out."""
        if len(terms) == 1:
            m, c = terms[0]
            if c < 0:
                return self.make("neg", self._emit_term(m, -c))
            return self._emit_term(m, c)
        k = abs(terms[0][1])
        if k != 1.0 and all(abs(c) == k for _, c in terms):
            return self.make("mul", k, self._emit_sum([(m, c / k) for m, c in terms]))
        if all(c < 0 for _, c in terms):
            return self.make("neg", self._emit_sum([(m, -c) for m, c in terms]))
        counts = Counter((a, k > 0) for m, _ in terms for a, k in m)
        parts = []
        if counts:
            (atom, up), n = max(counts.items(),
                                key=lambda item: (item[1], -self.rank(item[0][0])))
            if n >= 2:
                step = frozenset({(atom, -1 if up else 1)})
                shared = [(_mono_product(m, step), c) for m, c in terms
                          if any(a is atom and (k > 0) == up for a, k in m)]
                terms = [t for t in terms if not any(a is atom and (k > 0) == up for a, k in t[0])]
                inner = self._emit_sum(shared)
                parts.append((self.make("mul" if up else "truediv", inner, atom), False))
        parts += [(self._emit_term(m, abs(c)), c < 0)
                  for m, c in sorted(terms, key=lambda t: (t[1] < 0, self._mono_rank(t[0])))]
        parts.sort(key=lambda part: part[1])   # a positive part first: no neg needed
        acc, negative = parts[0]
        if negative:
            acc = self.make("neg", acc)
        for node, negative in parts[1:]:
            acc = self.make("sub" if negative else "add", acc, node)
        return acc

    def _emit_term(self, mono: Monomial, c: float) -> Node:
        """c · Π atoms^powers, as (c · numerator) / denominator."""
        ordered = sorted(mono, key=lambda f: self.rank(f[0]))
        up = [a for a, k in ordered if k > 0 for _ in range(k)]
        down = [a for a, k in ordered if k < 0 for _ in range(-k)]
        num = self._product(up)
        if num is None:
            num = self.constant(c)
        elif c != 1.0:
            num = self.make("mul", c, num)
        den = self._product(down)
        return num if den is None else self.make("truediv", num, den)

    def _product(self, factors: list) -> Node | None:
        acc = None
        for f in factors:
            acc = f if acc is None else self.make("mul", acc, f)
        return acc

    def _mono_rank(self, mono: Monomial) -> tuple:
        return tuple(sorted(self.rank(a) for a, _ in mono))

    # ------------------------------------------------------------------ nodes

    def rank(self, node: Node) -> int:
        r = self.state.rank.get(node)
        if r is None:
            r = self.state.rank[node] = len(self.state.rank)
        return r

    def constant(self, value) -> Constant:
        node = Constant(value)
        self.made[node] = abstract_of(value)
        return node

    def make(self, name: str, *args) -> Node:
        """name(*args), or the node that computes it already."""
        args = [a if isinstance(a, Node) else self.constant(a) for a in args]
        key = _key(name, args)
        found = self.state.existing.get(key) if key is not None else None
        if found is not None:
            return found
        t = TYPE_RULES[name](*(self.type_of(a) for a in args))
        if not isinstance(t, (AScalar, AArray)):
            raise _Unsupported(name)
        node = self.state.g.apply(PRIMITIVES[name], *args)
        self.made[node] = t
        if key is not None:
            self.state.existing[key] = node
        return node

    def type_of(self, node: Node):
        t = self.made.get(node)
        if t is None:
            t = self.state.types.get(node)
        if t is None and isinstance(node, Constant):
            t = abstract_of(node.value)
        return t


# ---------------------------------------------------------------------- polynomials

def _mono_product(m: Monomial, n: Monomial) -> Monomial:
    powers: dict[Node, int] = {}
    for a, k in (*m, *n):
        powers[a] = powers.get(a, 0) + k
    return frozenset((a, k) for a, k in powers.items() if k)


def _product(p: Polynomial, q: Polynomial) -> Polynomial:
    """p·q for monomials (one term each, or none: zero)."""
    result: Polynomial = {}
    for m, c in p.items():
        for n, d in q.items():
            key = _mono_product(m, n)
            result[key] = result.get(key, 0.0) + c * d
    return {m: c for m, c in result.items() if c != 0.0}


def _inverse(p: Polynomial) -> Polynomial:
    [(m, c)] = p.items()
    return {frozenset((a, -k) for a, k in m): 1.0 / c}


def _scale(p: Polynomial, s: float) -> Polynomial:
    return {m: c * s for m, c in p.items()}


def _add(p: Polynomial, q: Polynomial, sign: float) -> Polynomial:
    result = dict(p)
    for m, c in q.items():
        result[m] = result.get(m, 0.0) + sign * c
    return {m: c for m, c in result.items() if c != 0.0}


def _shape_of(t) -> tuple | None:
    if isinstance(t, AScalar):
        return ()
    return t.shape if isinstance(t, AArray) else None


def _applies_below(start: Node, g: Graph, enter=lambda n: True) -> set:
    """The applies of g that `start` reaches through inputs (itself included), going only
    into those `enter` accepts."""
    seen: set[Node] = set()
    stack = [start]
    while stack:
        node = stack.pop()
        if node in seen or not isinstance(node, Apply) or node.graph is not g \
                or not enter(node):
            continue
        seen.add(node)
        stack.extend(node.inputs)
    return seen


def _size(t) -> int:
    """Elements of a value of type t (1 for a scalar or an unknown shape)."""
    shape = _shape_of(t)
    return math.prod(shape) if shape and None not in shape else 1
