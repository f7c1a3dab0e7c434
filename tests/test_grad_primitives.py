"""The gradient of every differentiable primitive, against central finite differences.

Each subject (tests/programs_grad.py) returns a float built from one primitive; the test
compiles `myir.grad(subject, ...)` once, then compares it, for hypothesis-drawn values (and
shapes, from small fixed lists so that a compiler that specialises per shape compiles a
handful of signatures), with central differences of the *uncompiled* subject in float64.
The gradient must have the shape of its operand (broadcast operands included) and be a
scalar for a float operand.  Values are drawn away from kinks and outside domains; the
subgradients chosen at kinks (passes/grad_rules.py) are tested separately at the kinks.

`numerical_grad` and `assert_grads_close` are used by tests/test_grad.py too.
"""

from __future__ import annotations

import functools
import inspect
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import myir
import passes.ad
import passes.grad_rules
from myir.ir.primitives import PRIMITIVES
from tests import programs_grad as G
from tests.programs_check import DEFAULT_BACKENDS

# The backend the gradients are compiled with: the first of MYIR_TEST_BACKENDS (as in
# tests/programs_check.py; "default" means myir's default backend).  CI runs these tests a
# second time with MYIR_TEST_BACKENDS=tvm (see .ci/run).
BACKEND = os.environ.get("MYIR_TEST_BACKENDS", DEFAULT_BACKENDS).split(",")[0].strip()
BACKEND = None if BACKEND in ("", "default") else BACKEND

RTOL = 1e-5
ATOL = 1e-6


def examples(n: int) -> int:
    """`n` examples in the `ci` profile (60 by default), proportionally more in deeper
    profiles (`thorough`): the tests here compile little but call a lot."""
    return max(n, n * settings().max_examples // 60)


@functools.lru_cache(maxsize=None, typed=True)
def gradient(f, *wrt, with_value=False):
    """`myir.grad(f, *wrt)` (or value_and_grad), made once per test session so that each
    signature compiles once."""
    make = myir.value_and_grad if with_value else myir.grad
    return make(f, *wrt, backend=BACKEND)


# --------------------------------------------------------------------------------------------
# Finite differences


def numerical_grad(f, args, argnum, eps=1e-6):
    """Central differences of the scalar `f(*args)` with respect to `args[argnum]` (a float, a
    float64 array or a tuple of those), one element at a time; the step is relative."""
    args = tuple(args)

    def at(value):
        return float(f(*args[:argnum], value, *args[argnum + 1:]))

    return _central(at, args[argnum], eps)


def _central(fun, x, eps):
    if isinstance(x, (tuple, list)):
        return type(x)(_central(lambda v, i=i: fun(x[:i] + type(x)((v,)) + x[i + 1:]), xi, eps)
                       for i, xi in enumerate(x))
    if isinstance(x, np.ndarray):
        x = x.astype(np.float64)
        g = np.zeros(x.shape)
        for idx in np.ndindex(x.shape):
            up, down = x.copy(), x.copy()
            h = eps * max(1.0, abs(float(x[idx])))
            up[idx] += h
            down[idx] -= h
            g[idx] = (fun(up) - fun(down)) / (up[idx] - down[idx])
        return g
    h = eps * max(1.0, abs(x))
    return (fun(x + h) - fun(x - h)) / ((x + h) - (x - h))


def assert_grads_close(got, want, rtol=RTOL, atol=ATOL, where="gradient"):
    """Same structure (tuples, lists), same shapes (a float's gradient is a scalar), close
    values."""
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), \
            f"{where}: expected a {type(want).__name__} of {len(want)} gradients, got {got!r}"
        for i, (a, b) in enumerate(zip(got, want)):
            assert_grads_close(a, b, rtol, atol, f"{where}[{i}]")
        return
    assert not isinstance(got, (tuple, list)), \
        f"{where}: expected one gradient, got {type(got).__name__} {got!r}"
    assert np.shape(got) == np.shape(want), \
        f"{where}: shape {np.shape(got)}, expected {np.shape(want)}"
    assert np.all(np.isfinite(got)), f"{where}: not finite: {got!r}"
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rtol, atol=atol,
                               err_msg=where)


def check_gradient(f, args, wrt=None, rtol=RTOL, atol=ATOL):
    """myir.grad(f, *wrt)(*args) against finite differences (all float arguments by
    default); returns the gradients."""
    if wrt is None:
        wrt = tuple(i for i, a in enumerate(args) if not isinstance(a, (int, bool)))
    got = gradient(f, *wrt)(*args)
    want = tuple(numerical_grad(f, args, i) for i in wrt)
    if len(wrt) == 1:
        want = want[0]
    assert_grads_close(got, want, rtol, atol, f"grad of {f.__name__} w.r.t. {wrt}")
    return got


def name(f):
    return getattr(f, "__name__", str(f))


# --------------------------------------------------------------------------------------------
# Strategies


def values(lo, hi, avoid=(), gap=0.05):
    """Floats in [lo, hi] at least `gap` away from each point of `avoid`."""
    s = st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    if avoid:
        s = s.filter(lambda v: all(abs(v - p) > gap for p in avoid))
    return s


def operand(shape, elements):
    """A Python float (shape "float") or a float64 array of `shape`."""
    if shape == "float":
        return elements.map(float)
    return hnp.arrays(np.float64, shape, elements=elements)


UNARY_SHAPES = ["float", (), (3,), (2, 3), (2, 1, 3)]

# subject, elements; "float" inputs only where CPython accepts them too
UNARY = [
    (G.neg, values(-3, 3)),
    (G.pos, values(-3, 3)),
    (G.exp, values(-3, 3)),
    (G.log, values(0.1, 5)),
    (G.log1p, values(-0.9, 5)),
    (G.expm1, values(-3, 3)),
    (G.sqrt, values(0.1, 5)),
    (G.sin, values(-5, 5)),
    (G.cos, values(-5, 5)),
    (G.tan, values(-1.2, 1.2)),
    (G.tanh, values(-3, 3)),
    (G.sinh, values(-3, 3)),
    (G.cosh, values(-3, 3)),
    (G.arcsin, values(-0.9, 0.9)),
    (G.arccos, values(-0.9, 0.9)),
    (G.arctan, values(-5, 5)),
    (G.np_abs, values(-3, 3, avoid=[0])),
    (G.np_absolute, values(-3, 3, avoid=[0])),
    (G.builtin_abs, values(-3, 3, avoid=[0])),
    (G.square, values(-3, 3)),
    (G.negative, values(-3, 3)),
    (G.reciprocal, values(-3, 3, avoid=[0], gap=0.3)),
    (G.clip, values(-3, 3, avoid=[-1, 2])),
    (G.sign_times, values(-3, 3, avoid=[0])),
    (G.floor_plus, values(-3, 3, avoid=range(-3, 4))),
    (G.pow_const_exponent, values(-3, 3)),
    (G.pow_int_exponent, values(-3, 3)),
    (G.pow_const_base, values(-3, 3)),
    (G.where_mask_constant, values(-3, 3, avoid=[0])),
    (G.astype_f64, values(-3, 3)),
    (G.np_array_copy, values(-3, 3)),
    (G.clip_method, values(-3, 3, avoid=[-1, 2])),
]
METHODS_ONLY = {G.astype_f64, G.clip_method}  # `x.method()`: not on a Python float


@settings(max_examples=examples(12))
@pytest.mark.parametrize("f, elements", UNARY, ids=[name(f) for f, _ in UNARY])
@given(data=st.data())
def test_unary(f, elements, data):
    shapes = [s for s in UNARY_SHAPES if not (s == "float" and f in METHODS_ONLY)]
    if f is G.astype_f64:
        shapes.remove(())  # see test_astype_of_a_0d_array
    x = data.draw(operand(data.draw(st.sampled_from(shapes), label="shape"), elements),
                  label="x")
    check_gradient(f, (x,))


# --------------------------------------------------------------------------------------------
# Binary operations, with broadcasting

BROADCAST_SHAPES = [
    ((3,), (3,)),
    ((3, 4), (4,)),
    ((3, 1), (1, 4)),
    ("float", (3, 4)),
    ((3, 4), "float"),
    ((2, 3, 4), (3, 1)),
    ((4,), (2, 3, 4)),
    ((), (2, 3)),
    ((2, 1, 4), (3, 1)),
    ("float", "float"),
]

# No ties between the operands of maximum, minimum and where: x avoids the half-integers,
# y is a half-integer.
OFF_GRID = values(-3, 3, avoid=[k + 0.5 for k in range(-4, 4)])
ON_GRID = st.integers(-3, 2).map(lambda k: k + 0.5)

BINARY = [
    (G.add, values(-3, 3), values(-3, 3)),
    (G.sub, values(-3, 3), values(-3, 3)),
    (G.mul, values(-3, 3), values(-3, 3)),
    (G.truediv, values(-3, 3), values(-3, 3, avoid=[0], gap=0.5)),
    (G.pow_, values(0.5, 2), values(-2, 2)),
    (G.np_power, values(0.5, 2), values(-2, 2)),
    (G.mod, values(0.1, 0.9), values(1.1, 2)),
    (G.maximum, OFF_GRID, ON_GRID),
    (G.minimum, OFF_GRID, ON_GRID),
    (G.where, OFF_GRID, ON_GRID),
    (G.arctan2, values(-3, 3, avoid=[0], gap=0.2), values(-3, 3)),
    (G.np_add, values(-3, 3), values(-3, 3)),
    (G.np_subtract, values(-3, 3), values(-3, 3)),
    (G.np_multiply, values(-3, 3), values(-3, 3)),
    (G.np_divide, values(-3, 3), values(-3, 3, avoid=[0], gap=0.5)),
]


@settings(max_examples=examples(15))
@pytest.mark.parametrize("f, xs, ys", BINARY, ids=[name(f) for f, _, _ in BINARY])
@given(data=st.data())
def test_binary_broadcasting(f, xs, ys, data):
    sx, sy = data.draw(st.sampled_from(BROADCAST_SHAPES), label="shapes")
    x = data.draw(operand(sx, xs), label="x")
    y = data.draw(operand(sy, ys), label="y")
    dx, dy = check_gradient(f, (x, y))
    # the gradient of a broadcast operand is summed back to the operand's shape
    assert np.shape(dx) == np.shape(x) and np.shape(dy) == np.shape(y)


@pytest.mark.parametrize("shapes", [((3, 4), (4,)), ((3, 1), (1, 4)), ("float", (3, 4)),
                                    ((2, 3, 4), (3, 1))], ids=str)
@pytest.mark.parametrize("f", [G.add, G.sub, G.mul, G.truediv], ids=name)
def test_broadcast_gradient_is_summed(f, shapes):
    """The shapes of the design's examples, with a hand-computed gradient for `+`."""
    rng = np.random.default_rng(len(str(shapes)))
    x, y = (float(rng.uniform(1, 2)) if s == "float" else rng.uniform(1, 2, s) for s in shapes)
    dx, dy = check_gradient(f, (x, y))
    if f is G.add:
        c = np.cos(x + y)
        target = np.broadcast_shapes(np.shape(x), np.shape(y))
        for d, v in ((dx, x), (dy, y)):
            lead = len(target) - np.ndim(v)
            axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(np.shape(v))
                                              if n == 1 and target[lead + i] != 1)
            np.testing.assert_allclose(d, np.sum(c, axis=axes).reshape(np.shape(v)))


@settings(max_examples=examples(15))
@given(x=values(-3, 3), y=values(-3, 3))
def test_aug_assignment_operators(x, y):
    check_gradient(G.aug_ops, (np.array([x, y, x * y]), np.array([y, 1.0, x])))


# --------------------------------------------------------------------------------------------
# math module

MATH_UNARY = [
    (G.math_exp, values(-3, 3)),
    (G.math_log, values(0.1, 5)),
    (G.math_log1p, values(-0.9, 5)),
    (G.math_expm1, values(-3, 3)),
    (G.math_sqrt, values(0.1, 5)),
    (G.math_sin, values(-5, 5)),
    (G.math_cos, values(-5, 5)),
    (G.math_tan, values(-1.2, 1.2)),
    (G.math_asin, values(-0.9, 0.9)),
    (G.math_acos, values(-0.9, 0.9)),
    (G.math_atan, values(-5, 5)),
    (G.math_sinh, values(-3, 3)),
    (G.math_cosh, values(-3, 3)),
    (G.math_tanh, values(-3, 3)),
    (G.math_fabs, values(-3, 3, avoid=[0])),
    (G.math_more, values(0.1, 5)),
    (G.to_float, values(-3, 3)),
    (G.scalar_floor, values(-3, 3, avoid=range(-3, 4))),
]


@settings(max_examples=examples(15))
@pytest.mark.parametrize("f, xs", MATH_UNARY, ids=[name(f) for f, _ in MATH_UNARY])
@given(data=st.data())
def test_math_unary(f, xs, data):
    check_gradient(f, (data.draw(xs, label="x"),))


MATH_BINARY = [
    (G.math_pow, values(0.5, 2), values(-2, 2)),
    (G.math_atan2, values(-3, 3, avoid=[0], gap=0.2), values(-3, 3)),
    (G.math_hypot, values(-3, 3, avoid=[0], gap=0.2), values(-3, 3)),
]


@settings(max_examples=examples(15))
@pytest.mark.parametrize("f, xs, ys", MATH_BINARY, ids=[name(f) for f, _, _ in MATH_BINARY])
@given(data=st.data())
def test_math_binary(f, xs, ys, data):
    check_gradient(f, (data.draw(xs, label="x"), data.draw(ys, label="y")))


# --------------------------------------------------------------------------------------------
# Reductions

REDUCE_SHAPES = [(2, 3), (1, 4), (3, 2, 2)]
ALL_SHAPES = [(4,), (2, 3), (3, 2, 2)]
# distinct by 0.1 at least: no ties for max and min
DISTINCT = st.integers(-40, 40).map(lambda k: k / 10.0)
# away from zero and bounded: prod stays small and its gradient finite
PROD_ELEMENTS = st.one_of(values(0.5, 1.5), values(-1.5, -0.5))

REDUCTIONS = [
    (G.sum_all, ALL_SHAPES, values(-3, 3), False),
    (G.sum_0, REDUCE_SHAPES, values(-3, 3), False),
    (G.sum_1, REDUCE_SHAPES, values(-3, 3), False),
    (G.sum_m1, REDUCE_SHAPES, values(-3, 3), False),
    (G.sum_0_keep, REDUCE_SHAPES, values(-3, 3), False),
    (G.sum_m1_keep, REDUCE_SHAPES, values(-3, 3), False),
    (G.sum_all_keep, ALL_SHAPES, values(-3, 3), False),
    (G.sum_method, REDUCE_SHAPES, values(-3, 3), False),
    (G.mean_all, ALL_SHAPES, values(-3, 3), False),
    (G.mean_0, REDUCE_SHAPES, values(-3, 3), False),
    (G.mean_1, REDUCE_SHAPES, values(-3, 3), False),
    (G.mean_m1_keep, REDUCE_SHAPES, values(-3, 3), False),
    (G.max_all, ALL_SHAPES, DISTINCT, True),
    (G.max_0, REDUCE_SHAPES, DISTINCT, True),
    (G.max_1, REDUCE_SHAPES, DISTINCT, True),
    (G.max_m1_keep, REDUCE_SHAPES, DISTINCT, True),
    (G.amax_0_keep, REDUCE_SHAPES, DISTINCT, True),
    (G.max_method, REDUCE_SHAPES, DISTINCT, True),
    (G.min_all, ALL_SHAPES, DISTINCT, True),
    (G.min_0, REDUCE_SHAPES, DISTINCT, True),
    (G.min_1_keep, REDUCE_SHAPES, DISTINCT, True),
    (G.min_m1, REDUCE_SHAPES, DISTINCT, True),
    (G.prod_all, ALL_SHAPES, PROD_ELEMENTS, False),
    (G.prod_0, REDUCE_SHAPES, PROD_ELEMENTS, False),
    (G.prod_1, REDUCE_SHAPES, PROD_ELEMENTS, False),
    (G.prod_m1_keep, REDUCE_SHAPES, PROD_ELEMENTS, False),
]


@settings(max_examples=examples(10))
@pytest.mark.parametrize("f, shapes, elements, unique", REDUCTIONS,
                         ids=[name(r[0]) for r in REDUCTIONS])
@given(data=st.data())
def test_reduction(f, shapes, elements, unique, data):
    shape = data.draw(st.sampled_from(shapes), label="shape")
    x = data.draw(hnp.arrays(np.float64, shape, elements=elements, unique=unique), label="x")
    check_gradient(f, (x,))


@settings(max_examples=examples(15))
@pytest.mark.parametrize("f", [G.builtin_max2, G.builtin_min2], ids=name)
@given(x=OFF_GRID, y=ON_GRID)
def test_builtin_min_max_two(f, x, y):
    check_gradient(f, (x, y))
    check_gradient(f, (y, x))


@settings(max_examples=examples(15))
@pytest.mark.parametrize("f", [G.builtin_max3, G.builtin_min3], ids=name)
@given(xs=st.lists(DISTINCT, min_size=3, max_size=3, unique=True))
def test_builtin_min_max_three(f, xs):
    check_gradient(f, tuple(xs))


# --------------------------------------------------------------------------------------------
# Matrix products

MATMUL_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 2)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (5, 3, 4)),
    ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)),
    ((2, 1, 2, 3), (5, 3, 2)),
]
DOT_SHAPES = MATMUL_SHAPES[:6]


MATMUL_CASES = [(f, sx, sy) for f in (G.matmul_op, G.np_matmul) for sx, sy in MATMUL_SHAPES]
MATMUL_CASES += [(f, sx, sy) for f in (G.np_dot, G.dot_method) for sx, sy in DOT_SHAPES]


@settings(max_examples=examples(8))
@pytest.mark.parametrize("f, sx, sy", MATMUL_CASES,
                         ids=[f"{name(f)}-{sx}-{sy}" for f, sx, sy in MATMUL_CASES])
@given(data=st.data())
def test_matmul(f, sx, sy, data):
    x = data.draw(operand(sx, values(-2, 2)), label="x")
    y = data.draw(operand(sy, values(-2, 2)), label="y")
    check_gradient(f, (x, y))


@pytest.mark.parametrize("f", [G.np_dot, G.dot_method], ids=name)
@pytest.mark.parametrize("sx, sy", [((5, 2, 3), (5, 3, 4)), ((2, 3), (4, 3, 2)), (3, (2, 3, 4)),
                                    ((2, 2, 3), (2, 4, 3, 2))])
def test_dot_of_stacked_arrays(f, sx, sy):
    """np.dot with y of 3 or more axes pairs every row of x with every matrix of y."""
    rng = np.random.default_rng(0)
    check_gradient(f, (rng.uniform(-1, 1, sx), rng.uniform(-1, 1, sy)))


def test_dot_with_a_scalar_operand():
    """np.dot with a Python float operand multiplies; bprop_dot dispatches on np.ndim(x) == 0,
    which is 0 for a Python float as in numpy (it used to be the `.ndim` attribute)."""
    check_gradient(G.np_dot, (0.5, np.random.default_rng(0).uniform(-1, 1, 3)))


@settings(max_examples=examples(8))
@given(x=hnp.arrays(np.float64, (2, 3), elements=values(-2, 2)),
       y=hnp.arrays(np.float64, (3, 3), elements=values(-2, 2)))
def test_aug_matmul(x, y):
    check_gradient(G.aug_matmul, (x, y))


# --------------------------------------------------------------------------------------------
# Shapes

SHAPE_OPS = [
    (G.reshape_fn, [(2, 3, 4)]),
    (G.reshape_method, [(2, 3, 4)]),
    (G.reshape_minus_one, [(2, 3, 4)]),
    (G.transpose_fn, [(2, 3, 4)]),
    (G.transpose_axes, [(2, 3, 4)]),
    (G.transpose_method_axes, [(2, 3, 4)]),
    (G.broadcast_to, [(3, 1), (4,), (2, 1, 4)]),
    (G.expand_dims_0, [(2, 3, 4)]),
    (G.expand_dims_m1, [(2, 3, 4)]),
    (G.expand_dims_two_axes, [(2, 3, 4)]),
    (G.times_eye_float32, [(3, 4)]),
    (G.squeeze_axis, [(2, 1, 4)]),
    (G.squeeze_all, [(2, 1, 4), (1, 2, 4, 1)]),
    (G.swapaxes, [(2, 3, 4)]),
    (G.index_int, [(4, 5)]),
    (G.index_negative, [(4, 5)]),
    (G.index_two_ints, [(4, 5)]),
    (G.index_slice, [(4, 5)]),
    (G.index_slice_step, [(4, 5)]),
    (G.index_slice_reverse, [(4, 5)]),
    (G.index_column, [(4, 5)]),
    (G.index_slice_2d, [(4, 5)]),
    (G.index_mixed, [(4, 5)]),
    (G.index_chain, [(4, 5)]),
    (G.index_numpy_scalar, [(4, 5), (3,)]),
]


@settings(max_examples=examples(8))
@pytest.mark.parametrize("f, shapes", SHAPE_OPS, ids=[name(f) for f, _ in SHAPE_OPS])
@given(data=st.data())
def test_shape_and_index(f, shapes, data):
    shape = data.draw(st.sampled_from(shapes), label="shape")
    check_gradient(f, (data.draw(operand(shape, values(-3, 3)), label="x"),))


def test_attribute_T():
    x = np.arange(24.0).reshape(2, 3, 4) / 10
    check_gradient(G.dot_t, (x,))


JOINS = [G.concatenate_0, G.concatenate_1, G.stack_0, G.stack_1, G.stack_m1]


@settings(max_examples=examples(8))
@pytest.mark.parametrize("f", JOINS, ids=name)
@given(x=hnp.arrays(np.float64, (3, 4), elements=values(-3, 3)),
       y=hnp.arrays(np.float64, (3, 4), elements=values(-3, 3)))
def test_concatenate_and_stack(f, x, y):
    check_gradient(f, (x, y))


@settings(max_examples=examples(8))
@given(x=values(-3, 3), y=values(-3, 3))
def test_np_array_of_a_tuple_of_floats(x, y):
    check_gradient(G.np_array_of_tuple, (x, y))


@settings(max_examples=examples(8))
@given(x=values(0.1, 3, avoid=[0.75, 1.5, 2.25, 3.0]), y=values(-2, 2),
       v=hnp.arrays(np.float64, (4,), elements=values(-3, 3)))
def test_builtins_pow_divmod_and_reversed(x, y, v):
    check_gradient(G.builtin_pow_divmod, (x, y))
    check_gradient(G.reversed_loop, (v,))


def test_astype_keeps_the_input_dtype():
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    d = gradient(G.astype_f32_sum)(x)
    assert isinstance(d, np.ndarray) and d.dtype == np.float32 and d.shape == (2, 3)
    np.testing.assert_array_equal(d, np.full((2, 3), 3.0, np.float32))
    d = gradient(G.astype_f64)(x)
    assert d.dtype == np.float32
    np.testing.assert_allclose(d, np.cos(x.astype(np.float64)), rtol=1e-6)


def test_astype_of_a_0d_array():
    x = np.array(0.5)
    np.testing.assert_allclose(gradient(G.astype_f64)(x), np.cos(0.5))


# --------------------------------------------------------------------------------------------
# Tuples


@settings(max_examples=examples(15))
@pytest.mark.parametrize("f", [G.tuple_index, G.tuple_index_negative, G.tuple_slice,
                               G.tuple_unpack], ids=name)
@given(a=values(-3, 3), b=hnp.arrays(np.float64, (3,), elements=values(-3, 3)),
       c=values(-3, 3))
def test_tuple_index(f, a, b, c):
    t = (a, b, c) if f is G.tuple_index else (a, float(b[0]), c)
    got = check_gradient(f, (t,))
    assert isinstance(got, tuple) and len(got) == 3


# --------------------------------------------------------------------------------------------
# Non-differentiable primitives have zero gradients


def test_piecewise_constant_primitives_have_zero_gradient():
    x = np.array([-2.5, -0.3, 0.7, 1.2])
    # sign(x) * x * x: only the x * x part contributes
    np.testing.assert_allclose(gradient(G.sign_times)(x), 2 * np.abs(x))
    # floor(x) + ceil(x) * x
    np.testing.assert_allclose(gradient(G.floor_plus)(x), np.ceil(x))
    # math.floor(x) * x + math.ceil(x)
    assert gradient(G.scalar_floor)(2.5) == 2.0
    assert gradient(G.scalar_floor)(-2.5) == -3.0


# --------------------------------------------------------------------------------------------
# Subgradients at kinks (the conventions of passes/grad_rules.py)


def test_abs_at_zero_is_zero():
    x = np.array([-1.5, 0.0, 2.0, -0.0])
    np.testing.assert_allclose(gradient(G.np_abs)(x), np.cos(np.abs(x)) * np.sign(x))
    assert gradient(G.np_abs)(x)[1] == 0.0
    assert gradient(G.np_absolute)(x)[1] == 0.0
    assert gradient(G.builtin_abs)(x)[1] == 0.0
    assert gradient(G.builtin_abs)(0.0) == 0.0
    assert gradient(G.math_fabs)(0.0) == 0.0
    assert gradient(G.math_fabs)(-1.0) == -math.cos(1.0)


def test_maximum_minimum_ties_split_in_half():
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([1.0, 5.0, 3.0])
    for f, pick_x in ((G.maximum, x > y), (G.minimum, x < y)):
        out = np.maximum(x, y) if f is G.maximum else np.minimum(x, y)
        c = np.cos(out)
        dx, dy = gradient(f, 0, 1)(x, y)
        wx = np.where(x == y, 0.5, np.where(pick_x, 1.0, 0.0))
        np.testing.assert_allclose(dx, c * wx)
        np.testing.assert_allclose(dy, c * (1 - wx))
        # all ties, one operand broadcast: each half summed back to y's shape
        dx, dy = gradient(f, 0, 1)(np.full((3, 2), 2.0), np.array([2.0, 2.0]))
        np.testing.assert_allclose(dx, np.full((3, 2), 0.5 * np.cos(2.0)))
        np.testing.assert_allclose(dy, np.full(2, 1.5 * np.cos(2.0)))


def test_max_min_reduction_ties_share_equally():
    x = np.array([1.0, 3.0, 3.0, 2.0])
    np.testing.assert_allclose(gradient(G.max_all)(x), np.cos(3.0) * np.array([0, .5, .5, 0]))
    x = np.array([-1.0, 2.0, -1.0, -1.0])
    np.testing.assert_allclose(gradient(G.min_all)(x), np.cos(-1.0) * np.array([1, 0, 1, 1]) / 3)
    # per column: column 0 has a three-way tie, column 1 a two-way tie, column 2 none
    x = np.array([[4.0, 1.0, 0.0],
                  [4.0, 7.0, 2.0],
                  [4.0, 7.0, 1.0]])
    want = np.array([[1 / 3, 0, 0], [1 / 3, .5, 1], [1 / 3, .5, 0]]) * np.cos([4.0, 7.0, 2.0])
    np.testing.assert_allclose(gradient(G.max_0)(x), want)
    np.testing.assert_allclose(gradient(G.max_m1_keep)(x.T), want.T)
    np.testing.assert_allclose(gradient(G.min_1_keep)(-x.T), want.T)


def test_builtin_min_max_ties_split():
    assert gradient(G.builtin_max2, 0, 1)(1.5, 1.5) == (1.0, 1.0)
    assert gradient(G.builtin_min2, 0, 1)(-2.0, -2.0) == (1.0, 1.0)
    assert gradient(G.builtin_max2, 0, 1)(1.5, 1.0) == (2.0, 0.0)
    np.testing.assert_allclose(gradient(G.builtin_max3, 0, 1, 2)(2.0, 2.0, 2.0), (1 / 3,) * 3)
    np.testing.assert_allclose(gradient(G.builtin_min3, 0, 1, 2)(0.5, 3.0, 0.5), (.5, 0, .5))
    np.testing.assert_allclose(gradient(G.builtin_max3, 0, 1, 2)(0.5, 3.0, 0.5), (0, 1, 0))


def test_infinite_slopes_are_inf_as_in_numpy_and_jax():
    """Where a slope is infinite the gradient is inf (nan for 0 / 0), for Python floats too,
    where CPython's `/` and `**` would raise in the rule."""
    assert gradient(G.math_sqrt)(0.0) == math.inf
    assert gradient(G.pow_half)(0.0) == math.inf
    assert type(gradient(G.pow_half)(0.0)) is float
    assert gradient(G.math_asin)(1.0) == math.inf and gradient(G.math_asin)(-1.0) == math.inf
    assert gradient(G.math_acos)(1.0) == -math.inf
    for f in (G.math_atan2_xy, G.math_hypot_xy):
        assert all(map(math.isnan, gradient(f, 0, 1)(0.0, 0.0)))
    with np.errstate(divide="ignore"):
        assert np.all(gradient(G.sqrt)(np.zeros(3)) == np.inf)
        assert np.all(gradient(G.sum_pow_half)(np.zeros(3)) == np.inf)
        assert gradient(G.sum_pow_half)(np.zeros(3, np.float32)).dtype == np.float32
    # away from 0 the rules are the usual ones
    assert gradient(G.math_sqrt)(4.0) == 0.25 and gradient(G.pow_half)(4.0) == 0.25
    # the forward keeps CPython's semantics: 0.0 ** -0.5 raises
    with pytest.raises(ZeroDivisionError):
        myir.compile(G.pow_neg_half, backend=BACKEND)(0.0)


def test_a_zero_sensitivity_contributes_zero_through_an_infinite_slope():
    """The strong zero (passes/grad_rules.py): a value whose sensitivity is a computed 0
    contributes exactly 0, where its slope is inf or nan (0 * inf would make the whole
    gradient nan); a nonzero sensitivity through the same slope still gives inf or nan."""
    assert gradient(G.zero_times_pow_half)(0.0) == 1.0
    assert gradient(G.unused_math_slopes)(0.0, 0.0) == 1.0
    assert not math.isfinite(gradient(G.unused_math_slopes)(0.0, 1.0))   # inf - inf: nan
    with np.errstate(divide="ignore", invalid="ignore"):
        for dtype in (np.float64, np.float32):
            x = np.zeros(3, dtype)
            d = gradient(G.unused_infinite_slopes)(x, 0.0)
            np.testing.assert_array_equal(d, np.ones(3))
            assert d.dtype == dtype
            assert not np.any(np.isfinite(gradient(G.unused_infinite_slopes)(x, 1.0)))
    # away from the singular points the rules are the usual ones (w = 0 or not)
    for w in (0.0, 0.5):
        x = np.array([0.3, 0.5])
        np.testing.assert_allclose(gradient(G.unused_infinite_slopes)(x, w),
                                   numerical_grad(G.unused_infinite_slopes, (x, w), 0),
                                   rtol=RTOL, atol=ATOL)
        assert gradient(G.unused_math_slopes)(0.3, w) == pytest.approx(
            numerical_grad(G.unused_math_slopes, (0.3, w), 0), rel=RTOL, abs=ATOL)


def test_a_zero_tangent_contributes_zero_through_an_infinite_slope():
    """Forward mode's strong zero: at (0, 0) along (1, 0) the tangent of x * y is a computed
    0, and (x * y) ** 0.5 + x changes as x does (the derivative along (0, 1) too is 0 + 0)."""
    f = G.pow_half_of_product
    assert myir.jvp(f, (0.0, 0.0), (1.0, 0.0), backend=BACKEND) == (0.0, 1.0)
    assert myir.jvp(f, (0.0, 0.0), (0.0, 1.0), backend=BACKEND) == (0.0, 0.0)
    value, tangent = myir.jvp(f, (0.0, 1.0), (1.0, 0.0), backend=BACKEND)
    assert tangent == math.inf     # sqrt(x) + x at 0: the slope itself is infinite
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.zeros(3)
        _, tangent = myir.jvp(f, (x, x), (np.ones(3), x), backend=BACKEND)
        np.testing.assert_array_equal(tangent, np.ones(3))


@pytest.mark.parametrize("x, y", [(0.0, 5.7e-249), (0.0, 5e-324), (1e-200, 1e-180),
                                  (1e300, 1e200)])
def test_quotient_derivatives_where_the_divisor_squared_leaves_the_floats(x, y):
    """d(x / y)/dy = -x / y**2 is computed as -(x / y) / y, in both modes: y * y underflows to
    0 for |y| < 1e-162 (the gradient of 0.0 / y raised ZeroDivisionError where x / y ran) and
    overflows for |y| > 1e154."""
    want = -(x / y) / y
    assert gradient(G.quotient, 0, 1)(x, y) == (1.0 / y, want)
    assert myir.jvp(G.quotient, (x, y), (0.0, 1.0), backend=BACKEND) == (x / y, want)


@pytest.mark.parametrize("n, want", [(0, 0.0), (0.0, 0.0), (1, 1.0), (1.0, 1.0), (2, 0.0),
                                     (2.0, 0.0), (3, 0.0), (1.5, 0.0), (0.5, math.inf)])
def test_power_slopes_at_zero(n, want):
    """d/dx x ** n at x = 0: n * 0 ** (n - 1) as JAX computes it, and 0 for the exponent 0
    (x ** 0 is the constant 1)."""
    d = gradient(G.pow_int if isinstance(n, int) else G.pow_float)(0.0, n)
    assert type(d) is float and d == want
    with np.errstate(divide="ignore", invalid="ignore"):
        da = gradient(G.pow_const_exponent_n)(np.zeros(2), n)
    np.testing.assert_array_equal(da, [want, want])


def test_clip_at_the_bounds_passes_nothing_outside():
    x = np.array([-3.0, -1.0 + 1e-3, 0.0, 2.0 - 1e-3, 5.0])
    np.testing.assert_allclose(gradient(G.clip)(x), np.cos(np.clip(x, -1, 2)) * [0, 1, 1, 1, 0])


# --------------------------------------------------------------------------------------------
# Known wrong gradients (bugs)


@pytest.mark.parametrize("x, want", [
    ([2.0, 0.0, 3.0], [0.0, 6.0, 0.0]),             # one zero: the product of the others
    ([2.0, 0.0, 0.0], [0.0, 0.0, 0.0]),             # two: every product of others is 0
    ([-2.0, 0.5, 3.0], [1.5, -6.0, -1.0]),
])
def test_prod_gradient_with_zero_elements(x, want):
    np.testing.assert_allclose(gradient(G.prod_all)(np.array(x)), want)


def test_prod_gradient_along_an_axis_with_zeros():
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.0, 4.0, -2.0]])
    check_gradient(G.prod_1, (x,))
    check_gradient(G.prod_0, (x,))


def test_second_derivative_of_prod_with_a_zero():
    # d/dx0 prod = x1 * x2, whose gradient at (2, 0, 3) is (0, 3, 0)
    np.testing.assert_allclose(gradient(G.d_prod_first)(np.array([2.0, 0.0, 3.0])), [0.0, 3.0, 0.0])


FLOAT32_SUBJECTS = [
    G.exp, G.log, G.sqrt, G.tanh, G.np_abs, G.sum_0, G.mean_1, G.prod_0, G.index_column,
    G.pow_const_exponent, G.where_mask_constant,
    pytest.param(G.max_0),
    pytest.param(G.min_all),
    pytest.param(G.clip),
    G.pow_const_base,
]


@pytest.mark.parametrize("f", FLOAT32_SUBJECTS, ids=name)
def test_float32_gradient_stays_float32(f):
    x = np.linspace(0.2, 0.9, 12, dtype=np.float32).reshape(3, 4)
    d = gradient(f)(x)
    assert d.dtype == np.float32 and d.shape == x.shape
    np.testing.assert_allclose(d, numerical_grad(f, (x.astype(np.float64),), 0), rtol=1e-3,
                               atol=1e-4)


@pytest.mark.parametrize("f", [G.maximum, G.minimum], ids=name)
def test_float32_gradient_stays_float32_binary(f):
    x = np.linspace(0.2, 0.9, 12, dtype=np.float32).reshape(3, 4)
    dx, dy = gradient(f, 0, 1)(x, x[::-1] * 0.9)
    assert dx.dtype == np.float32 and dy.dtype == np.float32


# --------------------------------------------------------------------------------------------
# The rule table itself (coverage of every primitive: tests/test_primitive_tables.py)


def test_every_rule_names_a_primitive_and_takes_inputs_out_dout():
    rules = {n[len("bprop_"):]: f for n, f in vars(passes.grad_rules).items()
             if n.startswith("bprop_") and inspect.isfunction(f)}
    assert len(rules) > 80
    for prim, rule in rules.items():
        assert prim in PRIMITIVES, f"bprop_{prim}: no such primitive"
        assert not PRIMITIVES[prim].varargs, f"bprop_{prim}: variadic rules are built in ad.py"
        params = list(inspect.signature(rule).parameters)
        assert len(params) == len(PRIMITIVES[prim].params) + 2, prim
        assert params[-2:] == ["out", "dout"], prim
        assert passes.ad.has_gradient_rule(prim)
        assert passes.ad.gradient_rule(prim) is not None  # it parses
    for prim in passes.ad.NO_RULE:
        assert not passes.ad.has_gradient_rule(prim)
