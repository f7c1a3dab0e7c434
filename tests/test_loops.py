"""Loops that were miscompiled, failed to differentiate or never finished compiling
(subjects in tests/programs_loops.py), on every backend and as saved programs (the
`compiled` fixture, tests/programs_check.py), and the tracebacks of errors raised inside
loops.  Reference derivatives are derived by hand or are central finite differences
(`numerical_grad`) in float64."""

import inspect
import linecache
import math
import signal
import sys
import traceback
import types

import pytest

import myir
from tests import programs_constructs as C
from tests import programs_loops as L
from tests.programs_check import check, compiled  # noqa: F401
from tests.test_constructs import _line_of
from tests.test_grad_primitives import assert_grads_close, numerical_grad

BACKENDS = ["python", "tvm"]
HANG_S = 300   # a loop that never ends fails the test instead of hanging the suite


@pytest.fixture(autouse=True)
def no_hang():
    def alarm(signum, frame):
        raise TimeoutError(f"still running after {HANG_S} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(HANG_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("args", [((2, 0, 0), -1.0, False), ((2, 0, 0), -1.0, True),
                                  ((1, 5, 3), 2.0, False)])
def test_loop_copied_into_a_branch_of_an_enclosing_loop(compiled, args):
    """The optimizer leaves a copy of the `while` loop in a branch of the `for` loop's body;
    the copy's exit must leave the `for` loop's iteration too, not only the copy."""
    check(compiled, L.main, *args)


def sin_loop_derivatives(x, n):
    """The first three derivatives of sin applied n times, by the chain rule."""
    r, d1, d2, d3 = x, 1.0, 0.0, 0.0
    for _ in range(n):
        s, c = math.sin(r), math.cos(r)
        d1, d2, d3 = (c * d1, -s * d1 ** 2 + c * d2,
                      -c * d1 ** 3 - 3 * s * d1 * d2 + c * d3)
        r = s
    return d1, d2, d3


@pytest.mark.parametrize("n", [0, 1, 3, 6])
def test_higher_derivatives_through_for_range(compiled, n):
    for x in (0.5, -1.3):
        d1, d2, d3 = sin_loop_derivatives(x, n)
        assert compiled(L.d_sin_loop)(x, n) == pytest.approx(d1, rel=1e-12, abs=1e-15)
        assert compiled(L.dd_sin_loop)(x, n) == pytest.approx(d2, rel=1e-12, abs=1e-15)
        assert compiled(L.ddd_sin_loop)(x, n) == pytest.approx(d3, rel=1e-12, abs=1e-15)
        assert compiled(L.dd_sin_loop)(x, n) == pytest.approx(
            numerical_grad(compiled(L.d_sin_loop), (x, n), 0), rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_of_grad_through_for_range_outside_compiled_code(backend):
    dd = myir.grad(myir.grad(L.sin_loop, "x"), "x", backend=backend)
    for x, n in ((0.5, 3), (2.0, 5)):
        assert dd(x, n) == pytest.approx(sin_loop_derivatives(x, n)[1], rel=1e-12)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_gradient_of_a_loop_calling_a_closure(compiled, n):
    """The loop's body calls a closure that captures `x`: the loop is lifted (its free
    variables become parameters) but `x` stays the closure's."""
    for x in (0.7, -1.2):
        assert compiled(L.d_closure_in_loop)(x, n) == pytest.approx(
            n * x ** (n - 1) if n else 0.0, rel=1e-12)
        d = myir.grad(L.closure_in_while, backend="python")
        assert compiled(L.dd_closure_in_while)(x, n) == pytest.approx(
            numerical_grad(d, (x, n), 0), rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f, points", [
    (L.closure_in_loop, [(0.7, 3), (-1.2, 5)]),
    (L.closure_in_while, [(0.7, 3), (-1.2, 5)]),
    (L.return_in_loop, [(0.3, 5), (0.9, 4), (2.0, 0)]),
    (L.return_before_assignment, [(1.5, 2), (0.5, 2), (0.9, 3)]),
    (L.return_in_nested_loops, [(0.3, 5), (1.1, 3), (0.1, 1)]),
    (L.return_in_nested_whiles, [(0.3, 4), (1.5, 3), (0.2, 1)]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_gradients_of_loops_match_finite_differences(backend, f, points):
    gradient = myir.grad(f, 0, backend=backend)
    for args in points:
        assert_grads_close(gradient(*args), numerical_grad(f, args, 0),
                           where=f"grad of {f.__name__}{args}")


def unread_counter_derivative(x, limit):
    """d/dx of `break_at_end_unread_counter`, by hand: r_{k+1} = a r_k + b x for the N
    steps it takes (a step of x big enough for finite differences changes N)."""
    a, b, r, n = 1.00001, 1e-6, x, 0
    while True:
        r, n = a * r + b * x, n + 1
        if r > limit:
            return a ** n + b * (a ** n - 1) / (a - 1)


def continue_derivative(x, n):
    """d/dx of `continue_reading_the_target`: the product of its steps' derivatives."""
    r, d = x, 1.0
    for i in range(n):
        if i % 3:
            r, d = r + 1e-6 * math.cos(r), d * (1.0 - 1e-6 * math.sin(r))
    return d


@pytest.mark.parametrize("f, args, derivative", [
    (L.break_at_end_unread_counter, (1.5, 4.0), unread_counter_derivative),  # 98,000 steps
    (L.continue_reading_the_target, (0.5, 100_000), continue_derivative),
], ids=lambda v: getattr(v, "__name__", ""))
def test_deep_loops_run_in_constant_stack(compiled, f, args, derivative):
    """Compiled, and differentiated, at CPython's default recursion limit: neither the loop
    nor its gradient's forward and backward loops recurse."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        value = compiled(f)(*args)
        gradient = compiled(myir.grad(f))(*args)
    finally:
        sys.setrecursionlimit(limit)
    assert value == f(*args)
    assert gradient == pytest.approx(derivative(*args), rel=1e-9)


@pytest.mark.parametrize("f, points", [
    (L.for_else, [(0.5, (1.0, 3.0)), (0.5, (1.0, 1.5)), (0.7, ())]),
    (L.while_else_in_for, [(0.3, 6), (0.9, 6), (0.01, 3), (0.5, 0)]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_loop_else(compiled, f, points):
    for args in points:
        check(compiled, f, *args)
        assert_grads_close(compiled(myir.grad(f))(*args), numerical_grad(f, args, 0),
                           where=f"grad of {f.__name__}{args}")


@pytest.mark.parametrize("f", [L.default_is_the_target, L.default_computed_from_x],
                         ids=lambda f: f.__name__)
def test_closures_with_defaults_made_in_a_loop(compiled, f):
    for args in ((0.7, 4), (-1.3, 3), (0.7, 0)):
        check(compiled, f, *args)
        assert_grads_close(compiled(myir.grad(f))(*args), numerical_grad(f, args, 0),
                           where=f"grad of {f.__name__}{args}")


@pytest.mark.parametrize("f, args, error, text", [
    (L.sqrt_in_loop, (1.5, 4), ValueError, "math.sqrt(x - i)"),
    (L.divides_in_while, (1.5, 3), ZeroDivisionError, "1.0 / (n - i)"),
    (L.assigned_in_the_loop_only, (1.5, 0), UnboundLocalError, "return y"),
    (L.unpacks_a_list_of_the_loops_length, (1.5, 3), ValueError, "a, b = xs"),
])
@pytest.mark.parametrize("transform", ["compile", "grad"])
def test_error_in_a_loop_points_at_its_line(compiled, f, args, error, text, transform):
    """The traceback's innermost frame is the offending line of the user's file, and no frame
    names a line that file does not have."""
    with pytest.raises(error):
        f(*args)
    with pytest.raises(error) as info:
        compiled(myir.grad(f) if transform == "grad" else f)(*args)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].filename == L.__file__, traceback.format_list(frames)
    assert frames[-1].lineno == _line_of(f, text), traceback.format_list(frames)
    length = len(linecache.getlines(L.__file__))
    assert all(1 <= fr.lineno <= length for fr in frames if fr.filename == L.__file__), \
        traceback.format_list(frames)


@pytest.mark.parametrize("f, text", [(C.for_tuple, "for v in t"),
                                     (L.comprehension_over_a_float, "for a in x]")])
@pytest.mark.parametrize("transform", ["compile", "grad"])
def test_iterating_over_a_number_is_cpythons_type_error(compiled, f, text, transform):
    """`for a in x` with a float x: CPython's message, located at the loop's line when
    compiling, rather than the failure of the `len()` the loop takes of x."""
    with pytest.raises(TypeError, match="^'float' object is not iterable$"):
        f(0.5)
    with pytest.raises(myir.MyirTypeError) as info:
        compiled(myir.grad(f) if transform == "grad" else f)(0.5)
    assert info.value.message == "'float' object is not iterable" and info.value.hint
    assert info.value.location.line == _line_of(f, text)
    assert info.value.location.filename == inspect.getsourcefile(f)


def _function_codes(code):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _function_codes(const)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [
    lambda b: myir.compile(L.main, backend=b).lower((2, 0, 0), -1.0, False),
    lambda b: myir.grad(L.closure_in_loop, backend=b).lower(0.5, 3),
    lambda b: myir.grad(myir.grad(L.sin_loop), backend=b).lower(0.5, 3),
    lambda b: myir.compile(L.dd_closure_in_while, backend=b, optimize=False).lower(0.5, 3),
], ids=["miscompiled", "closure", "grad_of_grad", "unoptimized"])
def test_generated_code_names_only_lines_its_files_have(backend, make):
    """Every instruction of the generated functions maps to a line of the file its code
    object names: the user's file, or the generated source, registered with linecache."""
    lowered = make(backend)
    for code in _function_codes(lowered.code):
        length = len(linecache.getlines(code.co_filename))
        assert length, code.co_filename
        lines = {line for _, _, line in code.co_lines() if line is not None}
        assert all(1 <= line <= length for line in lines), \
            (code.co_name, code.co_filename, sorted(lines), length)
