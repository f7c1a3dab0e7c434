"""Gradients of recursion that is not a loop (two calls on a path, a walk over a tree,
mutual recursion) without a closure per call: each call pushes a record of what its
adjoint reads, and one dispatching graph pops them (passes/defunctionalise.py).

Values and gradients against CPython and central finite differences in float64 (higher
orders: of the compiled order below), on each backend of `MYIR_TEST_BACKENDS`; the
structure of the generated code; the conditions the pass proves before it rewrites; a
saved program's gradient in a second process.
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
from frontend import parse
from myir.ir.analysis import primitive_name, reachable_graphs, toposort
from passes.opt import optimize
from tests import programs_opt as P
from tests.test_grad_primitives import assert_grads_close, numerical_grad
from tests.test_recursion import backend  # noqa: F401  (the fixture: every backend)


# ------------------------------------------------------------------------------ subjects


def fib(x, n):
    if n < 2:
        return x * n + math.sin(x)
    return fib(x, n - 1) * 0.5 + fib(x * 1.01, n - 2)


def heap_walk(x, w, i, depth):
    """A walk over the complete binary tree stored in w (node i's children at 2i + 1 and
    2i + 2); its branches take their parameters in another order than the function."""
    if depth == 0:
        return math.sin(w[i] * x)
    left = heap_walk(x, w, 2 * i + 1, depth - 1)
    right = heap_walk(x * w[i], w, 2 * i + 2, depth - 1)
    return left * right + w[i] * x


def tree_walk(t, x):
    """A walk over a tree of nested tuples `(value, left, right)`, None at the leaves."""
    if t is None:
        return 1.0
    v, left, right = t
    return math.sin(v * x) + tree_walk(left, x) * tree_walk(right, x) * 0.5


def tree(depth, v=1.0):
    return None if depth == 0 else (v, tree(depth - 1, v * 1.1), tree(depth - 1, v * 0.9))


def ping(x, n):
    if n <= 0:
        return x * x
    return pong(x, n - 1) * 0.5 + pong(x * 0.9, n - 2)


def pong(x, n):
    if n <= 0:
        return math.cos(x)
    return math.sin(ping(x, n - 1)) + ping(x, n - 3) * x


def with_helper(x, n):
    """The recursion goes through a closure passed to a function inlined twice."""
    if n <= 0:
        return math.sin(x)
    return _twice(lambda t: with_helper(t, n - 1) * 0.5, x) + with_helper(x, n - 2)


def _twice(f, x):
    return f(f(x))


W = np.linspace(0.1, 0.9, 63)
# (function, arguments, position differentiated)
CASES = [
    (fib, (0.3, 7), 0),
    (fib, (0.3, 1), 0),
    (fib, (0.3, 0), 0),
    (heap_walk, (0.7, W, 0, 4), 0),
    (tree_walk, (tree(4), 0.3), 1),
    (ping, (0.6, 6), 0),
    (with_helper, (0.7, 4), 0),
]
ids = [f"{f.__name__}-{args[-1] if isinstance(args[-1], int) else 'tree'}"
       for f, args, _ in CASES]


def _sensitivities(f, args, wrt):
    return myir.grad(f, wrt, backend="python").lower(*args)


# ------------------------------------------------------------------------------ values


@pytest.mark.parametrize("f, args, wrt", CASES, ids=ids)
def test_gradients_against_finite_differences(backend, f, args, wrt):
    assert myir.compile(f, backend=backend)(*args) == f(*args)
    got = myir.grad(f, wrt, backend=backend)(*args)
    assert_grads_close(got, numerical_grad(f, args, wrt))


@pytest.mark.parametrize("f, args, wrt", [CASES[0], CASES[3], CASES[5]],
                         ids=[ids[0], ids[3], ids[5]])
def test_second_and_third_order(backend, f, args, wrt):
    first = myir.grad(f, wrt, backend=backend)
    second = myir.grad(myir.grad(f, wrt), wrt, backend=backend)
    assert_grads_close(second(*args), numerical_grad(first, args, wrt))
    third = myir.grad(myir.grad(myir.grad(f, wrt), wrt), wrt, backend=backend)
    assert_grads_close(third(*args), numerical_grad(second, args, wrt))


# ------------------------------------------------------------------------------ structure


@pytest.mark.parametrize("f, args, wrt", CASES, ids=ids)
def test_no_closure_per_call(f, args, wrt):
    """No function is defined inside another in the generated code (a closure made per
    call) but the program's own (with_helper's lambda, made per call by CPython too): the
    gradient pushes records and pops them in one dispatching function."""
    lowered = _sensitivities(f, args, wrt)
    nested = [line for line in lowered.source.splitlines()
              if line.startswith(" ") and line.lstrip().startswith("def ")
              and not line.lstrip().startswith("def J_lambda(")]
    assert not nested, lowered.source
    used = lowered.graph("typed").stats()["primitives"]
    assert used["stack_push"] and used["stack_pop"], lowered.source


def _dispatch(lowered):
    return next(g for g in reachable_graphs(lowered.graph("typed"))
                if g.name == "bprop_dispatch")


def test_the_dispatch_returns_only_what_is_read():
    """fib's gradient with respect to x: no call's adjoint computes the sensitivity of the
    integer n, which only its callers' adjoints would add up and nothing reads, nor
    passes on a stack that stays empty (drop_unused_parameters in passes/opt.py)."""
    dispatch = _dispatch(_sensitivities(fib, (0.3, 7), 0))
    returned = {len(g.output.args) for g in reachable_graphs(dispatch)
                if primitive_name(g.output) == "make_tuple"}
    # the state (tags, the leaves' records) and one sensitivity, as it takes
    assert returned == {len(dispatch.parameters)} == {3}


def test_a_tag_per_call_and_records_only_at_the_leaves():
    """fib's calls push one tag each, and the leaves alone push a record: the code after
    the `if` reads nothing once types are known (drop_unread_residuals)."""
    lowered = _sensitivities(fib, (0.3, 7), 0)
    pushes = [n for g in reachable_graphs(lowered.graph("typed")) for n in toposort(g)
              if primitive_name(n) == "stack_push" and n.graph is g]
    assert len(pushes) == 3, lowered.source


def test_a_gradient_differentiated_again_keeps_its_closures():
    """First-order gradients only: the derivative of the closures runs faster than that of
    the records (passes/defunctionalise.py)."""
    lowered = myir.grad(myir.grad(fib, 0), 0, backend="python").lower(0.3, 7)
    assert not [g for g in reachable_graphs(lowered.graph("typed"))
                if g.name.startswith("bprop_dispatch")], lowered.source


# ------------------------------------------------------------------------------ conditions


def _pushes(program) -> int:
    return sum(1 for g in reachable_graphs(program) for n in toposort(g)
               if n.graph is g and primitive_name(n) == "stack_push")


def test_a_backpropagator_called_once_becomes_a_record():
    program = optimize(parse(P.defunctionalise_before))
    assert _pushes(program) == 3     # a tag per call, a record per leaf
    assert not [g for g in reachable_graphs(program) if g.name in ("leaf_bprop", "node_bprop")]


def test_a_backpropagator_called_twice_stays_a_closure():
    """A closure calling its callee's backpropagator twice would pop the callee's records
    twice: the program is left as it is."""
    program = optimize(parse(P.defunctionalise_calling_twice))
    assert _pushes(program) == 0
    assert [g for g in reachable_graphs(program) if g.name == "node_bprop"]
    for n in (0, 1, 4):
        assert myir.compile(P.defunctionalise_calling_twice, backend="python")(0.7, n) \
            == P.defunctionalise_calling_twice(0.7, n)


# ------------------------------------------------------------------------------ saved


SECOND_PROCESS = """
import sys
sys.path.insert(0, {root!r})
import math
import myir
{source}
f = myir.compile(myir.grad(fib), backend="python")
print(repr(f(0.3, 12)), f._by_signature[next(iter(f._by_signature))].from_disk)
"""


def test_a_saved_program_runs_the_gradient_in_a_second_process(tmp_path):
    script = tmp_path / "fib.py"
    script.write_text(SECOND_PROCESS.format(
        root=os.getcwd(), source=textwrap.dedent(inspect.getsource(fib))))
    env = {**os.environ, "MYIR_CACHE_DIR": str(tmp_path / "cache"), "MYIR_PROGRAM_CACHE": "on"}
    runs = [subprocess.run([sys.executable, str(script)], env=env, check=True,
                           capture_output=True, text=True).stdout.split() for _ in range(2)]
    assert [r[1] for r in runs] == ["False", "True"]
    assert runs[0][0] == runs[1][0]
    assert float(runs[0][0]) == myir.grad(fib, backend="python")(0.3, 12)
    assert_grads_close(float(runs[0][0]), numerical_grad(fib, (0.3, 12), 0))


def walk_with_a_branch_after(depth, count):
    """Two calls, then an `if` whose branches return: the code after the calls (a J
    graph of its own, on the recursion's cycle) does not qualify at first."""
    if depth <= 1:
        return count + count < 6
    ready = walk_with_a_branch_after(depth - 1, depth + depth)
    ready = walk_with_a_branch_after(depth - 1, 416 if ready else depth)
    if count:
        return depth - 4 != 3
    else:
        return ready if depth else False


def descend_calling_the_walk(depth, x):
    if depth <= 0:
        return x * 2.0
    r = descend_calling_the_walk(depth - 1, x * 1.5)
    if walk_with_a_branch_after(depth - 1, 10):
        r = r + x * x
    return r


def test_a_recursion_is_rewritten_whole_or_not_at_all(backend):
    """The graphs of a recursion that qualify are not rewritten while another graph on its
    cycle does not: that graph's calls started stacks of their own, and a later round of
    the optimizer, finding it qualified, threaded a second state through the first
    (found by the thorough profile: an internal error from inference)."""
    args = (0.5, )
    got = myir.grad(lambda x: descend_calling_the_walk(3, x), backend=backend)(*args)
    assert_grads_close(got, numerical_grad(lambda x: descend_calling_the_walk(3, x), args, 0))
