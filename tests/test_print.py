"""`print(...)` in compiled code prints what CPython prints, in program order, on every
backend; under `grad` and `value_and_grad` the forward's prints print once."""

from __future__ import annotations

import os

import numpy as np
import pytest

import myir
from tests.programs_check import DEFAULT_BACKENDS

BACKENDS = [b.strip() for b in os.environ.get("MYIR_TEST_BACKENDS", DEFAULT_BACKENDS).split(",")
            if b.strip() in ("python", "tvm")]


def straight(x):
    print("start", x)
    y = np.sin(x) * 2.0
    print("y =", y, sep=" ", end="!\n")
    return y


def in_loop(x, n):
    total = x
    for i in range(n):
        if i % 2:
            print("odd", i, end=";\n")
        else:
            print("even", i, sep="-")
        total = total + i
    print("total", total)
    return total


def early_return(x):
    if x > 0:
        print("positive", x)
        return x
    print("not positive", x)
    return -x


def in_while(x):
    while x < 10.0:
        print("x", x)
        x = x * 3.0
    return x


def same_text_twice(x):
    print("tick")
    y = x + 1.0
    print("tick")
    return y


def unused_value(x):
    y = x * 2.0
    print("only the print uses y", y)
    return x


def helper(x):
    print("helper", x)
    return x * 2.0


def calls_printing_helper(x):
    print("before")
    y = helper(x)
    print("after", y)
    return helper(y) + helper(x)


def loop_calls_helper(x):
    for i in range(3):
        x = helper(x)
    return x


def forward(x):
    print("forward got", x)
    z = np.sin(x) * x
    print("z", z)
    return np.sum(z)


CASES = [(straight, (0.5,)), (straight, (np.array([0.25, 1.0]),)), (in_loop, (1.5, 4)),
         (early_return, (2.0,)), (early_return, (-3.0,)), (in_while, (1.0,)),
         (same_text_twice, (1.0,)), (unused_value, (np.ones(2),)),
         (calls_printing_helper, (1.0,)), (loop_calls_helper, (1.0,))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f, args", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_prints_like_cpython(f, args, backend, capsys):
    want = f(*args)
    expected = capsys.readouterr().out
    got = myir.compile(f, backend=backend)(*args)
    assert capsys.readouterr().out == expected
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("transform", [myir.grad, myir.value_and_grad])
@pytest.mark.parametrize("f, x", [(forward, np.array([1.0, 2.0])), (calls_printing_helper, 1.0)],
                         ids=["forward", "calls_printing_helper"])
def test_forward_prints_once_under_grad(f, x, transform, backend, capsys):
    f(x)
    expected = capsys.readouterr().out
    transform(f, backend=backend)(x)
    assert capsys.readouterr().out == expected
