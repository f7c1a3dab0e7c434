"""Gradients of nested loops: the outer loop's records hold what the inner loop's gradient
reads (its stacks, the values its adjoints read), not the inner loop's backpropagator, so no
function is made per outer iteration and the outer backward loop runs the inner one in place
(`lift_record_closures`, `lift_result_closures` and `lift_parameter_closures` in
passes/opt.py; the design in passes/ad.py).

Nested `while` and `for` loops, inner loops with `break`, `continue` and `if`s, three deep,
and inside a branch of the outer body: against central finite differences in float64 or a
hand-derived formula, at first, second and third order, on each backend of
`MYIR_TEST_BACKENDS`; the generated source of the first derivative (python backend) makes
no function inside a loop; a loop of 10^3 iterations around one of 10^3.  (The gradient of
a gradient, whose stacks hold sensitivities, is not lifted: its outer loops still make the
inner loops' backpropagators, one per iteration.)
"""

from __future__ import annotations

import math

import pytest

import myir
from bench.nested_loop import derivative, nested as nested_while
from tests.test_grad_primitives import assert_grads_close, numerical_grad
from tests.test_loop_adjoints import backend, check, check_next_order, \
    closures_made_per_iteration, nested  # noqa: F401  (backend: the fixture)


def nested_while_derivatives(x, n, m):
    """The first three derivatives of `nested_while`: its n * m = N steps give
    r = x^(N+1) + 0.1 * (x^0 + ... + x^(N-1))."""
    big = n * m

    def term(order: int, power: int) -> float:     # d^order/dx^order x^power
        return math.prod(range(power - order + 1, power + 1)) * x ** (power - order) \
            if power >= order else 0.0
    return [term(k, big + 1) + 0.1 * sum(term(k, p) for p in range(big)) for k in (1, 2, 3)]


def nested_for(x, n, m):
    r = x
    for i in range(n):
        s = 0.0
        for j in range(m):
            s = s + math.sin(r * x + j)
        r = 0.5 * r + 0.1 * s
    return r


def nested_paths(x, n, m):
    r = x
    for i in range(n):
        j = 0
        while True:
            j += 1
            if j % 3 == 0:
                continue
            if j > m:
                break
            if r > 1.0:
                r = r * 0.5 + x
            else:
                r = r * x + 0.3
        if i % 2 == 0:
            r = r + 0.1 * x * r
    return r


def three_deep(x, n):
    r = x
    for i in range(n):
        for j in range(n):
            for k in range(2):
                r = r * 0.9 + x * math.cos(r + k)
    return r


def inner_in_branch(x, n, m):
    r = x
    for i in range(n):
        if i % 2 == 0:
            for j in range(m):
                r = r * x * 0.8 + 0.1
        else:
            r = math.sin(r) + x
    return r


SUBJECTS = [
    (nested_while, (0.9, 3, 4)),
    (nested_for, (0.7, 3, 4)),
    (nested_paths, (0.8, 3, 7)),
    (three_deep, (0.6, 3)),
    (inner_in_branch, (0.9, 4, 3)),
    (nested, (0.8, 4)),
]
IDS = ["nested_while", "nested_for", "nested_paths", "three_deep", "inner_in_branch",
       "inner_bound_from_outer"]


@pytest.mark.parametrize("f, args", SUBJECTS, ids=IDS)
def test_first_order_against_finite_differences(backend, f, args):
    check(f, args, (0,), backend)


@pytest.mark.parametrize("f, args", SUBJECTS, ids=IDS)
def test_second_order_against_finite_differences_of_the_first(backend, f, args):
    check_next_order(myir.grad(f), args, backend)


def test_third_order_against_finite_differences_of_the_second(backend):
    check_next_order(myir.grad(myir.grad(nested_for)), (0.7, 3, 4), backend)


def test_three_orders_by_hand(backend):
    first, second, third = nested_while_derivatives(0.9, 3, 4)
    grads = [myir.grad(nested_while)]
    grads += [myir.grad(grads[-1]), myir.grad(myir.grad(grads[-1]))]
    for g, want in zip(grads, (first, second, third)):
        assert myir.compile(g, backend=backend)(0.9, 3, 4) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("f, args", SUBJECTS, ids=IDS)
def test_no_function_is_made_per_iteration(f, args):
    """The first derivative's loops make no function, and keep every stack as a list (the
    inner stacks, held in the outer records, too): no cell of the tuples a stack is
    otherwise made of."""
    source = myir.grad(f, 0, backend="python").lower(*args).source
    assert closures_made_per_iteration(source) == [], source
    assert "__StackCell" not in source and "_stack_pop" not in source, source


def test_a_thousand_iterations_around_a_thousand(backend):
    """10^6 steps of r = r * x + 0.1, in 10^3 outer iterations: the derivative by its
    closed form (bench.nested_loop's)."""
    assert myir.grad(nested_while, backend=backend)(0.999, 1000, 1000) == pytest.approx(
        derivative(0.999, 1000 * 1000), rel=1e-8)


def test_many_short_inner_loops(backend):
    """10^4 outer iterations of 3 inner ones, against differences of the function itself."""
    args = (0.7, 10_000, 3)
    assert_grads_close(myir.grad(nested_for, backend=backend)(*args),
                       numerical_grad(nested_for, args, 0))


def dict_loop_in_while(count, x):    # (as the thorough profile drew it)
    x += abs(x) ** 1.5
    y = count + (1.0 or 1.0)
    steps = 0
    while steps < 6 and 1.0 >= 1.0 / (1.0 or 2.0):
        steps += 1
        table = {'a': 8 or count, 'b': count, 'w': count if not count else count // count}
        table['a'] = count
        for key in table:
            pair = (count - table['a'], table[key])  # noqa: F841
            x += table[key] * x / (y if y != 0.0 else 4.0)
            if len(table):
                x -= (len(table) - table[key]) * table['b']
                continue
    return abs(y) ** 1.5 - count - x + y - steps


def test_a_for_over_a_dict_with_continue_in_a_while(backend):
    """The inner loop's body, split at the `if` of its value into a copy of the rest per
    branch, had both copies call one choice of the later `if`'s branch: their adjoints
    were built as if each had one caller, and one of them took the other's residuals."""
    got = myir.grad(dict_loop_in_while, 1, backend=backend)(12, 0.5)
    assert_grads_close(got, numerical_grad(dict_loop_in_while, (12, 0.5), 1))
