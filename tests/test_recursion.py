"""Recursion: a linear self-recursion (one call of itself on each path to a result, not in
tail position) runs as a descent loop pushing a record per call and an ascent loop popping
them (passes/linear_recursion.py), forward and gradient; other recursion (two calls on a
path, mutual recursion) keeps its calls.

Values against CPython, gradients against central finite differences of the uncompiled
function in float64 (higher orders: of the compiled order below), on each backend of
`MYIR_TEST_BACKENDS`; depths past CPython's recursion limit at that limit; a saved
program's gradient in a second process.
"""

from __future__ import annotations

import inspect
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import myir
from bench.workloads.programs import tree_recursion
from frontend import parse
from myir.ir.analysis import reachable_graphs, recursive_graphs
from passes.ad import loop_region
from passes.linear_recursion import recursion_as_loops
from tests.programs_check import DEFAULT_BACKENDS
from tests.test_grad_primitives import assert_grads_close, numerical_grad

BACKENDS = [b.strip() for b in os.environ.get("MYIR_TEST_BACKENDS", DEFAULT_BACKENDS).split(",")
            if b.strip() and b.strip() != "saved"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return None if request.param == "default" else request.param


# ------------------------------------------------------------------------------ subjects


def base_last(x, n):
    if n > 0:
        z = x * n
        return math.sin(base_last(x, n - 1)) + z
    return x


def used_twice(x, n):
    if n == 0:
        return x
    y = used_twice(x, n - 1)
    return y * y * 0.5 + math.cos(y) * x


def halving(x, n):
    if n == 0:
        return x
    y = halving(x * 0.5, n - 1)
    return y + x * y


def int_base(x, n):
    if n == 0:
        return 1
    return int_base(x, n - 1) * x + n


def array_rec(v, n):
    if n == 0:
        return v
    w = array_rec(v * 0.9, n - 1)
    return np.tanh(w) * v + w


def array_loss(v, n):
    return np.sum(array_rec(v, n) ** 2)


def with_loops(x, n):
    s = 0.0
    for i in range(n):
        s = s + x * i
    if n == 0:
        return s + x
    y = with_loops(x, n - 1)
    r = y
    for i in range(2):
        r = math.sin(r) * s + x
    return r


def branch_after(x, n):
    if n == 0:
        return x
    y = branch_after(x, n - 1)
    if y > 0.5:
        return y * x
    return y + x * x


def closure_after(x, n):
    if n == 0:
        return x
    z = x * n
    y = closure_after(x, n - 1)
    g = lambda t: t * y + z  # noqa: E731
    return g(0.5)


def nested_rec(x, n):
    def rec(k):
        if k == 0:
            return x
        return math.sin(rec(k - 1)) * x + 0.1
    return rec(n) + x


def nested_linear(x, n):
    if n == 0:
        return x

    def rec(k):
        if k == 0:
            return x
        return math.sin(rec(k - 1)) * x + 0.1
    y = nested_linear(x, n - 1)
    return rec(n) * y + 0.2


def raises(x, n):
    if n == 0:
        return x
    if x > 100.0:
        raise ValueError("x is too large")
    y = raises(x * 3.0, n - 1)
    return y * 0.5 + x


def two_sites(x, n):
    if n <= 0:
        return x
    if n % 2 == 0:
        y = two_sites(x * 1.1, n - 1)
        return y * y
    t = math.cos(x)
    return two_sites(x, n - 2) * t


def three_sites(x, n):
    if n <= 0:
        return x
    if n % 3 == 0:
        return math.sin(three_sites(x, n - 1)) + x
    if n % 3 == 1:
        z = x * n
        y = three_sites(x * 0.9, n - 1)
        return y * z
    return three_sites(x, n - 2) * 0.5 + 0.1


def composed(x, n):
    def compose(k):
        if k == 0:
            return lambda t: t
        g = compose(k - 1)
        return lambda t: math.sin(g(t)) * x + t
    return compose(n)(x)


def alternating(f, g, x, n):
    if n == 0:
        return f(x)
    return alternating(g, f, x * 0.9, n - 1) * 0.5 + f(x)


def sin_then_cos(x, n):
    return alternating(math.sin, math.cos, x, n)


def wrapping(x, n):
    def rec(f, k):
        if k == 0:
            return f(x)
        return rec(lambda t: math.sin(f(t)) + x * t, k - 1)
    return rec(math.cos, n)


def with_default(x, n=4):
    if n == 0:
        return x
    return math.sin(with_default(x, n - 1)) * x


# kept as calls: two calls of itself on a path, mutual recursion

def fib_like(x, n):
    if n < 2:
        return x
    return fib_like(x, n - 1) * 0.5 + math.sin(fib_like(x, n - 2))


def call_after_call(x, n):
    if n <= 0:
        return x
    y = call_after_call(x, n - 1)
    if y > 0.5:
        return call_after_call(x * 0.5, n - 2) + y
    return y * x


def even_part(x, n):
    if n == 0:
        return x
    return math.sin(odd_part(x, n - 1)) * x


def odd_part(x, n):
    return even_part(x, n - 1) + x if n > 0 else x


def first_of_three(x, n):
    return x if n <= 0 else second_of_three(x * 1.1, n - 1) - 0.5 * x


def second_of_three(x, n):
    if n <= 0:
        return math.cos(x)
    return third_of_three(x, n - 1) * x


def third_of_three(y, k):
    return first_of_three(math.sin(y), k - 1) + y if k > 0 else y * y


def two_calls_each(x, n):
    return x if n <= 0 else two_calls_other(x, n - 1) + two_calls_other(x * 0.5, n - 2)


def two_calls_other(x, n):
    return x * x if n <= 0 else math.sin(two_calls_each(x, n - 1)) * x


LINEAR = [
    (tree_recursion, (0.7, 6)),
    (tree_recursion, (0.7, 0)),
    (base_last, (0.7, 5)),
    (used_twice, (0.3, 5)),
    (halving, (0.6, 5)),
    (int_base, (0.8, 5)),
    (with_loops, (0.3, 4)),
    (branch_after, (0.4, 6)),
    (branch_after, (0.9, 3)),
    (closure_after, (0.4, 5)),
    (nested_rec, (0.6, 5)),
    (nested_linear, (0.6, 5)),
    (raises, (0.6, 4)),
    (array_loss, (np.array([0.3, -0.5, 1.0]), 4)),
    (two_sites, (0.4, 5)),
    (two_sites, (0.4, 8)),
    (three_sites, (0.6, 9)),
    (with_default, (0.6,)),
    (composed, (0.6, 5)),      # the ascent carries a function: the base's closure first
    (sin_then_cos, (0.7, 5)),  # the calls swap the two functions they pass
    (wrapping, (0.6, 4)),      # each call passes a closure wrapping the function it got
    (with_default, (0.6, 2)),
    (even_part, (0.7, 5)),     # mutual recursion, merged into one recursion first
    (even_part, (0.7, 0)),
    (first_of_three, (0.6, 10)),
    (first_of_three, (0.6, 2)),
]
KEPT = [(fib_like, (0.6, 5)), (call_after_call, (0.9, 5)), (two_calls_each, (0.7, 5))]
ids = lambda v: getattr(v, "__name__", None)  # noqa: E731


def made_loops(f) -> bool:
    """Whether the recursion of f's program became loops: every graph on a cycle of calls
    is a graph of a loop's iteration (passes.ad.loop_region), which calls the loop in tail
    position."""
    program = recursion_as_loops(parse(f))
    iterations = {h for g in reachable_graphs(program) for h in loop_region(g) or ()}
    return recursive_graphs(program) <= iterations


# ------------------------------------------------------------------------------ the shape


@pytest.mark.parametrize("f, args", LINEAR, ids=ids)
def test_linear_recursion_becomes_loops(f, args):
    assert made_loops(f)


@pytest.mark.parametrize("f, args", KEPT, ids=ids)
def test_other_recursion_keeps_its_calls(f, args):
    program = parse(f)
    assert recursion_as_loops(program) is program
    assert not made_loops(f)


def test_only_what_the_code_after_the_call_reads_is_pushed():
    """tree_recursion's code after the call reads x, which every call passes on unchanged:
    the descent counts its depth and pushes nothing; the gradient's backward pass pops what
    the ascent's adjoint reads."""
    source = myir.compile(tree_recursion, backend="python").lower(0.7, 10).source
    assert "append" not in source and "_stack_pop" not in source, source
    assert source.count("def ") == 1 and source.count("while True:") == 2, source
    program = recursion_as_loops(parse(base_last))
    pushes = [n for g in reachable_graphs(program) for n in _applies(g)
              if n.inputs[0].value is myir.ir.primitives.PRIMITIVES["stack_push"]]
    assert [n.inputs[2].debug.name for n in pushes] == ["z"]


def _applies(g):
    from myir.ir.analysis import toposort
    from myir.ir.graph import Apply, Constant
    return [n for n in toposort(g) if isinstance(n, Apply) and n.graph is g
            and isinstance(n.inputs[0], Constant)]


# ------------------------------------------------------------------------------ values


@pytest.mark.parametrize("f, args", LINEAR + KEPT, ids=ids)
def test_values_equal_cpython(backend, f, args):
    got = myir.compile(f, backend=backend)(*args)
    want = f(*args)
    assert type(got) is type(want) or isinstance(want, np.ndarray) or \
        isinstance(got, np.floating)
    np.testing.assert_array_equal(got, want)


def test_an_int_result_stays_an_int(backend):
    got = myir.compile(int_base, backend=backend)(0.8, 0)
    assert got == 1 and type(got) is int
    got = myir.compile(int_base, backend=backend)(2, 4)
    assert got == int_base(2, 4) and type(got) is int


def test_raises_where_cpython_raises(backend):
    with pytest.raises(ValueError, match="^x is too large$"):
        raises(50.0, 4)
    with pytest.raises(ValueError, match="^x is too large$"):
        myir.compile(raises, backend=backend)(50.0, 4)
    with pytest.raises(ValueError, match="^x is too large$"):
        myir.grad(raises, backend=backend)(50.0, 4)


# ------------------------------------------------------------------------------ gradients


@pytest.mark.parametrize("f, args", LINEAR + KEPT, ids=ids)
def test_gradients_against_finite_differences(backend, f, args):
    got = myir.grad(f, backend=backend)(*args)
    assert_grads_close(got, numerical_grad(f, args, 0))


@pytest.mark.parametrize("f, args", [(tree_recursion, (0.7, 5)), (base_last, (0.7, 4)),
                                     (halving, (0.6, 4)), (nested_rec, (0.6, 4)),
                                     (two_sites, (0.4, 5)), (even_part, (0.7, 5))], ids=ids)
def test_second_and_third_order(backend, f, args):
    d1 = myir.grad(f, backend=backend)
    d2 = myir.grad(myir.grad(f), backend=backend)
    d3 = myir.grad(myir.grad(myir.grad(f)), backend=backend)
    assert_grads_close(d2(*args), numerical_grad(d1, args, 0), rtol=1e-6)
    assert_grads_close(d3(*args), numerical_grad(d2, args, 0), rtol=1e-6)


@pytest.mark.parametrize("f, args", [(tree_recursion, (0.7, 5)), (base_last, (0.7, 4)),
                                     (two_sites, (0.4, 7)), (three_sites, (0.6, 9))], ids=ids)
def test_forward_mode_and_hessian(backend, f, args):
    """jvp runs the loops with tangents (a stack's tangent is a stack of its items'
    tangents; the tags' are zeros), and the Hessian is forward over reverse."""
    value, tangent = myir.jvp(f, args, (1.0, 0), backend=backend)
    assert value == f(*args)
    assert_grads_close(tangent, numerical_grad(f, args, 0))
    assert_grads_close(myir.hessian(f, 0, backend=backend)(*args),
                       numerical_grad(myir.grad(f, backend=backend), args, 0), rtol=1e-6)


def test_second_order_by_hand(backend):
    """d/dx of x^n, written as `rpow(x, n - 1) * x`, twice and three times."""
    def want(x, n, k):
        return math.perm(n, k) * x ** (n - k) if n >= k else 0.0
    d2 = myir.grad(myir.grad(rpow), backend=backend)
    d3 = myir.grad(myir.grad(myir.grad(rpow)), backend=backend)
    for n in (0, 1, 2, 5):
        assert d2(1.3, n) == pytest.approx(want(1.3, n, 2), rel=1e-12)
        assert d3(1.3, n) == pytest.approx(want(1.3, n, 3), rel=1e-12)


def rpow(x, n):
    if n == 0:
        return 1.0
    return rpow(x, n - 1) * x


# ------------------------------------------------------------------------------ depth


def tree_recursion_by_loop(x, n):
    """tree_recursion and its derivative by forward mode, as a loop."""
    y, dy = x, 1.0
    for _ in range(n):
        y, dy = math.sin(y) * y + x, (math.cos(y) * y + math.sin(y)) * dy + 1.0
    return y, dy


def test_deep_recursion_at_the_default_recursion_limit(backend):
    """10^4 calls deep, past CPython's limit (1000, which the tests run at): the forward
    and the gradient run as loops."""
    assert sys.getrecursionlimit() < 10_000
    y, dy = tree_recursion_by_loop(0.3, 10_000)
    assert myir.compile(tree_recursion, backend=backend)(0.3, 10_000) == pytest.approx(
        y, rel=1e-12)
    assert myir.grad(tree_recursion, backend=backend)(0.3, 10_000) == pytest.approx(
        dy, rel=1e-9)
    d2 = myir.grad(myir.grad(tree_recursion), backend=backend)(0.3, 10_000)
    assert math.isfinite(d2)


def or_chain_after(depth, y):
    if depth <= 0:
        return depth < 1
    found = not depth
    y = 1.0 if or_chain_after(depth - 1, y) else 5.0
    return depth > 133 or y >= 3.0 or found


def test_an_or_chain_after_the_call_runs_the_ascent_once(backend):
    """`a or b or c` is `(a or b) or c`: the outer `or`'s first branch returns the inner
    one's value, which its enclosing graph computed; that is no tail call of the inner
    branches, and the ascent must not go on from each of them (it did: the inner branches'
    values went up the rest of the recursion, then the outer `or` tested the result)."""
    assert made_loops(or_chain_after)
    compiled = myir.compile(or_chain_after, backend=backend)
    for depth in range(6):
        got, want = compiled(depth, 1.0), or_chain_after(depth, 1.0)
        assert got is want, (depth, got, want)


def test_deep_mutual_recursion_at_the_default_recursion_limit(backend):
    """Mutual recursion 3,000 calls deep, first and second order: merged into one recursion,
    it runs as loops too.  (CPython needs a higher recursion limit for the reference.)"""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        want = numerical_grad(even_part, (0.4, 3000), 0)
    finally:
        sys.setrecursionlimit(old)
    d1 = myir.grad(even_part, backend=backend)
    assert_grads_close(d1(0.4, 3000), want)
    d2 = myir.grad(myir.grad(even_part), backend=backend)
    assert_grads_close(d2(0.4, 3000), numerical_grad(d1, (0.4, 3000), 0), rtol=1e-6)


def never_ends(x, n):
    if n == 0:
        return x
    return never_ends(x, n - 1) * 0.5 + x


def test_a_recursion_that_never_ends_raises_recursion_error(backend, monkeypatch):
    """Past `MAX_DEPTH` calls the descent raises RecursionError at the recursive call, as
    CPython does past its recursion limit (a smaller bound here, for time)."""
    import passes.linear_recursion
    monkeypatch.setattr(passes.linear_recursion, "MAX_DEPTH", 500)
    with pytest.raises(RecursionError):
        never_ends(0.5, -1)
    assert myir.compile(never_ends, backend=backend)(0.5, 500) == pytest.approx(
        never_ends(0.5, 500))
    for compiled in (myir.compile(never_ends, backend=backend),
                     myir.grad(never_ends, backend=backend)):
        with pytest.raises(RecursionError, match="never_ends\\(\\) nested more than 500 calls"
                           ) as info:
            compiled(0.5, -1)
        assert info.traceback[-1].lineno + 1 == never_ends.__code__.co_firstlineno + 3


SECOND_PROCESS = """
import sys
sys.path.insert(0, {root!r})
import math
import myir
{source}
f = myir.compile(myir.grad(tree_recursion), backend="python")
print(f(0.3, 5000), f._by_signature[next(iter(f._by_signature))].from_disk,
      sys.getrecursionlimit())
"""


def test_a_saved_program_runs_a_deep_recursion_in_a_second_process(tmp_path):
    script = tmp_path / "deep.py"
    script.write_text(SECOND_PROCESS.format(
        root=os.getcwd(), source=textwrap.dedent(inspect.getsource(tree_recursion))
        .replace("np.sin", "math.sin")))
    env = {**os.environ, "MYIR_CACHE_DIR": str(tmp_path / "cache"), "MYIR_PROGRAM_CACHE": "on"}
    runs = [subprocess.run([sys.executable, str(script)], env=env, check=True,
                           capture_output=True, text=True).stdout.split() for _ in range(2)]
    assert [r[1] for r in runs] == ["False", "True"]
    assert runs[1][2] == "1000"
    want = tree_recursion_by_loop(0.3, 5000)[1]
    assert float(runs[0][0]) == float(runs[1][0]) == pytest.approx(want, rel=1e-9)
