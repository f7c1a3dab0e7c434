"""Gradients of whole programs: control flow, recursion, closures, higher-order functions,
several and tuple arguments, value_and_grad, higher derivatives against hand-derived
formulas, `grad` inside compiled code, the benchmark workloads, and the errors of `grad`.

Reference gradients are central finite differences of the uncompiled function in float64
(`numerical_grad`, tests/test_grad_primitives.py) or formulas derived by hand.  Subjects are
in tests/programs_grad.py.  Compiling third derivatives is slow (seconds each), so each is
compiled once per session (`gradient`, `compiled`) and called at several points.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import traceback
import tracemalloc

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import myir
from myir import tree
import passes.ad
import passes.grad_rules
from bench import workloads
from tests import programs_grad as G
from tests.test_grad_primitives import (BACKEND, assert_grads_close, check_gradient, examples,
                                        gradient, numerical_grad, values)


@functools.cache
def compiled(f):
    return myir.compile(f, backend=BACKEND)


def value_and_gradient(f, *wrt):
    return gradient(f, *wrt, with_value=True)


def fd(f, args, *wrt):
    """Finite-difference gradients of f with respect to the positions `wrt`."""
    got = tuple(numerical_grad(f, args, i) for i in wrt)
    return got[0] if len(wrt) == 1 else got


# --------------------------------------------------------------------------------------------
# Control flow


@settings(max_examples=examples(20))
@given(x=st.one_of(values(-3, -1, avoid=[-1]), values(-1, 1, avoid=[-1, 1]),
                   values(1, 3, avoid=[1])))
def test_if_elif_else(x):
    check_gradient(G.piecewise, (x,))
    want = 3 * x * x if x > 1 else 4 * x + 1 if x > -1 else -4 * x ** 3
    assert gradient(G.piecewise)(x) == pytest.approx(want, rel=1e-12)


@settings(max_examples=examples(15))
@given(x=hnp.arrays(np.float64, (4,), elements=values(-2, 2)),
       y=hnp.arrays(np.float64, (4,), elements=values(-2, 2)))
def test_if_on_array_data(x, y):
    assume(abs(np.sum(x)) > 0.01)  # the branch condition's kink
    check_gradient(G.branch_on_array, (x, y))


@pytest.mark.parametrize("x, y", [(0.5, 0.7), (-0.5, 0.7), (0.5, -0.7), (-0.5, -0.7)])
def test_and_or_and_ternary(x, y):
    check_gradient(G.and_or, (x, y))
    check_gradient(G.ternary, (x,))


@settings(max_examples=examples(20))
@given(a=values(0.01, 1e4, avoid=[1.0], gap=1e-3))
def test_while_on_data_newton_sqrt(a):
    # AD differentiates the iterations that ran: for a = 1 none does (x = a, derivative 1),
    # and close to 1 the one or two that do leave the derivative's error above 1e-8
    d = gradient(G.newton_sqrt)(a)
    assert d == pytest.approx(0.5 / math.sqrt(a), rel=1e-8)
    assert gradient(G.newton_sqrt)(1.0) == 1.0


@pytest.mark.parametrize("n", [0, 1, 2, 5, 13])
def test_while_with_counter(n):
    for x in (0.3, -1.7, 1.1):
        assert gradient(G.power_while)(x, n) == pytest.approx(n * x ** (n - 1) if n else 0.0,
                                                              rel=1e-12)


@pytest.mark.parametrize("n", [0, 1, 4, 7])
def test_for_over_range(n):
    x = 0.7
    want = sum((k + 1) * k * x ** (k - 1) for k in range(1, n))
    assert gradient(G.poly_for)(x, n) == pytest.approx(want, rel=1e-12)
    check_gradient(G.poly_for, (x, n))


@settings(max_examples=examples(10))
@given(x=hnp.arrays(np.float64, (3, 4), elements=st.integers(-30, 30).map(lambda k: k / 10)
                    .filter(bool), unique=True))
def test_for_over_array_rows(x):
    check_gradient(G.for_over_array, (x,))


def test_for_over_zip_enumerate():
    check_gradient(G.for_zip_enumerate, ((0.5, -1.5, 2.0), (1.0, 0.25, -3.0)))
    dx, dw = check_gradient(G.for_zip_enumerate, (np.array([0.5, -1.5, 2.0]),
                                                  np.array([1.0, 0.25, -3.0])))
    np.testing.assert_allclose(dx, [0.0, 0.25, -6.0])
    np.testing.assert_allclose(dw, [0.0, -1.5, 4.0])


@pytest.mark.parametrize("x", [0.05, 0.7, 3.0, -1.0])
def test_break_and_continue(x):
    check_gradient(G.for_break, (x,))
    check_gradient(G.while_continue, (x,))
    # while_continue skips every third power: sum of x**k / k for k in 1..10, 3 ∤ k
    want = sum(x ** (k - 1) for k in range(1, 11) if k % 3)
    assert gradient(G.while_continue)(x) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("x", [0.7, 5.0, -5.0])
def test_return_inside_loop(x):
    check_gradient(G.return_in_loop, (x,))


def test_data_dependent_while_loop_of_100000_iterations():
    """y <- y + h*y while t < 1: ~1/h iterations, y = x (1+h)^N, dy/dx = (1+h)^N."""
    x, h = 0.75, 1e-5
    t, n = 0.0, 0
    while t < 1.0:  # the trip count, as CPython computes it
        t, n = t + h, n + 1
    assert n >= 100_000
    dx, dh = gradient(G.euler_growth, 0, 1)(x, h)
    assert dx == pytest.approx((1 + h) ** n, rel=1e-9)
    assert dh == pytest.approx(x * n * (1 + h) ** (n - 1), rel=1e-9)


# --------------------------------------------------------------------------------------------
# Recursion


@pytest.mark.parametrize("n", [0, 1, 3, 8])
def test_recursion(n):
    for x in (0.4, -1.3):
        assert gradient(G.rpow)(x, n) == pytest.approx(n * x ** (n - 1) if n else 0.0,
                                                       rel=1e-12)


@pytest.mark.parametrize("n", [0, 1, 4, 5])
def test_mutual_recursion(n):
    check_gradient(G.is_even_sum, (0.7, n))
    check_gradient(G.is_odd_sum, (0.7, n))


@pytest.mark.parametrize("backend", myir.api.BACKENDS)
def test_recursive_lambda(backend):
    """A lambda assigned to a name it calls recurses like a nested `def`."""
    fact = myir.grad(G.lambda_factorial, backend=backend)
    assert fact(3.0) == pytest.approx(11.0, rel=1e-12)    # d/dx x(x-1)(x-2) at 3
    for x in (0.5, 2.5, 3.7):
        assert_grads_close(fact(x), numerical_grad(G.lambda_factorial, (x,), 0))
    power = myir.grad(G.lambda_power, backend=backend)
    for n in (0, 1, 4):
        assert power(1.3, n) == pytest.approx(n * 1.3 ** (n - 1) if n else 0.0, rel=1e-12)


@pytest.mark.parametrize("backend", myir.api.BACKENDS)
def test_assert_and_raise_in_differentiated_code(backend):
    """`assert` and `raise` are checked in the forward, as CPython does; a branch that
    raises has no gradient to give."""
    for x, y in ((0.5, 1.5), (2.0, -3.0)):
        got = myir.grad(G.asserts, 0, 1, backend=backend)(x, y)
        assert_grads_close(got, (numerical_grad(G.asserts, (x, y), 0),
                                 numerical_grad(G.asserts, (x, y), 1)))
    value, dx = myir.value_and_grad(G.asserts, backend=backend)(0.5, 1.5)
    assert value == G.asserts(0.5, 1.5) and dx == pytest.approx(1.5 + math.cos(0.5))
    with pytest.raises(AssertionError, match="^x must be positive$"):
        myir.grad(G.asserts, backend=backend)(-1.0, 1.0)
    with pytest.raises(AssertionError):
        myir.grad(G.asserts, backend=backend)(4.0, 3.0)
    second = myir.grad(myir.grad(G.raises_in_branch), backend=backend)
    assert second(2.0) == pytest.approx(12.0)
    with pytest.raises(ValueError, match="^x is too small$"):
        myir.grad(G.raises_in_branch, backend=backend)(-6.0)
    with pytest.raises(ValueError, match="^x is too small$"):
        second(-6.0)
    unoptimized = myir.compile(myir.grad(G.asserts), backend=backend, optimize=False)
    assert unoptimized(0.5, 1.5) == pytest.approx(1.5 + math.cos(0.5))
    with pytest.raises(AssertionError, match="^x must be positive$"):
        unoptimized(-1.0, 1.0)


def test_recursion_with_two_calls():
    for n in (0, 2, 6):
        check_gradient(G.fib_like, (0.6, n))


@pytest.mark.parametrize("fn, args", [(G.fib_like, (0.6, 4)), (G.is_odd_sum, (0.7, 4))])
def test_recursion_makes_no_backpropagator_per_call(fn, args):
    """A recursion that is not linear (two calls, mutual recursion: a linear one runs as
    loops, tests/test_recursion.py) makes no closure per call: each call pushes a record
    of what its adjoint reads, and one dispatching graph pops them
    (passes/defunctionalise.py).  No env carries sensitivities (passes/ad.py)."""
    lowered = myir.grad(fn).lower(*args)
    stats = lowered.graph("typed").stats()
    assert stats["primitives"]["stack_push"] and stats["primitives"]["stack_pop"]
    assert not [line for line in lowered.source.splitlines()
                if line.startswith(" ") and line.lstrip().startswith("def ")], lowered.source
    assert not {"env_setitem", "env_getitem", "gadd", "sum_to_like"} & set(stats["primitives"])
    assert_grads_close(myir.grad(fn)(*args), numerical_grad(fn, args, 0))


# --------------------------------------------------------------------------------------------
# Closures and higher-order functions


@settings(max_examples=examples(15))
@given(x=values(-2, 2), y=values(-2, 2))
def test_gradient_through_captured_values(x, y):
    dx, dy = check_gradient(G.closure_capture, (x, y))
    # inner(z) = x z + sin(x y); f = inner(y) inner(2)
    a, b = x * y + math.sin(x * y), 2 * x + math.sin(x * y)
    da_dx, db_dx = y + y * math.cos(x * y), 2 + y * math.cos(x * y)
    assert dx == pytest.approx(da_dx * b + a * db_dx, rel=1e-9, abs=1e-12)
    check_gradient(G.lambda_capture, (x,))
    assert gradient(G.lambda_capture)(x) == pytest.approx(6 * x + 3 * x * x, rel=1e-12,
                                                          abs=1e-12)


@settings(max_examples=examples(15))
@given(a=values(-2, 2), x=values(-2, 2))
def test_returned_closures(a, x):
    da, dx = check_gradient(G.returned_closure, (a, x))
    # a x^2 + x a^2
    assert da == pytest.approx(x * x + 2 * a * x, rel=1e-9, abs=1e-12)
    assert dx == pytest.approx(2 * a * x + a * a, rel=1e-9, abs=1e-12)
    check_gradient(G.returned_closure_loop, (a, x))


@settings(max_examples=examples(15))
@given(x=values(-1, 1), y=values(-2, 2))
def test_higher_order_functions(x, y):
    d = check_gradient(G.composed, (x,))
    # sin(exp(x)^2)
    assert d == pytest.approx(math.cos(math.exp(2 * x)) * 2 * math.exp(2 * x), rel=1e-9,
                              abs=1e-12)
    check_gradient(G.composed_closures, (x, y))
    check_gradient(G.twice_sin, (x,))


@settings(max_examples=examples(15))
@given(x=values(-2, 2), y=values(-2, 2))
def test_map_over_a_tuple_by_recursion(x, y):
    # x*x + y*x + 2*x
    for f in (G.map_sum, G.map_sum_index):
        dx, dy = check_gradient(f, (x, y))
        assert dx == pytest.approx(2 * x + y + 2, rel=1e-12, abs=1e-12)
        assert dy == pytest.approx(x, rel=1e-12, abs=1e-12)


# --------------------------------------------------------------------------------------------
# Arguments: several, by name and position, tuples, defaults; value_and_grad


def test_several_arguments_by_name_and_position():
    args = (0.3, -1.2, 0.8)
    x, y, z = args
    want = {"x": y * y + math.sin(z), "y": 2 * x * y, "z": math.cos(z) * x}
    assert gradient(G.three_args)(*args) == pytest.approx(want["x"])
    assert gradient(G.three_args, "y")(*args) == pytest.approx(want["y"])
    assert gradient(G.three_args, 2)(*args) == pytest.approx(want["z"])
    assert gradient(G.three_args, -1)(*args) == pytest.approx(want["z"])
    got = gradient(G.three_args, "x", "z")(*args)
    assert isinstance(got, tuple) and got == pytest.approx((want["x"], want["z"]))
    got = gradient(G.three_args, 2, 0, 1)(*args)
    assert got == pytest.approx((want["z"], want["x"], want["y"]))
    # keyword arguments bind as in CPython
    assert gradient(G.three_args, "y")(z=z, y=y, x=x) == pytest.approx(want["y"])
    check_gradient(G.three_args, args)


def test_array_and_int_arguments():
    rng = np.random.default_rng(1)
    w, x = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
    check_gradient(G.mixed_args, (w, x, 3))
    dw = gradient(G.mixed_args)(w, x, 3)
    np.testing.assert_allclose(dw, 6 * x * (1 - np.tanh(x * w) ** 2))


def test_gradient_with_respect_to_a_tuple_is_a_tuple():
    rng = np.random.default_rng(2)
    p, x = (rng.uniform(-1, 1, (3, 2)), rng.uniform(-1, 1, 2)), rng.uniform(-1, 1, (4, 3))
    dp = check_gradient(G.tuple_arg, (p, x), wrt=(0,))
    assert isinstance(dp, tuple) and len(dp) == 2
    r = 2 * (x @ p[0] + p[1])
    np.testing.assert_allclose(dp[0], x.T @ r)
    np.testing.assert_allclose(dp[1], r.sum(axis=0))
    dp, dx = check_gradient(G.tuple_arg, (p, x))
    assert isinstance(dp, tuple) and dx.shape == x.shape
    # nested tuples: a*b + c*c*a
    da, (db, dc) = gradient(G.nested_tuple_arg)((0.5, (2.0, -3.0)))
    assert (da, db, dc) == pytest.approx((2.0 + 9.0, 0.5, -3.0))


def test_default_arguments():
    assert gradient(G.with_default)(1.5) == pytest.approx(2 * 1.5)
    assert gradient(G.with_default, 0, 1)(1.5, 3.0) == pytest.approx(
        (3 * 1.5 ** 2, 1.5 ** 3 * math.log(1.5)))


def test_value_and_grad():
    v, d = value_and_gradient(G.three_args)(0.3, -1.2, 0.8)
    assert v == pytest.approx(G.three_args(0.3, -1.2, 0.8), rel=1e-15)
    assert d == pytest.approx(1.44 + math.sin(0.8))
    v, ds = value_and_gradient(G.three_args, "y", "z")(0.3, -1.2, 0.8)
    assert v == pytest.approx(G.three_args(0.3, -1.2, 0.8), rel=1e-15)
    assert ds == pytest.approx((2 * 0.3 * -1.2, math.cos(0.8) * 0.3))
    v, d = value_and_gradient(G.newton_sqrt)(2.0)
    assert v == pytest.approx(math.sqrt(2.0), rel=1e-12) and d == pytest.approx(
        0.25 * math.sqrt(2.0), rel=1e-9)
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    v, d = value_and_gradient(G.for_over_array)(x)
    assert v == pytest.approx(G.for_over_array(x))
    np.testing.assert_allclose(d, numerical_grad(G.for_over_array, (x,), 0), rtol=1e-6)


def test_grad_of_a_compiled_function():
    g = myir.grad(G.three_args)  # outside compiled code: a compiled function
    assert callable(g) and hasattr(g, "lower")
    assert g(0.3, -1.2, 0.8) == pytest.approx(1.44 + math.sin(0.8))
    f = myir.compile(G.three_args, backend=BACKEND)
    assert myir.grad(f, "z")(0.3, -1.2, 0.8) == pytest.approx(math.cos(0.8) * 0.3)
    assert f(0.3, -1.2, 0.8) == pytest.approx(G.three_args(0.3, -1.2, 0.8))


# --------------------------------------------------------------------------------------------
# Higher derivatives, against hand-derived formulas


def poly_derivatives(x, y):
    """Partial derivatives of x^3 y^4."""
    return {
        "dx": 3 * x ** 2 * y ** 4, "dy": 4 * x ** 3 * y ** 3,
        "dxdx": 6 * x * y ** 4, "dxdy": 12 * x ** 2 * y ** 3, "dydy": 12 * x ** 3 * y ** 2,
        "dxdxdx": 6 * y ** 4, "dxdxdy": 24 * x * y ** 3,
    }


POLY = {"dx": G.d_poly_dx, "dy": G.d_poly_dy, "dxdx": G.dd_poly_dxdx, "dxdy": G.dd_poly_dxdy,
        "dydy": G.dd_poly_dydy}
# magnitudes below 1e-3 are left out: see test_third_derivative_of_a_power_near_zero
POLY_VALUES = st.one_of(st.just(0.0), values(-2, 2).filter(lambda v: abs(v) > 1e-3))


@settings(max_examples=examples(20))
@given(x=POLY_VALUES, y=POLY_VALUES)
def test_partial_derivatives_of_a_polynomial(x, y):
    want = poly_derivatives(x, y)
    for key, f in POLY.items():
        assert compiled(f)(x, y) == pytest.approx(want[key], rel=1e-9, abs=1e-9), key
    # the outer grad taken outside compiled code: d/dy of d/dx d/dx
    assert gradient(G.dd_poly_dxdx, "y")(x, y) == pytest.approx(want["dxdxdy"], rel=1e-9,
                                                                abs=1e-9)
    # and the mixed partials agree both ways
    assert gradient(G.d_poly_dy, "x")(x, y) == pytest.approx(want["dxdy"], rel=1e-9, abs=1e-9)


@settings(max_examples=examples(20))
@given(x=values(-4, 4))
def test_derivatives_of_sin_cos(x):
    s, c = math.sin(x), math.cos(x)
    sc, cc = math.sin(c), math.cos(c)
    d1 = -cc * s
    d2 = -sc * s * s - cc * c
    d3 = cc * s ** 3 - 3 * sc * s * c + cc * s
    assert compiled(G.d_sin_cos)(x) == pytest.approx(d1, rel=1e-9, abs=1e-12)
    assert compiled(G.dd_sin_cos)(x) == pytest.approx(d2, rel=1e-9, abs=1e-12)
    assert compiled(G.ddd_sin_cos)(x) == pytest.approx(d3, rel=1e-9, abs=1e-12)


def test_third_derivative_of_a_power_near_zero():
    """A constant exponent has no gradient computed (its log x, differentiated twice, would
    make 0 * inf = nan near 0): each derivative's `x ** (c - 1)` has a constant exponent too."""
    # (compiled without the optimizer, which only makes the compilation slower here)
    f = myir.compile(G.ddd_cube_pow, backend=BACKEND, optimize=False)
    assert f(1e-170) == pytest.approx(6.0)
    assert f(0.0) == 6.0 and f(-2.0) == pytest.approx(6.0)


@pytest.mark.parametrize("x", [-2.5, -1.5, -0.5, 0.25, 0.75, 1.5, 2.5])
def test_second_derivative_through_if(x):
    want = 6 * x if x > 1 else 4.0 if x > -1 else -12 * x * x
    assert compiled(G.dd_piecewise)(x) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("x", [-1.5, -0.5, 0.5, 2.0])
def test_third_derivative_through_if(x):
    # x^3 for x > 0, -x^4 otherwise
    assert compiled(G.ddd_two_branches)(x) == pytest.approx(6.0 if x > 0 else -24 * x,
                                                            rel=1e-12)


def power_derivative(x, n, k):
    """The k-th derivative of x**n."""
    c = math.prod(range(n - k + 1, n + 1))
    return c * x ** (n - k) if n >= k else 0.0


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6])
def test_higher_derivatives_through_while(n):
    for x in (1.3, -0.6):
        assert compiled(G.dd_power_while)(x, n) == pytest.approx(power_derivative(x, n, 2),
                                                                 rel=1e-12)
        assert compiled(G.ddd_power_while)(x, n) == pytest.approx(power_derivative(x, n, 3),
                                                                  rel=1e-12)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6])
def test_higher_derivatives_through_recursion(n):
    for x in (1.3, -0.6):
        assert compiled(G.dd_rpow)(x, n) == pytest.approx(power_derivative(x, n, 2),
                                                          rel=1e-12)
        assert compiled(G.ddd_rpow)(x, n) == pytest.approx(power_derivative(x, n, 3),
                                                           rel=1e-12)


@pytest.mark.parametrize("a", [0.04, 2.0, 7.0, 900.0])
def test_second_derivative_through_data_dependent_while(a):
    assert compiled(G.dd_newton_sqrt)(a) == pytest.approx(-0.25 * a ** -1.5, rel=1e-6)


def test_second_derivative_through_two_recursive_calls():
    d1 = gradient(G.fib_like)
    for n in (2, 5):
        want = numerical_grad(d1, (0.6, n), 0)
        assert compiled(G.dd_fib_like)(0.6, n) == pytest.approx(want, rel=1e-6)


# --------------------------------------------------------------------------------------------
# grad inside compiled code


@pytest.mark.parametrize("x", [-1.5, 0.5, 2.0])
def test_grad_of_a_function_calling_grad(x):
    # calls_grad = 3x^2 * x
    assert compiled(G.calls_grad)(x) == pytest.approx(3 * x ** 3)
    assert gradient(G.calls_grad)(x) == pytest.approx(9 * x ** 2)
    # calls_value_and_grad = x^3 + 2 * 3x^2
    assert compiled(G.calls_value_and_grad)(x) == pytest.approx(x ** 3 + 6 * x ** 2)
    assert gradient(G.calls_value_and_grad)(x) == pytest.approx(3 * x ** 2 + 12 * x)


@pytest.mark.parametrize("x", [-1.5, 0.5, 2.0])
def test_grad_of_closures_inside_compiled_code(x):
    # grad(lambda z: z*z*x)(3) = 6x; grad(inner)(x) with inner(y) = x*y*y: 2x^2
    assert compiled(G.grad_of_lambda)(x) == pytest.approx(6 * x)
    assert gradient(G.grad_of_lambda)(x) == pytest.approx(6.0)
    assert compiled(G.dd_closure)(x) == pytest.approx(2 * x * x)
    assert gradient(G.dd_closure)(x) == pytest.approx(4 * x)


def gd_reference(w, lr, steps):
    """G.descend in CPython with the analytic gradient; also d w / d w0 and d w / d lr."""
    dw0, dlr = 1.0, 0.0
    for _ in range(steps):
        g = 2 * (w - 3.0) + math.cos(w)
        dg = 2.0 - math.sin(w)  # g'(w)
        dw0, dlr = dw0 * (1 - lr * dg), dlr * (1 - lr * dg) - g
        w = w - lr * g
    return w, dw0, dlr


@pytest.mark.parametrize("w, lr, steps", [(0.5, 0.1, 0), (0.5, 0.1, 1), (-2.0, 0.05, 20),
                                          (6.0, 0.3, 7)])
def test_gradient_descent_with_grad_in_a_loop_body(w, lr, steps):
    want, dw0, dlr = gd_reference(w, lr, steps)
    assert compiled(G.descend)(w, lr, steps) == pytest.approx(want, rel=1e-12, abs=1e-12)
    # differentiating through the descent: second derivatives of the loss
    got = gradient(G.descend, 0, 1)(w, lr, steps)
    assert got == pytest.approx((dw0, dlr), rel=1e-9, abs=1e-12)


def quad_grad(w, A, b):
    return A.T @ (A @ w - b) + 0.2 * w


def descend_array_reference(w, A, b, lr, steps):
    for _ in range(steps):
        w = w - lr * quad_grad(w, A, b)
    return w


def descend_loss_reference(w, A, b):
    w2 = descend_array_reference(w, A, b, 0.05, 3)
    r = A @ w2 - b
    return 0.5 * np.sum(r * r) + 0.1 * np.sum(w2 * w2)


@settings(max_examples=examples(8))
@given(seed=st.integers(0, 2 ** 16))
def test_gradient_descent_on_arrays(seed):
    rng = np.random.default_rng(seed)
    w, A, b = rng.normal(size=3), rng.normal(size=(4, 3)), rng.normal(size=4)
    got = compiled(G.descend_array)(w, A, b, 0.05, 5)
    np.testing.assert_allclose(got, descend_array_reference(w, A, b, 0.05, 5), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(gradient(G.quad_loss)(w, A, b), quad_grad(w, A, b), rtol=1e-12)
    dw, dA, db = gradient(G.descend_loss, 0, 1, 2)(w, A, b)
    for i, d in enumerate((dw, dA, db)):
        assert_grads_close(d, numerical_grad(descend_loss_reference, (w, A, b), i))


# --------------------------------------------------------------------------------------------
# The benchmark workloads


def _workload_reference(name, args):
    """Handwritten gradients where present, else central differences in float64: for
    scalars directly, for arrays along random directions (one per differentiated
    argument), returned as (direction, derivative) pairs."""
    fn = workloads.function(name)
    if name in workloads.GRADS:
        return "exact", workloads.GRADS[name](*args)
    args64 = tuple(a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in args)
    rng = np.random.default_rng(7)
    out = []
    for i in workloads.WRT[name]:
        if isinstance(args64[i], float):
            out.append((None, numerical_grad(fn, args64, i)))
            continue
        v = rng.standard_normal(args64[i].shape)
        h = 1e-6

        def along(t, i=i, v=v):
            return fn(*args64[:i], args64[i] + t * v, *args64[i + 1:])

        out.append((v, (along(h) - along(-h)) / (2 * h)))
    return "directional", tuple(out)


@pytest.mark.parametrize("name", workloads.WORKLOADS)
def test_workload(name):
    args = workloads.make_inputs(name)
    wrt = workloads.WRT[name]
    got = gradient(workloads.function(name), *wrt)(*args)
    if len(wrt) == 1:
        got = (got,)
    assert isinstance(got, tuple) and len(got) == len(wrt)
    f32 = workloads.DTYPE[name] == "float32"
    rtol = 1e-3 if f32 else 1e-7
    kind, ref = _workload_reference(name, args)
    params = [args[i] for i in wrt]
    if kind == "exact":     # leaf by leaf: a dict of parameters' gradient is such a dict
        assert [tree.structure(d) for d in got] == [tree.structure(p) for p in params]
        got, ref, params = ([x for v in vs for x in tree.leaves(v)] for vs in (got, ref, params))
    for i, (d, r) in enumerate(zip(got, ref)):
        assert np.shape(d) == np.shape(params[i]), (name, i)
        assert np.all(np.isfinite(d)), (name, i)
        if kind == "exact":
            scale = np.max(np.abs(r))
            np.testing.assert_allclose(d, r, rtol=rtol, atol=rtol * scale, err_msg=f"{name}[{i}]")
        else:
            v, deriv = r
            along = d if v is None else np.sum(np.asarray(d, np.float64) * v)
            assert along == pytest.approx(deriv, rel=1e-3 if f32 else 1e-6), (name, i)


@pytest.mark.parametrize("name", [
    "lstm", "hmlstm",
    pytest.param("mlp"),
])
def test_float32_workload_gradients_are_float32(name):
    args = workloads.make_inputs(name)
    got = gradient(workloads.function(name), *workloads.WRT[name])(*args)
    assert [np.asarray(d).dtype for d in got] == [np.dtype(np.float32)] * len(got)


# --------------------------------------------------------------------------------------------
# Errors


def _line_range(f):
    lines, first = inspect.getsourcelines(f)
    return range(first, first + len(lines))


def _line_of(f, text):
    lines, first = inspect.getsourcelines(f)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _location_line(e: myir.MyirError) -> int:
    m = re.search(r"programs_grad\.py:(\d+)", str(e))
    assert m, f"no file:line in the message: {e}"
    return int(m.group(1))


@pytest.mark.parametrize("call", [
    pytest.param(lambda: gradient(G.plain_scalar, "n")(2.0, 3), id="int"),
    pytest.param(lambda: gradient(G.plain_scalar, 1)(2.0, True), id="bool"),
    pytest.param(lambda: gradient(G.plain_scalar)(2, 3.0), id="int-first"),
    pytest.param(lambda: gradient(G.plain_scalar, "x", "n")(2.5, 4), id="int-of-two"),
    pytest.param(lambda: value_and_gradient(G.plain_scalar, "n")(2.0, 3), id="value_and_grad"),
])
def test_grad_with_respect_to_an_int_or_bool(call):
    with pytest.raises(myir.MyirError) as info:
        call()
    e = info.value
    assert _location_line(e) in _line_range(G.plain_scalar)
    assert re.search(r"\b(int|bool)\b", e.message), e.message
    assert e.hint and e.hint.strip()
    assert "hint:" in str(e)


def test_grad_with_respect_to_an_int_array():
    with pytest.raises(myir.MyirError) as info:
        gradient(G.sum_all)(np.arange(4))
    assert _location_line(info.value) in _line_range(G.sum_all)
    assert "int" in info.value.message and info.value.hint


def test_grad_with_respect_to_an_int_inside_compiled_code():
    with pytest.raises(myir.MyirError) as info:
        compiled(G.grad_wrt_int_inside)(2.0, 3)
    assert info.value.hint and "int" in info.value.message
    assert "programs_grad.py:" in str(info.value)


def test_grad_of_a_non_scalar_function():
    with pytest.raises(myir.MyirError) as info:
        gradient(G.returns_array)(np.ones(3))
    e = info.value
    assert "vector-Jacobian" in str(e)
    assert _location_line(e) in _line_range(G.returns_array)
    # a scalar output of the same function is fine
    assert gradient(G.returns_array)(1.5) == 2.0


def test_grad_of_an_output_of_one_element_that_is_no_scalar():
    """Shape (1,) is no scalar (JAX refuses it too); a 0-d array is one."""
    x = np.array([1.0, -2.0, 3.0])
    for make in (gradient(G.sum_keepdims), value_and_gradient(G.sum_keepdims),
                 compiled(G.grad_of_keepdims_inside)):
        with pytest.raises(myir.MyirTypeError) as info:
            make(x)
        assert "shape (1,)" in info.value.message and "keepdims" in info.value.hint
        assert _location_line(info.value) in (_line_range(G.sum_keepdims)
                                              if make is not compiled(G.grad_of_keepdims_inside)
                                              else _line_range(G.grad_of_keepdims_inside))
    np.testing.assert_allclose(gradient(G.zero_d_output)(x), 2 * x)
    value, d = value_and_gradient(G.zero_d_output)(x)
    assert type(value) is np.ndarray and value.shape == () and value == 14.0


@pytest.mark.parametrize("backend", ["python", "tvm"])
@pytest.mark.parametrize("f, kind", [(G.recursion_to_a_string, "returned str"),
                                     (G.while_loop_to_a_string, "returned str"),
                                     (G.recursion_to_none_on_one_path, "returned NoneType")],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_grad_of_an_output_that_is_no_float_raises_through_loops_and_recursion(backend, f, kind):
    """The check of the output's type (grad's seed) is kept although the backpropagator
    it is passed to ignores it: first and second order raise, never a gradient of 0.0."""
    for make in (myir.grad(f, "x", backend=backend),
                 myir.grad(myir.grad(f, "x"), "x", backend=backend)):
        with pytest.raises(myir.MyirTypeError) as info:
            make(1.0, 3)
        assert "grad() needs a function returning a float" in info.value.message
        assert kind in info.value.message and info.value.hint
        assert _location_line(info.value) in _line_range(f)


# A gradient has its parameter's type: Python float -> float, a numpy scalar -> that scalar
# type, an array -> an array of its dtype and shape (as JAX keeps a parameter's dtype), also
# where the parameter meets a wider operand.
GRADIENT_TYPE_CASES = [2.0, np.float64(2.0), np.float32(2.0), np.array(2.0),
                       np.array(2.0, np.float32), np.full(3, 0.5, np.float32),
                       np.full((2, 3), 0.5), np.array([0.5], np.float32)]


@pytest.mark.parametrize("x", GRADIENT_TYPE_CASES, ids=lambda x: f"{type(x).__name__}"
                         f"-{getattr(x, 'dtype', '')}-{getattr(x, 'shape', '')}")
@pytest.mark.parametrize("w", [np.float64(0.75), 0.75, np.float32(0.75)], ids=repr)
def test_gradient_has_its_parameters_type(x, w):
    want = (1 - np.tanh(np.float64(x) * np.float64(w)) ** 2) * np.float64(w)
    tol = 1e-6 if 4 in (np.result_type(x).itemsize, np.result_type(x, w).itemsize) else 1e-12
    dx, dw = gradient(G.tanh_scaled, 0, 1)(x, w)
    value, (dx2, dw2) = value_and_gradient(G.tanh_scaled, 0, 1)(x, w)
    for d, p in ((dx, x), (dw, w), (dx2, x), (dw2, w)):
        assert type(d) is type(p)
        if isinstance(p, np.ndarray):
            assert d.dtype == p.dtype and d.shape == p.shape
        elif isinstance(p, np.generic):
            assert d.dtype == p.dtype
    np.testing.assert_allclose(dx, want, rtol=tol)
    np.testing.assert_allclose(dx2, dx, rtol=0)
    # inside compiled code the gradient has the type too, and computations go on with it
    d, twice = compiled(G.grad_tanh_scaled_inside)(x, w)
    assert type(d) is type(x) and type(twice) is type(x * 2.0)
    assert np.result_type(d) == np.result_type(x)
    np.testing.assert_allclose(d, want, rtol=tol)


def test_gradients_of_python_floats_are_floats():
    assert type(gradient(G.builtin_abs)(0.0)) is float
    assert type(gradient(G.math_sqrt)(4.0)) is float and gradient(G.math_sqrt)(4.0) == 0.25
    # README's example: grad of grad is a float, not np.float64
    dd = myir.grad(myir.grad(G.poly_xy), backend=BACKEND)(2.0, 3.0)
    assert type(dd) is float and dd == 972.0
    dx, dy = gradient(G.poly_xy, 0, 1)(2.0, 3.0)
    assert (type(dx), type(dy), dx, dy) == (float, float, 972.0, 864.0)


def test_gradient_of_a_tuple_parameter_has_its_items_types():
    a = np.array([1.0, 2.0], np.float32)
    da, db = gradient(G.tuple_param_loss)((a, 3.0), np.float64(0.5))
    assert da.dtype == np.float32 and type(db) is float
    np.testing.assert_allclose(da, [1.5, 1.5])
    assert db == 1.5


@pytest.mark.parametrize("optimize", [True, False], ids=["optimized", "unoptimized"])
def test_error_in_gradient_code_points_at_the_operations_line(optimize):
    """Nodes a gradient rule makes carry the location of the operation they differentiate:
    the traceback names the user's line, never a line of passes/grad_rules.py."""
    with pytest.raises(ZeroDivisionError):
        G.divides_by_zero(1.0)                   # CPython agrees there is an error
    with pytest.raises(ZeroDivisionError) as info:
        myir.compile(myir.grad(G.divides_by_zero), backend=BACKEND, optimize=optimize)(1.0)
    frames = traceback.extract_tb(info.value.__traceback__)
    ours = [f.lineno for f in frames if f.filename == G.__file__]
    line = _line_of(G.divides_by_zero, "1.0 / (x - x)")
    assert frames[-1].filename == G.__file__, traceback.format_list(frames)
    assert all(n in _line_range(G.divides_by_zero) for n in ours), ours
    # the J graph applies the division itself, optimized or not
    assert ours[-1] == line


def test_grad_of_a_function_returning_an_int():
    with pytest.raises(myir.MyirError) as info:
        gradient(G.returns_int)(1.5)
    assert "int" in str(info.value) and info.value.hint


@pytest.mark.parametrize("wrt", ["nope", 5, -3, 1.0])
def test_unknown_parameter(wrt):
    with pytest.raises(myir.MyirError) as info:
        myir.grad(G.plain_scalar, wrt, backend=BACKEND)(2.0, 3.0)
    text = str(info.value)
    assert repr(wrt) in text or str(wrt) in text
    # it names the parameters
    assert re.search(r"\bx\b", info.value.hint) and re.search(r"\bn\b", info.value.hint)
    assert _location_line(info.value) in _line_range(G.plain_scalar)


def test_primitive_without_a_gradient_rule():
    """vectorize's gradient (vectorize_call's rule) has none: the error points at the
    vectorized call whose second derivative would need it."""
    x = np.arange(3.0)
    with pytest.raises(myir.MyirError) as info:
        gradient(G.grad_of_vectorize)(x)
    e = info.value
    assert "vectorize_call" in e.message and e.hint
    assert _location_line(e) == _line_of(G.uses_vectorize, "vectorize(cubed)(x)")
    # the function itself compiles and runs
    assert compiled(G.grad_of_vectorize)(x) == 3.0 * np.sum(x * x)


@pytest.mark.parametrize("f, args", [
    (G.grad_of_parameter, (G.cube, 2.0)),
    (G.grad_of_runtime_choice, (True, 2.0)),
    (G.grad_of_branch_fn, (False, 2.0)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_grad_of_a_runtime_function_value(f, args):
    with pytest.raises(myir.MyirError) as info:
        compiled(f)(*args)
    assert "known when compiling" in str(info.value)
    assert _location_line(info.value) == _line_of(f, "grad(f)")
    assert info.value.hint


def test_grad_of_a_python_closure():
    loss = G.make_closure_loss(3.0)
    assert myir.grad(loss, backend=BACKEND)(2.0) == pytest.approx(12.0)


@pytest.mark.usefixtures("optimizer_on")
def test_gradient_temporaries_are_freed_at_their_last_use():
    """The python backend `del`s an array temporary after its last use, so a straight-line
    gradient holds the forward values it still needs and a couple of backward ones, not every
    intermediate until it returns (8 arrays at the peak here against 14 when all are kept)."""
    x = np.linspace(0.0, 1.0, 1 << 16)
    dchain = myir.grad(G.long_chain, backend="python")
    expected = numerical_grad(G.long_chain, (x[:8].copy(),), 0)
    assert_grads_close(dchain(x[:8].copy()), expected)
    dchain(x)
    tracemalloc.start()
    try:
        dchain(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * x.nbytes, peak / x.nbytes



@pytest.mark.parametrize("f", [G.tuple_concatenated, G.tuple_grown_in_a_loop,
                               G.tuple_concatenated_unequally, G.tuple_grown_after_a_check],
                         ids=["concatenated", "grown_in_a_loop", "unequally", "after_a_check"])
def test_gradient_through_a_tuple_concatenation(f):
    # each operand's gradient is its own side of the concatenation's, item by item
    check_gradient(f, (1.5,))


def test_gradient_through_a_tuple_repetition():
    # a tuple the function makes, repeated: each item's gradient sums its copies'
    check_gradient(G.tuple_repeated, (1.5,))
    check_gradient(G.tuple_argument_copied_then_repeated, ((1.5, -0.5), 2.0))


def test_gradient_through_repeating_a_tuple_argument_is_a_located_error():
    # `t * 2` of a tuple argument is `mul` (the parser cannot tell t is a tuple), whose
    # gradient would repeat the sensitivity rather than sum it: refused, not wrong
    with pytest.raises(myir.MyirError) as info:
        myir.grad(G.tuple_argument_repeated, 0, 1, backend=BACKEND)((1.5, -0.5), 2.0)
    message = str(info.value)
    assert "repeating a tuple (`xs * n`)" in message and "`tuple(xs) * n`" in message
    assert "u = t * 2" in message


def test_gradient_of_tuple_arguments_concatenated():
    x, y = (1.5, np.array([0.5, -2.0])), (np.array([3.0, 1.0]), 2.5)
    check_gradient(G.tuple_arguments_concatenated, (x, y))


def test_second_derivative_through_a_tuple_concatenation():
    # the gradient of the side primitives themselves: (x*x, 3x) -> 6x**2; second derivative 12x
    second = myir.grad(myir.grad(G.tuple_concatenated_unequally), backend=BACKEND)
    for x in (1.5, -0.5):
        want = numerical_grad(gradient(G.tuple_concatenated_unequally), (x,), 0)
        assert second(x) == pytest.approx(want, rel=1e-6)


# --------------------------------------------------------------------------------------------
# A value that is an int on some paths and a float on others (an accumulator started at 0)


@pytest.mark.parametrize("n", [0, 1, 4])
@pytest.mark.parametrize("f", [G.int_accumulator, G.int_product, G.int_accumulator_augmented,
                               G.int_or_float_in_between], ids=lambda f: f.__name__)
def test_int_on_some_paths_is_differentiable(f, n):
    """The paths where the value is an int contribute zero; the value has CPython's type,
    and the gradient its parameter's."""
    check_gradient(f, (1.5, n))
    value, d = value_and_gradient(f)(1.5, n)
    want = f(1.5, n)
    assert type(value) is type(want) and value == pytest.approx(want, rel=1e-12)
    assert type(d) is float


@pytest.mark.parametrize("n", [0, 3])
def test_int_on_some_paths_with_arrays(n):
    v = np.array([1.0, -2.0, 0.5])
    d = check_gradient(G.int_accumulator_of_arrays, (v, n))
    assert d.dtype == v.dtype and d.shape == v.shape


def test_int_on_some_paths_under_grad_inside_compiled_code():
    f = compiled(G.grad_of_int_accumulator)
    assert f(1.5, 0) == 0.0 and f(1.5, 3) == pytest.approx(3.0)
    g = compiled(G.value_and_grad_of_int_product)
    value, d = g(1.5, 0)
    assert (value, d) == (1, 0.0) and type(value) is int
    assert g(1.5, 2) == pytest.approx((1.5 * 2.5, 4.0))


def test_union_error_under_grad_names_the_programs_variable():
    """The AD's own values (a primitive's result in its J graph) never lend their names to
    the program's: the message names `u`, as it does without grad."""
    with pytest.raises(myir.MyirError) as info:
        gradient(G.int_or_float_index)(1.5, np.ones(5))
    text = str(info.value)
    assert "`u` is a float or an int" in text and "`out`" not in text
    assert _location_line(info.value) == _line_of(G.int_or_float_index, "v[u]")


def test_grad_of_an_output_that_is_an_array_on_some_paths():
    with pytest.raises(myir.MyirError) as info:
        gradient(G.int_accumulator)(np.ones(3), 2)      # an int or an array of shape (3,)
    e = info.value
    assert "scalar" in e.message and "int" in e.message and "ndarray" in e.message and e.hint
    assert _location_line(e) in _line_range(G.int_accumulator)


# --------------------------------------------------------------------------------------------
# The grad macro in compiled code binds its call as a call of the function it differentiates


def test_grad_macro_honours_defaults_and_keywords():
    v = np.array([1.0, -2.0, 0.5])
    f = G.scaled_norm
    assert np.allclose(compiled(G.grad_using_defaults)(v), fd(f, (v,), 0))
    assert np.allclose(compiled(G.grad_with_a_keyword)(v), fd(f, (v, 2.0, 3), 0))
    assert compiled(G.grad_wrt_a_defaulted_parameter)(v) == pytest.approx(fd(f, (v, 2.0), 1))
    value, (dv, dscale) = compiled(G.value_and_grad_with_keywords)(v)
    assert value == pytest.approx(f(v, scale=0.5))
    assert np.allclose(dv, fd(f, (v, 0.5), 0)) and dscale == pytest.approx(fd(f, (v, 0.5), 1))
    assert compiled(G.grad_held_in_a_variable)(v) == pytest.approx(fd(f, (v, 2.0, 1), 1))
    assert compiled(G.grad_of_grad_with_defaults)(1.5) == pytest.approx(2.0 * 1.5)


def test_grad_macro_takes_functions_known_when_compiling():
    """A parameter holding a function (a default `act=np.tanh`, `np.sin` or a function of
    the program passed in) is called by J of the function: each call's gradient has the
    function it passes in place of the parameter."""
    f = G.layers_loss
    params, x = [{"W": np.array([[0.5, -1.0], [0.3, 0.8]]), "b": np.array([0.1, -0.2])}], \
        np.array([[0.4, -0.7], [1.1, 0.2]])
    dp = compiled(G.grad_with_a_default_function)(params, x)
    W = params[0]["W"]
    assert np.allclose(dp[0]["W"], fd(lambda w: f([{"W": w, "b": params[0]["b"]}], x), (W,), 0))
    dx, dp = compiled(G.grad_with_a_function_passed)(params, x)
    assert np.allclose(dx, fd(lambda z: f(params, z, np.sin), (x,), 0))
    assert np.allclose(dp[0]["b"], fd(lambda b: f([{"W": W, "b": b}], x, G.softsign),
                                      (params[0]["b"],), 0))
    dx, dx_sin = compiled(G.grad_with_a_flag_default)(params, x)
    assert np.allclose(dx, fd(G.forward, (params, x), 1))
    assert np.allclose(dx_sin, fd(lambda z: G.forward(params, z, np.sin), (x,), 0))
    # outside compiled code, the default function too
    assert np.allclose(gradient(f, "x")(params, x), fd(f, (params, x), 1))


@pytest.mark.parametrize("backend", ["python", "tvm"])
def test_grad_outside_compiled_code_takes_flags_as_constants(backend):
    """myir.grad(f) called from Python, where a flag (a bool, None or a string; its default
    or given) chooses whether f returns a scalar: each flag value is its own program, as in
    compiled code, where the flag is a constant."""
    v = np.array([0.5, -1.5, 2.0])
    f = G.squares_or_their_sum
    for call in (lambda g: g(v), lambda g: g(v, reduce=True), lambda g: g(v, True)):
        assert np.array_equal(call(myir.grad(f, backend=backend)), 2.0 * v)
    with pytest.raises(myir.MyirTypeError) as info:     # an array: no gradient
        myir.grad(f, backend=backend)(v, reduce=False)
    assert "returned an array of shape (3,)" in str(info.value) and info.value.hint
    g = G.loss_with_flags
    for kwargs in ({}, {"mean": True}, {"mode": "sin", "scale": 3.0}):
        dx, dw = myir.grad(g, "x", "w", backend=backend)(v, 0.7, **kwargs)
        assert np.allclose(dx, fd(lambda x: g(x, 0.7, **kwargs), (v,), 0))
        assert dw == pytest.approx(fd(lambda w: g(v, w, **kwargs), (0.7,), 0))


def test_grad_of_a_function_calling_a_function_made_at_run_time_is_a_located_error():
    """A closure made by the caller, or a function passed to the gradient from outside
    compiled code: J of the function would call J of it, which it has not."""
    params, x = [{"W": np.eye(2), "b": np.zeros(2)}], np.ones((2, 2))
    for call in (lambda: compiled(G.grad_with_a_closure_passed)(params, x, 2.0),
                 lambda: gradient(G.layers_loss, "x")(params, x, np.sin)):
        with pytest.raises(myir.MyirError) as info:
            call()
        assert "calls its parameter `act`" in str(info.value) and info.value.hint
        assert _location_line(info.value) == _line_of(G.layers_loss, "act(x @")


def test_grad_macro_call_missing_an_argument():
    with pytest.raises(myir.MyirError) as info:
        compiled(G.grad_missing_an_argument)(np.ones(2))
    assert "missing required argument 'v'" in str(info.value)
    assert _location_line(info.value) == _line_of(G.grad_missing_an_argument, "grad(")
