"""Gradients of loops, which the J transform turns into a forward loop pushing each
iteration's adjoint onto a residual stack and a backward loop popping it (passes/ad.py).

Every loop shape the frontend parses (`while`, `for` over ranges, arrays, `zip` and
`enumerate`, `break`, `continue`, early `return`, nested loops, loops in branches and in
closures) against central finite differences of the uncompiled function in float64, or a
hand-derived formula; deep loops (no Python recursion: the default recursion limit is
enough), higher derivatives, a saved program run by a second process, and the stack's
runtime helpers.  Each backend of `MYIR_TEST_BACKENDS` compiles every case.
"""

from __future__ import annotations

import math
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import myir
from backends.python.impls import gadd, grad_zeros
from bench.workloads.programs import pow_loop
from myir.ir.values import EMPTY_STACK, stack_push
from tests.programs_check import DEFAULT_BACKENDS
from tests.test_grad_primitives import assert_grads_close, numerical_grad

BACKENDS = [b.strip() for b in os.environ.get("MYIR_TEST_BACKENDS", DEFAULT_BACKENDS).split(",")
            if b.strip() and b.strip() != "saved"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return None if request.param == "default" else request.param


def check(f, args, wrt, backend):
    """myir.grad(f, *wrt) against central differences, for each position in `wrt`."""
    got = myir.grad(f, *wrt, backend=backend)(*args)
    want = tuple(numerical_grad(f, args, i) for i in wrt)
    assert_grads_close(got, want[0] if len(wrt) == 1 else want)
    return got


def check_next_order(lower, args, backend):
    """myir.grad(lower) against central differences of `lower`, compiled (a derivative)."""
    assert_grads_close(myir.compile(myir.grad(lower), backend=backend)(*args),
                       numerical_grad(myir.compile(lower, backend=backend), args, 0))


# ------------------------------------------------------------------------------ subjects


def sin_for_range(x, n):
    r = x
    for i in range(n):
        r = math.sin(r) + 0.1 * i * x
    return r


def over_array(x, xs):
    r = x
    for a in xs:
        r = r * a + x
    return r


def over_zip_enumerate(x, xs, ys):
    r = 0.0
    for i, (a, b) in enumerate(zip(xs, ys)):
        r = r + a * b * x * i + r * x * 0.5
    return r


def with_break(x, xs):
    r = x
    for a in xs:
        if a > 2.0:
            break
        r = r * a + math.sin(x)
    return r


def with_continue(x):
    r = 0.0
    k = 0
    while k < 10:
        k = k + 1
        if k % 3 == 0:
            continue
        r = r + x ** k / k
    return r


def early_return(x, xs):
    r = x
    for a in xs:
        if r > 10.0:
            return r * 2.0
        r = r * a + x
    return r


def if_else_in_body(x, n):
    r = x
    i = 0
    while i < n:
        if r > 1.0:
            r = r * 0.5 + x
        else:
            r = r * r + 0.25
        r = r + 0.1 * x
        i = i + 1
    return r


def nested(x, n):
    r = x
    i = 0
    while i < n:
        j = 0
        while j < i + 1:
            r = r * x * 0.5 + math.sin(r)
            j = j + 1
        i = i + 1
    return r


def loop_in_branch(x, n):
    if x > 0.0:
        r = x
        for i in range(n):
            r = r * x
        return r
    return -x


def loop_in_closure(x, n):
    def power(y):
        r = y
        i = 0
        while i < n:
            r = r * x + y
            i = i + 1
        return r
    return power(x) + power(2.0 * x)


def wrapped(h, x):
    return lambda t: math.sin(h(t)) * x + t


def composed_in_a_loop(x, n):
    g = math.sin
    i = 0
    while i < n:
        g = wrapped(g, x)
        i = i + 1
    return g(x)


def swapped_in_a_loop(x, n):
    f, g = math.sin, math.cos
    r = x
    for _ in range(n):
        r = f(r) * g(x) + r * 0.5
        f, g = g, f
    return r


def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


def euler(x):
    y = x
    t = 0.0
    h = 1e-5
    while t < 1.0:
        y = y + h * y
        t = t + h
    return y


# ------------------------------------------------------------------------------ first order

XS = np.array([1.5, 0.5, 1.2, 2.5, 0.7])
YS = np.array([0.3, -1.0, 2.0, 0.5, 1.1])


@pytest.mark.parametrize("n", [0, 1, 7])
def test_while(backend, n):
    assert myir.grad(pow_loop, "x", backend=backend)(1.3, n) == \
        pytest.approx(n * 1.3 ** (n - 1) if n else 0.0, rel=1e-12)


@pytest.mark.parametrize("f, args, wrt", [
    (sin_for_range, (0.7, 6), (0,)),
    (over_array, (0.8, XS), (0, 1)),
    (over_zip_enumerate, (0.9, XS, YS), (0, 1, 2)),
    (with_break, (0.6, XS), (0, 1)),
    (with_continue, (1.1,), (0,)),
    (early_return, (0.9, XS), (0,)),
    (early_return, (3.0, XS), (0, 1)),
    (if_else_in_body, (0.7, 9), (0,)),
    (nested, (0.8, 4), (0,)),
    (loop_in_branch, (1.2, 5), (0,)),
    (loop_in_branch, (-1.2, 5), (0,)),
    (loop_in_closure, (0.9, 4), (0,)),
    (newton_sqrt, (2.0,), (0,)),
    (newton_sqrt, (30.0,), (0,)),
], ids=lambda v: getattr(v, "__name__", None))
def test_loop_shapes_against_finite_differences(backend, f, args, wrt):
    check(f, args, wrt, backend)


@pytest.mark.parametrize("f", [composed_in_a_loop, swapped_in_a_loop],
                         ids=lambda v: v.__name__)
@pytest.mark.parametrize("n", [0, 1, 4])
def test_a_loop_carrying_a_function_that_starts_as_a_constant(backend, f, n):
    """The loop's first iteration takes `math.sin`, a constant, and the next ones the
    closures wrapping it, or `math.cos`: the optimizer must not specialise the loop on
    the first one."""
    assert myir.compile(f, backend=backend)(0.6, n) == f(0.6, n)
    check(f, (0.6, n), (0,), backend)
    check_next_order(f, (0.6, n), backend)


def test_with_continue_by_hand(backend):
    want = sum(1.1 ** (k - 1) for k in range(1, 11) if k % 3)
    assert myir.grad(with_continue, backend=backend)(1.1) == pytest.approx(want, rel=1e-12)


def test_100000_iterations(backend):
    """No Python recursion in either loop: CPython's default limit is far below the trip
    count, and the process runs at whatever limit it had."""
    got = myir.grad(pow_loop, "x", backend=backend)(1.000001, 100_000)
    assert got == pytest.approx(100_000 * 1.000001 ** 99_999, rel=1e-9)
    trips = 0
    t = 0.0
    while t < 1.0:  # the trip count, as CPython computes it
        t += 1e-5
        trips += 1
    assert myir.grad(euler, backend=backend)(0.5) == pytest.approx((1 + 1e-5) ** trips,
                                                                     rel=1e-9)


# ------------------------------------------------------------------------------ higher order


def test_second_and_third_order(backend):
    """J's output is several times the size of its input, most of it gone once optimized:
    the third derivative differentiates the optimized second (passes/expand.py), so the
    program handed to the optimizer stays near the size of its result (J of the raw second
    derivative is 7,300 operations; optimized and typed, 2,900)."""
    dd = myir.compile(myir.grad(myir.grad(pow_loop, "x"), "x"), backend=backend)
    ddd = myir.compile(myir.grad(myir.grad(myir.grad(pow_loop, "x"), "x"), "x"),
                       backend=backend)
    assert ddd.lower(1.3, 5).stages["expanded"].stats()["applies"] < 2500
    for x, n in ((1.3, 5), (0.7, 4)):
        assert dd(x, n) == pytest.approx(n * (n - 1) * x ** (n - 2), rel=1e-10)
        assert ddd(x, n) == pytest.approx(n * (n - 1) * (n - 2) * x ** (n - 3), rel=1e-10)


def test_second_order_through_a_data_dependent_loop(backend):
    dd = myir.compile(myir.grad(myir.grad(newton_sqrt)), backend=backend)
    assert dd(2.0) == pytest.approx(-0.25 * 2.0 ** -1.5, rel=1e-8)
    ddd = myir.compile(myir.grad(myir.grad(myir.grad(newton_sqrt))), backend=backend)
    assert ddd(2.0) == pytest.approx(0.375 * 2.0 ** -2.5, rel=1e-8)


@pytest.mark.parametrize("f, args", [
    (if_else_in_body, (0.7, 9)),
    (with_break, (0.6, XS)),
    (with_continue, (1.1,)),
    (early_return, (0.9, XS)),
    (nested, (0.8, 4)),
    (sin_for_range, (0.7, 6)),
], ids=lambda v: getattr(v, "__name__", None))
def test_second_order_against_finite_differences_of_the_first(backend, f, args):
    check_next_order(myir.grad(f), args, backend)


def test_third_order_against_finite_differences_of_the_second(backend):
    check_next_order(myir.grad(myir.grad(if_else_in_body)), (0.7, 9), backend)


def test_second_order_through_100000_iterations(backend):
    """The gradient of a gradient's loops is loops: it runs at CPython's default recursion
    limit (compiling may raise the limit: the program runs under the one it had before)."""
    dd = myir.compile(myir.grad(myir.grad(pow_loop, "x"), "x"), backend=backend)
    dd(1.1, 3)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        got = dd(1.000001, 100_000)
    finally:
        sys.setrecursionlimit(limit)
    assert got == pytest.approx(100_000 * 99_999 * 1.000001 ** 99_998, rel=1e-9)


# ------------------------------------------------------------------------------ several paths


def continue_every_third(x, n):
    r = 0.0
    i = 0
    while i < n:
        i += 1
        if i % 3 == 0:
            continue
        r = r * 0.9 + 0.1 * math.sin(r * x + i)
    return r


def if_joins(x, n):
    r = 0.5
    i = 0
    while i < n:
        i += 1
        if i % 3 == 0:
            r = r * x
        else:
            r = r + 0.1 * math.sin(r * x + i)
    return r


def nested_ifs(x, n):
    r = 0.5
    i = 0
    while i < n:
        i += 1
        if i % 3 == 0:
            if i % 2 == 0:
                continue
            r = r * x
        elif r > 1.0:
            r = r * 0.5 + math.cos(x * r)
        r = r + 0.1 * math.sin(r * x + i)
    return r


def break_in_if(x, n):
    r = x
    for i in range(n):
        if r > 3.0:
            break
        if i % 2 == 0:
            r = r * x + 0.1
        else:
            r = r + math.sin(r)
    return r


def if_over_array(x, xs):
    r = x
    for a in xs:
        if a > 1.0:
            r = r * a
        else:
            r = r + a * math.sin(r * x)
    return r


def return_from_if(x, xs):
    r = x
    for a in xs:
        if r * a > 5.0:
            return r * 2.0 + a
        if a < 1.0:
            r = r * a + x
        else:
            r = r + a
    return r


def five_ifs(x, n):
    r = 0.5
    i = 0
    while i < n:
        i += 1
        if i % 2 == 0:
            r = r * x
        if i % 3 == 0:
            r = r + x
        if i % 5 == 0:
            r = r * 0.5
        if i % 7 == 0:
            r = r - x
        if i % 11 == 0:
            r = r * 0.25
        r = math.sin(r)
    return r


def value_if_then_continue(x, n):
    """The rest of the body after the `if` of a value is copied for each branch; the choice
    of the later `if`'s branch, which does not read that value, goes with each copy."""
    r = 0.5
    i = 0
    while i < n:
        i += 1
        r = r + x * r / (r if r > 1.0 else 2.0)
        if i % 3 == 0:
            r = r * 0.9
            continue
        r = math.sin(r)
    return r


def continue_every_third_tangent(x, n):
    """d continue_every_third / dx, in forward mode by hand."""
    r, dr = 0.0, 0.0
    i = 0
    while i < n:
        i += 1
        if i % 3 == 0:
            continue
        a, da = r * x + i, dr * x + r
        r, dr = r * 0.9 + 0.1 * math.sin(a), dr * 0.9 + 0.1 * math.cos(a) * da
    return dr


def if_joins_tangent(x, n):
    """d if_joins / dx, in forward mode by hand."""
    r, dr = 0.5, 0.0
    i = 0
    while i < n:
        i += 1
        if i % 3 == 0:
            r, dr = r * x, dr * x + r
        else:
            a, da = r * x + i, dr * x + r
            r, dr = r + 0.1 * math.sin(a), dr + 0.1 * math.cos(a) * da
    return dr


SEVERAL_PATHS = [
    (continue_every_third, (0.7, 10)),
    (if_joins, (0.7, 10)),
    (nested_ifs, (0.7, 13)),
    (break_in_if, (0.9, 12)),
    (if_over_array, (0.8, XS)),
    (return_from_if, (0.9, XS)),
    (return_from_if, (0.3, XS)),
    (value_if_then_continue, (0.8, 10)),
]


@pytest.mark.parametrize("f, args", SEVERAL_PATHS + [(five_ifs, (0.7, 12))],
                         ids=lambda v: getattr(v, "__name__", None))
def test_several_paths_against_finite_differences(backend, f, args):
    check(f, args, (0,), backend)


def closures_made_per_iteration(source: str) -> list[str]:
    """The functions the source defines inside a loop on a path that goes round again (a
    block not ending in `break` or `return`): one made at each iteration."""
    import ast

    found = []

    def visit(body: list, in_loop: bool):
        once = bool(body) and isinstance(body[-1], (ast.Break, ast.Return))
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef):
                if in_loop and not once:
                    found.append(stmt.name)
                visit(stmt.body, False)
            elif isinstance(stmt, ast.While):
                visit(stmt.body, True)
            elif isinstance(stmt, ast.For):
                visit(stmt.body, True)
            elif isinstance(stmt, ast.If):
                visit(stmt.body, in_loop)
                visit(stmt.orelse, in_loop)
    visit(ast.parse(source).body, False)
    return found


@pytest.mark.parametrize("f, args", SEVERAL_PATHS, ids=lambda v: getattr(v, "__name__", None))
def test_several_paths_push_records_not_closures(f, args):
    """Each path through an iteration pushes a record of the values its adjoint reads onto
    a list of its own, and its number onto a list of tags; the backward loop pops a tag
    and applies that path's adjoint in place: no function is made per iteration, in either
    loop (the exits' adjoints are made once)."""
    source = myir.grad(f, 0, backend="python").lower(*args).source
    assert closures_made_per_iteration(source) == [], source
    assert re.search(r"^\s*\w+\.append\(\d\)$", source, re.M), source    # the tags
    assert "_stack_pop" not in source and "__StackCell" not in source, source
    # ...while five `if`s one after the other have too many paths: a closure each
    source = myir.grad(five_ifs, 0, backend="python").lower(0.7, 12).source
    assert closures_made_per_iteration(source), source


def test_an_effect_after_an_if_keeps_its_place(backend, capsys):
    """The code after an `if` becomes the branches' continuation; a `print` there that
    does not read the `if`'s value still runs after the branch, as in CPython."""
    def printing(x, n):
        r = 0.5
        i = 0
        while i < n:
            i += 1
            if i % 3 == 0:
                r = r * x
            else:
                r = r + x
            print(i, r)
            r = math.sin(r)
        return r
    printing(0.7, 4)
    expected = capsys.readouterr().out
    got = myir.grad(printing, backend=backend)(0.7, 4)
    assert capsys.readouterr().out == expected
    assert got == pytest.approx(numerical_grad(printing, (0.7, 4), 0), rel=1e-6)
    capsys.readouterr()


def test_several_paths_100000_iterations(backend):
    """As deep as the one-path loops, at CPython's recursion limit, in time linear in the
    trip count."""
    limit = sys.getrecursionlimit()
    g1 = myir.compile(myir.grad(continue_every_third), backend=backend)
    g2 = myir.compile(myir.grad(if_joins), backend=backend)
    g1(0.7, 3), g2(0.7, 3)
    sys.setrecursionlimit(1000)
    try:
        got = g1(0.7, 100_000), g2(0.999999, 100_000)
    finally:
        sys.setrecursionlimit(limit)
    assert got[0] == pytest.approx(continue_every_third_tangent(0.7, 100_000), rel=1e-9)
    assert got[1] == pytest.approx(if_joins_tangent(0.999999, 100_000), rel=1e-9)


@pytest.mark.parametrize("f, args", SEVERAL_PATHS[:4], ids=lambda v: getattr(v, "__name__", None))
def test_several_paths_second_order(backend, f, args):
    check_next_order(myir.grad(f), args, backend)


def test_several_paths_third_order(backend):
    check_next_order(myir.grad(myir.grad(continue_every_third)), (0.7, 10), backend)


# ------------------------------------------------------------------------------ the program


def pow_for(x, n):
    r = x
    for _ in range(n):
        r = r * x
    return r


def test_a_for_loops_backward_loop_carries_only_what_it_reads():
    """The loop variable of `for _ in range(n)` and range's keys have sensitivities of kind
    `None | int` (the variable is unbound before the first iteration).  Nothing the
    gradient returns reads them, and the operations on them cannot raise: the backward loop
    carries the sensitivities of r and x alone, and the forward loop pushes r alone."""
    source = myir.grad(pow_for, "x", backend="python").lower(1.1, 5).source
    assert re.search(r"^\s*for (\w+) in reversed\(\w+\):\n\s*(\w+), (\w+) = \2 \* x, "
                     r"\3 \+ \1 \* \2$", source, re.M), source
    for left in ("_getitem_grad", "_gadd", "_grad_zeros(getitem"):
        assert left not in source, source
    assert myir.grad(pow_for, "x")(1.1, 5) == pytest.approx(6 * 1.1 ** 5, rel=1e-14)


def test_generated_source_has_a_forward_and_a_backward_loop():
    """Two loops, and no closure made per iteration: the forward loop appends the one
    residual the backward loop reads to a list, and the backward loop reads the list from
    its end.  No def is nested: the exit's adjoint, which reads nothing of the loop, is
    applied after it (`drop_unused_outputs` of passes/opt.py), and the loop returns its
    stack alone."""
    source = myir.grad(pow_loop, "x", backend="python").lower(1.1, 5).source
    assert "while True:" not in source, source      # the loop's test is the while's
    assert re.search(r"^\s*while i < \w+:$", source, re.M), source
    assert re.search(r"^\s*for \w+ in reversed\(\w+\):$", source, re.M), source
    assert ".pop()" not in source, source
    # the forward loop's value (r, i), which the gradient does not read, is not read
    # either: indexing the tuple the loop returns cannot raise
    assert not re.search(r"^\s*\w+\[\d+\]$", source, re.M), source
    assert re.search(r"\w+\.append\(r\)", source), source    # r alone: i is unread
    # pushed first, so that the next iteration's values, which cannot raise, are computed
    # in the assignment of the loop's variables rather than named one line each
    assert re.search(r"^\s*r, i = r \* \w+, i \+ 1$", source, re.M), source
    assert source.count("def ") == 1, source
    # the backward loop carries the two sensitivities it reads (of r and of x), not those
    # of i, n and the env, which are constant, and the loop returns its stack alone
    assert "_Env" not in source, source
    assert re.search(r"^\s*(\w+), (\w+) = \1 \* x, \2 \+ \w+ \* \1$", source, re.M), source


def rows_of(X, w):
    r = 0.0
    for row in X:
        r = r + np.sum(np.tanh(row * w))
    return r


def zipped(x, xs, ys):
    r = x
    for a, b in zip(xs, ys):
        r = r + 0.1 * math.sin(a * r) * b
    return r


@pytest.mark.parametrize("f, args", [(over_array, (0.9, np.linspace(0.5, 1.5, 9))),
                                     (rows_of, (np.linspace(-1.0, 1.0, 12).reshape(4, 3),
                                                0.7)),
                                     (zipped, (0.9, XS, YS))])
def test_a_loop_over_an_array_adds_each_rows_gradient_in_place(backend, f, args):
    """The gradient of the array a loop runs over gains one row per iteration, written into
    the one array (`d[i] = d[i] + dv`: `InPlace` proves nothing else sees d), not added as
    an array of zeros but there: a loop over n rows is linear in n.  With `zip`, the
    sensitivity of b, a float on the first iteration and a float64 after, is an item of
    the iteration's tuple: its type stays known (`gadd_rule` of a union), and so does that
    of ys's gradient, which is written in place too."""
    check(f, args, (0, 1), backend)
    source = myir.grad(f, 0, 1, backend="python").lower(*args).source
    backward = source[source.index("in reversed("):]
    assert re.search(r"^\s*\w+\[\w+\] = \w+ \+ \w+$", backward, re.M), source
    assert "_getitem_grad" not in backward, source


TYPED_SOURCE = """
import hashlib, sys
sys.path.insert(0, {root!r})
import numpy as np
import myir
from tests.test_loop_adjoints import over_array
source = myir.grad(over_array, 0, 1, backend="python").lower(0.9, np.linspace(0.5, 1.5, 9)).source
print(hashlib.sha1(source.encode()).hexdigest())
"""


def test_a_loops_typed_gradient_is_the_same_in_every_process():
    """Inference calls a function value's options in the program's order, not by address:
    otherwise the frames are made in another order from one process to the next, and
    whether the loop's first iteration is typed apart (and its row gradients written in
    place) changed with them (one process in four)."""
    root = str(pathlib.Path(__file__).parents[1])
    env = {**os.environ, "MYIR_CACHE_DIR": "off"}
    digests = {subprocess.run([sys.executable, "-c", TYPED_SOURCE.format(root=root)], env=env,
                              capture_output=True, text=True, check=True, timeout=300).stdout
               for _ in range(8)}
    assert len(digests) == 1, digests


def sign_twice(x, n):
    r = x
    i = 0
    while i < n:
        i += 1
        r = -(-r)
    return r


def test_a_backward_loop_that_changes_nothing(backend):
    """Each iteration's adjoint is the identity once optimized (-(-d) is d, and the
    sensitivities of i, n and the env are not carried): the backward loop's step is
    empty, written `pass`."""
    check(sign_twice, (1.5, 3), (0,), backend)
    source = myir.grad(sign_twice, backend="python").lower(1.5, 3).source
    assert re.search(r"in reversed\(\w+\):\n\s+pass$", source, re.M), source


def root_read_by_a_loop(x, n):
    rest = abs(x) ** 0.5
    for _ in range(n):
        x = x + rest
    return x


def test_a_loop_that_never_runs_reads_a_value_with_an_infinite_slope(backend):
    """Found by the random-program tests: `abs(x) ** 0.5` at x = 0 has an infinite slope,
    and when the loop reading it runs no iteration, its sensitivity is a computed 0: the
    gradient is 1.0 (the strong zero of passes/grad_rules.py), not 0 * inf = nan.  Where
    the loop runs, x + n * sqrt(|x|) has no derivative at 0, and elsewhere its own."""
    assert myir.grad(root_read_by_a_loop, backend=backend)(0.0, 0) == 1.0
    check(root_read_by_a_loop, (0.0, 0), (0,), backend)
    assert math.isnan(myir.grad(root_read_by_a_loop, backend=backend)(0.0, 3))
    check(root_read_by_a_loop, (2.5, 0), (0,), backend)
    check(root_read_by_a_loop, (-2.5, 3), (0,), backend)


def counts_only(x, n):
    i = 0
    while i < n:
        i += 1
    return x * 2.0


def test_a_loop_whose_counter_nothing_reads(backend):
    """`i += 1` may raise (an int meeting a float), so the parser keeps it although its
    value goes unread after the loop; the next iteration's call, which takes it, keeps it,
    and stays in tail position: the gradient's loop runs as a loop, 10^5 iterations deep."""
    assert myir.grad(counts_only, backend=backend)(1.5, 100_000) == 2.0


def test_records_hold_what_the_backward_loop_reads():
    """The rules of `0.5 * (x + a / x)` may read x, a / x and their sum; once typed, the
    adjoint reads x alone (a is the loop's invariant), so x alone is pushed."""
    source = myir.grad(newton_sqrt, backend="python").lower(2.0).source
    assert re.search(r"\w+\.append\(x\)", source), source


SECOND_PROCESS = """
import math, sys
sys.path.insert(0, {root!r})
import myir
{source}
f = myir.compile({function}, backend="python")
print(f(1.000001, 100_000), f._by_signature[next(iter(f._by_signature))].from_disk,
      sys.getrecursionlimit())
"""


@pytest.mark.parametrize("subject, function, want", [
    (pow_loop, 'myir.grad(pow_loop, "x")', 100_000 * 1.000001 ** 99_999),
    (pow_loop, 'myir.grad(myir.grad(pow_loop, "x"), "x")',
     100_000 * 99_999 * 1.000001 ** 99_998),
    (continue_every_third, 'myir.grad(continue_every_third)',
     continue_every_third_tangent(1.000001, 100_000)),
], ids=["first order", "second order", "several paths"])
def test_a_saved_program_runs_a_deep_loop_in_a_second_process(tmp_path, subject, function,
                                                              want):
    import inspect

    script = tmp_path / "deep.py"
    script.write_text(SECOND_PROCESS.format(root=os.getcwd(), function=function,
                                            source=textwrap.dedent(inspect.getsource(subject))))
    env = {**os.environ, "MYIR_CACHE_DIR": str(tmp_path / "cache"), "MYIR_PROGRAM_CACHE": "on"}
    runs = [subprocess.run([sys.executable, str(script)], env=env, check=True,
                           capture_output=True, text=True).stdout.split() for _ in range(2)]
    assert [r[1] for r in runs] == ["False", "True"]
    assert runs[1][2] == str(1000)      # the loaded program runs at CPython's default limit
    assert float(runs[0][0]) == float(runs[1][0]) == pytest.approx(want, rel=1e-9)


# ------------------------------------------------------------------------------ the stack


def deep_stack(n, item):
    s = EMPTY_STACK
    for _ in range(n):
        s = stack_push(s, item)
    return s


def test_stack_helpers_iterate():
    """Adding two sensitivity stacks as deep as a long loop, and their zeros, use no
    recursion; an exhausted stack stands for zeros."""
    a, b = deep_stack(200_000, 1.0), deep_stack(100_000, 2.0)
    total = gadd(a, b)
    depth, s, seen = 0, total, []
    while s is not EMPTY_STACK:
        seen.append(s[0])
        s, depth = s[1], depth + 1
    assert depth == 200_000 and seen[:100_000] == [3.0] * 100_000 and seen[-1] == 1.0
    assert gadd(EMPTY_STACK, b) is b and gadd(b, EMPTY_STACK) is b
    assert grad_zeros(a) is EMPTY_STACK and grad_zeros((1.0, a)) == (0.0, EMPTY_STACK)
