"""Python float arithmetic with IEEE 754's answers where CPython raises ZeroDivisionError.

Gradient rules divide by, or raise to a negative power, values that are 0 where the function
itself is fine: sqrt's slope at 0 is 1 / (2 * sqrt(0)), and x ** 0.5's is 0.5 * 0 ** -0.5.
numpy and JAX answer inf there (nan for 0 / 0), and so do the rules: they compute with these
two functions (the primitives `ieee_truediv` and `ieee_pow`), which are Python's `/` and
`**` wherever those do not raise.  numpy values never raise, so on arrays and numpy scalars
they are numpy's operators (the typed optimizer writes them so).

The third, `strong_zero` (a primitive too), is the rules' convention where such a slope meets
a zero sensitivity: the product is exactly 0, not IEEE's nan (see passes/grad_rules.py).
"""

from __future__ import annotations

import math

import numpy as np


def ieee_truediv(x, y):
    """x / y; where y is 0, ±inf, or nan for 0 / 0 and nan / 0."""
    try:
        return x / y
    except ZeroDivisionError:
        if x != x or x == 0:
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)


def ieee_pow(x, y):
    """x ** y; where x is 0 and y negative, inf (signed like x for an odd integer y)."""
    try:
        return x ** y
    except ZeroDivisionError:
        odd = math.isfinite(y) and y == int(y) and int(y) % 2 == 1
        return math.copysign(math.inf, x) if odd else math.inf


def strong_zero(d, x):
    """x, the contribution of a sensitivity d through a slope that may be infinite or nan,
    but exactly 0 (in x's type) where d is 0: a value no output depends on contributes
    nothing, whatever its slope (0 * inf would be nan)."""
    if type(x) is float and type(d) in (float, int):
        return x if d != 0 else 0.0
    out = np.where(np.equal(d, 0), np.zeros_like(x), x)
    if isinstance(x, np.ndarray) or np.ndim(out):
        return out
    return type(x)(out[()])
