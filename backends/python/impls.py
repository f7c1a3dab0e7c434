"""The python backend's table of primitive implementations.

`SYNTAX` holds primitives the generated code writes as Python syntax (operators, indexing,
builtins): they then have exactly CPython's semantics, and cost nothing extra.  `IMPLS`
holds the rest as callables the generated code calls by name.  Every primitive is in one of
the two (tests/test_primitive_tables.py checks).
"""

from __future__ import annotations

import linecache
import math
import operator
import sys

import numpy as np

from myir.errors import Location, MyirTypeError
from myir.ir.primitives import UNBOUND

SYNTAX = {
    "add": "{} + {}", "sub": "{} - {}", "mul": "{} * {}", "truediv": "{} / {}",
    "floordiv": "{} // {}", "mod": "{} % {}", "pow": "{} ** {}", "matmul": "{} @ {}",
    "lt": "{} < {}", "le": "{} <= {}", "gt": "{} > {}", "ge": "{} >= {}", "eq": "{} == {}",
    "ne": "{} != {}", "is_": "{} is {}", "is_not": "{} is not {}",
    "neg": "-{}", "pos": "+{}", "invert": "~{}", "not_": "not {}", "truth": "bool({})",
    "getitem": "{}[{}]", "len": "len({})", "builtin_abs": "abs({})",
    "to_float": "float({})", "to_int": "int({})", "to_bool": "bool({})",
    "make_slice": "slice({}, {}, {})", "shape": "{}.shape", "ndim": "{}.ndim",
    "size": "{}.size", "dtype": "{}.dtype", "raise_": "raise {}",
}

# Variadic primitives written as Python syntax: name -> (prefix, suffix).
VARIADIC_SYNTAX = {
    "make_tuple": ("(", ")"), "range": ("range(", ")"), "builtin_min": ("min(", ")"),
    "builtin_max": ("max(", ")"),
}


def _unpack(x, n):
    """Tuple unpacking `a, b = x`: x must have exactly n elements, as Python checks."""
    if len(x) != n:
        if len(x) > n:
            raise ValueError(f"too many values to unpack (expected {n})")
        raise ValueError(f"not enough values to unpack (expected {n}, got {len(x)})")
    return x


def _check_bound(x, name):
    if x is UNBOUND:
        raise UnboundLocalError(
            f"cannot access local variable '{name}' where it is not associated with a value")
    return x


def _format(x, conversion, spec):
    if conversion == "r":
        x = repr(x)
    elif conversion == "s":
        x = str(x)
    elif conversion == "a":
        x = ascii(x)
    return format(x, spec)


def _caller_location(depth: int = 2) -> Location:
    """The user's source line running the generated code that called an implementation (the
    generated code carries the user's file and line numbers)."""
    frame = sys._getframe(depth)
    filename, line = frame.f_code.co_filename, frame.f_lineno
    text = linecache.getline(filename, line)
    return Location(filename, line, len(text) - len(text.lstrip()) + 1)


def _augmented(op, symbol):
    def aug(x, y):
        if isinstance(x, np.ndarray):
            raise MyirTypeError(
                f"`x {symbol}= y` on an array would update it in place, and here the array "
                "is shared (with another variable, a tuple, a closure or the caller); "
                "compiled functions never mutate arrays", _caller_location(),
                hint=f"write `x = x {symbol} y` to make a new array")
        return op(x, y)
    aug.__name__ = f"aug_{op.__name__}"
    return aug


def _make_exception(cls, *args):
    return cls(*args)


def _switch(cond, if_true, if_false):
    return if_true if cond else if_false


def _transpose(x, axes=None):
    return np.transpose(x, axes)


def _reshape(x, shape):
    return np.reshape(x, shape)


def _astype(x, dtype):
    if not isinstance(x, np.ndarray):
        raise MyirTypeError(f"`.astype` needs an array, got {type(x).__name__}")
    return x.astype(dtype)


def _sum_like(fn):
    def reduce(x, axis=None, keepdims=False):
        return fn(x, axis=axis, keepdims=keepdims)
    reduce.__name__ = fn.__name__
    return reduce


IMPLS = {
    **{name: getattr(np, name) for name in (
        "exp log log1p expm1 sqrt sin cos tan arcsin arccos arctan sinh cosh tanh abs sign "
        "floor ceil square negative reciprocal maximum minimum arctan2 power where clip "
        "argmax argmin dot broadcast_to expand_dims squeeze concatenate stack zeros ones empty "
        "full zeros_like ones_like array asarray arange eye").split()},
    **{name: _sum_like(getattr(np, name)) for name in ("sum", "mean", "prod", "max", "min")},
    **{"math_" + name: getattr(math, name) for name in (
        "exp log log1p expm1 sqrt sin cos tan asin acos atan sinh cosh tanh fabs floor ceil "
        "pow atan2 hypot").split()},
    "transpose": _transpose,
    "reshape": _reshape,
    "astype": _astype,
    "cast": lambda x, dtype: dtype(x),
    "unpack": _unpack,
    **{"aug_" + name: _augmented(getattr(operator, name), symbol) for name, symbol in (
        ("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"), ("floordiv", "//"),
        ("mod", "%"), ("pow", "**"), ("matmul", "@"))},
    "make_exception": _make_exception,
    "check_bound": _check_bound,
    "depend": lambda x, effect: x,
    "format": _format,
    "concat_str": lambda *parts: "".join(parts),
    "switch": _switch,
}
