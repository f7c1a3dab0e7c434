"""What a tangent given to `jvp` must be, said once for the three places that check it: the
type rule of `jvp_check_tangent` (at compile time, from abstract values), its python
implementation (at run time, where inference could not tell) and `myir.jvp` (before
compiling, at the caller's line).

As in JAX, a tangent has its primal's shape and dtype; a Python float's tangent is a float
(or a numpy float64 scalar).  Integers and booleans have no tangent: theirs must be integers
or booleans of the same shape (JAX's float0), and forward mode treats them as zero."""

from __future__ import annotations

import numpy as np


def describe(shape: tuple, dtype: np.dtype) -> str:
    if shape == ():
        return f"a {dtype} scalar"
    return f"a {dtype} array of shape {shape}"


def mismatch(x: tuple, t: tuple, index: int) -> tuple[str, str] | None:
    """(message, hint) when a tangent `t` cannot go with primal `x`, else None; each is
    (shape, dtype)."""
    (xs, xd), (ts, td) = x, t
    discrete = xd.kind in "biu"
    fits = xs == ts and (td.kind in "biu" if discrete else td == xd)
    if fits:
        return None
    want = f"an integer or boolean {'scalar' if xs == () else f'array of shape {xs}'}" \
        if discrete else describe(xs, xd)
    make = "0" if xs == () else f"np.zeros({xs}, {'int' if discrete else xd.name!r})"
    if xs == () and not discrete:
        make = "0.0" if xd == np.float64 else f"np.{xd.name}(0.0)"
    return (f"jvp: tangent {index} must match primal {index}, {describe(xs, xd)}; it is "
            f"{describe(ts, td)}",
            f"pass {want} as tangent {index} (for example `{make}` plus the direction)"
            + (": an integer input has no derivative, its tangent is taken as 0"
               if discrete else ""))


def of_value(v) -> tuple | None:
    """(shape, dtype) of a number or array; None for anything else (tuples and containers
    are checked leaf by leaf by the caller)."""
    if isinstance(v, np.ndarray):
        return v.shape, v.dtype
    if isinstance(v, (bool, int, float, complex, np.generic)):
        return (), np.dtype(type(v))
    return None
