"""`compile(f, fastmath=True)`: the real-number algebra of passes/fastmath.py.

Each law has a before/after pair: `before` compiled with fastmath gives the graph that
`after` gives without it (typed stage, up to isomorphism).  Results are checked against
CPython within rounding (programs whose terms cannot cancel, where the bound is tight), and
the benchmark workloads' gradients against the exact pipeline's.
"""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import myir
from bench import workloads
from bench.workloads import programs as W
from myir import tree
from myir.errors import MyirError
from tests.programs_check import module_from_source
from tests.test_opt import assert_isomorphic

pytestmark = pytest.mark.usefixtures("optimizer_on")

# --------------------------------------------------------------------------------------------
# Laws: before (with fastmath) and after (without)


def like_terms_before(x, y):
    return x * y + y * x * 2.0


def like_terms_after(x, y):
    return 3.0 * (x * y)


def cancel_before(a, b):
    return (a + b) - a


def cancel_after(a, b):
    return b


def divide_out_before(x, y):
    return x * y / x


def divide_out_after(x, y):
    return y


def common_factor_before(a, b, c):
    return a * b + a * c


def common_factor_after(a, b, c):
    return (b + c) * a


def softmax_sums_to_one_before(x):
    """sum is linear: sum(e / s) = sum(e) / s = 1 for s = sum(e)."""
    e = np.exp(x)
    return e / np.sum(e) * (2.0 - np.sum(e / np.sum(e)))


def softmax_sums_to_one_after(x):
    e = np.exp(x)
    return e / np.sum(e)


def rows_sum_to_one_before(x):
    """The same along an axis: 1/s is constant along axis 1 (keepdims)."""
    e = np.exp(x)
    s = np.sum(e, axis=1, keepdims=True)
    return np.sum(e / s, axis=1, keepdims=True) * x


def rows_sum_to_one_after(x):
    return x


def zero_term_before(x, y):
    """A factor that is zero in real arithmetic takes its product with it."""
    return x + (y - y) * np.exp(x)


def zero_term_after(x, y):
    return x


def no_gain_before(a, b, c):
    """Products of sums are not multiplied out: nothing to win, nothing changes."""
    return (a + b) * c


no_gain_after = no_gain_before

A = np.array([0.5, 1.5, -2.0, 0.25])
M = np.array([[0.5, 1.5, -2.0], [0.25, 3.0, -1.0]])
LAWS = {
    "like_terms": (1.5, -0.75),
    "cancel": (1.5, -0.75),
    "divide_out": (1.5, -0.75),
    "common_factor": (A, 2.0, A[::-1].copy()),
    "softmax_sums_to_one": (A,),
    "rows_sum_to_one": (M,),
    "zero_term": (A, A[::-1].copy()),
    "no_gain": (1.5, -0.75, 2.0),
}


def _typed(fn, args, **options):
    return myir.compile(fn, backend="python", **options).lower(*args).graph("typed")


@pytest.mark.parametrize("law", list(LAWS))
def test_law(law):
    args = LAWS[law]
    before, after = globals()[law + "_before"], globals()[law + "_after"]
    assert_isomorphic(_typed(before, args, fastmath=True), _typed(after, args))


@pytest.mark.parametrize("law", [k for k in LAWS if k != "no_gain"])
def test_law_needs_fastmath(law):
    """Without fastmath every law is left alone (each changes rounding, or NaN and inf)."""
    args = LAWS[law]
    before = globals()[law + "_before"]
    plain = _typed(before, args)
    assert plain.stats()["applies"] > _typed(before, args, fastmath=True).stats()["applies"]


@pytest.mark.parametrize("law", list(LAWS))
def test_law_results(law):
    args = LAWS[law]
    before = globals()[law + "_before"]
    got = myir.compile(before, backend="python", fastmath=True)(*args)
    np.testing.assert_allclose(got, before(*args), rtol=1e-12, atol=1e-15)


def test_fastmath_is_exact_where_rounding_would_show():
    """The difference is real: x * y / x is not y for every float (rounding), so only
    fastmath drops it."""
    x, y = 0.1, 0.1
    assert x * y / x != y
    assert myir.compile(divide_out_before, backend="python")(x, y) == x * y / x
    assert myir.compile(divide_out_before, backend="python", fastmath=True)(x, y) == y


# --------------------------------------------------------------------------------------------
# Results: random sums of products of positive values (no cancellation, so fastmath's
# reordering keeps every result within a few ulps per term)

_OPS = ("+", "*", "/")


@st.composite
def _expressions(draw, depth=0):
    if depth >= 3 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(["x", "y", "z", "2.0", "0.5", "x", "y"]))
    op = draw(st.sampled_from(_OPS))
    return f"({draw(_expressions(depth + 1))} {op} {draw(_expressions(depth + 1))})"


@given(_expressions(), st.lists(st.floats(0.5, 2.0), min_size=3, max_size=3))
def test_random_positive_expressions_agree(expr, values):
    f = _function(expr)
    got = myir.compile(f, backend="python", fastmath=True)(*values)
    assert got == pytest.approx(f(*values), rel=1e-13)


def _function(expr: str, _made={}):
    """A function returning `expr`, from a file the frontend can read its source from."""
    if expr not in _made:
        _made[expr] = module_from_source(Path(tempfile.mkdtemp()) / "expression.py",
                                         f"def f(x, y, z):\n    return {expr}\n").f
    return _made[expr]


# --------------------------------------------------------------------------------------------
# The workloads: fastmath gradients against the exact pipeline's


RTOL = {np.dtype("float32"): 1e-4, np.dtype("float64"): 1e-9}


@pytest.mark.parametrize("backend", ["python", "tvm"])
@pytest.mark.parametrize("name", workloads.WORKLOADS)
def test_workload_gradients_agree(name, backend):
    fn = workloads.function(name)
    args = workloads.make_inputs(name, 0)
    exact = myir.grad(fn, *workloads.WRT[name], backend="python")
    fast = myir.compile(exact, backend=backend, fastmath=True)
    got, want = fast(*args), exact(*args)
    for g, w in zip(tree.leaves(got), tree.leaves(want)):   # a dict's gradient too
        w = np.asarray(w)
        scale = np.max(np.abs(w)) or 1.0
        assert np.max(np.abs(np.asarray(g) - w)) <= RTOL[w.dtype] * scale


# --------------------------------------------------------------------------------------------
# Options


def test_unknown_option_is_an_error():
    with pytest.raises(MyirError, match="unknown option 'fast_math'"):
        myir.compile(cancel_before, fast_math=True)


def test_fastmath_takes_a_bool():
    with pytest.raises(MyirError, match="fastmath= takes True or False"):
        myir.compile(cancel_before, fastmath="yes")


def test_fastmath_needs_the_optimizer():
    with pytest.raises(MyirError, match="optimize=False turns the optimizer off"):
        myir.compile(cancel_before, fastmath=True, optimize=False)


def huge_int_factor(x):
    return x * 10**400 + x


def test_fastmath_leaves_what_python_raises():
    """An int too large for a float is no coefficient: the tree stays, and raises as
    CPython does."""
    with pytest.raises(OverflowError):
        huge_int_factor(1.5)
    with pytest.raises(OverflowError):
        myir.compile(huge_int_factor, backend="python", fastmath=True)(1.5)


def test_fastmath_assumes_no_division_by_zero():
    """As documented: x * y / x is y under fastmath, so x = 0.0 no longer raises the
    ZeroDivisionError that CPython (and the exact pipeline) raise."""
    with pytest.raises(ZeroDivisionError):
        myir.compile(divide_out_before, backend="python")(0.0, 2.0)
    assert myir.compile(divide_out_before, backend="python", fastmath=True)(0.0, 2.0) == 2.0


def test_a_graph_left_unused_is_not_rewritten_again():
    """fastmath's sweeps skip a graph an earlier rewrite left unused: `replace` edits only
    what the root reaches, so each sweep of it 'changed' it and the compile never ended."""
    from tests import programs_fastmath as F
    signal.signal(signal.SIGALRM, _too_long)
    signal.alarm(120)
    try:
        got = myir.compile(F.main, backend="python", fastmath=True)((1.0, 1.0), 1.0)
    finally:
        signal.alarm(0)
    assert got == F.main((1.0, 1.0), 1.0)


def _too_long(signum, frame):
    raise AssertionError("the fastmath compile did not end within 120 s")
