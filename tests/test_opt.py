"""Tests of the optimizer (passes/opt.py).

1. Rewrites: for each rewrite in `passes.opt.REWRITES` and each prune in `PRUNES`,
   before/after pairs — the optimized "before" graph is isomorphic to the optimized "after"
   graph, and is not once that rewrite is taken out — plus cases where it must not fire
   (effects, bools, strings); for each rewrite of `TYPED_REWRITES`, small graphs with types
   given by hand, before/after and must-not-fire, which give the same results bit for bit
   before and after (hypothesis inputs); programs in which each rewrite fires give
   the same results with and without the optimizer (hypothesis inputs); `optimize` and
   `optimize_typed` never mutate their input.
2. Golden collapse: the optimized gradient of straight-line programs has one graph, no
   closures, no tuple/env/gadd/switch operations (but one output tuple for several
   gradients) — without types where it can, with the types of `passes.infer` for all — and,
   with types, about the size (at most 1.25x the applies) of the gradient one would write by
   hand, compiled by the same pipeline; the typed gradient gives the same results bit for
   bit.  Run `python -m tests.test_opt` for the table.
3. Differential: the benchmark workloads, forward and gradient, with and without the
   optimizer (the forward also against CPython, exactly).

Subjects are in tests/programs_opt.py.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import myir
from myir import tree
from backends.python import compile_module, generate
from bench import workloads
from bench.workloads import programs as W
from frontend import parse
from myir.ir.analysis import primitive_name, reachable_graphs, toposort
from myir.ir.edit import GraphMoved, clone_program
from myir.ir.graph import Constant, Graph, Parameter
from myir.ir.primitives import PRIMITIVES, UNBOUND, Primitive
from myir.ir.values import EMPTY_STACK, NEWENV, Env, GradKey
from passes import opt
from passes.abstract import ANY, BOTTOM, AArray, ADict, AEnv, AList, ANone, AObject, AScalar, ASlice, \
    AStack, ATuple, abstract_of, join
from passes.infer import infer
from tests import programs_opt as P

PR = PRIMITIVES
REWRITE_NAMES = [r.__name__ for r in opt.REWRITES]


# These tests are about the optimizer (the differential tests choose explicitly).
pytestmark = pytest.mark.usefixtures("optimizer_on")


@pytest.fixture(scope="module", autouse=True)
def _gradients_compiled_once():
    """The first gradient the pipeline compiles raises the recursion limit; do it before the
    hypothesis tests (which warn when the limit changes under them)."""
    myir.grad(P.poly_xy).lower(1.0, 2.0)

# --------------------------------------------------------------------------------------------
# Graph isomorphism


class Mismatch(Exception):
    pass


def _same_constant(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)  # -0.0 is not 0.0; nan is nan
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(map(_same_constant, a, b))
    if isinstance(a, (Primitive, GradKey)):
        return a is b
    if isinstance(a, Env):
        return not a.items and not b.items
    return a == b


class Iso:
    """A bijection between the nodes and graphs of two programs, built by walking both
    from their outputs in parallel: applies must call the same thing on corresponding
    inputs, parameters must be at the same position of corresponding graphs, constants must
    have the same type and value (graphs: corresponding graphs; gradient keys: corresponding
    keys), and sharing must be the same (a node used twice on one side is one node used twice
    on the other)."""

    def __init__(self):
        self.fwd: dict[int, object] = {}
        self.bwd: dict[int, object] = {}

    def _pair(self, a, b, what: str) -> bool:
        """Pair a with b; True if new, False if already paired; Mismatch if inconsistent."""
        fa, fb = self.fwd.get(id(a)), self.bwd.get(id(b))
        if fa is None and fb is None:
            self.fwd[id(a)], self.bwd[id(b)] = b, a
            return True
        if fa is b and fb is a:
            return False
        raise Mismatch(f"{what} {a!r} and {b!r} correspond to different things "
                       "(different sharing)")

    def graph(self, g: Graph, h: Graph) -> None:
        if not self._pair(g, h, "graph"):
            return
        if len(g.parameters) != len(h.parameters):
            raise Mismatch(f"{g!r} has {len(g.parameters)} parameters, {h!r} "
                           f"{len(h.parameters)}")
        for p, q in zip(g.parameters, h.parameters):
            self._pair(p, q, "parameter")
        self.node(g.output, h.output)

    def node(self, a, b) -> None:
        if type(a) is not type(b):
            raise Mismatch(f"{a!r} is a {type(a).__name__}, {b!r} a {type(b).__name__}")
        if isinstance(a, Constant):
            va, vb = a.value, b.value
            if isinstance(va, Graph) and isinstance(vb, Graph):
                self.graph(va, vb)
            elif isinstance(va, GradKey) and isinstance(vb, GradKey):
                self._pair(va, vb, "key")
            elif not _same_constant(va, vb):
                raise Mismatch(f"constant {va!r} ({type(va).__name__}) vs {vb!r} "
                               f"({type(vb).__name__})")
        elif isinstance(a, Parameter):
            if self.fwd.get(id(a)) is not b:
                raise Mismatch(f"parameter {a!r} vs {b!r} (position or graph differs)")
        else:
            if not self._pair(a, b, "node"):
                return
            if self.fwd.get(id(a.graph)) is not b.graph:
                raise Mismatch(f"{a!r} and {b!r} belong to graphs that do not correspond")
            if len(a.inputs) != len(b.inputs):
                raise Mismatch(f"{a!r} has {len(a.args)} arguments, {b!r} {len(b.args)}")
            for x, y in zip(a.inputs, b.inputs):
                self.node(x, y)


def isomorphism_error(g: Graph, h: Graph) -> str | None:
    try:
        Iso().graph(g, h)
    except Mismatch as e:
        return str(e)
    return None


def assert_isomorphic(g: Graph, h: Graph) -> None:
    error = isomorphism_error(g, h)
    assert error is None, f"{error}\n--- got:\n{g}\n--- expected:\n{h}"
    assert g.stats()["primitives"] == h.stats()["primitives"]


def optimized(fn_or_graph) -> Graph:
    g = fn_or_graph if isinstance(fn_or_graph, Graph) else parse(fn_or_graph)
    return opt.optimize(g)


def test_isomorphism_checker_tells_graphs_apart():
    """The checker itself: equal programs match, small differences do not."""
    assert isomorphism_error(parse(P.getitem_after), parse(P.getitem_after)) is None
    assert isomorphism_error(parse(P.cse_after), optimized(P.cse_before)) is None
    # argument order, constant type, signed zero, sharing, parameter position
    assert isomorphism_error(parse(P.getitem_after), parse(P.unpack_after)) is not None
    g1, (x1,) = _graph(1)
    g1.output = g1.apply(PR["mul"], x1, 2)
    g2, (x2,) = _graph(1)
    g2.output = g2.apply(PR["mul"], x2, 2.0)
    assert isomorphism_error(g1, g2) is not None
    g3, (x3,) = _graph(1)
    g3.output = g3.apply(PR["mul"], x3, -0.0)
    g4, (x4,) = _graph(1)
    g4.output = g4.apply(PR["mul"], x4, 0.0)
    assert isomorphism_error(g3, g4) is not None
    assert isomorphism_error(parse(P.cse_before), parse(P.cse_after)) is not None
    g5, (a5, b5) = _graph(2)
    g5.output = g5.apply(PR["sub"], a5, b5)
    g6, (a6, b6) = _graph(2)
    g6.output = g6.apply(PR["sub"], b6, a6)
    assert isomorphism_error(g5, g6) is not None
    assert isomorphism_error(g5, g5) is None


# --------------------------------------------------------------------------------------------
# 1. Rewrites: before/after


def _graph(n: int, name: str = "g"):
    g = Graph(name)
    return g, [g.add_parameter(f"p{i}") for i in range(n)]


def _keys(n: int):
    holder = Graph("keys")
    return [GradKey(holder.add_parameter(f"k{i}")) for i in range(n)]


def _returning(n: int, i: int) -> Graph:
    """The graph of n parameters returning the i-th."""
    g, ps = _graph(n, "after")
    g.output = ps[i]
    return g


def hand_env_same_key():
    (k,) = _keys(1)
    g, (e, v, d) = _graph(3, "before")
    g.output = g.apply(PR["env_getitem"], g.apply(PR["env_setitem"], e, k, v), k, d)
    return g, _returning(3, 1)


def hand_env_other_key():
    k1, k2 = _keys(2)
    g, (e, v, d) = _graph(3, "before")
    g.output = g.apply(PR["env_getitem"], g.apply(PR["env_setitem"], e, k1, v), k2, d)
    h, (e2, _, d2) = _graph(3, "after")
    h.output = h.apply(PR["env_getitem"], e2, k2, d2)
    return g, h


def hand_env_empty():
    k1, k2 = _keys(2)
    g, (v, d) = _graph(2, "before")
    g.output = g.apply(PR["env_getitem"], g.apply(PR["env_setitem"], NEWENV, k1, v), k2, d)
    return g, _returning(2, 1)


def hand_env_chain():
    k1, k2 = _keys(2)
    g, (e, v, w, d) = _graph(4, "before")
    env = g.apply(PR["env_setitem"], g.apply(PR["env_setitem"], e, k1, v), k2, w)
    g.output = g.apply(PR["add"], g.apply(PR["env_getitem"], env, k1, d),
                       g.apply(PR["env_getitem"], env, k2, d))
    h, (_, v2, w2, _) = _graph(4, "after")
    h.output = h.apply(PR["add"], v2, w2)
    return g, h


def hand_gadd_zero_right():
    g, (x, y) = _graph(2, "before")
    g.output = g.apply(PR["gadd"], x, g.apply(PR["grad_zeros"], y))
    return g, _returning(2, 0)


def hand_gadd_zero_left():
    g, (x, y) = _graph(2, "before")
    g.output = g.apply(PR["gadd"], g.apply(PR["grad_zeros"], y), x)
    return g, _returning(2, 0)


def hand_depend_satisfied():
    g, (x,) = _graph(1, "before")
    e = g.apply(PR["sin"], x)
    g.output = g.apply(PR["depend"], g.apply(PR["mul"], e, 2.0), e)
    h, (y,) = _graph(1, "after")
    h.output = h.apply(PR["mul"], h.apply(PR["sin"], y), 2.0)
    return g, h


def hand_depend_kept():
    g, (x,) = _graph(1, "before")
    g.output = g.apply(PR["depend"], g.apply(PR["cos"], x), g.apply(PR["sin"], x))
    return g


def hand_gadd_empty_env():
    g, (e,) = _graph(1, "before")
    g.output = g.apply(PR["gadd"], NEWENV, g.apply(PR["gadd"], e, NEWENV))
    return g, _returning(1, 0)


def hand_gadd_empty_stack():
    g, (s,) = _graph(1, "before")
    g.output = g.apply(PR["gadd"], EMPTY_STACK, g.apply(PR["gadd"], s, EMPTY_STACK))
    return g, _returning(1, 0)


def hand_switch_same_branches():
    g, (c, a) = _graph(2, "before")
    g.output = g.apply(PR["switch"], c, a, a)
    return g, _returning(2, 1)


def hand_switch_constants():
    g, (a, b) = _graph(2, "before")
    g.output = g.apply(PR["sub"], g.apply(PR["switch"], True, a, b),
                       g.apply(PR["switch"], 0, a, b))
    h, (a2, b2) = _graph(2, "after")
    h.output = h.apply(PR["sub"], a2, b2)
    return g, h


def hand_getitem_negative():
    g, (a, b, c) = _graph(3, "before")
    g.output = g.apply(PR["getitem"], g.apply(PR["make_tuple"], a, b, c), -2)
    return g, _returning(3, 1)


def hand_getitem_grad_of_made():
    g, (a, b, c, d) = _graph(4, "before")
    g.output = g.apply(PR["getitem_grad"], g.apply(PR["make_tuple"], a, b, c), -2, d)
    h, (a2, b2, c2, d2) = _graph(4, "after")
    h.output = h.apply(PR["make_tuple"], h.apply(PR["grad_zeros"], a2), d2,
                       h.apply(PR["grad_zeros"], c2))
    return g, h


def hand_gadd_of_made():
    g, (a, b, c, d) = _graph(4, "before")
    g.output = g.apply(PR["gadd"], g.apply(PR["make_tuple"], a, b),
                       g.apply(PR["make_tuple"], c, d))
    h, (a2, b2, c2, d2) = _graph(4, "after")
    h.output = h.apply(PR["make_tuple"], h.apply(PR["gadd"], a2, c2), h.apply(PR["gadd"], b2, d2))
    return g, h


def hand_getitem_grad_out_of_range():
    g, (a, d) = _graph(2, "before")
    g.output = g.apply(PR["getitem_grad"], g.apply(PR["make_tuple"], a), 1, d)
    return g


def hand_gadd_of_unequal_tuples():
    g, (a, b, c) = _graph(3, "before")
    g.output = g.apply(PR["gadd"], g.apply(PR["make_tuple"], a, b), g.apply(PR["make_tuple"], c))
    return g


def hand_fold_chain():
    g, (x,) = _graph(1, "before")
    folded = g.apply(PR["neg"], g.apply(PR["add"], 2.5, g.apply(PR["mul"], 3, 4)))
    g.output = g.apply(PR["mul"], x, folded)
    h, (x2,) = _graph(1, "after")
    h.output = h.apply(PR["mul"], x2, -14.5)
    return g, h


def hand_fold_numpy_scalars():
    """Gradients of numpy code add numpy scalars to numbers (max's tie mask: where(eq,
    np.float64(0.0) + 1.0, ...)): folded with numpy's arithmetic, type included."""
    g, (x,) = _graph(1, "before")
    g.output = g.apply(PR["mul"], x, g.apply(PR["add"], np.float64(0.0), 1.0))
    h, (x2,) = _graph(1, "after")
    h.output = h.apply(PR["mul"], x2, np.float64(1.0))
    return g, h


def hand_fold_numpy_division_by_zero():
    """np.float64(1.0) / np.float64(0.0) warns at run time (and gives inf): not folded."""
    g, (x,) = _graph(1, "before")
    g.output = g.apply(PR["mul"], x, g.apply(PR["truediv"], np.float64(1.0), np.float64(0.0)))
    return g


def hand_gadd_of_dicts():
    """The gradients of a dict's entries added: one dict of the entries' sums."""
    g, (x, y) = _graph(2, "before")
    g.output = g.apply(PR["gadd"], g.apply(PR["make_dict"], "a", x),
                       g.apply(PR["make_dict"], "a", y))
    h, (x2, y2) = _graph(2, "after")
    h.output = h.apply(PR["make_dict"], "a", h.apply(PR["gadd"], x2, y2))
    return g, h


def hand_closure_eta():
    """A closure that only forwards its parameters to a function value its graph
    received, made into a tuple: the function value itself."""
    g, (f, x) = _graph(2, "before")
    c = Graph("forward", parent=g)
    c.output = c.apply(f, *(c.add_parameter(f"d{i}") for i in range(2)))
    g.output = g.apply(PR["make_tuple"], x, Constant(c))
    h, (f2, x2) = _graph(2, "after")
    h.output = h.apply(PR["make_tuple"], x2, f2)
    return g, h


def hand_closure_not_eta():
    """Closures that do more than forward their parameters in order stay closures."""
    g, (f, x) = _graph(2, "before")
    swapped = Graph("swapped", parent=g)
    a, b = swapped.add_parameter("a"), swapped.add_parameter("b")
    swapped.output = swapped.apply(f, b, a)
    bound = Graph("bound", parent=g)
    bound.output = bound.apply(f, bound.add_parameter("a"), x)
    own = Graph("own", parent=g)
    own.output = own.apply(own.apply(PR["getitem"], f, 0), own.add_parameter("a"))
    g.output = g.apply(PR["make_tuple"], Constant(swapped), Constant(bound), Constant(own))
    return g


def _parsed_pair(before, after):
    return lambda: (parse(before), parse(after))


# (rewrite that does the work, case name, () -> (before graph, after graph))
PAIRS = [
    ("getitem_of_tuple", "tuple", _parsed_pair(P.getitem_before, P.getitem_after)),
    ("getitem_of_tuple", "nested", _parsed_pair(P.getitem_nested_before, P.getitem_nested_after)),
    ("getitem_of_tuple", "negative_index", hand_getitem_negative),
    ("env_get_after_set", "same_key", hand_env_same_key),
    ("env_get_after_set", "other_key", hand_env_other_key),
    ("env_get_after_set", "empty_env", hand_env_empty),
    ("env_get_after_set", "chain", hand_env_chain),
    ("gadd_zero", "zeros_right", hand_gadd_zero_right),
    ("gadd_zero", "zeros_left", hand_gadd_zero_left),
    ("gadd_zero", "empty_env", hand_gadd_empty_env),
    ("gadd_zero", "empty_stack", hand_gadd_empty_stack),
    ("getitem_grad_of_made", "tuple", hand_getitem_grad_of_made),
    ("gadd_of_made", "tuples", hand_gadd_of_made),
    ("switch_on_constant", "if_true", _parsed_pair(P.switch_before, P.switch_after)),
    ("switch_on_constant", "ifexp_zero", _parsed_pair(P.switch_ifexp_before, P.switch_ifexp_after)),
    ("switch_on_constant", "specialised_flag",
     _parsed_pair(P.switch_specialised_before, P.switch_specialised_after)),
    ("switch_equal_branches", "same_node", hand_switch_same_branches),
    ("switch_equal_branches", "same_function",
     _parsed_pair(P.switch_equal_before, P.switch_equal_after)),
    ("neg_neg", "floats", _parsed_pair(P.neg_neg_before, P.neg_neg_after)),
    ("specialize_call", "recursion", _parsed_pair(P.specialize_before, P.specialize_after)),
    ("switch_on_constant", "constant_conditions", hand_switch_constants),
    ("constant_fold", "python_numbers", _parsed_pair(P.fold_before, P.fold_after)),
    ("constant_fold", "chain", hand_fold_chain),
    ("constant_fold", "numpy_scalars", hand_fold_numpy_scalars),
    ("call_inline", "helper", _parsed_pair(P.inline_before, P.inline_after)),
    ("call_inline", "lambda", _parsed_pair(P.inline_lambda_before, P.inline_lambda_after)),
    ("unpack_of_tuple", "unpack", _parsed_pair(P.unpack_before, P.unpack_after)),
    ("depend_satisfied", "effect_used", hand_depend_satisfied),
    ("item_of_container", "dict", _parsed_pair(P.dict_item_before, P.dict_item_after)),
    ("update_of_container", "dict_setitem",
     _parsed_pair(P.dict_update_before, P.dict_update_after)),
    ("update_of_container", "gadd_of_dicts", hand_gadd_of_dicts),
    ("closure_eta", "forwarding_closure", hand_closure_eta),
]


def test_every_rewrite_has_before_after_pairs():
    assert set(REWRITE_NAMES) == {r for r, _, _ in PAIRS}


@pytest.mark.parametrize("rewrite, case, build", PAIRS,
                         ids=[f"{r}-{c}" for r, c, _ in PAIRS])
def test_rewrite_before_after(rewrite, case, build):
    before, after = build()
    assert_isomorphic(optimized(before), optimized(after))


@pytest.mark.parametrize("rewrite, case, build", PAIRS,
                         ids=[f"{r}-{c}" for r, c, _ in PAIRS])
def test_rewrite_is_needed_for_its_pair(rewrite, case, build, monkeypatch):
    """Without the rewrite, the pair does not optimize to the same graph: the pair tests
    that rewrite, not another."""
    before, after = build()
    expected = optimized(after)
    monkeypatch.setattr(opt, "REWRITES", [r for r in opt.REWRITES if r.__name__ != rewrite])
    assert isomorphism_error(optimized(before), expected) is not None


def hand_env_unknown():
    (k,) = _keys(1)
    g, (e, d) = _graph(2, "before")
    g.output = g.apply(PR["env_getitem"], e, k, d)
    return g


def hand_gadd_nonzero():
    g, (x, y) = _graph(2, "before")
    g.output = g.apply(PR["gadd"], x, y)
    return g


def hand_switch_unknown():
    g, (c, a, b) = _graph(3, "before")
    g.output = g.apply(PR["switch"], c, a, b)
    return g


# Programs the optimizer must leave as they are (their operations raise at run time, or are
# recursive, or are not known to be simplifiable).
UNCHANGED = [
    ("depend_on_an_unused_effect", hand_depend_kept),
    ("getitem_out_of_range", lambda: parse(P.getitem_out_of_range)),
    ("fold_division_by_zero", lambda: parse(P.fold_raises)),
    ("fold_math_domain_error", lambda: parse(P.fold_math_domain)),
    ("fold_numpy_division_by_zero", hand_fold_numpy_division_by_zero),
    ("inline_recursive", lambda: parse(P.inline_recursive)),
    ("env_unknown", hand_env_unknown),
    ("gadd_nonzero", hand_gadd_nonzero),
    ("getitem_grad_out_of_range", hand_getitem_grad_out_of_range),
    ("gadd_of_unequal_tuples", hand_gadd_of_unequal_tuples),
    ("switch_unknown", hand_switch_unknown),
    ("switch_equal_branches_effect", lambda: parse(P.switch_equal_keeps_check)),
    ("neg_neg_bool", lambda: parse(P.neg_neg_bool)),
    ("closure_not_eta", hand_closure_not_eta),
]


@pytest.mark.parametrize("build", [b for _, b in UNCHANGED], ids=[n for n, _ in UNCHANGED])
def test_rewrite_does_not_fire(build):
    g = build()
    assert_isomorphic(optimized(g), g)


def test_cse_merges_equal_computations():
    assert_isomorphic(optimized(P.cse_before), optimized(P.cse_after))


def test_cse_knows_that_mul_commutes():
    assert_isomorphic(optimized(P.cse_commuted_before), optimized(P.cse_commuted_after))


def test_cse_does_not_commute_add():
    g = optimized(P.cse_add_does_not_commute)
    assert g.stats()["primitives"]["add"] == 2
    assert myir.compile(P.cse_add_does_not_commute)("a", "b") == ("ab", "ba")


# --------------------------------------------------------------------------------------------
# 1. Dead code: prunes


def hand_unused_outputs():
    """A graph too large to inline, called twice, returning a pair of which only the first
    element is read: it returns that element alone."""
    def long_pair(keep_both: bool):
        g, (x,) = _graph(1, "long_pair")
        chain = x
        for _ in range(opt.INLINE_SIZE + 1):
            chain = g.apply(PR["sin"], chain)
        rest = g.apply(PR["cos"], x)
        g.output = g.apply(PR["make_tuple"], chain, rest) if keep_both else chain
        return g

    def caller(name, callee, read):
        g, (a, b) = _graph(2, name)
        first, second = g.apply(callee, a), g.apply(callee, b)
        g.output = g.apply(PR["mul"], read(g, first), read(g, second))
        return g

    before = caller("before", long_pair(True), lambda g, c: g.apply(PR["getitem"], c, 0))
    after = caller("after", long_pair(False), lambda g, c: c)
    return before, after


def hand_loop_constant(nested: bool = False):
    """A loop whose exit returns (r, 7), both read: 7 is read where the loop is called,
    and the exit returns r alone.  `nested`: it returns ((r, 7), i), of which the caller
    reads the first element's two: the inner tuple's items are the loop's results, the
    same."""
    def build(name: str, tagged: bool):
        g, (x, n) = _graph(2, name)
        loop = Graph("loop", g)
        r, i = loop.add_parameter("r"), loop.add_parameter("i")
        body, done = Graph("body", loop), Graph("done", loop)
        body.output = body.apply(Constant(loop), body.apply(PR["mul"], r, 2.0),
                                 body.apply(PR["add"], i, 1))
        done.output = done.apply(PR["make_tuple"], r, 7) if tagged else r
        if tagged and nested:
            done.output = done.apply(PR["make_tuple"], done.output, i)
        test = loop.apply(PR["switch"], loop.apply(PR["lt"], i, n), Constant(body),
                          Constant(done))
        loop.output = loop.apply(test)
        call = g.apply(Constant(loop), x, 0)
        inner = g.apply(PR["getitem"], call, 0) if tagged and nested else call
        value, tag = (g.apply(PR["getitem"], inner, 0), g.apply(PR["getitem"], inner, 1)) \
            if tagged else (call, Constant(7))
        g.output = g.apply(PR["add"], value, tag)
        return g

    return build("before", True), build("after", False)


def hand_unused_outputs_kept():
    """The same, but the dropped element has an effect (a check): it stays."""
    g, (x,) = _graph(1, "long_pair")
    chain = x
    for _ in range(opt.INLINE_SIZE + 1):
        chain = g.apply(PR["sin"], chain)
    g.output = g.apply(PR["make_tuple"], chain, g.apply(PR["check_bound"], x, "x"))
    caller, (a, b) = _graph(2, "before")
    caller.output = caller.apply(PR["mul"], caller.apply(PR["getitem"], caller.apply(g, a), 0),
                                 caller.apply(PR["getitem"], caller.apply(g, b), 0))
    return caller


def _doubling_loop(g: Graph, done_output) -> Graph:
    """A loop nested in g doubling r while i < n (g's second parameter), whose exit returns
    `done_output(done, r)`."""
    loop = Graph("loop", g)
    r, i = loop.add_parameter("r"), loop.add_parameter("i")
    body, done = Graph("body", loop), Graph("done", loop)
    body.output = body.apply(Constant(loop), body.apply(PR["mul"], r, 2.0),
                             body.apply(PR["add"], i, 1))
    done.output = done_output(done, r)
    test = loop.apply(PR["switch"], loop.apply(PR["lt"], i, g.parameters[1]), Constant(body),
                      Constant(done))
    loop.output = loop.apply(test)
    return loop


def hand_result_closure():
    """A loop whose exit returns (r, lambda y: y * r), of which the caller calls the
    closure: the loop returns r, and the caller computes 3.0 * r."""
    def closure(done, r):
        f = Graph("f", done)
        f.output = f.apply(PR["mul"], f.add_parameter("y"), r)
        return done.apply(PR["make_tuple"], r, Constant(f))

    before, _ = _graph(2, "before")
    call = before.apply(Constant(_doubling_loop(before, closure)), before.parameters[0], 0)
    before.output = before.apply(before.apply(PR["getitem"], call, 1), 3.0)
    after, (x, _) = _graph(2, "after")
    call = after.apply(Constant(_doubling_loop(after, lambda done, r: r)), x, 0)
    after.output = after.apply(PR["mul"], 3.0, call)
    return before, after


def hand_parameter_closure():
    """An iteration that makes `lambda y: y * i` and passes it to the graph that goes round
    again (which, on the loop's cycle, is not inlined), which adds f(2.0): that graph takes
    the closure's i instead, and adds 2.0 * i."""
    def build(name: str, lifted: bool):
        g, (x, n) = _graph(2, name)
        loop = Graph("loop", g)
        i, acc = loop.add_parameter("i"), loop.add_parameter("acc")
        body, done, step = Graph("body", loop), Graph("done", loop), Graph("step", g)
        fi, si, sa = step.add_parameter("f"), step.add_parameter("i"), step.add_parameter("acc")
        term = step.apply(PR["mul"], 2.0, fi) if lifted else step.apply(fi, 2.0)
        step.output = step.apply(Constant(loop), step.apply(PR["add"], si, 1),
                                 step.apply(PR["add"], sa, term))
        if lifted:
            body.output = body.apply(Constant(step), i, i, acc)
        else:
            f = Graph("f", body)
            f.output = f.apply(PR["mul"], f.add_parameter("y"), i)
            body.output = body.apply(Constant(step), Constant(f), i, acc)
        done.output = acc
        loop.output = loop.apply(loop.apply(PR["switch"], loop.apply(PR["lt"], i, n),
                                            Constant(body), Constant(done)))
        g.output = g.apply(Constant(loop), 0, x)
        return g
    return build("before", False), build("after", True)


def hand_record_closure():
    """A record holding `lambda d: d * x`, pushed and popped and called: the record holds
    x, and the pop's caller computes 3.0 * x."""
    def build(name: str, lifted: bool):
        g, (x,) = _graph(1, name)
        if lifted:
            field = x
        else:
            f = Graph("f", g)
            f.output = f.apply(PR["mul"], f.add_parameter("d"), x)
            field = Constant(f)
        pushed = g.apply(PR["stack_push"], EMPTY_STACK, g.apply(PR["make_tuple"], field))
        record = g.apply(PR["getitem"], g.apply(PR["stack_pop"], pushed), 0)
        item = g.apply(PR["getitem"], record, 0)
        g.output = g.apply(PR["mul"], 3.0, item) if lifted else g.apply(item, 3.0)
        return g
    return build("before", False), build("after", True)


def hand_defunctionalised():
    """programs_opt._walk_with_bprop, whose calls return their backpropagators, with the
    state of stacks in their place: each call pushes the tag of the closure it made (0:
    the leaf's, 1: the node's) and the leaf its record (x), and one dispatch pops a tag
    and runs that closure's body on the stacks, calling itself for the callees'
    backpropagators, the right call's first."""
    walk = Graph("walk")
    x, n, tags, leaves = (walk.add_parameter(name) for name in ("x", "n", "tags", "leaves"))
    leaf = Graph("leaf", walk)
    t, s = leaf.add_parameter("tags"), leaf.add_parameter("leaves")
    leaf.output = leaf.apply(PR["make_tuple"], leaf.apply(PR["mul"], x, x),
                             leaf.apply(PR["stack_push"], t, 0),
                             leaf.apply(PR["stack_push"], s, leaf.apply(PR["make_tuple"], x)))
    after = Graph("after", walk)
    t, s = after.add_parameter("tags"), after.add_parameter("leaves")
    left = after.apply(Constant(walk), x, after.apply(PR["sub"], n, 1), t, s)
    right = after.apply(Constant(walk), after.apply(PR["mul"], x, 0.5),
                        after.apply(PR["sub"], n, 2), *(after.apply(PR["getitem"], left, k)
                                                        for k in (1, 2)))
    after.output = after.apply(
        PR["make_tuple"], after.apply(PR["add"], after.apply(PR["getitem"], left, 0),
                                      after.apply(PR["getitem"], right, 0)),
        after.apply(PR["stack_push"], after.apply(PR["getitem"], right, 1), 1),
        after.apply(PR["getitem"], right, 2))
    other = Graph("else", walk)
    other.output = other.apply(Constant(after), other.add_parameter("tags"),
                               other.add_parameter("leaves"))
    branch = walk.apply(PR["switch"], walk.apply(PR["truth"], walk.apply(PR["le"], n, 0)),
                        Constant(leaf), Constant(other))
    walk.output = walk.apply(branch, tags, leaves)

    dispatch = Graph("dispatch")
    tags, leaves, d = (dispatch.add_parameter(name) for name in ("tags", "leaves", "d"))
    popped = dispatch.apply(PR["stack_pop"], tags)
    tag = dispatch.apply(PR["getitem"], popped, 0)
    of_leaf, of_node, choice = (Graph(name, dispatch) for name in ("of_leaf", "of_node", "choice"))
    t, s, d0 = (of_leaf.add_parameter(name) for name in ("tags", "leaves", "d"))
    record = of_leaf.apply(PR["stack_pop"], s)
    of_leaf.output = of_leaf.apply(
        PR["make_tuple"], t, of_leaf.apply(PR["getitem"], record, 1),
        of_leaf.apply(PR["mul"], d0, of_leaf.apply(PR["getitem"],
                                                    of_leaf.apply(PR["getitem"], record, 0), 0)))
    t, s, d1 = (of_node.add_parameter(name) for name in ("tags", "leaves", "d"))
    first = of_node.apply(Constant(dispatch), t, s, d1)
    second = of_node.apply(Constant(dispatch), of_node.apply(PR["getitem"], first, 0),
                           of_node.apply(PR["getitem"], first, 1), d1)
    of_node.output = of_node.apply(
        PR["make_tuple"], of_node.apply(PR["getitem"], second, 0),
        of_node.apply(PR["getitem"], second, 1),
        of_node.apply(PR["add"], of_node.apply(PR["getitem"], second, 2),
                      of_node.apply(PR["mul"], of_node.apply(PR["getitem"], first, 2), 0.5)))
    params = [choice.add_parameter(name) for name in ("tags", "leaves", "d")]
    choice.output = choice.apply(choice.apply(PR["switch"], choice.apply(PR["eq"], tag, 0),
                                              Constant(of_leaf), Constant(of_node)), *params)
    dispatch.output = dispatch.apply(Constant(choice), dispatch.apply(PR["getitem"], popped, 1),
                                     leaves, d)

    g, (x, n) = _graph(2, "after")
    made = g.apply(Constant(walk), x, n, EMPTY_STACK, EMPTY_STACK)
    g.output = g.apply(PR["getitem"], g.apply(Constant(dispatch), g.apply(PR["getitem"], made, 1),
                                              g.apply(PR["getitem"], made, 2), 1.0), 2)
    return parse(P.defunctionalise_before), g


# (prune that does the work, case name, () -> (before graph, after graph))
PRUNE_PAIRS = [
    ("drop_unused_parameters", "passed_on_to_itself",
     _parsed_pair(P.unused_parameter_before, P.unused_parameter_after)),
    ("drop_unused_parameters", "carried_through_a_loop",
     _parsed_pair(P.loop_carried_before, P.loop_carried_after)),
    ("drop_unused_outputs", "second_element", hand_unused_outputs),
    ("drop_unused_outputs", "through_a_loop",
     _parsed_pair(P.loop_carried_before, P.loop_carried_after)),
    ("drop_unused_outputs", "constant_of_a_loop", hand_loop_constant),
    ("drop_unused_outputs", "nested_in_a_loop", lambda: hand_loop_constant(nested=True)),
    ("lift_result_closures", "exit_adjoint", hand_result_closure),
    ("lift_parameter_closures", "passed_round_a_loop", hand_parameter_closure),
    ("lift_record_closures", "popped_and_called", hand_record_closure),
    ("defunctionalise", "walk_with_bprop", hand_defunctionalised),
]


def test_every_prune_has_before_after_pairs():
    assert {p.__name__ for p in opt.PRUNES} == {r for r, _, _ in PRUNE_PAIRS}


@pytest.mark.parametrize("prune, case, build", PRUNE_PAIRS,
                         ids=[f"{r}-{c}" for r, c, _ in PRUNE_PAIRS])
def test_prune_before_after(prune, case, build, monkeypatch):
    before, after = build()
    assert_isomorphic(optimized(before), optimized(after))
    monkeypatch.setattr(opt, "PRUNES", [p for p in opt.PRUNES if p.__name__ != prune])
    assert isomorphism_error(optimized(before), optimized(after)) is not None


def test_parameter_with_an_effect_stays():
    """`y` may be unbound: the argument that checks it stays, so its parameter does too."""
    g = optimized(P.unused_parameter_effect)
    callee = next(h for h in reachable_graphs(g) if h.name == "_count_down_checked")
    assert len(callee.parameters) == 2
    with pytest.raises(UnboundLocalError):
        myir.compile(P.unused_parameter_effect)(-1.0, 2)


def test_output_with_an_effect_stays():
    g = hand_unused_outputs_kept()
    assert_isomorphic(optimized(g), g)


# --------------------------------------------------------------------------------------------
# 1. Typed rewrites: small graphs with types given by hand (the golden tests below use
# passes.infer)

F64, I64, BOOL = AScalar(float), AScalar(int), AScalar(bool)


def _typed(n: int, types: list, build):
    """A graph of n parameters whose output `build(g, *params)` makes, and the types of
    its parameters and of every node `build` makes (`types` in order of creation: the
    parameters' then those given with `build`'s nodes as `(node, type)` pairs)."""
    g, ps = _graph(n, "before")
    mapping = dict(zip(ps, types))
    out = build(g, *ps)
    for node, t in out[1]:
        mapping[node] = t
    g.output = out[0]
    return g, mapping


def _one_op(name, types, *consts, result=None, first_const=False, negated=(), swap=False):
    """`name(p0, ...)` (or with constants after, or before, the parameters; with `swap`,
    name(p0, consts..., p1)) typed `result`; the parameters at the positions `negated`
    negated first (neg(p), typed as p)."""
    def build(g, *ps):
        negs = [g.apply(PR["neg"], p) if i in negated else p for i, p in enumerate(ps)]
        args = [*consts, *negs] if first_const else [*negs, *consts]
        if swap:
            args = [negs[0], *consts, *negs[1:]]
        node = g.apply(PR[name], *args)
        return node, [(node, result)] + [(n, t) for n, p, t in zip(negs, ps, types)
                                         if n is not p]
    return _typed(len(types), types, build)


def _sigmoid_slope(kept: bool):
    """The sensitivity d of z through `1 / (1 + exp(-z))`: `-((1 / y) / y) * d`, whose slope
    is finite for every z (y >= 1), inside strong_zero(d, ...) when `kept`."""
    def build(g, d, z):
        y = g.apply(PR["add"], Constant(1.0), g.apply(PR["exp"], g.apply(PR["neg"], z)))
        quotient = g.apply(PR["truediv"], g.apply(PR["truediv"], Constant(1.0), y), y)
        slope = g.apply(PR["neg"], quotient)
        x = g.apply(PR["mul"], slope, d)
        out = g.apply(PR["strong_zero"], d, x) if kept else x
        made = [out, x, slope, quotient, quotient.args[0], y, y.args[1], y.args[1].args[0]]
        return out, [(n, F64) for n in dict.fromkeys(made)]
    return _typed(2, [F64, F64], build)


def _divided_by():
    """strong_zero(d, d / y), y a parameter: it may be 0, so the zero is kept."""
    def build(g, d, y):
        x = g.apply(PR["truediv"], d, y)
        out = g.apply(PR["strong_zero"], d, x)
        return out, [(x, F64), (out, F64)]
    return _typed(2, [F64, F64], build)


def _gadd_of_made_and_typed():
    """gadd(make_tuple(p1), p0) of a tuple p0 of one float."""
    def build(g, x, y):
        made = g.apply(PR["make_tuple"], y)
        node = g.apply(PR["gadd"], made, x)
        return node, [(made, ATuple((F64,))), (node, ATuple((F64,)))]
    return _typed(2, [ATuple((F64,)), F64], build)


def _items_placed(name):
    """What container_grads_by_type makes of the typed cases of `name` above, item by item."""
    g, (x, y) = _graph(2, "after")
    item = lambda t, i: g.apply(PR["getitem"], t, i)  # noqa: E731
    if name == "getitem_grad":      # (p0 : (float, array), 0, p1)
        g.output = g.apply(PR["make_tuple"], y, g.apply(PR["grad_zeros"], item(x, 1)))
    elif name == "gadd":            # gadd(make_tuple(p1), p0)
        g.output = g.apply(PR["make_tuple"], g.apply(PR["add"], y, item(x, 0)))  # typed
    elif name == "sum_to_side":     # (p0 : (float, array), p1 : (array,), right)
        g.output = g.apply(PR["make_tuple"], item(x, 1))
    else:                           # broadcast_to_side(p0 : (array,), p1 : (float, array))
        g.output = g.apply(PR["make_tuple"], Constant(0.0), item(x, 0))   # a float's zero
    return g


def _expect_constant(n, value):
    g, _ = _graph(n, "after")
    g.output = Constant(value)
    return g


def _expect_op(name, n, *consts, order=None):
    """`name(p0, ..., *consts)` of n parameters (in the given order of their indices)."""
    g, ps = _graph(n, "after")
    g.output = g.apply(PR[name], *(ps if order is None else [ps[i] for i in order]), *consts)
    return g


def _expect_unary(name, n):
    """`name(p0)` of n parameters."""
    g, ps = _graph(n, "after")
    g.output = g.apply(PR[name], ps[0])
    return g


A34 = AArray(np.dtype("float64"), (3, 4))
A4 = AArray(np.dtype("float64"), (4,))
F32 = AScalar(np.float32)
F64_OR_NUMPY = join(F64, AScalar(np.float64))  # a recursion returning x at its bottom
MAYBE_UNBOUND = join(abstract_of(UNBOUND), I64)  # a variable assigned on one branch only


def _shape_from_log():
    """reduce_grad(x, log(x), None, False): reduce_grad reads only log(x)'s shape."""
    def build(g, x):
        log = g.apply(PR["log"], x)
        node = g.apply(PR["reduce_grad"], x, log, None, False)
        return node, [(log, A34), (node, A34)]
    return _typed(1, [A34], build)


def _reduce_grad_of_itself():
    g, (x,) = _graph(1, "after")
    g.output = g.apply(PR["reduce_grad"], x, x, None, False)
    return g


def _shape_from_sum():
    """reduce_grad(x, sum(y, 1), None, False): y has another shape than the sum."""
    def build(g, x, y):
        total = g.apply(PR["sum"], y, 1, False)
        node = g.apply(PR["reduce_grad"], x, total, None, False)
        return node, [(total, AArray(np.dtype("float64"), (3,))), (node, A34)]
    return _typed(2, [A34, A34], build)


def _spread_into(op, d_type, other_type, other=None, result=None):
    """op(reduce_grad(d, x, None, False), other): d spread to x's shape (3, 4), then used by
    an op that broadcasts (`other` a parameter unless given as a constant)."""
    def build(g, x, d, *rest):
        spread = g.apply(PR["reduce_grad"], d, x, None, False)
        operand = rest[0] if rest else Constant(other)
        node = g.apply(PR[op], spread, operand)
        typed = [(spread, AArray(opt._dtype(d_type), (3, 4))), (node, result or A34)]
        return node, typed + ([] if rest else [(operand, AScalar(type(other)))])
    types = [A34, d_type] + ([other_type] if other is None else [])
    return _typed(len(types), types, build)


def _spread_read_directly():
    g, (x, d, y) = _graph(3, "after")
    g.output = g.apply(PR["mul"], d, y)
    return g


A34_F32 = AArray(np.dtype("float32"), (3, 4))


def _divided_then_spread():
    g, (x, d) = _graph(2, "after")
    g.output = g.apply(PR["reduce_grad"], g.apply(PR["truediv"], d, 2.0), x, None, False)
    return g


def _double_spread(d_type):
    """reduce_grad(reduce_grad(d, x, None, False), y, 1, False), x of shape (3,) and y
    (3, 4): the second spread inserts an axis first."""
    def build(g, x, y, d):
        first = g.apply(PR["reduce_grad"], d, x, None, False)
        node = g.apply(PR["reduce_grad"], first, y, 1, False)
        return node, [(first, AArray(np.dtype("float64"), (3,))), (node, A34)]
    return _typed(3, [AArray(np.dtype("float64"), (3,)), A34, d_type], build)


def _single_spread():
    g, (x, y, d) = _graph(3, "after")
    g.output = g.apply(PR["reduce_grad"], d, y, None, False)
    return g


def _where_zeros():
    """where(c, y, grad_zeros(y)): the zeros are the number 0 of y's dtype."""
    def build(g, c, y):
        zeros = g.apply(PR["grad_zeros"], y)
        node = g.apply(PR["where"], c, y, zeros)
        return node, [(zeros, A34), (node, A34)]
    return _typed(2, [AArray(np.dtype("bool"), (3, 4)), A34], build)


def _where_zero():
    g, (c, y) = _graph(2, "after")
    g.output = g.apply(PR["where"], c, y, np.float64(0.0))
    return g


B4 = AArray(np.dtype("bool"), (4,))
A4_F32 = AArray(np.dtype("float32"), (4,))


def _typed_constants(*values):
    """Constants of these values, and their types as inference gives them."""
    nodes = [Constant(v) for v in values]
    return nodes, [(c, abstract_of(c.value)) for c in nodes]


def _where_of_a_row(zeros: bool):
    """where(c, 0, ones) of a row mask c (4,) and ones spread over x (3, 4), float32 (the
    hmlstm gradient's), or where(c, 1, zeros) with the zeros of x (float64)."""
    dtype = np.float64 if zeros else np.float32

    def build(g, c, x):
        (zero, one), typed = _typed_constants(dtype(0.0), dtype(1.0))
        t = AArray(np.dtype(dtype), (3, 4))
        if zeros:
            spread = g.apply(PR["grad_zeros"], x)
            node = g.apply(PR["where"], c, one, spread)
        else:
            spread = g.apply(PR["reduce_grad"], one, x, None, False)
            node = g.apply(PR["where"], c, zero, spread)
        return node, typed + [(spread, t), (node, t)]
    return _typed(2, [B4, A34 if zeros else A34_F32], build)


def _where_of_a_row_spread(zeros: bool):
    dtype = np.float64 if zeros else np.float32
    g, (c, x) = _graph(2, "after")
    values = (dtype(1.0), dtype(0.0)) if zeros else (dtype(0.0), dtype(1.0))
    g.output = g.apply(PR["broadcast_to_like"], g.apply(PR["where"], c, *values), x)
    return g


def _two_spreads():
    """add(reduce_grad(d, x, None, False), broadcast_to_like(r, x)): a number and a row,
    both spread over x (3, 4)."""
    def build(g, x, d, r):
        first = g.apply(PR["reduce_grad"], d, x, None, False)
        second = g.apply(PR["broadcast_to_like"], r, x)
        node = g.apply(PR["add"], first, second)
        return node, [(first, A34), (second, A34), (node, A34)]
    return _typed(3, [A34, AScalar(np.float64), A4], build)


def _op_then_spread(name, n):
    """broadcast_to_like(name(p1, ..., p(n-1)), p0)."""
    g, (x, *ps) = _graph(n, "after")
    g.output = g.apply(PR["broadcast_to_like"], g.apply(PR[name], *ps), x)
    return g


def _waiting(name, types, result, wrap=None):
    """depend(p0, name(p1, ...)) (of wrap(name(p1, ...), p_last) with `wrap`, a float
    operation): p0 waits for an operation kept because it may raise."""
    def build(g, x, *ps):
        args = ps[:-1] if wrap else ps
        node = g.apply(PR[name], *args)
        waited = g.apply(PR[wrap], node, ps[-1]) if wrap else node
        out = g.apply(PR["depend"], x, waited)
        return out, [(node, result), (waited, result), (out, F64)]
    return _typed(len(types), types, build)


def _expect_waiting(name, n, unused=0):
    """depend(p0, name(p1, ...)) of n parameters, the last `unused` of them unused."""
    g, (x, *ps) = _graph(n, "after")
    g.output = g.apply(PR["depend"], x, g.apply(PR[name], *ps[:len(ps) - unused]))
    return g


I_A4 = AArray(np.dtype("int64"), (4,))

_DICT = ADict(("a", "b"), (F64, A4))


def _dict_item_grad():
    """getitem_grad(d, 'a', dout) of a dict of known keys: zeros but at 'a'."""
    return _typed(2, [_DICT, F64], lambda g, d, dout: (
        n := g.apply(PR["getitem_grad"], d, "a", dout), [(n, _DICT)]))


def _dict_item_grad_expected():
    g, (d, dout) = _graph(2, "after")
    zeros = g.apply(PR["grad_zeros"], g.apply(PR["getitem"], d, "b"))
    g.output = g.apply(PR["make_dict"], "a", dout, "b", zeros)
    return g


# (typed rewrite, case, () -> (before, types), expected graph or None when nothing changes)
TYPED_CASES = [
    ("depend_on_what_raises", "array_division_cannot",
     lambda: _waiting("truediv", [F64, A34, A34], A34), lambda: _returning(3, 0)),
    ("depend_on_what_raises", "float_array_power_cannot",
     lambda: _waiting("pow", [F64, A4, F64], A4), lambda: _returning(3, 0)),
    ("depend_on_what_raises", "narrowed_to_log",
     lambda: _waiting("math_log", [F64, F64, F64], F64, wrap="add"),
     lambda: _expect_waiting("math_log", 3, unused=1)),
    ("depend_on_what_raises", "float_division_kept",
     lambda: _waiting("truediv", [F64, F64, F64], F64), None),
    ("depend_on_what_raises", "int_array_power_kept",
     lambda: _waiting("power", [F64, I_A4, I_A4], I_A4), None),
    ("depend_on_what_raises", "unknown_dimension_kept",
     lambda: _waiting("add", [F64, AArray(np.dtype("float64"), (None,)), A4], A4), None),
    ("grad_check_passes", "float", lambda: _one_op("grad_check_input", [F64], "x", result=F64),
     lambda: _returning(1, 0)),
    ("grad_check_passes", "array", lambda: _one_op("grad_check_input", [A34], "x", result=A34),
     lambda: _returning(1, 0)),
    ("grad_check_passes", "tuple", lambda: _one_op("grad_check_input", [ATuple((A34, I64))],
                                                   "x", result=ATuple((A34, I64))),
     lambda: _returning(1, 0)),
    ("grad_check_passes", "int_kept", lambda: _one_op("grad_check_input", [I64], "x",
                                                      result=I64), None),
    ("grad_check_passes", "list", lambda: _one_op("grad_check_input", [AList((A34, F64))],
                                                  "x", result=AList((A34, F64))),
     lambda: _returning(1, 0)),
    ("seq_grad_of_same_kind", "tuple", lambda: _one_op(
        "seq_grad", [ATuple((A4, A4)), ATuple((A4, A4))], result=ATuple((A4, A4))),
     lambda: _returning(2, 0)),
    ("seq_grad_of_same_kind", "list", lambda: _one_op(
        "seq_grad", [AList((A4,)), AList((A4,))], result=AList((A4,))),
     lambda: _returning(2, 0)),
    ("array_like_of_array", "asarray_of_array",
     lambda: _one_op("asarray", [A4], None, result=A4), lambda: _returning(1, 0)),
    ("array_like_of_array", "asarray_of_list_kept",
     lambda: _one_op("asarray", [AList((F64, F64))], None, result=A4), None),
    ("array_like_of_array", "array_grad_of_array",
     lambda: _one_op("array_grad", [A4, A4], result=A4),
     lambda: _returning(2, 1)),
    ("setitem_slot_of_no_list_slice", "array",
     lambda: _one_op("setitem_slot", [A4, I64, F64], result=ATuple((I64, F64))),
     lambda: _expect_op("make_tuple", 3, order=[1, 2])),
    ("setitem_slot_of_no_list_slice", "list_item",
     lambda: _one_op("setitem_slot", [AList((F64, F64)), I64, F64], result=ATuple((I64, F64))),
     lambda: _expect_op("make_tuple", 3, order=[1, 2])),
    ("setitem_slot_of_no_list_slice", "list_slice_kept",
     lambda: _one_op("setitem_slot", [AList((F64, F64)), ASlice(I64, I64, ANone()),
                                      AList((F64,))],
                     result=ATuple((ASlice(I64, I64, ANone()), AList((F64,))))), None),
    ("grad_cast_by_type", "dict_of_unknown_type_kept",
     lambda: _one_op("grad_cast", [ANY, ADict(("a",), (F64,))], result=ADict(("a",), (F64,))),
     None),
    ("seq_grad_of_same_kind", "tuple_to_list_kept", lambda: _one_op(
        "seq_grad", [ATuple((A4,)), AList((A4,))], result=AList((A4,))), None),
    ("grad_seed_of_float", "float", lambda: _one_op("grad_seed", [F64], result=F64),
     lambda: _expect_constant(1, 1.0)),
    ("grad_seed_of_float", "float32", lambda: _one_op("grad_seed", [F32], result=F32),
     lambda: _expect_constant(1, np.float32(1.0))),
    ("grad_seed_of_float", "int_kept", lambda: _one_op("grad_seed", [I64], result=I64), None),
    ("grad_seed_of_float", "array_kept", lambda: _one_op("grad_seed", [A4], result=A4), None),
    ("zeros_of_number", "float", lambda: _one_op("grad_zeros", [F64], result=AScalar(float, 0.0)),
     lambda: _expect_constant(1, 0.0)),
    ("zeros_of_number", "float32", lambda: _one_op(
        "grad_zeros", [F32], result=AScalar(np.float32, np.float32(0))),
     lambda: _expect_constant(1, np.float32(0))),
    ("zeros_of_number", "complex", lambda: _one_op(
        "grad_zeros", [AScalar(complex)], result=AScalar(complex, 0j)),
     lambda: _expect_constant(1, 0j)),
    ("zeros_of_number", "array_kept", lambda: _one_op("grad_zeros", [A4], result=A4), None),
    ("zeros_of_number", "stack", lambda: _one_op(
        "grad_zeros", [AStack(F64)], result=AStack(BOTTOM)),
     lambda: _expect_constant(1, EMPTY_STACK)),
    ("zeros_of_number", "env", lambda: _one_op("grad_zeros", [AEnv()], result=AEnv()),
     lambda: _expect_constant(1, NEWENV)),
    ("sensitivity_of_nothing", "range_item", lambda: _one_op(
        "getitem_grad", [AObject(range), I64, I64], result=ANone()),
     lambda: _expect_constant(3, None)),
    ("sensitivity_of_nothing", "zeros_of_range", lambda: _one_op(
        "grad_zeros", [AObject(range)], result=ANone()), lambda: _expect_constant(1, None)),
    ("sensitivity_of_nothing", "sum_of_nothing", lambda: _one_op(
        "gadd", [ANone(), ANone()], result=ANone()), lambda: _expect_constant(2, None)),
    ("sensitivity_of_nothing", "tuple_item_kept", lambda: _one_op(
        "getitem_grad", [ATuple((F64, F64)), I64, F64], result=ATuple((F64, F64))), None),
    ("grad_cast_by_type", "same_array", lambda: _one_op("grad_cast", [A34, A34], result=A34),
     lambda: _returning(2, 0)),
    ("grad_cast_by_type", "same_float", lambda: _one_op("grad_cast", [F64, F64], result=F64),
     lambda: _returning(2, 0)),
    ("grad_cast_by_type", "tuple", lambda: _one_op(
        "grad_cast", [ATuple((A34, F64)), ATuple((A34, F64))], result=ATuple((A34, F64))),
     lambda: _returning(2, 0)),
    ("grad_cast_by_type", "float64_of_float32_kept",
     lambda: _one_op("grad_cast", [A34, A34_F32], result=A34_F32), None),
    ("grad_cast_by_type", "numpy_scalar_of_float",
     lambda: _one_op("grad_cast", [AScalar(np.float64), F64], result=F64),
     lambda: _expect_unary("to_float", 2)),
    ("grad_cast_by_type", "complex_of_float_unchanged",    # what the cast does too
     lambda: _one_op("grad_cast", [AScalar(np.complex128), F64], result=AScalar(np.complex128)),
     lambda: _returning(2, 0)),
    ("grad_cast_by_type", "row_of_0d_kept", lambda: _one_op(
        "grad_cast", [AArray(np.dtype("float64"), (1,)), AArray(np.dtype("float64"), ())],
        result=AArray(np.dtype("float64"), ())), None),
    ("ieee_on_numpy", "array", lambda: _one_op("ieee_truediv", [A34, F64], result=A34),
     lambda: _expect_op("truediv", 2)),
    ("ieee_on_numpy", "numpy_scalar", lambda: _one_op("ieee_pow", [F64, F32], result=F32),
     lambda: _expect_op("pow", 2)),
    ("strong_zero_of_nonzero", "seed", lambda: _one_op(
        "strong_zero", [F64], 1.0, first_const=True, result=F64), lambda: _returning(1, 0)),
    ("strong_zero_of_nonzero", "array", lambda: _one_op(
        "strong_zero", [A34], -2.0, first_const=True, result=A34), lambda: _returning(1, 0)),
    ("strong_zero_of_nonzero", "zero_kept", lambda: _one_op(
        "strong_zero", [F64], 0.0, first_const=True, result=F64), None),
    ("strong_zero_of_finite_slope", "sigmoid", lambda: _sigmoid_slope(True),
     lambda: _sigmoid_slope(False)[0]),
    ("strong_zero_of_finite_slope", "unbounded_divisor_kept", _divided_by, None),
    ("ieee_on_numpy", "floats_kept", lambda: _one_op("ieee_truediv", [F64, F64], result=F64),
     None),
    ("shape_facts", "ndim", lambda: _one_op("ndim", [A34], result=I64),
     lambda: _expect_constant(1, 2)),
    ("shape_facts", "size", lambda: _one_op("size", [A34], result=I64),
     lambda: _expect_constant(1, 12)),
    ("shape_facts", "shape", lambda: _one_op("shape", [A34], result=ANY),
     lambda: _expect_constant(1, (3, 4))),
    ("shape_facts", "size_of_number", lambda: _one_op("size", [F64], result=I64),
     lambda: _expect_constant(1, 1)),
    ("shape_facts", "unknown_dimension_kept",
     lambda: _one_op("size", [AArray(np.dtype("float64"), (None, 4))], result=I64), None),
    ("mul_one", "float", lambda: _one_op("mul", [F64], 1.0, result=F64),
     lambda: _returning(1, 0)),
    ("mul_one", "one_first", lambda: _one_op("mul", [A34], 1, result=A34, first_const=True),
     lambda: _returning(1, 0)),
    ("mul_one", "numpy_one", lambda: _one_op("mul", [F32], np.float32(1.0), result=F32),
     lambda: _returning(1, 0)),
    ("mul_one", "int_times_float_kept", lambda: _one_op("mul", [I64], 1.0, result=F64), None),
    ("mul_one", "bool_kept", lambda: _one_op("mul", [BOOL], 1, result=I64), None),
    ("add_zero", "minus_zero", lambda: _one_op("add", [F64], -0.0, result=F64),
     lambda: _returning(1, 0)),
    ("add_zero", "minus_zero_first", lambda: _one_op("add", [A34], -0.0, result=A34,
                                                     first_const=True),
     lambda: _returning(1, 0)),
    ("add_zero", "sub_zero", lambda: _one_op("sub", [F64], 0.0, result=F64),
     lambda: _returning(1, 0)),
    ("add_zero", "int_zero", lambda: _one_op("add", [I64], 0, result=I64),
     lambda: _returning(1, 0)),
    ("add_zero", "plus_zero_kept", lambda: _one_op("add", [F64], 0.0, result=F64), None),
    ("add_zero", "sub_minus_zero_kept", lambda: _one_op("sub", [F64], -0.0, result=F64), None),
    ("add_zero", "bool_kept", lambda: _one_op("add", [BOOL], 0, result=I64), None),
    ("add_zero", "unknown_kept", lambda: _one_op("add", [ANY], 0, result=ANY), None),
    ("mul_one", "unknown_kept", lambda: _one_op("mul", [ANY], 1, result=ANY), None),
    ("add_at_index", "float", lambda: _added_at(I64, F64), lambda: _expect_added_at()),
    ("add_at_index", "numpy_float_first", lambda: _added_at(I64, AScalar(np.float64),
                                                            acc_first=False),
     lambda: _expect_added_at()),
    ("add_at_index", "union_of_floats", lambda: _added_at(I64, F64_OR_NUMPY),
     lambda: _expect_added_at()),
    ("add_at_index", "float32_sensitivity_kept", lambda: _added_at(I64, F32), None),
    ("add_at_index", "unknown_sensitivity_kept", lambda: _added_at(I64, ANY), None),
    ("add_at_index", "array_index_kept", lambda: _added_at(I_A4, F64), None),
    ("add_at_index", "bool_index_kept", lambda: _added_at(BOOL, F64), None),
    ("gadd_of_numbers", "floats", lambda: _one_op("gadd", [F64, A34], result=A34),
     lambda: _expect_op("add", 2)),
    ("gadd_of_numbers", "union_of_scalars",
     lambda: _one_op("gadd", [F64_OR_NUMPY, F64], result=F64_OR_NUMPY),
     lambda: _expect_op("add", 2)),
    ("gadd_of_numbers", "union_with_a_tuple_kept",
     lambda: _one_op("gadd", [join(F64, ATuple((F64,))), F64], result=ANY), None),
    ("tuple_rebuilt", "items", lambda: _rebuilt([ATuple((F64, A4))], [0, 1]),
     lambda: _returning(1, 0)),
    ("tuple_rebuilt", "known_items",
     lambda: _rebuilt([ATuple((AEnv(), F64, AScalar(int, 0)))],
                      [Constant(NEWENV), 1, Constant(0)]),
     lambda: _returning(1, 0)),
    ("tuple_rebuilt", "fewer_items_kept",
     lambda: _rebuilt([ATuple((F64, F64, F64))], [0, 1]), None),
    ("tuple_rebuilt", "other_order_kept",
     lambda: _rebuilt([ATuple((F64, A4, A4))], [0, 2, 1]), None),
    ("tuple_rebuilt", "unknown_item_kept",
     lambda: _rebuilt([ATuple((F64, F64))], [0, Constant(0.0)]), None),
    ("tuple_rebuilt", "two_tuples_kept",
     lambda: _rebuilt([ATuple((F64, F64)), ATuple((F64, F64))], [0, (1, 1)]), None),
    ("tuple_rebuilt", "call_passing_items_kept",
     lambda: _rebuilt([ATuple((F64, F64))], [0, 1], PR["add"]), None),
    ("gadd_of_numbers", "tuples_kept",
     lambda: _one_op("gadd", [ATuple((F64,)), ATuple((F64,))], result=ATuple((F64,))), None),
    ("gadd_of_numbers", "unknown_kept", lambda: _one_op("gadd", [F64, ANY], result=ANY), None),
    ("sum_to_like_same_shape", "arrays", lambda: _one_op("sum_to_like", [A34, A34],
                                                         result=A34),
     lambda: _returning(2, 0)),
    ("sum_to_like_same_shape", "scalars", lambda: _one_op("sum_to_like", [F64, F32],
                                                          result=F64),
     lambda: _returning(2, 0)),
    ("sum_to_like_same_shape", "union_of_scalars",
     lambda: _one_op("sum_to_like", [F64_OR_NUMPY, F64_OR_NUMPY], result=F64_OR_NUMPY),
     lambda: _returning(2, 0)),
    ("sum_to_like_same_shape", "broadcast_kept",
     lambda: _one_op("sum_to_like", [A34, A4], result=A4), None),
    ("sum_to_like_same_shape", "array_to_scalar_kept",
     lambda: _one_op("sum_to_like", [A4, F64], result=F64), None),
    ("side_of_number", "array", lambda: _one_op("sum_to_side", [A34, A4], True, result=A4),
     lambda: _expect_op("sum_to_like", 2)),
    ("side_of_number", "float", lambda: _one_op("broadcast_to_side", [F64, A34], False,
                                                result=A34),
     lambda: _expect_op("broadcast_to_like", 2)),
    ("side_of_number", "unknown_tuple_kept", lambda: _one_op(
        "sum_to_side", [ANY, ATuple((F64,))], True, result=ANY), None),
    ("container_grads_by_type", "getitem_grad", lambda: _one_op(
        "getitem_grad", [ATuple((F64, A4)), F64], 0, result=ATuple((F64, A4)), swap=True),
     lambda: _items_placed("getitem_grad")),
    ("container_grads_by_type", "gadd", _gadd_of_made_and_typed,
     lambda: _items_placed("gadd")),
    ("container_grads_by_type", "sum_to_side", lambda: _one_op(
        "sum_to_side", [ATuple((F64, A4)), ATuple((A4,))], True, result=ATuple((A4,))),
     lambda: _items_placed("sum_to_side")),
    ("container_grads_by_type", "broadcast_to_side", lambda: _one_op(
        "broadcast_to_side", [ATuple((A4,)), ATuple((F64, A4))], True,
        result=ATuple((F64, A4))),
     lambda: _items_placed("broadcast_to_side")),
    ("container_grads_by_type", "unknown_length_kept", lambda: _one_op(
        "getitem_grad", [ANY, F64], 0, result=ANY, swap=True), None),
    ("known_integer", "len", lambda: _one_op("len", [ATuple((F64, F64))],
                                             result=AScalar(int, 2)),
     lambda: _expect_constant(1, 2)),
    ("known_integer", "float_kept", lambda: _one_op("exp", [F64], result=AScalar(float, 1.0)),
     None),
    ("known_integer", "effect_kept", lambda: _one_op("check_bound", [MAYBE_UNBOUND], "n",
                                                     result=AScalar(int, 3)), None),
    ("checks_proved", "bound", lambda: _one_op("check_bound", [F64], "x", result=F64),
     lambda: _returning(1, 0)),
    ("checks_proved", "maybe_unbound_kept",
     lambda: _one_op("check_bound", [MAYBE_UNBOUND], "x", result=I64), None),
    ("checks_proved", "unpack", lambda: _one_op("unpack", [ATuple((F64, I64))], 2,
                                                result=ATuple((F64, I64))),
     lambda: _returning(1, 0)),
    ("checks_proved", "unpack_other_length_kept",
     lambda: _one_op("unpack", [ATuple((F64, I64))], 3, result=ANY), None),
    ("checks_proved", "aug_scalar", lambda: _one_op("aug_add", [F64, A34], result=A34),
     lambda: _expect_op("add", 2)),
    ("checks_proved", "aug_array_kept", lambda: _one_op("aug_mul", [A34, F64], result=A34),
     None),
    ("shape_from_input", "elementwise", _shape_from_log,
     _reduce_grad_of_itself),
    ("shape_from_input", "other_shape_kept", _shape_from_sum, None),
    ("implicit_broadcast", "numpy_scalar",
     lambda: _spread_into("mul", AScalar(np.float64), A34), _spread_read_directly),
    ("implicit_broadcast", "kept_axes",
     lambda: _spread_into("mul", AArray(np.dtype("float64"), (3, 1)), A34),
     _spread_read_directly),
    ("implicit_broadcast", "python_float", lambda: _spread_into("mul", F64, A34),
     _spread_read_directly),
    ("implicit_broadcast", "python_float_into_float32_kept",
     lambda: _spread_into("mul", F64, A34_F32), None),
    ("implicit_broadcast", "shape_made_by_the_spread_kept",
     lambda: _spread_into("mul", F64, None, other=2.0), None),
    ("implicit_broadcast", "zeros", _where_zeros, _where_zero),
    ("spread_late", "numpy_scalar",
     lambda: _spread_into("truediv", AScalar(np.float64), None, other=2.0),
     _divided_then_spread),
    ("spread_late", "python_float_kept",
     lambda: _spread_into("truediv", F64, None, other=2.0), None),
    ("spread_of_spread", "number", lambda: _double_spread(F64), _single_spread),
    ("spread_of_spread", "array_kept",
     lambda: _double_spread(AArray(np.dtype("float64"), (3, 1))), None),
    ("negation_absorbed", "times_minus_one",
     lambda: _one_op("mul", [A34], np.float64(-1.0), result=A34), lambda: _expect_op("neg", 1)),
    ("negation_absorbed", "minus_one_first",
     lambda: _one_op("mul", [F32], -1.0, result=F32, first_const=True),
     lambda: _expect_op("neg", 1)),
    ("negation_absorbed", "minus_one_promoting_kept",
     lambda: _one_op("mul", [A34_F32], np.float64(-1.0), result=A34), None),
    ("negation_absorbed", "int_minus_one_kept", lambda: _one_op("mul", [I64], -1, result=I64),
     None),
    ("negation_absorbed", "complex_minus_one_kept",
     lambda: _one_op("mul", [AScalar(complex)], -1.0, result=AScalar(complex)), None),
    ("negation_absorbed", "negated_times_constant",
     lambda: _one_op("mul", [A34], 0.5, result=A34, first_const=True, negated=(0,)),
     lambda: _expect_op("mul", 1, -0.5)),
    ("negation_absorbed", "negated_times_numpy_constant",
     lambda: _one_op("mul", [A4_F32], np.float32(2.0), result=A4_F32, negated=(0,)),
     lambda: _expect_op("mul", 1, np.float32(-2.0))),
    ("negation_absorbed", "negated_times_zero",
     lambda: _one_op("mul", [F64], 0.0, result=F64, negated=(0,)),
     lambda: _expect_op("mul", 1, -0.0)),
    ("negation_absorbed", "negated_int_kept",
     lambda: _one_op("mul", [I64], 2.0, result=F64, negated=(0,)), None),
    ("negation_absorbed", "add_negated_first",
     lambda: _one_op("add", [A34, F64], result=A34, negated=(0,)),
     lambda: _expect_op("sub", 2, order=(1, 0))),
    ("negation_absorbed", "add_negated_second",
     lambda: _one_op("add", [F64, A4_F32], result=A4_F32, negated=(1,)),
     lambda: _expect_op("sub", 2)),
    ("negation_absorbed", "sub_negated",
     lambda: _one_op("sub", [F32, F32], result=F32, negated=(1,)),
     lambda: _expect_op("add", 2)),
    ("negation_absorbed", "negated_minus_kept",
     lambda: _one_op("sub", [F64, F64], result=F64, negated=(0,)), None),
    ("negation_absorbed", "int_add_kept",
     lambda: _one_op("add", [I64, I64], result=I64, negated=(0,)), None),
    ("spread_out", "where_of_a_row", lambda: _where_of_a_row(False),
     lambda: _where_of_a_row_spread(False)),
    ("spread_out", "where_of_zeros", lambda: _where_of_a_row(True),
     lambda: _where_of_a_row_spread(True)),
    ("spread_out", "two_spreads", _two_spreads, lambda: _op_then_spread("add", 3)),
    ("spread_out", "numpy_scalar_and_row",
     lambda: _spread_into("mul", AScalar(np.float64), A4), lambda: _op_then_spread("mul", 3)),
    ("spread_out", "python_float_promoting_kept",
     lambda: _spread_into("mul", F64, A4_F32, result=A34), None),
    ("spread_out", "pow_kept", lambda: _spread_into("pow", AScalar(np.float64), A4), None),
    ("spread_out", "int_kept",
     lambda: _spread_into("add", AScalar(np.int64), AArray(np.dtype("int64"), (4,)),
                          result=AArray(np.dtype("int64"), (3, 4))), None),
    # an AD zero inference folded to the number 0.0: the sum is the other operand, as for
    # grad_zeros (not an int, whose sum with 0.0 is a float)
    ("gadd_zero", "folded_float_zero",
     lambda: _one_op("gadd", [F64], Constant(0.0), result=F64), lambda: _returning(1, 0)),
    ("gadd_zero", "folded_float_zero_first",
     lambda: _one_op("gadd", [F64], Constant(0.0), result=F64, first_const=True),
     lambda: _returning(1, 0)),
    ("gadd_zero", "int_and_float_zero_kept",
     lambda: _one_op("gadd", [I64], Constant(0.0), result=F64), None),
    ("neg_neg", "int", lambda: _typed(1, [I64], lambda g, x: _neg_neg(g, x, I64)),
     lambda: _returning(1, 0)),
    ("neg_neg", "bool_kept", lambda: _typed(1, [BOOL], lambda g, x: _neg_neg(g, x, I64)),
     None),
    ("gradient_of_container", "getitem_grad_of_dict", _dict_item_grad,
     _dict_item_grad_expected),
    ("gradient_of_container", "iter_keys_of_tuple",
     lambda: _one_op("iter_keys", [ATuple((F64, F64))], result=ATuple((F64, F64))),
     lambda: _returning(1, 0)),
]


def _rebuilt(types, items, fn=PR["make_tuple"]):
    """make_tuple (or another call of `fn`) of `items`: an int i is getitem(p0, i), a pair
    (k, i) getitem(pk, i), a Constant itself; the parameters typed `types`."""
    def build(g, *ts):
        made = []
        for item in items:
            if type(item) is int:
                item = (0, item)
            made.append(item if isinstance(item, Constant) else
                        g.apply(PR["getitem"], ts[item[0]], item[1]))
        typed = [(m, types[ts.index(m.args[0])].items[m.args[1].value])
                 for m in made if not isinstance(m, Constant)]
        node = g.apply(fn, *made)
        return node, typed + [(node, ANY)]
    return _typed(len(types), types, build)


def _added_at(index_type, d_type, acc_first=True):
    """add(p0, getitem_grad(p1, p2, p3)) (or the sum the other way round) of a float64
    vector p0 and p1, an index p2 and a sensitivity p3 of the types given."""
    def build(g, acc, x, i, d):
        spread = g.apply(PR["getitem_grad"], x, i, d)
        node = g.apply(PR["add"], *((acc, spread) if acc_first else (spread, acc)))
        return node, [(spread, A4), (node, A4)]
    return _typed(4, [A4, A4, index_type, d_type], build)


def _expect_added_at():
    """setitem(p0, p2, add(getitem(p0, p2), p3))."""
    g, (acc, _, i, d) = _graph(4, "after")
    g.output = g.apply(PR["setitem"], acc, i,
                       g.apply(PR["add"], g.apply(PR["getitem"], acc, i), d))
    return g


def _neg_neg(g, x, t):
    inner = g.apply(PR["neg"], x)
    outer = g.apply(PR["neg"], inner)
    return outer, [(inner, t), (outer, t)]


TYPED_IDS = [f"{r}-{c}" for r, c, _, _ in TYPED_CASES]


def test_every_typed_rewrite_has_cases():
    assert {r.__name__ for r in opt.TYPED_REWRITES} <= {r for r, _, _, _ in TYPED_CASES}


@pytest.mark.parametrize("rewrite, case, build, expected", TYPED_CASES, ids=TYPED_IDS)
def test_typed_rewrite(rewrite, case, build, expected, monkeypatch):
    """The typed rewrite turns the graph into the expected one (or leaves it alone), and
    is needed for it."""
    before, types = build()
    got, _ = opt.optimize_typed(before, types)
    if expected is None:
        assert_isomorphic(got, before)
        return
    assert_isomorphic(got, optimized(expected()))
    monkeypatch.setattr(opt, "TYPED_REWRITES",
                        [r for r in opt.TYPED_REWRITES if r.__name__ != rewrite])
    monkeypatch.setattr(opt, "REWRITES", [r for r in opt.REWRITES if r.__name__ != rewrite])
    again, types = build()
    assert isomorphism_error(opt.optimize_typed(again, types)[0], optimized(expected())) \
        is not None


def test_typed_rewrites_give_new_nodes_the_old_type():
    """gadd -> add keeps the type, so the add's `x * 1.0` user can still be simplified."""
    def build(g, x, y):
        s = g.apply(PR["gadd"], x, y)
        m = g.apply(PR["mul"], s, 1.0)
        return m, [(s, F64), (m, F64)]
    before, types = _typed(2, [F64, F64], build)
    got, got_types = opt.optimize_typed(before, types)
    assert_isomorphic(got, _expect_op("add", 2))
    assert got_types[got.output] == F64


def test_optimize_typed_does_not_mutate_its_input():
    before, types = _one_op("gadd", [F64, F64], result=F64)
    text, known = str(before), dict(types)
    opt.optimize_typed(before, types)
    assert str(before) == text and types == known


def _values(t):
    """Values of the abstract type t, a number or an array of numbers: for floats, every
    float, and often a signed zero, an infinity or a NaN."""
    dtype = opt._dtype(t)
    elements = hnp.from_dtype(dtype)
    if dtype.kind == "f":
        special = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan]
        elements = st.sampled_from(special) | st.floats(width=8 * dtype.itemsize)
    if isinstance(t, AArray):
        return hnp.arrays(dtype, t.shape, elements=elements)
    return elements.map(t.pytype)


def _runnable(t) -> bool:
    return (isinstance(t, AScalar) and t.pytype is not complex) \
        or (isinstance(t, AArray) and opt._shape(t) is not None)


# The typed cases that change their graph, with parameters of numbers and arrays (not
# shape_facts's size of a number, np.size's value: the primitive itself takes arrays only).
TYPED_RUNS = [c for c in TYPED_CASES if c[3] is not None and c[:2] != ("shape_facts",
                                                                       "size_of_number")
              and all(_runnable(t) for t in c[2]()[1].values())]
_typed_runs: dict = {}


def _typed_run(case, build):
    """The parameters' types and the case's graph compiled before and after optimize_typed
    (python backend)."""
    if case not in _typed_runs:
        before, types = build()
        after, _ = opt.optimize_typed(before, types)
        _typed_runs[case] = ([types[p] for p in before.parameters],
                             *(compile_module(generate(g), f"<{case}>") for g in (before, after)))
    return _typed_runs[case]


# Rewrites of a gradient's sums that leave a -0.0 of the sum's other operand where the sum
# made +0.0 (-0.0 + 0.0 is 0.0): as gadd_zero does, they treat a gradient's zero as
# having no sign.  Their results are otherwise the same, bit for bit.
# Rewrites of gradient code that may change the sign of a zero (a sensitivity's sign of zero
# carries no meaning): strong_zero's zero is +0.0, the product it guards may be -0.0.
SIGNLESS_ZEROS = {"add_at_index", "strong_zero_of_finite_slope", "gadd_zero"}


@pytest.mark.parametrize("rewrite, case, build, expected", TYPED_RUNS,
                         ids=[f"{r}-{c}" for r, c, _, _ in TYPED_RUNS])
@given(data=st.data())
def test_typed_rewrite_preserves_results(rewrite, case, build, expected, data):
    """The typed rewrites are exact: each case's graph gives the same results before and
    after, bit for bit on any input (the signs of zeros in arrays included; a NaN is a NaN,
    whatever its sign)."""
    types, before, after = _typed_run(f"{rewrite}-{case}", build)
    values = data.draw(st.tuples(*map(_values, types)))
    with np.errstate(all="ignore"):
        got, plain = outcome(after, values), outcome(before, values)
    assert got[0] == plain[0], (got, plain)
    if got[0] == "raise":
        assert got == plain
        return
    if rewrite in SIGNLESS_ZEROS and isinstance(got[1], (float, np.floating)):
        got, plain = (got[0], got[1] + 0.0), (plain[0], plain[1] + 0.0)    # -0.0 + 0.0 is 0.0
    assert_same(got[1], plain[1])
    if isinstance(got[1], np.ndarray) and got[1].dtype.kind == "f" \
            and rewrite not in SIGNLESS_ZEROS:
        numbers = ~np.isnan(got[1])
        assert np.array_equal(np.signbit(got[1])[numbers], np.signbit(plain[1])[numbers])


# --------------------------------------------------------------------------------------------
# 1. Rewrites: results are preserved

floats = st.floats(-100.0, 100.0, allow_nan=False, allow_infinity=False)
small_ints = st.integers(-5, 5)


def _args(*strategies):
    return st.tuples(*strategies)


# (rewrite expected to fire or None, subject, wrt (None: the function itself), arguments)
RUNS = [
    ("getitem_of_tuple", P.getitem_before, None, _args(floats, floats, floats)),
    ("getitem_of_tuple", P.getitem_nested_before, None, _args(floats, floats)),
    ("getitem_of_tuple", P.getitem_before, (0, 1, 2), _args(floats, floats, floats)),
    (None, P.getitem_out_of_range, None, _args(floats, floats)),
    ("env_get_after_set", P.env_closure, (0, 1), _args(floats, floats)),
    ("gadd_zero", P.gadd_unused_operand, (0,), _args(floats)),
    (None, P.gadd_compare, (0,), _args(floats)),
    ("getitem_grad_of_made", P.tuple_pair, (0, 1), _args(floats, floats)),
    ("gadd_of_made", P.tuple_pair, (0, 1), _args(floats, floats)),
    ("switch_on_constant", P.switch_before, None, _args(floats)),
    ("switch_on_constant", P.switch_ifexp_before, None, _args(floats)),
    ("switch_on_constant", P.switch_specialised_before, None, _args(floats)),
    ("switch_on_constant", P.fold_and_switch, None, _args(floats, small_ints)),
    ("switch_on_constant", P.fold_and_switch, (0,), _args(floats, small_ints)),
    ("constant_fold", P.fold_before, None, _args(floats)),
    ("constant_fold", P.fold_and_switch, None, _args(floats, small_ints)),
    (None, P.fold_raises, None, _args(floats)),
    (None, P.fold_math_domain, None, _args(floats)),
    ("call_inline", P.inline_before, None, _args(floats)),
    ("call_inline", P.inline_lambda_before, None, _args(floats)),
    ("call_inline", P.compose_sincos, None, _args(floats)),
    ("call_inline", P.compose_sincos, (0,), _args(floats)),
    ("call_inline", P.nested_poly, (0,), _args(floats)),
    (None, P.inline_recursive, None, _args(floats)),
    (None, P.cse_before, None, _args(floats, floats)),
    (None, P.cse_before, (0, 1), _args(floats, floats)),
    ("switch_equal_branches", P.switch_equal_before, None, _args(floats, floats)),
    (None, P.switch_equal_keeps_check, None, _args(floats, floats)),
    ("neg_neg", P.neg_neg_before, None, _args(floats)),
    ("neg_neg", P.neg_neg_before, (0,), _args(floats)),
    (None, P.neg_neg_bool, None, _args(floats, floats)),
    (None, P.add_zero_unknown_type, None, _args(floats)),
    ("negation_absorbed", P.negations, None, _args(floats, floats)),
    ("negation_absorbed", P.negations_scalar, (0, 1), _args(floats, floats)),
    ("spread_out", P.spread_rows, (0,), _args(floats, floats)),
    ("specialize_call", P.specialize_before, None, _args(floats)),
    ("specialize_call", P.specialize_before, (0,), _args(floats)),
    ("specialize_call", P.specialize_map, None, _args(floats, floats)),
    ("drop_unused_parameters", P.unused_parameter_before, None, _args(floats, small_ints)),
    (None, P.unused_parameter_effect, None, _args(floats, small_ints)),
    ("closure_eta", P.tail_call_in_branch, (0,), _args(floats)),
    ("tuple_rebuilt", P.tail_call_in_branch, (0,), _args(floats)),
    ("defunctionalise", P.recursion_chain, (0,), _args(floats, small_ints)),
]
RUN_IDS = [f"{fn.__name__}{'' if wrt is None else '-grad' + ''.join(map(str, wrt))}"
           for _, fn, wrt, _ in RUNS]

_compiled: dict = {}


def compiled(fn, wrt, optimize: bool):
    """The subject compiled (wrt None) or differentiated, with or without the optimizer, on
    the python backend (TVM fuses differently with and without: results differ in the last
    bits)."""
    key = (fn, wrt, optimize)
    if key not in _compiled:
        c = myir.compile(fn, backend="python", optimize=optimize)
        _compiled[key] = c if wrt is None else myir.grad(c, *wrt)
    return _compiled[key]


def outcome(f, args):
    try:
        return "value", f(*args)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome
        return "raise", (type(e), str(e))


def assert_same(a, b, exact: bool = True):
    """Same type and value (floats: bit for bit, unless `exact` is False; tuples and dicts
    elementwise)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b), (a, b)
        for k in a:
            assert_same(a[k], b[k], exact)
    elif isinstance(a, tuple):
        assert len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            assert_same(x, y, exact)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
        if exact:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5 if a.dtype == np.float32 else 1e-12,
                                       atol=1e-12)
    elif isinstance(a, (float, np.floating)):
        if exact:
            assert repr(a) == repr(b) or (math.isnan(a) and math.isnan(b)), (a, b)
        else:
            assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12) \
                or (math.isnan(a) and math.isnan(b)), (a, b)
    elif isinstance(a, (complex, np.complexfloating)):   # a NaN part: never == itself
        assert_same(float(a.real), float(b.real), exact)
        assert_same(float(a.imag), float(b.imag), exact)
    else:
        assert a == b, (a, b)


@pytest.mark.parametrize("rewrite, fn, wrt, args", RUNS, ids=RUN_IDS)
@given(data=st.data())
def test_optimizer_preserves_results(rewrite, fn, wrt, args, data):
    values = data.draw(args)
    got = outcome(compiled(fn, wrt, True), values)
    plain = outcome(compiled(fn, wrt, False), values)
    assert got[0] == plain[0], (got, plain)
    if got[0] == "raise":
        assert got == plain
    else:
        assert_same(got[1], plain[1], exact=wrt is None)
    if wrt is None:  # the forward against CPython itself, exactly
        expected = outcome(fn, values)
        assert got[0] == expected[0], (got, expected)
        if got[0] == "raise":
            assert got[1][0] is expected[1][0], (got, expected)
        else:
            assert_same(got[1], expected[1])


def _counting(monkeypatch) -> Counter:
    """Counts, by name, the rewrites that replace a node and the prunes that change the
    program."""
    counts: Counter = Counter()

    def wrap(rewrite):
        def counted(node, ctx):
            new = rewrite(node, ctx)
            if new is not None and new is not node:
                counts[rewrite.__name__] += 1
            return new

        counted.__name__ = rewrite.__name__
        return counted

    def wrap_prune(prune):
        def counted(root, types=None):
            changed = prune(root, types)
            counts[prune.__name__] += changed
            return changed

        counted.__name__ = prune.__name__
        return counted

    monkeypatch.setattr(opt, "REWRITES", [wrap(r) for r in opt.REWRITES])
    monkeypatch.setattr(opt, "TYPED_REWRITES", [wrap(r) for r in opt.TYPED_REWRITES])
    monkeypatch.setattr(opt, "PRUNES", [wrap_prune(p) for p in opt.PRUNES])
    return counts


SAMPLE_ARGS = {1: (0.5,), 2: (0.5, 2), 3: (0.5, 0.25, 1.5)}
FIRING = [(r, fn, wrt) for r, fn, wrt, _ in RUNS if r is not None]


@pytest.mark.parametrize("rewrite, fn, wrt", FIRING,
                         ids=[i for i, (r, *_) in zip(RUN_IDS, RUNS) if r is not None])
def test_rewrite_fires_in_its_program(rewrite, fn, wrt, monkeypatch):
    """The programs above exercise the rewrites they are listed for."""
    counts = _counting(monkeypatch)
    c = myir.compile(fn)
    c = c if wrt is None else myir.grad(c, *wrt)
    nargs = fn.__code__.co_argcount
    args = [float(a) if i in (wrt or ()) else a for i, a in enumerate(SAMPLE_ARGS[nargs])]
    c.lower(*args)
    assert counts[rewrite] > 0, dict(counts)


# --------------------------------------------------------------------------------------------
# 1. optimize() never mutates its input


SUBJECTS = [P.getitem_before, P.getitem_nested_before, P.switch_before, P.switch_ifexp_before,
            P.switch_specialised_before, P.fold_before, P.inline_before, P.inline_lambda_before,
            P.inline_recursive, P.env_closure, P.compose_sincos, P.cse_before,
            P.switch_equal_before, P.specialize_before, P.specialize_map,
            P.unused_parameter_before]


@pytest.mark.parametrize("fn", SUBJECTS, ids=lambda f: f.__name__)
def test_optimize_does_not_mutate_parsed_graph(fn):
    g = parse(fn)
    text, stats = str(g), g.stats()
    result = opt.optimize(g)
    assert result is not g
    assert str(g) == text
    assert g.stats() == stats


@pytest.mark.parametrize("build", [b for _, _, b in PAIRS], ids=[f"{r}-{c}" for r, c, _ in PAIRS])
def test_optimize_does_not_mutate_built_graph(build):
    g, _ = build()
    text, stats = str(g), g.stats()
    opt.optimize(g)
    assert str(g) == text
    assert g.stats() == stats


def test_graphs_called_once_are_moved_not_copied(monkeypatch):
    """Inlining the only call of a graph moves its body there (`edit.move_inline`): a chain
    of such calls, and its gradient's J graphs and backpropagators, are moved, none copied."""
    moved, copied = [], []
    real_move, real_inline = opt.move_inline, opt.inline
    monkeypatch.setattr(opt, "move_inline", lambda g, *a: moved.append(g.name) or real_move(g, *a))
    monkeypatch.setattr(opt, "inline", lambda g, *a, **k: copied.append(g.name)
                        or real_inline(g, *a, **k))
    f = myir.compile(P.chain_called_once, backend="python")
    assert f(0.75) == P.chain_called_once(0.75)
    assert {"_chain_1", "_chain_2"} <= set(moved) and not {"_chain_1", "_chain_2"} & set(copied)
    # d/dx [2 ((x/2)^2 + 1) - x] = x - 1
    assert myir.grad(myir.compile(P.chain_called_once, backend="python"), 0)(0.75) == -0.25
    assert {"J__chain_1", "bprop__chain_1"} <= set(moved)


def test_graph_used_again_after_its_body_moved_is_copied():
    """`pair[0]` becomes the helper only during the sweep: two calls of a graph counted as
    called once.  The first moves its body; the second meets the moved graph (GraphMoved),
    and the optimizer starts again, copying: the results are CPython's."""
    with pytest.raises(GraphMoved):
        opt._run(clone_program(parse(P.called_through_a_tuple)), opt.REWRITES, None, True)
    f = myir.compile(P.called_through_a_tuple, backend="python")
    assert f(0.5) == P.called_through_a_tuple(0.5)
    # d/dx [(3x + 1) + (6x + 1)] = 9
    assert myir.grad(f, 0)(0.5) == 9.0


def test_compile_starts_over_without_moves_when_a_moved_graph_is_used(monkeypatch):
    """The typed optimization edits inference's graphs in place: nothing to start over
    from, so a moved graph met again (GraphMoved) restarts the whole compile, without
    moves."""
    from myir import pipeline

    tried, real = [], pipeline.optimize_typed

    def optimize_typed(graph, types, entry, in_place, moves):
        tried.append(moves)
        if moves:
            raise GraphMoved(graph)
        return real(graph, types, entry, in_place, moves)

    monkeypatch.setattr(pipeline, "optimize_typed", optimize_typed)
    assert myir.compile(P.chain_called_once, backend="python")(0.75) \
        == P.chain_called_once(0.75)
    assert tried == [True, False]


def test_moves_leave_graphs_shared_between_compiles_alone():
    """The gradient rules (and parsed functions) are graphs that caches share between
    compiles; `mul`'s rule is called once here.  Moved rather than copied, the next compile
    would call an empty graph."""
    from passes.ad import gradient_rule

    for optimize in (True, False, True):
        g = myir.grad(myir.compile(P.getitem_before, backend="python", optimize=optimize),
                      0, 1, 2)
        assert g(0.5, 2.0, 3.0) == (-1.0, 3.0, 2.0)     # (-1, c, b)
        assert gradient_rule("mul").output is not None


# --------------------------------------------------------------------------------------------
# Known bugs


def test_cse_keeps_signed_zeros_apart():
    got = myir.compile(P.cse_signed_zeros)(1.0)
    assert [math.copysign(1.0, v) for v in got] == [1.0, -1.0]


def test_inlining_keeps_evaluation_order():
    with pytest.raises(ZeroDivisionError):
        myir.compile(P.inline_keeps_order)(0.0)


def test_inlining_keeps_evaluation_order_without_optimizer():
    with pytest.raises(ZeroDivisionError):
        myir.compile(P.inline_keeps_order, optimize=False)(0.0)


# --------------------------------------------------------------------------------------------
# 2. Golden collapse of straight-line gradients

_rng = np.random.default_rng(1234)


def _vec(n, dtype=np.float64):
    return _rng.standard_normal(n).astype(dtype)


def _inputs(name):
    f32 = np.float32
    if name == "logreg":
        return (_vec((7, 3)), np.where(_vec(7) > 0, 1.0, -1.0), _vec(3), 0.1)
    if name == "mlp":
        return (_vec((4, 6), f32), _vec((6, 5), f32), _vec(5, f32), _vec((5, 3), f32),
                _vec(3, f32), np.eye(3, dtype=f32)[[0, 2, 1, 1]])
    if name == "mlp_dict":
        x, W1, b1, W2, b2, onehot = _inputs("mlp")
        return ({"W1": W1, "b1": b1, "W2": W2, "b2": b2}, x, onehot)
    if name == "blackscholes":
        u = _rng.uniform
        return (u(50, 150, 5), u(50, 150, 5), u(0.1, 2, 5), u(0, 0.05, 5), u(0.1, 0.5, 5))
    if name == "hmlstm":
        mats = [_vec((4, 4), f32) for _ in range(4)]
        return (*mats, np.array([1, 0, 0, 1], f32), np.array([0, 1, 0, 1], f32))
    if name == "sigmoid_xent":
        return (_vec(5), np.array([1.0, 0.0, 1.0, 1.0, 0.0]))
    if name == "tanh_layer":
        return (_vec(4), _vec(4), _vec(4))
    if name == "logsumexp":
        return (_vec(6),)
    if name in ("poly_xy", "tuple_pair"):
        return (1.3, 0.7)
    return (0.4,)


ALLOWED_SIZE = 1.25
FORBIDDEN = ("make_tuple", "getitem", "env_getitem", "env_setitem", "gadd", "switch")

_TYPES = "gadd is only turned into add with types (optimize_typed)"
_MATMUL = ("bprop_matmul's dispatch on ndim (switch, closures, make_tuple/getitem) is only "
           "resolved with shapes (optimize_typed)")
_MAX = ("max's tie-splitting gradient (eq/where/sum/reduce_grad), for a sensitivity that is "
        "0 only mathematically (1 - sum(softmax)), stays: dropping it changes results")
_ALGEBRA = "the hand-written gradient uses algebra that changes rounding: "

_RATIONAL = ("sigmoid(z) - t needs rational-function algebra (1 - 1/(1+e) = e/(1+e)), "
             "which fastmath does not do: it collects terms of products, not fractions")

# name: (subject, wrt, reason the untyped pipeline's gradient is not collapsed or None,
#        reason the typed gradient is not within ALLOWED_SIZE or None,
#        applies of the untyped pipeline's gradient (a regression guard, counting the
#        strong_zero of each division, log and root; mean's gradient
#        counts 2 more since `np.size(x)` is `np.zeros_like(x, dtype=np.bool_).size`, which
#        works on Python scalars too: frontend/numpy_functions.py; each gradient counts its
#        grad_cast to its parameter's type, which only types prove needless, and one of
#        several parameters the `depend` on grad's seed, which reaches the tuple of gradients
#        only as an item until types make the seed a constant),
#        reason the fastmath gradient is not within ALLOWED_SIZE of the hand-written one
#        (compiled with fastmath too) or None)
GOLDEN = {
    "poly_xy": (P.poly_xy, (0,), None, None, 13, None),
    "sincos": (W.sincos, (0,), None, None, 11, None),
    "logsumexp": (W.logsumexp, (0,), _TYPES, _MAX, 31, None),
    "logreg": (W.logreg, (2, 3), _MATMUL, None, 112, None),
    "mlp": (W.mlp, (1, 2, 3, 4), _MATMUL + "; " + _TYPES, _MAX, 152, None),
    "mlp_dict": (P.mlp_dict, (0,), _MATMUL + "; " + _TYPES, _MAX, 155, None),
    "blackscholes": (W.blackscholes, (0, 4), _TYPES,
                     _ALGEBRA + "norm_cdf's derivative in closed form (the pdf) and shared "
                     "factors; the AD differentiates x*x*x and tanh's polynomial by the "
                     "product rule", 133, None),
    "compose_sincos": (P.compose_sincos, (0,), None, None, 11, None),
    "sigmoid_xent": (P.sigmoid_xent, (0,), _TYPES,
                     _ALGEBRA + "d/dz xent(sigmoid(z), t) = sigmoid(z) - t", 46, _RATIONAL),
    "nested_poly": (P.nested_poly, (0,), _TYPES,
                    _ALGEBRA + "9x^2 + 4x + 1 collects like terms (reassociation)", 31, None),
    "tanh_layer": (P.tanh_layer, (0, 1), None, None, 20, None),
    "hmlstm": (W.hmlstm, (0, 1, 2, 3), _TYPES, None, 71, None),
    "tuple_pair": (P.tuple_pair, (0, 1), _TYPES, None, 23, None),
}


def golden_graphs(name):
    """The optimized gradient of GOLDEN[name] and its hand-written gradient, through the
    pipeline (no types)."""
    fn, wrt, *_ = GOLDEN[name]
    args = _inputs(name)
    grad = myir.grad(fn, *wrt, backend="python")
    hand = myir.compile(getattr(P, "hand_" + name), backend="python")
    return grad.lower(*args).graph("optimized"), hand.lower(*args).graph("optimized")


def typed_optimized(g: Graph, args) -> Graph:
    """g optimized with `optimize_typed` and the types `passes.infer` finds for args."""
    typed = infer(g, args)
    return opt.optimize_typed(typed.graph, typed.types)[0]


def typed_golden_graphs(name):
    """golden_graphs(name), both optimized with types."""
    g, h = golden_graphs(name)
    args = _inputs(name)
    return typed_optimized(g, args), typed_optimized(h, args)


def fastmath_golden_graphs(name):
    """The final (typed) graphs of GOLDEN[name]'s gradient and its hand-written gradient,
    both compiled with fastmath=True."""
    fn, wrt, *_ = GOLDEN[name]
    args = _inputs(name)
    grad = myir.compile(myir.grad(fn, *wrt), backend="python", fastmath=True)
    hand = myir.compile(getattr(P, "hand_" + name), backend="python", fastmath=True)
    return grad.lower(*args).graph("typed"), hand.lower(*args).graph("typed")


def golden_table():
    """Rows (name, applies of the optimized gradient, applies of the hand-written one,
    ratio, graphs, closures, forbidden primitives left): without types, with types, and
    with fastmath."""
    rows = []
    kinds = (("untyped", golden_graphs), ("typed", typed_golden_graphs),
             ("fastmath", fastmath_golden_graphs))
    for kind, graphs in kinds:
        for name in GOLDEN:
            g, h = graphs(name)
            s, hs = g.stats(), h.stats()
            left = {p: n for p, n in s["primitives"].items() if p in FORBIDDEN}
            rows.append((f"{name} ({kind})", s["applies"], hs["applies"],
                         s["applies"] / hs["applies"], s["graphs"], s["closures"], left))
    return rows


def _xfail_if(reason):
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def assert_collapsed(name, g: Graph) -> None:
    """One graph, no closures, no tuple/env/gadd/switch operations but the output tuple of
    several gradients (which, without types, waits for the forward's output: whether an
    operation can raise is only known with types, see passes/raising.py)."""
    stats = g.stats()
    several = len(GOLDEN[name][1]) > 1
    left = Counter({p: n for p, n in stats["primitives"].items() if p in FORBIDDEN})
    left["getitem"] -= _reads_of_parameter_dicts(g)
    out = g.output
    while primitive_name(out) == "depend":
        out = out.args[0]
    if several and out is not None and primitive_name(out) == "make_tuple":
        left["make_tuple"] -= 1
    left = +left
    assert (stats["graphs"], stats["closures"], dict(left)) == (1, 0, {}), f"\n{g}"


def _reads_of_parameter_dicts(g: Graph) -> int:
    """The `params['W1']` of a gradient with respect to a dict of parameters: reads of the
    argument, which a gradient with respect to positional parameters gets as arguments."""
    return sum(1 for n in toposort(g) if primitive_name(n) == "getitem"
               and n.graph is g and n.args[0] in g.parameters
               and isinstance(n.args[1], Constant) and type(n.args[1].value) is str)


@pytest.mark.parametrize("name", [pytest.param(n, marks=_xfail_if(v[2])) for n, v in GOLDEN.items()])
def test_golden_structure(name):
    """Collapsed without types (the pipeline as it runs today)."""
    g, _ = golden_graphs(name)
    assert_collapsed(name, g)


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden_structure_typed(name):
    """Collapsed with types."""
    g, _ = typed_golden_graphs(name)
    assert_collapsed(name, g)


def operations(g: Graph) -> int:
    """The applies of g but `depend`, which generated code writes as nothing: what it waits
    for is a statement of its own (poly_xy's gradient keeps the forward's `x ** 3`, which
    raises OverflowError for |x| > 5.6e102 where the gradient would not)."""
    stats = g.stats()
    return stats["applies"] - stats["primitives"].get("depend", 0)


@pytest.mark.parametrize("name", [pytest.param(n, marks=_xfail_if(v[3])) for n, v in GOLDEN.items()])
def test_golden_size(name):
    """With types, at most 1.25x the operations of the hand-written gradient (optimized with
    types too)."""
    g, h = typed_golden_graphs(name)
    ratio = operations(g) / operations(h)
    assert ratio <= ALLOWED_SIZE, f"{ratio:.2f}x the hand-written gradient\n{g}\n{h}"


@pytest.mark.parametrize("name", [pytest.param(n, marks=_xfail_if(v[5])) for n, v in GOLDEN.items()])
def test_golden_size_fastmath(name):
    """With fastmath, at most 1.25x the operations of the hand-written gradient (compiled with
    fastmath too), and collapsed."""
    g, h = fastmath_golden_graphs(name)
    assert_collapsed(name, g)
    ratio = operations(g) / operations(h)
    assert ratio <= ALLOWED_SIZE, f"{ratio:.2f}x the hand-written gradient\n{g}\n{h}"


@pytest.mark.parametrize("name", list(GOLDEN))
def test_fastmath_gradient_is_close(name):
    """The fastmath gradient differs from the exact one by rounding only."""
    fn, wrt, *_ = GOLDEN[name]
    args = _inputs(name)
    exact = myir.grad(fn, *wrt, backend="python")
    got = myir.compile(exact, fastmath=True)(*args)
    want = exact(*args)
    got, want = (got, want) if len(wrt) > 1 else ((got,), (want,))
    for a, b in zip(tree.leaves(got), tree.leaves(want)):
        b = np.asarray(b)
        tol = 1e-5 if b.dtype == np.float32 else 1e-12
        assert np.max(np.abs(np.asarray(a) - b)) <= tol * max(np.max(np.abs(b)), 1.0)


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden_does_not_grow(name):
    """A regression guard for the pipeline without types: no more applies than measured
    (one of them the `depend` on the forward's output, which only types narrow away)."""
    g, _ = golden_graphs(name)
    assert g.stats()["applies"] <= GOLDEN[name][4], f"\n{g}"


@pytest.mark.parametrize("name", list(GOLDEN))
def test_typed_optimization_preserves_results(name):
    """The typed rewrites are exact: the typed gradient gives the pipeline's results bit for
    bit."""
    fn, wrt, *_ = GOLDEN[name]
    args = _inputs(name)
    g, _ = typed_golden_graphs(name)
    typed = compile_module(generate(g), "<typed>")
    assert_same(typed(*args), myir.grad(fn, *wrt, backend="python")(*args))


@pytest.mark.parametrize("name", list(GOLDEN))
def test_hand_written_gradients_are_right(name):
    """The baselines are real gradients: they agree with myir.grad."""
    fn, wrt, *_ = GOLDEN[name]
    args = _inputs(name)
    got = myir.grad(fn, *wrt)(*args)
    hand = getattr(P, "hand_" + name)(*args)
    got, hand = (got, hand) if len(wrt) > 1 else ((got,), (hand,))
    assert len(got) == len(hand)
    for a, b in zip(tree.leaves(got), tree.leaves(hand)):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("name", list(GOLDEN))
def test_optimize_reaches_a_fixpoint(name):
    """optimize() stops because nothing changes, not because it ran out of sweeps; and
    optimizing again gives the same graph."""
    g, _ = golden_graphs(name)
    again = opt.optimize(g)
    assert_isomorphic(again, g)
    assert not opt.sweep(again)


@pytest.mark.parametrize("name", list(GOLDEN))
def test_pipeline_leaves_earlier_stages_alone(name):
    """The parsed graph (shared by every signature) and the expanded graph are the same
    after the optimizer ran as without it."""
    fn, wrt, *_ = GOLDEN[name]
    args = _inputs(name)
    parsed_text = str(parse(fn))
    with_opt = myir.grad(fn, *wrt).lower(*args)
    without = myir.grad(myir.compile(fn, optimize=False), *wrt).lower(*args)
    assert "optimized" in with_opt.stages and "optimized" not in without.stages
    assert str(parse(fn)) == parsed_text == str(with_opt.graph("parsed"))
    assert str(with_opt.graph("expanded")) == str(without.graph("expanded"))


def test_a_call_optimizes_the_gradient_in_place_and_leaves_shared_graphs_alone(monkeypatch):
    """A compile for a call optimizes the program the gradient transform made itself, not a
    copy: the transform calls private copies of the gradient rules, so that program holds
    no graph another compile shares.  The parsed function, the rules and the rule
    specialised for the constant exponent stay as they were; `lower` compiles again, for
    the stage the optimizer edited."""
    from passes import ad

    pow_rule = ad.CONSTANT_OPERAND_RULES["pow"][1]
    shared = [parse(P.poly_xy), ad.gradient_rule("mul"),
              ad._specialised_rule(pow_rule, 1, int, "3")]
    texts = [str(g) for g in shared]
    copied = []
    clone_program = opt.clone_program
    monkeypatch.setattr(opt, "clone_program", lambda g: copied.append(g) or clone_program(g))
    g = myir.grad(P.poly_xy, 0, 1, backend="python")
    x, y = 1.3, 0.7
    assert g(x, y) == pytest.approx((3 * x ** 2 * y ** 4, 4 * x ** 3 * y ** 3), rel=1e-14)
    assert copied == []
    assert [str(g) for g in shared] == texts
    program = g.prepare(x, y)
    assert not program.all_stages and "expanded" not in program.stages
    lowered = g.lower(x, y)
    assert lowered.all_stages and "expanded" in lowered.stages and copied
    assert lowered.entry(x, y) == g(x, y)
    assert [str(g) for g in shared] == texts


def test_environment_variable_turns_the_optimizer_off(monkeypatch):
    monkeypatch.setenv("MYIR_OPTIMIZE", "0")
    lowered = myir.grad(P.poly_xy).lower(1.0, 2.0)
    assert "optimized" not in lowered.stages
    assert lowered.graph().stats()["closures"] > 0


# --------------------------------------------------------------------------------------------
# 3. Differential: the benchmark workloads with and without the optimizer


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", workloads.WORKLOADS)
def test_workloads_with_and_without_optimizer(name, seed):
    fn = workloads.function(name)
    args = workloads.make_inputs(name, seed)
    expected = fn(*args)
    fwd_opt = compiled(fn, None, True)(*args)
    fwd_plain = compiled(fn, None, False)(*args)
    assert_same(fwd_opt, expected)      # the same operations in the same order: exact
    assert_same(fwd_plain, expected)
    grad_opt = compiled(fn, workloads.WRT[name], True)(*args)
    grad_plain = compiled(fn, workloads.WRT[name], False)(*args)
    assert_same(grad_opt, grad_plain, exact=False)


if __name__ == "__main__":
    print(f"{'program':24s} {'AD':>5s} {'hand':>5s} {'ratio':>6s} graphs closures left")
    for name, ad, hand, ratio, graphs, closures, left in golden_table():
        print(f"{name:24s} {ad:5d} {hand:5d} {ratio:6.2f} {graphs:6d} {closures:8d} {left}")


def test_every_rewrite_says_which_primitives_it_can_match():
    """A rewrite missing from MATCHES is tried on every node: correct, but each node then
    pays for its test; the optimizer's own rewrites all name what they match."""
    from passes.opt import MATCHES, REWRITES, TYPED_REWRITES
    missing = [r.__name__ for r in REWRITES + TYPED_REWRITES if r not in MATCHES]
    assert missing == []


@given(st.lists(st.one_of(st.integers(-40, 40).map(float),
                          st.floats(-1e3, 1e3, allow_nan=False)), max_size=1500),
       st.lists(st.floats(-1e3, 1e3, allow_nan=False), max_size=50))
def test_sorted_ids_find_the_largest_id_below(added, queries):
    """The ids a sweep visited (`opt.SortedIds`: runs of a bounded length, the ids added
    since the last question sorted in when asked) answer as one sorted list would,
    duplicates and runs split included, with questions between the additions too."""
    import bisect

    ids, reference = opt.SortedIds(), []

    def check(q):
        k = bisect.bisect_left(reference, q)
        assert ids.below(q) == (reference[k - 1] if k else None)

    for i, x in enumerate(added):
        ids.add(x)
        bisect.insort(reference, x)
        if i % 97 == 0:
            check(queries[i % len(queries)] if queries else x)
    for q in queries + added[:50]:
        check(q)
    assert [x for run in ids.runs for x in run] == reference
