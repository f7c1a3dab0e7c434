"""Functions to try the command line on:

    python -m myir show examples/functions.py:poly --stage parsed
    python -m myir show examples/functions.py:f --grad x --stage expanded --format svg -o f.svg
    python -m myir run examples/functions.py:newton_sqrt 2.0 --grad a
"""

import numpy as np


def poly(x, a):
    y = a * x * x
    return y + np.sin(x) / a


def f(x, y):
    """Figure 1 of the Myia paper."""
    return x ** 3 * y ** 4


def newton_sqrt(a):
    """A `while` loop on data."""
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


def softmax(z):
    e = np.exp(z - np.max(z))
    return e / np.sum(e)


def logsumexp(z):
    """Its gradient is softmax(z): exactly so with --fastmath (see the typed stage)."""
    m = np.max(z)
    return np.log(np.sum(np.exp(z - m))) + m
