"""A computation whose result is unused still raises what CPython raises (passes/raising.py).

Compiled functions and their gradients on every backend of MYIR_TEST_BACKENDS: an unused
`1 / x`, `math.log(x)`, `x ** 3`, ... raises exactly (type and message) where CPython does,
in straight-line code, branches, loops and closures; a gradient raises what its forward
raises, before anything the gradient itself would raise; unused array arithmetic, which
numpy does not raise for, is still not run.  With `fastmath=True` the arithmetic checks go.
The table's typed answers are checked against numpy and CPython directly.
"""

import itertools
import math
import os

import numpy as np
import pytest

import myir
from passes.abstract import AArray, AScalar, ATuple
from passes.raising import may_raise
from tests.programs_check import ANY, DEFAULT_BACKENDS, Raised, assert_same, check, jit, run  # noqa: F401

BACKENDS = [b.strip() for b in os.environ.get("MYIR_TEST_BACKENDS", DEFAULT_BACKENDS).split(",")
            if b.strip() in ("python", "tvm")] or ["python"]


def log_of(x):
    return math.log(x)


def unused_division(x):
    unused = 1 / x
    return x + 1.0


def unused_constant_division(x):
    unused = 1 / 0
    return x * 2.0


def unused_log_in_expression(x):
    unused = math.log(x) + 1.0
    return x * x


def unused_in_branch(x):
    y = x * 3.0
    if x < 10.0:
        unused = math.sqrt(x)
        y = y + 1.0
    return y


def unused_in_loop(x, n):
    s = 0.0
    for i in range(n):
        unused = 1.0 / (x - i)
        s = s + x * i
    return s


def unused_in_branch_that_returns(x):
    if x > 0.0:
        unused = math.log(x - 1.0)
        return x * 2.0
    y = x * x
    return y


def unused_in_loop_with_continue(x, n):
    s = 0.0
    for i in range(n):
        if i % 2 == 0:
            unused = math.sqrt(x - i)
            continue
        s = s + x
    return s


def rebound_before_use(x):
    y = math.acos(x)
    y = x * 2.0
    return y


def unused_in_closure(x):
    def inner(y):
        unused = math.log(y)
        return y * y
    return inner(x) + x


def unused_power(x):
    unused = x ** 3
    return x * 2.0


def unused_zero_power(x):
    unused = x ** -1
    return x + 1.0


def unused_exp(x):
    unused = math.exp(x)
    return x - 1.0


def unused_int_of(x):
    unused = int(x)
    return x * 0.5


def unused_index(t, i):
    unused = t[i]
    return t[0] * 2.0


def division_before_log(x):
    unused = 1 / x
    return math.log(x)


def augmented_then_unused(x, k):
    k %= 3                      # the optimizer rewrites the update as a new `k % 3`
    unused = 2.5 // k
    unused2 = math.log(x)
    return k + x


def loop_then_log(x, k):
    n = 0
    while n < 2:
        n += 1                  # made into `n + 1` by the optimizer
        z = 3 % (k + n)
    return math.log(x) + z


def unused_then_loop(x, k):
    unused = math.sqrt(x)
    n = 0
    while n < 2:
        n += 1
        z = 3 % (k + n)
    return x + z


def unused_read_after_loop(x):
    while x < 1.0:
        x = x * 2.0 + 0.25
    unused = 1.0 / (x - 1.25) if x > 0.0 else 43.0   # reads the loop's result, returned
    return x


def log_then_division(x):
    return math.log(x) + 1.0 / x


def sqrt_of(x):
    return math.sqrt(x) * 2.0


def power_of(x):
    return x ** 3 + x


def acos_in_branch(x):
    if x > 0.0:
        return math.acos(x) * x
    return x * x


def unused_array_arithmetic(a, b):
    unused = np.log(a) / b
    return np.sum(a * b)


CASES = [
    (unused_division, [(0.0,), (2.0,), (-0.0,)]),
    (unused_constant_division, [(1.0,)]),
    (unused_log_in_expression, [(-1.0,), (0.0,), (3.0,), (math.nan,)]),
    (unused_in_branch, [(-4.0,), (4.0,), (20.0,)]),
    (unused_in_loop, [(1.0, 3), (1.0, 1), (5.0, 3), (0.0, 0)]),
    (rebound_before_use, [(2.0,), (0.5,), (-0.5,)]),
    (unused_in_branch_that_returns, [(0.5,), (3.0,), (-2.0,)]),
    (unused_in_loop_with_continue, [(1.0, 4), (5.0, 4), (1.0, 1)]),
    (unused_in_closure, [(-2.0,), (2.0,)]),
    (unused_power, [(1e103,), (2.0,), (-1e200,), (0.0,)]),
    (unused_zero_power, [(0.0,), (2.0,)]),
    (unused_exp, [(1000.0,), (709.5,), (1.0,), (-1e308,)]),
    (unused_int_of, [(math.nan,), (math.inf,), (2.5,)]),
    (unused_index, [((1.0, 2.0), 5), ((1.0, 2.0), 1), ((1.0, 2.0), -3)]),
    (division_before_log, [(0.0,), (-1.0,), (1.0,)]),
    (augmented_then_unused, [(-1.0, 3), (-1.0, 4), (2.0, 3)]),
    (loop_then_log, [(-1.0, -1), (-1.0, 1), (2.0, 1)]),
    (unused_then_loop, [(-1.0, -1), (4.0, -1), (4.0, 1)]),
    (unused_read_after_loop, [(0.5,), (0.1,), (2.0,), (1.25,)]),
]


@pytest.mark.parametrize("fn, inputs", CASES, ids=[f.__name__ for f, _ in CASES])
def test_unused_computation_raises_as_cpython(jit, fn, inputs):  # noqa: F811
    for args in inputs:
        check(jit, fn, *args, raises=ANY)


GRAD_CASES = CASES + [
    (log_of, [(-1.0,), (0.0,), (2.0,)]),
    (log_then_division, [(0.0,), (-2.0,), (2.0,)]),
    (sqrt_of, [(-1.0,), (4.0,)]),
    (power_of, [(1e103,), (2.0,)]),
    (acos_in_branch, [(2.0,), (0.5,), (-3.0,)]),
]


def _float_args(args):
    return all(isinstance(a, float) for a in args)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, inputs", GRAD_CASES, ids=[f.__name__ for f, _ in GRAD_CASES])
def test_gradient_raises_what_its_forward_raises(backend, fn, inputs):
    """Where f raises, grad(f) raises the same (type and message); elsewhere it returns a
    gradient equal to a central finite difference."""
    g = myir.grad(fn, backend=backend)
    for args in inputs:
        if not isinstance(args[0], float):
            continue
        want = run(fn, args, {}).result
        got = run(g, args, {}).result
        if isinstance(want, Raised):
            assert_same(got, want, f"grad of {fn.__name__}{args}")
            continue
        assert not isinstance(got, Raised), f"grad of {fn.__name__}{args}: {got!r}"
        x, rest = args[0], args[1:]
        h = 1e-6 * max(1.0, abs(x))
        fd = (fn(x + h, *rest) - fn(x - h, *rest)) / (2 * h)
        assert type(got) is float, got
        assert abs(got - fd) <= 1e-5 * max(1.0, abs(fd)) or math.isnan(got) == math.isnan(fd) \
            == math.isnan(x), (got, fd)


@pytest.mark.parametrize("backend", BACKENDS)
def test_issue_repros(backend):
    """grad of math.log at -1.0 raises CPython's ValueError; `unused = 1 / 0` raises
    ZeroDivisionError compiled and under grad."""
    with pytest.raises(ValueError, match="math domain error"):
        myir.grad(log_of, backend=backend)(-1.0)
    for f in (myir.compile(unused_constant_division, backend=backend),
              myir.grad(unused_constant_division, backend=backend)):
        with pytest.raises(ZeroDivisionError, match="division by zero"):
            f(1.0)


def test_the_forward_raises_first():
    """log(0.0) raises ValueError in the forward; the gradient's 1 / x would raise
    ZeroDivisionError, but comes later."""
    for backend in BACKENDS:
        with pytest.raises(ValueError, match="math domain error"):
            myir.grad(log_of, backend=backend)(0.0)


def test_a_kept_check_costs_one_comparison():
    """The unused forward `math.log(x)` of the gradient is a guarded statement: the
    operation runs only where the guard fails."""
    source = myir.grad(log_of, backend="python").lower(2.0).source
    assert "if not (x > 0): " in source, source
    source = myir.compile(unused_division, backend="python").lower(2.0).source
    assert "if not (x): 1 / x" in source, source


def test_unused_array_arithmetic_is_not_run():
    """numpy returns nan or inf rather than raising: unused array arithmetic goes."""
    a, b = np.array([1.0, -1.0, 0.0]), np.array([0.0, 2.0, 3.0])
    for backend in BACKENDS:
        f = myir.compile(unused_array_arithmetic, backend=backend)
        lowered = f.lower(a, b)
        assert "log" not in lowered.source and "/" not in lowered.source, lowered.source
        with np.errstate(all="ignore"):
            assert f(a, b) == unused_array_arithmetic(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fastmath_drops_arithmetic_checks(backend):
    """fastmath assumes no arithmetic raises (README): the unused division and the
    gradient's forward log are not run."""
    f = myir.compile(unused_division, backend=backend, fastmath=True)
    assert f(0.0) == 1.0
    g = myir.compile(myir.grad(log_of), backend=backend, fastmath=True)
    assert g(-1.0) == -1.0
    # an explicit check stays: fastmath only drops what is kept for arithmetic exceptions
    h = myir.compile(unused_index, backend=backend, fastmath=True)
    with pytest.raises(IndexError):
        h((1.0, 2.0), 5)


# --------------------------------------------------------------------------------------------
# The table against CPython and numpy

F64, I, B = AScalar(float), AScalar(int), AScalar(bool)
NF64, NI64 = AScalar(np.float64), AScalar(np.int64)
A3, IA3 = AArray(np.dtype("float64"), (3,)), AArray(np.dtype("int64"), (3,))


def _raises(f, *args) -> bool:
    with np.errstate(all="ignore"):
        try:
            f(*args)
        except Exception:  # noqa: BLE001 - any exception counts
            return True
    return False


# (primitive, operand types, result type, values of those types on which CPython or numpy
# raises, or None where no value does)
TABLE = [
    ("truediv", [F64, F64], F64, (1.0, 0.0), lambda x, y: x / y),
    ("truediv", [A3, A3], A3, None, lambda x, y: x / y),
    ("truediv", [NF64, F64], NF64, None, lambda x, y: x / y),
    ("floordiv", [I, I], I, (1, 0), lambda x, y: x // y),
    ("floordiv", [IA3, IA3], IA3, None, lambda x, y: x // y),
    ("mod", [F64, F64], F64, (1.0, 0.0), lambda x, y: x % y),
    ("pow", [F64, F64], F64, (0.0, -1.0), lambda x, y: x ** y),
    ("pow", [F64, F64], F64, (10.0, 400.0), lambda x, y: x ** y),
    ("pow", [A3, F64], A3, None, lambda x, y: x ** y),
    ("pow", [IA3, I], IA3, (np.array([2, 3, 4]), -1), lambda x, y: x ** y),
    ("power", [IA3, IA3], IA3, (np.array([2]), np.array([-1])), np.power),
    ("lshift", [I, I], I, (1, -1), lambda x, y: x << y),
    ("math_log", [F64], F64, (0.0,), math.log),
    ("math_sqrt", [NF64], F64, (np.float64(-1.0),), math.sqrt),
    ("math_sin", [F64], F64, (math.inf,), math.sin),
    ("math_exp", [F64], F64, (1000.0,), math.exp),
    ("math_floor", [F64], I, (math.nan,), math.floor),
    ("math_atan", [F64], F64, None, math.atan),
    ("math_atan", [I], F64, (10 ** 400,), math.atan),
    ("math_tanh", [F64], F64, None, math.tanh),
    ("to_int", [F64], I, (math.nan,), int),
    ("to_int", [B], I, None, int),
    ("to_float", [I], F64, (10 ** 400,), float),
    ("mul", [NF64, I], NF64, (np.float64(1.0), 10 ** 400), lambda x, y: x * y),
    ("mul", [F64, F64], F64, None, lambda x, y: x * y),
    ("add", [I, I], I, None, lambda x, y: x + y),
    ("getitem", [ATuple((F64, F64)), I], F64, ((1.0, 2.0), 2), lambda t, i: t[i]),
    ("getitem", [ATuple((F64, F64)), AScalar(int, 1)], F64, None, lambda t, i: t[i]),
    ("truth", [A3], B, (np.zeros(3),), bool),
    ("max", [AArray(np.dtype("float64"), (0,))], F64, (np.zeros(0),), np.max),
    ("max", [A3], F64, None, np.max),
    ("exp", [A3], A3, None, np.exp),
    ("cast", [I], NI64, (10 ** 30,), np.int64),
]


@pytest.mark.parametrize("name, args, out, raising, f", TABLE,
                         ids=[f"{r[0]}-{i}" for i, r in enumerate(TABLE)])
def test_may_raise_agrees_with_python(name, args, out, raising, f):
    """may_raise says yes where an example raises, no where the table claims none can
    (then a sample of values, special ones included, must not raise)."""
    if raising is not None:
        assert _raises(f, *raising), f"the example {raising} does not raise"
        assert may_raise(name, args, out)
        return
    assert not may_raise(name, args, out)
    samples = {float: [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 1e308],
               int: [0, 1, -1, 7], bool: [True, False],
               np.float64: [np.float64(0.0), np.float64(-1.0), np.float64(np.inf)]}
    def values(t):
        if isinstance(t, AArray):
            base = [0.0, -1.0, np.inf] if t.dtype.kind == "f" else [0, -1, 2]
            return [np.array([v] * t.shape[0], dtype=t.dtype) for v in base]
        if isinstance(t, ATuple):
            return [(1.0, 2.0)]
        if t.known:
            return [t.value]
        return samples[t.pytype]
    for combo in itertools.product(*map(values, args)):
        assert not _raises(f, *combo), combo


def test_unknown_operands_can_raise():
    assert may_raise("add", [AArray(np.dtype("float64"), (None,)), A3], A3)
    assert may_raise("exp", [None], None)
    assert may_raise(None, [F64], F64)  # a call of a graph
