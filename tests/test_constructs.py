"""Differential tests, one per construct of the compiled subset: compiled == CPython.

Every test takes the `jit` fixture and so runs once per mode (see tests/programs_check.py):
`cpython` runs the uncompiled function (it checks the tests' own expectations without the
compiler: `pytest tests/test_constructs.py -k cpython`), `myir-python` runs it compiled by
myir's python backend.  `check(jit, f, *args)` calls both on copies of the arguments and
asserts the same result type and value, the same exception (type and message), and the same
arguments afterwards.  The subjects are in tests/programs_constructs.py and
tests/programs_numpy.py.
"""

import collections
import inspect
import math
import os
import traceback

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import myir
from tests import programs_constructs as P
from tests import programs_numpy as N
from tests.programs_check import ANY, assert_same, check, compiled, jit  # noqa: F401

# --------------------------------------------------------------------------------------------
# Strategies

ints = st.integers(-1000, 1000)
small_ints = st.integers(-3, 3)
floats = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
unit_floats = st.floats(-10, 10, allow_nan=False, allow_infinity=False)
int_tuples = st.lists(st.integers(-100, 100), max_size=6).map(tuple)


def arrays(shape, dtype=np.float64, lo=-10.0, hi=10.0):
    if np.dtype(dtype).kind == "f":
        elements = st.floats(lo, hi, allow_nan=False, allow_infinity=False, width=np.dtype(dtype).itemsize * 8)
    else:
        elements = st.integers(int(lo), int(hi))
    return hnp.arrays(dtype, shape, elements=elements)


def vectors(min_side=1, max_side=5, **kw):
    return arrays(hnp.array_shapes(min_dims=1, max_dims=1, min_side=min_side, max_side=max_side), **kw)


def matrices(min_rows=1, min_cols=1, max_side=5, **kw):
    shapes = st.tuples(st.integers(min_rows, max_side), st.integers(min_cols, max_side))
    return arrays(shapes, **kw)


def name(f):
    return f.__name__


# --------------------------------------------------------------------------------------------
# Arithmetic

BINARY_OPS = [P.add, P.sub, P.mul, P.truediv, P.floordiv, P.mod]


@pytest.mark.parametrize("op", BINARY_OPS, ids=name)
@given(a=ints, b=ints)
@example(a=7, b=0)
@example(a=-7, b=2)
@example(a=7, b=-2)
def test_arith_int(jit, op, a, b):
    check(jit, op, a, b, raises=ANY if b == 0 else None)


@pytest.mark.parametrize("op", BINARY_OPS, ids=name)
@given(a=floats, b=floats)
@example(a=7.5, b=0.0)
@example(a=-7.5, b=2.0)
@example(a=-0.0, b=1.0)
def test_arith_float(jit, op, a, b):
    check(jit, op, a, b, raises=ANY if b == 0 else None)


@pytest.mark.parametrize("op", BINARY_OPS, ids=name)
@given(a=ints, b=floats)
def test_arith_int_float(jit, op, a, b):
    check(jit, op, a, b, raises=ANY if b == 0 else None)
    check(jit, op, b, a, raises=ANY if a == 0 else None)


@given(a=st.integers(-20, 20), b=st.integers(-4, 8))
@example(a=0, b=-1)
@example(a=2, b=-2)
def test_arith_pow_int(jit, a, b):
    check(jit, P.power, a, b, raises=ANY if a == 0 and b < 0 else None)


@given(a=st.just(0.0) | st.floats(1e-3, 100), b=st.floats(-5, 5))
@example(a=0.0, b=-1.0)
@example(a=-2.0, b=3.0)
def test_arith_pow_float(jit, a, b):
    check(jit, P.power, a, b, raises=ANY if a == 0 and b < 0 else None)


@given(a=vectors(min_side=3, max_side=3), b=vectors(min_side=3, max_side=3))
def test_arith_matmul_vectors(jit, a, b):
    check(jit, P.matmul, a, b)


@given(a=arrays((2, 3)), b=arrays((3, 4)))
def test_arith_matmul_matrices(jit, a, b):
    check(jit, P.matmul, a, b)


@given(x=st.integers(-1000, 1000), y=floats)
def test_arith_polynomial(jit, x, y):
    check(jit, P.polynomial, x, y)
    check(jit, P.polynomial, y, x)
    check(jit, P.polynomial, x, x)


@given(a=st.integers(-50, 50), b=st.integers(-50, 50), c=st.integers(-50, 50))
def test_arith_precedence(jit, a, b, c):
    check(jit, P.precedence, a, b, c)


@pytest.mark.parametrize("op", [P.neg, P.pos], ids=name)
@given(i=ints, x=floats)
def test_unary_minus_plus(jit, op, i, x):
    check(jit, op, i)
    check(jit, op, x)


@given(i=small_ints, x=st.sampled_from([0.0, -0.0, 1.5, -2.0]))
def test_unary_not(jit, i, x):
    check(jit, P.not_, i)
    check(jit, P.not_, x)


@given(i=ints)
def test_unary_invert(jit, i):
    assert check(jit, P.invert, i) == -i - 1


# --------------------------------------------------------------------------------------------
# Comparisons

COMPARISONS = [P.lt, P.le, P.gt, P.ge, P.eq, P.ne]


@pytest.mark.parametrize("op", COMPARISONS, ids=name)
@given(a=small_ints, b=small_ints, x=st.sampled_from([-1.0, 0.0, 0.5, 1.0]))
def test_compare(jit, op, a, b, x):
    check(jit, op, a, b)
    check(jit, op, a, x)
    check(jit, op, x, b)


@pytest.mark.parametrize("op", [P.chained_lt, P.chained_mixed, P.chained_eq], ids=name)
@given(a=small_ints, b=small_ints, c=small_ints)
def test_compare_chained(jit, op, a, b, c):
    check(jit, op, a, b, c)


@given(a=small_ints, b=small_ints, c=small_ints, d=small_ints)
def test_compare_chained_four(jit, a, b, c, d):
    check(jit, P.chained_four, a, b, c, d)


def test_compare_chained_short_circuit(jit):
    assert check(jit, P.chained_short_circuit, 1, 0, 0) is False  # 10 // 0 never evaluated
    check(jit, P.chained_short_circuit, 0, 1, 0, raises=ZeroDivisionError)
    assert check(jit, P.chained_short_circuit, 0, 1, 2) is True


# --------------------------------------------------------------------------------------------
# and / or / not


@pytest.mark.parametrize("op", [P.and_value, P.or_value], ids=name)
@given(a=st.integers(-2, 2), b=st.integers(-2, 2), x=st.sampled_from([0.0, 1.5]))
def test_and_or_value(jit, op, a, b, x):
    check(jit, op, a, b)
    check(jit, op, x, b)


@pytest.mark.parametrize("op", [P.and_value, P.or_value], ids=name)
@given(a=st.integers(-1, 1), x=st.sampled_from([0.0, 2.5]))
def test_and_or_value_mixed_types(jit, op, a, x):
    # `0 or 2.5` is a float, `1 or 2.5` an int: the result's type depends on the value
    check(jit, op, a, x)
    check(jit, op, x, a)


def test_or_literal(jit):
    assert check(jit, P.zero_or_five) == 5


def test_and_literal(jit):
    assert check(jit, P.three_and_zero) == 0


@given(a=st.integers(-1, 1), b=st.integers(-1, 1), c=st.integers(-1, 1))
def test_and_or_chain(jit, a, b, c):
    check(jit, P.and_or_chain, a, b, c)


@pytest.mark.parametrize("op", [P.and_guard, P.or_guard], ids=name)
@given(a=ints, b=st.integers(-3, 3))
@example(a=5, b=0)
def test_and_or_short_circuit_division(jit, op, a, b):
    check(jit, op, a, b)  # never divides by zero


def test_or_short_circuit_call(jit):
    assert check(jit, P.or_guard_call, 5) is True
    check(jit, P.or_guard_call, -1, raises=RuntimeError)


def test_and_short_circuit_call(jit):
    assert check(jit, P.and_guard_call, -5) is False
    check(jit, P.and_guard_call, 1, raises=RuntimeError)


def test_or_with_none(jit):
    assert check(jit, P.none_or_default, None) == 3
    assert check(jit, P.none_or_default, 0) == 3
    assert check(jit, P.none_or_default, 5) == 5


@given(a=st.integers(-1, 1), b=st.integers(-1, 1))
def test_not_and_or(jit, a, b):
    check(jit, P.not_and_or, a, b)


# --------------------------------------------------------------------------------------------
# if / elif / else, ternary


@given(i=st.integers(-20, 20), x=floats)
def test_if_elif_else(jit, i, x):
    check(jit, P.if_elif_else, i)
    check(jit, P.if_elif_else, x)


@given(i=small_ints)
def test_if_without_else(jit, i):
    check(jit, P.if_without_else, i)


def test_if_truthiness(jit):
    for v in (0, 3, 0.0, -1.5, None, True, False):
        check(jit, P.if_truthiness, v)


@given(a=small_ints, b=small_ints)
def test_if_nested(jit, a, b):
    check(jit, P.nested_if, a, b)


@given(i=ints, x=floats)
def test_ternary(jit, i, x):
    check(jit, P.ternary, i)
    check(jit, P.ternary, x)


@given(i=small_ints)
def test_ternary_nested(jit, i):
    check(jit, P.nested_ternary, i)


@given(a=ints, b=small_ints)
def test_ternary_short_circuit(jit, a, b):
    check(jit, P.ternary_guard, a, b)


@given(i=ints)
def test_pass_statement(jit, i):
    check(jit, P.with_pass, i)


def test_docstring(jit):
    assert check(jit, P.with_docstring, 1) == 2


# --------------------------------------------------------------------------------------------
# while


@given(n=st.integers(-5, 200))
def test_while(jit, n):
    check(jit, P.while_sum, n)


def test_while_value(jit):
    assert check(jit, P.while_sum, 10) == 45


def test_while_million_iterations(jit):
    # a loop is a tail call to its header graph: it must run in constant stack
    assert check(jit, P.while_count, 1_000_000) == sum(i % 7 for i in range(1_000_000))


def test_for_range_million_iterations(jit):
    assert check(jit, P.for_range_count, 1_000_000) == 1_000_000


@given(n=st.integers(0, 200))
def test_while_true_break(jit, n):
    check(jit, P.while_true_break, n)


@given(n=st.integers(-3, 100))
def test_while_continue(jit, n):
    check(jit, P.while_continue, n)


@given(n=st.integers(0, 200))
def test_while_return(jit, n):
    check(jit, P.while_return, n)


@given(x=st.floats(0, 1e6))
def test_while_float_state(jit, x):
    check(jit, P.while_float, x)


# --------------------------------------------------------------------------------------------
# for over range


@given(n=st.integers(-3, 50))
def test_for_range_n(jit, n):
    check(jit, P.for_range_n, n)


@given(a=st.integers(-20, 20), b=st.integers(-20, 20))
def test_for_range_ab(jit, a, b):
    check(jit, P.for_range_ab, a, b)


@given(a=st.integers(-20, 20), b=st.integers(-20, 20), step=st.integers(-5, 5).filter(bool))
def test_for_range_step(jit, a, b, step):
    check(jit, P.for_range_step, a, b, step)


@given(n=st.integers(-2, 40))
def test_for_range_negative_step(jit, n):
    check(jit, P.for_range_negative_step, n)


def test_for_range_empty(jit):
    assert check(jit, P.for_range_n, 0) == 0
    assert check(jit, P.for_range_n, -4) == 0
    assert check(jit, P.for_range_ab, 5, 2) == 0
    assert check(jit, P.for_range_step, 0, 5, -1) == 0
    assert check(jit, P.for_range_step, 5, 0, 1) == 0


def test_for_range_values(jit):
    assert check(jit, P.for_range_n, 4) == 0 + 1 + 4 + 9
    assert check(jit, P.for_range_step, 5, -1, -2) == (5 * 2 + 3) * 2 + 1


def test_for_range_zero_step(jit):
    check(jit, P.for_range_step, 0, 5, 0, raises=ValueError)


@given(n=st.integers(1, 20))
def test_for_loop_variable_after_loop(jit, n):
    assert check(jit, P.for_loop_var_after, n) == n - 1


# --------------------------------------------------------------------------------------------
# for over tuples, zip, enumerate, arrays


@given(t=int_tuples)
def test_for_tuple(jit, t):
    check(jit, P.for_tuple, t)


@given(x=floats)
def test_for_tuple_heterogeneous(jit, x):
    check(jit, P.for_tuple_mixed, x)


@given(t=int_tuples, u=int_tuples)
def test_for_zip(jit, t, u):
    check(jit, P.for_zip, t, u)


@given(t=int_tuples)
def test_for_zip_range(jit, t):
    check(jit, P.for_zip_range, t)


@given(t=int_tuples)
def test_for_enumerate(jit, t):
    check(jit, P.for_enumerate, t)


@given(t=int_tuples)
def test_for_enumerate_start(jit, t):
    check(jit, P.for_enumerate_start, t)


@given(x=matrices(min_rows=0))
def test_for_array_rows(jit, x):
    check(jit, P.for_array_rows, x)


@given(x=vectors(min_side=0))
def test_for_array_elements(jit, x):
    check(jit, P.for_array_elements, x)


@given(x=vectors(), y=vectors())
def test_for_zip_arrays(jit, x, y):
    check(jit, P.for_zip_arrays, x, y)


@given(x=vectors())
def test_for_enumerate_array(jit, x):
    check(jit, P.for_enumerate_array, x)


# --------------------------------------------------------------------------------------------
# break / continue / return in loops and branches


@given(n=st.integers(0, 60))
def test_for_break(jit, n):
    check(jit, P.for_break, n)


@given(n=st.integers(0, 60))
def test_for_continue(jit, n):
    check(jit, P.for_continue, n)


@given(n=st.integers(0, 60))
def test_for_return(jit, n):
    check(jit, P.for_return, n)


@given(n=st.integers(0, 12))
def test_nested_loops_break_continue(jit, n):
    check(jit, P.nested_loops_break, n)


@given(n=st.integers(0, 8), target=st.integers(0, 30))
def test_nested_loops_return(jit, n, target):
    check(jit, P.nested_loops_return, n, target)


@given(n=st.integers(0, 15))
def test_for_in_while(jit, n):
    check(jit, P.for_in_while, n)


@given(i=ints)
def test_return_in_branches(jit, i):
    check(jit, P.return_in_branches, i)


@given(i=st.integers(-5, 20))
def test_return_in_elif(jit, i):
    check(jit, P.return_in_elif, i)


# --------------------------------------------------------------------------------------------
# Assignment, unpacking, augmented assignment


@given(i=ints, x=floats)
def test_assign_chained_targets(jit, i, x):
    check(jit, P.assign_chain, i)
    check(jit, P.assign_chain, x)


@given(a=ints, b=floats)
def test_tuple_pack(jit, a, b):
    check(jit, P.tuple_pack, a, b)


@given(a=ints, b=floats)
def test_tuple_unpack(jit, a, b):
    check(jit, P.tuple_unpack, (a, b))


@given(a=ints, b=ints, c=floats, d=ints)
def test_tuple_unpack_nested(jit, a, b, c, d):
    check(jit, P.nested_unpack, ((a, (b, c)), d))


@given(a=ints, b=floats)
def test_swap(jit, a, b):
    check(jit, P.swap, a, b)


@given(i=ints)
def test_unpack_call_result(jit, i):
    check(jit, P.unpack_call_result, i)


@given(i=st.integers(-50, 50))
def test_augmented_assignment_int(jit, i):
    check(jit, P.augmented, i)


@given(x=floats)
def test_augmented_assignment_float(jit, x):
    check(jit, P.augmented_float, x)


@given(x=vectors())
def test_augmented_assignment_local_array(jit, x):
    check(jit, P.augmented_array, x)


@given(i=small_ints)
def test_reassign_other_type(jit, i):
    check(jit, P.reassign_type, i)


# --------------------------------------------------------------------------------------------
# Functions


@given(i=ints, x=floats)
def test_nested_def(jit, i, x):
    check(jit, P.nested_def, i)
    check(jit, P.nested_def, x)


@given(a=ints, b=floats)
def test_lambda_capture(jit, a, b):
    check(jit, P.lambda_capture, a, b)


@given(i=ints)
def test_two_level_closure(jit, i):
    check(jit, P.two_level_closure, i)


@given(i=ints)
def test_closure_returned_and_called_later(jit, i):
    check(jit, P.closure_called_later, i)


@pytest.mark.parametrize("maker", [P.returns_closure, P.returns_nested_def], ids=name)
@given(x=floats, y=floats)
def test_closure_returned_to_caller(jit, maker, x, y):
    expected = maker(x)
    actual = jit(maker)(x)
    assert callable(actual)
    assert_same(actual(y), expected(y))
    assert_same(actual(2), expected(2))


@given(i=st.integers(-100, 100))
def test_function_as_argument_internal(jit, i):
    check(jit, P.use_apply_twice, i)


@given(i=st.integers(-100, 100))
def test_closure_composition(jit, i):
    check(jit, P.use_compose, i)


@given(i=ints, x=floats)
def test_function_as_argument_from_caller(jit, i, x):
    check(jit, P.call_function_argument, P.square, i)
    check(jit, P.call_function_argument, P.increment, x)


@given(i=ints)
def test_closure_in_branch(jit, i):
    check(jit, P.closure_in_branch, i)


@given(n=st.integers(0, 20))
def test_closure_in_loop(jit, n):
    check(jit, P.closure_in_loop, n)


@given(i=ints)
def test_nested_def_defaults_and_keywords(jit, i):
    check(jit, P.nested_def_defaults, i)


@given(x=floats)
def test_lambdas_sharing_a_line(jit, x):
    """Module-level lambdas on one line (two with the same bytecode, other constants), one
    calling two others, and lambdas on one line inside a compiled function."""
    for f in P.LINE_LAMBDAS + P.SHIFTS + (P.inc, P.tenfold, P.nest, P.uses_line_lambdas,
                                          P.lambdas_inside_on_one_line, P.curried(x)):
        check(jit, f, x)
    assert_same(jit(P.curried)(x)(2.0), P.curried(x)(2.0))


def test_lambdas_sharing_a_line_values(jit):
    assert [check(jit, f, 2.0) for f in P.LINE_LAMBDAS] == [3.0, 20.0, 4.0]
    assert [check(jit, f, 2.0) for f in P.SHIFTS] == [2.0, 3.0, 4.0]
    assert check(jit, P.nest, 2.0) == 3.0
    assert check(jit, P.curried(2.0), 3.0) == 23.0


@given(x=st.floats(-3, 8, allow_nan=False), n=st.integers(-1, 12))
def test_recursive_lambda(jit, x, n):
    assert check(jit, P.recursive_lambda, 3.0) == 6.0
    check(jit, P.recursive_lambda, x)
    check(jit, P.recursive_lambda_capturing, x, n)
    check(jit, P.recursive_lambda_default, n)


@given(n=st.integers(0, 20))
def test_recursion(jit, n):
    check(jit, P.factorial, n)


def test_recursion_values(jit):
    assert check(jit, P.factorial, 10) == 3628800
    assert check(jit, P.fib, 15) == 610


@given(x=st.floats(-2, 2), n=st.integers(0, 30))
def test_recursion_float(jit, x, n):
    check(jit, P.power_rec, x, n)


@pytest.mark.parametrize("f", [P.is_even, P.is_odd], ids=name)
@given(n=st.integers(0, 200))
def test_mutual_recursion(jit, f, n):
    check(jit, f, n)


def test_defaults_and_keywords_at_call(jit):
    check(jit, P.with_defaults, 3)
    check(jit, P.with_defaults, 3, 4)
    check(jit, P.with_defaults, 3, c=1.0)
    check(jit, P.with_defaults, a=2, b=3, c=4.0)
    check(jit, P.with_defaults, 1.5, c=-1, b=2)


def test_functions_as_defaults(jit):
    check(jit, P.with_function_defaults, -1.5)
    check(jit, P.with_function_defaults, -1.5, lambda y: y - 1.0)
    check(jit, P.with_function_defaults, 2.0, h=math.sin)


@given(i=ints, x=floats)
def test_keywords_inside(jit, i, x):
    check(jit, P.calls_with_keywords, i)
    check(jit, P.calls_with_keywords, x)


@given(i=ints)
def test_call_function_defined_later(jit, i):
    check(jit, P.calls_later_defined, i)


def test_signature_cache(jit):
    f = P.nested_def
    assert_same(jit(f)(2), f(2))
    assert_same(jit(f)(2.5), f(2.5))
    assert_same(jit(f)(True), f(True))
    assert_same(jit(f)(2), f(2))


# --------------------------------------------------------------------------------------------
# Module constants


@given(i=ints, x=floats)
def test_module_constants(jit, i, x):
    check(jit, P.uses_constants, i)
    check(jit, P.uses_constants, x)


@pytest.mark.parametrize("i", [0, 1])
def test_module_tuple_constant(jit, i):
    check(jit, P.uses_nested_constant, i)


@given(i=ints)
def test_module_none_constant(jit, i):
    check(jit, P.uses_none_constant, i)


@given(x=floats)
def test_module_math_constants(jit, x):
    check(jit, P.uses_math_pi, x)


@given(x=vectors(min_side=3, max_side=3))
def test_module_array_constant(jit, x):
    check(jit, N.uses_array_constant, x)


# --------------------------------------------------------------------------------------------
# math.*

positive = st.floats(1e-3, 1e3)
MATH_UNARY = [
    (N.math_sin, floats),
    (N.math_cos, floats),
    (N.math_tan, floats),
    (N.math_tanh, floats),
    (N.math_exp, st.floats(-50, 50)),
    (N.math_log, positive),
    (N.math_sqrt, st.floats(0, 1e3)),
    (N.math_floor, floats),
    (N.math_ceil, floats),
    (N.math_fabs, floats),
    (N.math_more, positive),
    (N.math_combined, floats),
]


@pytest.mark.parametrize("f,strategy", MATH_UNARY, ids=[name(f) for f, _ in MATH_UNARY])
@given(data=st.data())
def test_math_function(jit, f, strategy, data):
    check(jit, f, data.draw(strategy))


@pytest.mark.parametrize("f", [N.math_sin, N.math_exp, N.math_sqrt, N.math_floor], ids=name)
@given(i=st.integers(0, 20))
def test_math_function_int_argument(jit, f, i):
    check(jit, f, i)


@given(x=positive, y=st.floats(-5, 5))
def test_math_pow(jit, x, y):
    check(jit, N.math_pow, x, y)


@given(y=floats, x=floats)
def test_math_atan2(jit, y, x):
    check(jit, N.math_atan2, y, x)


def test_math_domain_error(jit):
    check(jit, N.math_sqrt, -1.0, raises=ValueError)
    check(jit, N.math_log, 0.0, raises=ValueError)
    check(jit, N.math_more, -1.0, raises=ValueError)    # math.log2(-1.0)
    check(jit, N.math_more, math.inf, raises=ValueError)    # math.atanh(inf)


# --------------------------------------------------------------------------------------------
# numpy functions

NP_ELEMENTWISE = [
    (N.np_sin, unit_floats),
    (N.np_cos, unit_floats),
    (N.np_exp, unit_floats),
    (N.np_log, st.floats(1e-3, 10)),
    (N.np_sqrt, st.floats(0, 10)),
    (N.np_tanh, unit_floats),
    (N.np_abs, unit_floats),
]


@pytest.mark.parametrize("f,elements", NP_ELEMENTWISE, ids=[name(f) for f, _ in NP_ELEMENTWISE])
@given(data=st.data())
def test_numpy_elementwise(jit, f, elements, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=4))
    x = data.draw(hnp.arrays(np.float64, shape, elements=elements))
    check(jit, f, x)


@pytest.mark.parametrize("f,elements", NP_ELEMENTWISE, ids=[name(f) for f, _ in NP_ELEMENTWISE])
@given(data=st.data())
def test_numpy_elementwise_on_float(jit, f, elements, data):
    check(jit, f, data.draw(elements))  # a Python float in, a numpy.float64 out


NP_REDUCTIONS = [
    N.np_sum,
    N.np_sum_axis0,
    N.np_sum_axis1,
    N.np_mean,
    N.np_mean_axis0,
    N.np_max,
    N.np_max_axis1,
    N.np_min,
]


@pytest.mark.parametrize("f", NP_REDUCTIONS, ids=name)
@given(x=matrices())
def test_numpy_reduction(jit, f, x):
    check(jit, f, x)


@pytest.mark.parametrize("f", [N.np_sum, N.np_mean, N.np_max], ids=name)
@given(x=vectors())
def test_numpy_reduction_vector(jit, f, x):
    check(jit, f, x)


@pytest.mark.parametrize("f", [N.np_where, N.np_maximum], ids=name)
@given(x=matrices())
def test_numpy_where_maximum(jit, f, x):
    check(jit, f, x)


@given(data=st.data())
def test_numpy_where_two_arrays(jit, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=4))
    check(jit, N.np_where_two_arrays, data.draw(arrays(shape)), data.draw(arrays(shape)))


@given(x=arrays((3,)), y=arrays((3,)))
def test_numpy_dot_vectors(jit, x, y):
    check(jit, N.np_dot_vectors, x, y)


@given(a=arrays((2, 3)), v=arrays((3,)))
def test_numpy_dot_matrix_vector(jit, a, v):
    check(jit, N.np_dot_matrix_vector, a, v)


@given(a=arrays((2, 3)), b=arrays((3, 2)))
def test_numpy_dot_matrices(jit, a, b):
    check(jit, N.np_dot_matrices, a, b)


@given(n=st.integers(0, 4))
def test_numpy_zeros(jit, n):
    check(jit, N.np_zeros, n)
    check(jit, N.np_zeros_int_shape, n)


def test_numpy_ones(jit):
    check(jit, N.np_ones)


def test_python_types_as_dtypes(jit):
    check(jit, N.python_types_as_dtypes, 3, np.array([1.5, -2.5]))


@pytest.mark.parametrize("f", [N.np_ones_shape, N.np_zeros_like, N.np_ones_like, N.np_transpose], ids=name)
@given(x=matrices())
def test_numpy_shape_constructors(jit, f, x):
    check(jit, f, x)


@given(w=arrays((3,)), x=arrays((4, 3)), y=arrays((4,)))
def test_numpy_combined(jit, w, x, y):
    check(jit, N.np_combined, w, x, y)


@given(x=floats)
def test_numpy_pi(jit, x):
    check(jit, N.np_pi, x)


# --------------------------------------------------------------------------------------------
# Array arithmetic


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64], ids=lambda d: np.dtype(d).name)
@given(data=st.data())
def test_array_arithmetic_dtype(jit, dtype, data):
    x = data.draw(arrays(hnp.array_shapes(min_dims=1, max_dims=2, max_side=4), dtype=dtype))
    check(jit, N.array_scale, x)
    check(jit, N.scalar_minus_array, x)


@given(x=arrays((2, 3)), v=arrays((3,)))
def test_array_broadcasting(jit, x, v):
    check(jit, N.array_broadcast, x, v)


@pytest.mark.parametrize("op", [P.add, P.sub, P.mul], ids=name)
@given(x=arrays((2, 3)), y=arrays((2, 3)), s=floats)
def test_array_binary(jit, op, x, y, s):
    check(jit, op, x, y)
    check(jit, op, x, s)
    check(jit, op, s, x)


@given(x=arrays((2, 3)), y=arrays((2, 3), lo=0.5, hi=10.0))
def test_array_division(jit, x, y):
    check(jit, P.truediv, x, y)


@given(x=arrays((2, 3)), y=arrays((2, 3)))
def test_array_comparison(jit, x, y):
    check(jit, N.array_compare, x, y)


@given(x=vectors())
def test_array_unary_minus(jit, x):
    check(jit, P.neg, x)


# --------------------------------------------------------------------------------------------
# Array methods and attributes

ATTRS = [N.attr_T, N.attr_shape, N.attr_shape_index, N.attr_ndim, N.attr_size, N.attr_dtype]
METHODS = [N.method_sum, N.method_sum_axis0, N.method_mean, N.method_max_axis1]
RESHAPES = [N.method_reshape_flat, N.method_reshape_tuple, N.method_reshape_args]


@pytest.mark.parametrize("f", ATTRS, ids=name)
@given(x=matrices())
def test_array_attribute(jit, f, x):
    check(jit, f, x)


@pytest.mark.parametrize("f", METHODS, ids=name)
@given(x=matrices())
def test_array_method(jit, f, x):
    check(jit, f, x)


@pytest.mark.parametrize("f", RESHAPES, ids=name)
@given(x=arrays((2, 3)))
def test_array_reshape(jit, f, x):
    check(jit, f, x)


@given(x=matrices())
def test_array_shape_drives_constructor(jit, x):
    check(jit, N.zeros_of_shape, x)


# --------------------------------------------------------------------------------------------
# Indexing and slicing: tuples

TUPLE_INDEXING = [
    N.tuple_first,
    N.tuple_last,
    N.tuple_tail,
    N.tuple_init,
    N.tuple_reversed,
    N.tuple_every_other,
    N.tuple_middle,
    N.tuple_negative_slice_step,
]


@pytest.mark.parametrize("f", TUPLE_INDEXING, ids=name)
@given(t=st.lists(ints, min_size=4, max_size=7).map(tuple))
def test_tuple_indexing(jit, f, t):
    check(jit, f, t)


@given(a=ints, b=floats)
def test_tuple_heterogeneous_indexing(jit, a, b):
    check(jit, N.tuple_first, (a, b, None))
    check(jit, N.tuple_last, (a, b, None))
    check(jit, N.tuple_tail, (a, b, None))
    check(jit, N.tuple_nested_index, (a, (b, a)))
    check(jit, N.tuple_mixed_index, b)


@given(data=st.data())
def test_tuple_runtime_index(jit, data):
    t = data.draw(st.lists(ints, min_size=1, max_size=6).map(tuple))
    i = data.draw(st.integers(-len(t), len(t) - 1))
    check(jit, N.tuple_runtime_index, t, i)


def test_tuple_index_out_of_range(jit):
    check(jit, N.tuple_runtime_index, (1, 2, 3), 5, raises=IndexError)


# --------------------------------------------------------------------------------------------
# Indexing and slicing: arrays

VECTOR_INDEXING = [
    N.array_first,
    N.array_last,
    N.array_tail,
    N.array_reversed,
    N.array_every_other,
    N.array_middle,
]
MATRIX_INDEXING = [
    N.matrix_element,
    N.matrix_negative_element,
    N.matrix_row,
    N.matrix_column,
    N.matrix_last_column,
    N.matrix_slice_step,
    N.matrix_reverse_rows,
    N.matrix_row_then_element,
]


@pytest.mark.parametrize("f", VECTOR_INDEXING, ids=name)
@given(x=vectors(min_side=2))
def test_array_indexing(jit, f, x):
    check(jit, f, x)


@pytest.mark.parametrize("f", MATRIX_INDEXING, ids=name)
@given(x=matrices(min_rows=2, min_cols=3))
def test_matrix_indexing(jit, f, x):
    check(jit, f, x)


@given(data=st.data())
def test_array_runtime_index(jit, data):
    x = data.draw(vectors())
    i = data.draw(st.integers(-len(x), len(x) - 1))
    check(jit, N.array_runtime_index, x, i)


@given(data=st.data())
def test_array_runtime_slice(jit, data):
    x = data.draw(vectors())
    a = data.draw(st.integers(-7, 7))
    b = data.draw(st.integers(-7, 7))
    check(jit, N.array_runtime_slice, x, a, b)


@given(data=st.data())
def test_matrix_runtime_index(jit, data):
    x = data.draw(matrices())
    i = data.draw(st.integers(-x.shape[0], x.shape[0] - 1))
    j = data.draw(st.integers(-x.shape[1], x.shape[1] - 1))
    check(jit, N.matrix_runtime_element, x, i, j)


def test_array_index_out_of_bounds(jit):
    check(jit, N.array_runtime_index, np.arange(3.0), 5, raises=IndexError)


# --------------------------------------------------------------------------------------------
# assert and raise


def test_assert_passes(jit):
    assert check(jit, P.assert_positive, 2.5) == 5.0


def test_assert_fails_with_message(jit):
    check(jit, P.assert_positive, -1.0, raises=AssertionError)
    with pytest.raises(AssertionError, match="^x must be positive$"):
        jit(P.assert_positive)(-1.0)


def test_assert_without_message(jit):
    assert check(jit, P.assert_no_message, 3) == 3
    check(jit, P.assert_no_message, 0, raises=AssertionError)


def test_assert_fstring_message(jit):
    check(jit, P.assert_fstring, -2.5, raises=AssertionError)
    check(jit, P.assert_fstring, 2.5)


def test_assert_in_loop(jit):
    check(jit, P.asserts_in_loop, 3)
    check(jit, P.asserts_in_loop, 5, raises=AssertionError)


def test_raise_value_error(jit):
    assert check(jit, P.raise_value_error, 4.0) == 2.0
    check(jit, P.raise_value_error, -1.0, raises=ValueError)
    with pytest.raises(ValueError, match="^negative input$"):
        jit(P.raise_value_error)(-1.0)


def test_raise_fstring_message(jit):
    check(jit, P.raise_fstring, 3)
    check(jit, P.raise_fstring, 12, raises=ValueError)
    check(jit, P.raise_fstring, 12.5, raises=ValueError)


@given(n=ints)
def test_raise_runtime_error(jit, n):
    check(jit, P.raise_runtime_error, n, raises=ANY)


# --------------------------------------------------------------------------------------------
# Values: int, float, bool, None


def test_return_none(jit):
    assert check(jit, P.return_none, 1) is None


def test_implicit_none(jit):
    assert check(jit, P.implicit_none, 1) is None
    assert check(jit, P.implicit_none, -1) is None


def test_return_true(jit):
    assert check(jit, P.return_true) is True


@given(i=ints, x=floats)
def test_return_bool(jit, i, x):
    check(jit, P.return_bool, i)
    check(jit, P.return_bool, x)


@given(i=ints, x=floats)
def test_return_int_and_float(jit, i, x):
    check(jit, P.return_int, i)
    check(jit, P.return_int, x)
    check(jit, P.return_float, i)
    check(jit, P.return_float, x)


@given(i=ints, x=floats)
def test_return_tuple_of_values(jit, i, x):
    check(jit, P.return_values, i)
    check(jit, P.return_values, x)


@given(i=ints)
def test_return_optional(jit, i):
    check(jit, P.optional_result, i)


@given(i=ints)
def test_int_to_float_promotion(jit, i):
    check(jit, P.int_float_promotion, i)


@given(b=st.booleans())
def test_bool_argument(jit, b):
    check(jit, P.add, b, 1)
    check(jit, P.if_truthiness, b)
    check(jit, P.not_, b)


# --------------------------------------------------------------------------------------------
# Tracebacks point at the user's source


def _line_of(func, text):
    lines, start = inspect.getsourcelines(func)
    matches = [start + i for i, line in enumerate(lines) if text in line]
    assert len(matches) == 1, (text, matches)
    return matches[0]


def _has_frame(exc, func, lineno):
    filename = os.path.realpath(inspect.getsourcefile(func))
    frames = traceback.extract_tb(exc.__traceback__)
    return any(
        os.path.exists(fs.filename) and os.path.realpath(fs.filename) == filename and fs.lineno == lineno
        for fs in frames
    ), frames


def test_traceback_raise_line(jit):
    line = _line_of(P.helper_that_raises, 'raise ValueError("boom")')
    with pytest.raises(ValueError) as info:
        jit(P.raises_in_callee)(1)
    found, frames = _has_frame(info.value, P.helper_that_raises, line)
    assert found, f"no frame at {P.__file__}:{line} in\n" + "".join(traceback.format_list(frames))


def test_traceback_operator_line(jit):
    line = _line_of(P.divides_by_argument, "q = 10 // x")
    with pytest.raises(ZeroDivisionError) as info:
        jit(P.divides_by_argument)(0)
    found, frames = _has_frame(info.value, P.divides_by_argument, line)
    assert found, f"no frame at {P.__file__}:{line} in\n" + "".join(traceback.format_list(frames))


def test_traceback_assert_line(jit):
    line = _line_of(P.asserts_in_loop, 'assert i < 3, "i too large"')
    with pytest.raises(AssertionError) as info:
        jit(P.asserts_in_loop)(5)
    found, frames = _has_frame(info.value, P.asserts_in_loop, line)
    assert found, f"no frame at {P.__file__}:{line} in\n" + "".join(traceback.format_list(frames))


# --------------------------------------------------------------------------------------------
# Public API: decorator forms, lower(), graph, source


def test_decorator_forms():
    from tests import programs_decorated as D

    assert_same(D.plain(3), 7)
    assert_same(D.plain(1.5), 4.0)
    assert_same(D.with_backend(2), 5)
    assert_same(D.with_backend(2.0), 5.0)
    assert_same(D.with_backend(x=2), 5)


def test_lower_graph_and_source(compiled):
    lowered = compiled(P.nested_def).lower(2.0)
    graph = lowered.graph("parsed")
    text = str(graph)
    assert text.strip()
    assert "nested_def" in text
    stats = graph.stats()
    assert {"graphs", "applies", "closures", "primitives"} <= set(stats)
    assert isinstance(stats["primitives"], collections.Counter)
    assert stats["graphs"] >= 2  # nested_def and inner
    assert stats["applies"] >= 1
    assert isinstance(lowered.source, str)
    compile(lowered.source, "<myir generated>", "exec")


def test_lower_does_not_run(compiled):
    # lowering a signature whose call would raise must not raise
    lowered = compiled(P.raise_value_error).lower(-1.0)
    assert isinstance(lowered.source, str)


# --------------------------------------------------------------------------------------------
# pow, round, divmod, reversed


@given(x=unit_floats, i=small_ints)
def test_builtin_pow(jit, x, i):
    check(jit, P.builtin_pow, x, i, raises=ANY)     # 0.0 ** -1 raises ZeroDivisionError
    check(jit, P.builtin_pow, i, 2)
    check(jit, P.builtin_pow, abs(x), 0.5)


@given(x=floats, i=ints)
@example(x=2.5, i=0)
@example(x=-0.5, i=15)
def test_builtin_round(jit, x, i):
    check(jit, P.builtin_round, x)
    check(jit, P.builtin_round, i)
    check(jit, P.builtin_round, np.float64(x))


def test_builtin_round_of_nan_and_inf_raises_like_cpython(jit):
    check(jit, P.builtin_round, math.nan, raises=ValueError)
    check(jit, P.builtin_round, math.inf, raises=OverflowError)


@given(x=floats, y=floats, i=ints, j=small_ints)
def test_builtin_divmod(jit, x, y, i, j):
    check(jit, P.builtin_divmod, x, y, raises=ANY)  # by 0: ZeroDivisionError
    check(jit, P.builtin_divmod, i, j, raises=ANY)
    check(jit, P.builtin_divmod, np.array([x, i]), 3.5)


@given(n=small_ints.map(lambda k: k * 3), t=int_tuples, x=vectors(min_side=0))
def test_for_reversed(jit, n, t, x):
    check(jit, P.for_reversed_range, n)
    check(jit, P.for_reversed_tuple, t)
    check(jit, P.for_reversed_array, x)


def test_reversed_of_zip_is_refused_where_cpython_raises():
    with pytest.raises(myir.MyirError, match="'zip' object is not reversible") as e:
        myir.compile(P.for_reversed_zip)((1, 2), (3, 4))
    assert "programs_constructs.py" in str(e.value)
    with pytest.raises(TypeError, match="not reversible"):
        P.for_reversed_zip((1, 2), (3, 4))


def test_reversed_outside_a_for_loop_is_refused():
    with pytest.raises(myir.MyirError, match="can only be used as the iterable of a `for` loop"):
        myir.compile(P.reversed_outside_for)((1, 2))


def test_a_constant_tuple_whose_first_item_is_negative_stays_one_argument(jit):
    check(jit, P.negative_first_tuple_constant, 2.5)
    check(jit, P.negative_first_tuple_constant, -1)
