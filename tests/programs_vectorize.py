"""Programs for tests/test_vectorize.py: scalar functions with branches, loops, calls and
closures, broadcast by `myir.vectorize` inside and outside compiled code."""


import numpy as np

import myir


# the bench row's cell (the HM-LSTM update with if/elif) and its loss
from bench.mixed_mode import cell, hmlstm_vec  # noqa: E402,F401


def piecewise(x, y):
    if x > y:
        r = x * y
    elif x < -0.5:
        r = np.sin(x) + y
    else:
        r = np.exp(x) - y * y
    return r


def with_closure(x, y):
    def scaled(a):
        return a * y + 1.0

    return scaled(x) * scaled(y)


def newton(a):
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


def loops(a, b):
    """A loop in a branch, a loop left by `break`, and a `while` on data in a `for`."""
    x = a
    if b > 0.0:
        k = 0
        while k < 3:
            x = 0.5 * (x + (b + 1.0) / x)
            k += 1
    n = 0
    while True:
        x = x + 0.25 * np.sin(x + b)
        n += 1
        if n >= 4:
            break
    for i in range(2):
        y = x + i * b
        while y > 1.0 and y < 1e300:
            y = y * 0.5
        x = x + y * y
    return x


def power(x, n):
    if n <= 0:
        return x / x
    return x * power(x, n - 1)


def fib(x, n):
    if n <= 1:
        return x
    return fib(x, n - 1) + 0.5 * fib(x, n - 2)


def loss_of_loops(a, b):
    return np.sum(myir.vectorize(loops)(a, b) ** 2)


def pair(x, y):
    return x + y, x * y


@myir.vectorize
def decorated(x, y):
    if x > 0.0:
        return x * y
    return y - x


def calls_decorated(x, y):
    return np.sum(decorated(x, y) * 2.0)


def vectorize_inside(x, y):
    return myir.vectorize(piecewise)(x, y) + 1.0


def loss(x, y):
    return np.sum(myir.vectorize(piecewise)(x, y))


def loss_of_closure(x, y):
    return np.sum(myir.vectorize(with_closure)(x, y) ** 2)


def loss_of_loop(a):
    return np.sum(myir.vectorize(newton)(a))


def returns_array(x):
    return np.ones(3) * x


def not_scalar(x):
    return np.sum(myir.vectorize(returns_array)(x))


def type_depends_on_value(x):
    if x > 0.0:
        return 1
    return 2.5


def mixed_types(x):
    return myir.vectorize(type_depends_on_value)(x)




def captures(x, a):
    def scaled(v):
        if v > 0.0:
            return v * a
        return -v * v

    return np.sum(myir.vectorize(scaled)(x))
