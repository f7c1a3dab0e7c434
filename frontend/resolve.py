"""What names outside a function mean: module globals, builtins, `math` and `numpy` members.

Resolution happens at compile time, from the function's `__globals__`: functions are
parsed into graphs, numbers, tuples and arrays are embedded as constants (arrays copied: so
neither rebinding a module global after compiling nor writing into its array changes the
compiled function; a new compile sees the new values), and `np.NAME` / `math.NAME` map to
primitives through the tables below.
"""

from __future__ import annotations

import builtins
import difflib
import math
import types

import numpy as np

from frontend import builtin_functions, numpy_functions
from myir.ir.primitives import MATH_MORE, PRIMITIVES, Primitive

P = PRIMITIVES

# numpy functions reached as `np.NAME` (or `numpy.NAME`): primitives, or functions of
# frontend/numpy_functions.py (parsed into graphs where they are used).
NUMPY = {name: P[name] for name in (
    "exp log log1p expm1 sqrt sin cos tan arcsin arccos arctan sinh cosh tanh abs sign floor "
    "ceil square negative reciprocal maximum minimum arctan2 power where clip sum mean prod max "
    "min argmax argmin dot reshape transpose broadcast_to expand_dims squeeze concatenate "
    "stack zeros ones empty full zeros_like ones_like array asarray arange matmul swapaxes "
    ).split()}
NUMPY.update({name: getattr(numpy_functions, name) for name in ("shape", "ndim", "size")})
# numpy's API beyond the basics: ufuncs as primitives, the rest as compositions.
NUMPY.update({name: P[name] for name in (
    "cbrt log2 exp2 log10 arcsinh arccosh arctanh rint trunc isnan isinf isfinite hypot "
    "logaddexp logaddexp2").split()})
NUMPY.update({name: getattr(numpy_functions, name) for name in (
    "var std average ptp any all count_nonzero sinc nan_to_num outer inner vdot ravel "
    "atleast_1d atleast_2d atleast_3d moveaxis hstack vstack split flip fliplr flipud roll "
    "repeat tile pad diagonal trace diag triu tril linspace identity full_like diff append "
    "median isclose allclose logical_and logical_or logical_xor logical_not deg2rad rad2deg "
    "empty_like round around fmod copy").split()})
NUMPY.update({name: getattr(numpy_functions, name) for name in (
    "copy positive fabs float_power fmax fmin nansum nanmean heaviside").split()})
NUMPY.update({name: getattr(numpy_functions, name) for name in (
    "less less_equal greater greater_equal equal not_equal").split()})
NUMPY.update({"radians": NUMPY["deg2rad"], "degrees": NUMPY["rad2deg"]})
NUMPY.update({"absolute": P["abs"], "amax": P["max"], "amin": P["min"],
              "add": P["np_add"], "subtract": P["np_subtract"], "multiply": P["np_multiply"],
              "divide": P["np_divide"], "true_divide": P["np_divide"],
              "remainder": P["np_remainder"], "mod": P["np_remainder"],
              "floor_divide": P["np_floor_divide"]})

# numpy's linear algebra, contractions, scans, sorting and gathers: `np.NAME` and
# `np.linalg.NAME` (a namespace of its own).
NUMPY.update({name: P[name] for name in (
    "einsum tensordot convolve take_along_axis searchsorted").split()})
NUMPY.update({name: getattr(numpy_functions, name) for name in (
    "kron cross interp cumsum cumprod sort argsort take array_split hsplit vsplit "
    "column_stack dstack nanmax nanmin").split()})
NUMPY.update({name: getattr(numpy_functions, name) for name in (
    "quantile percentile nanquantile nanpercentile nanmedian cov corrcoef nanvar nanstd "
    "meshgrid tri eye rot90 signbit copysign trapezoid gradient fix logspace array_equal "
    "digitize correlate isin triu_indices tril_indices").split()})
LINALG = {name: P["linalg_" + name] for name in (
    "solve inv det slogdet cholesky eigh qr svd").split()}
LINALG.update({name: getattr(numpy_functions, name) for name in (
    "norm matrix_power pinv matrix_rank lstsq eigvalsh multi_dot").split()})

# Reductions that are primitives of (x, axis, keepdims), and clip of (x, lo, hi): a call
# with numpy's other arguments (dtype, out, where, initial; argmax's keepdims; clip's a_min,
# a_max, min, max) is numpy's signature, a composition.
REDUCTION_KEYWORDS = {name: getattr(numpy_functions, name) for name in ("sum", "mean", "prod")}
REDUCTION_KEYWORDS.update({name: getattr(numpy_functions, f"{name}_keywords")
                           for name in ("max", "min", "argmax", "argmin", "clip")})

# `np.UFUNC.METHOD(...)`: the reductions and scans of ufuncs.
UFUNC_METHODS = {(ufunc, method): getattr(numpy_functions, f"{ufunc}_{method}")
                 for ufunc, method in (("add", "reduce"), ("multiply", "reduce"),
                                       ("maximum", "reduce"), ("minimum", "reduce"),
                                       ("add", "accumulate"), ("multiply", "accumulate"))}
# The methods of any other binary ufunc, its fold, scan and outer application: compositions
# given the ufunc first (`np.logaddexp.reduce(x)` is `ufunc_reduce(np.logaddexp, x)`).
UFUNC_GENERIC_METHODS = {method: getattr(numpy_functions, f"ufunc_{method}")
                         for method in ("reduce", "accumulate", "outer")}


def is_binary_ufunc(name: str) -> bool:
    """Whether np.NAME is a numpy ufunc of two operands and one result that compiled code
    supports, so that its generic methods apply."""
    ufunc = getattr(np, name, None)
    return name in NUMPY and isinstance(ufunc, np.ufunc) and ufunc.nin == 2 and \
        ufunc.nout == 1 and ufunc.signature is None     # not a gufunc (np.matmul)

# numpy values reached as `np.NAME`: dtypes and constants.
NUMPY_VALUES = {name: getattr(np, name) for name in (
    "float16 float32 float64 int8 int16 int32 int64 uint8 bool_ pi e inf nan newaxis linalg"
).split()}

# `math` functions keep Python's semantics: they get their own primitives.
MATH = {name: P["math_" + name] for name in (
    "exp log log1p expm1 sqrt sin cos tan asin acos atan sinh cosh tanh fabs floor ceil "
    "pow atan2 hypot"
).split()}
MATH.update({name: P["math_" + name] for name in MATH_MORE.split()})
MATH_VALUES = {name: getattr(math, name) for name in ("pi", "e", "tau", "inf", "nan")}

# Builtins that are primitives.  range, zip, enumerate and reversed have special meaning in
# `for`.
BUILTINS = {"abs": P["builtin_abs"], "len": P["len"], "min": P["builtin_min"],
            "max": P["builtin_max"], "float": P["to_float"], "int": P["to_int"],
            "bool": P["to_bool"], "range": P["range"], "pow": P["pow"],
            "round": P["builtin_round"], "divmod": P["builtin_divmod"], "sum": P["builtin_sum"],
            "list": P["to_list"], "tuple": P["to_tuple"]}
# numpy functions of one array that take any number, each on its own: `np.atleast_1d(a, b)`
# is the sequence of `np.atleast_1d(a)` and `np.atleast_1d(b)`, of numpy's kind (a tuple
# since numpy 2, a list before).
EACH_ARGUMENT = frozenset({"atleast_1d", "atleast_2d", "atleast_3d"})
EACH_ARGUMENT_KIND = "make_tuple" if isinstance(np.atleast_1d(0, 0), tuple) else "make_list"

# Builtins that are compositions (frontend/builtin_functions.py).
BUILTIN_FUNCTIONS = {"sorted": builtin_functions.sorted_of}
# min(xs) / max(xs) of one iterable: compositions (frontend/builtin_functions.py).
ITERABLE_EXTREMA = {"builtin_min": builtin_functions.min_of,
                    "builtin_max": builtin_functions.max_of}

EXCEPTIONS = {name: getattr(builtins, name) for name in dir(builtins)
              if isinstance(getattr(builtins, name), type)
              and issubclass(getattr(builtins, name), Exception)}

# Methods and attributes of arrays: `x.sum(axis=0)` is `sum(x, axis=0)`.
METHODS = {"sum": P["sum"], "mean": P["mean"], "prod": P["prod"], "max": P["max"],
           "min": P["min"], "argmax": P["argmax"], "argmin": P["argmin"], "dot": P["dot"],
           "reshape": P["reshape"], "transpose": P["transpose"], "astype": P["astype"],
           "squeeze": P["squeeze"], "clip": P["clip"], "copy": P["copy"],
           "swapaxes": P["swapaxes"]}
# Methods that are numpy functions of frontend/numpy_functions.py: `x.var(axis=0)`.
METHODS.update({name: getattr(numpy_functions, name) for name in (
    "var std any all ravel trace diagonal repeat round cumsum cumprod take argsort item"
).split()})
METHODS["flatten"] = numpy_functions.ravel
# Methods of dicts (`copy` of arrays too).
METHODS.update({"items": P["dict_items"], "keys": P["dict_keys"], "values": P["dict_values"],
                "get": P["dict_get"], "copy": P["copy"]})
ATTRIBUTES = {"T": P["transpose"], "shape": P["shape"], "ndim": P["ndim"], "size": P["size"],
              "dtype": P["dtype"]}
# Updates of a local list, made functional: `xs.append(v)` is `xs = list_append(xs, v)`.
LIST_UPDATES = {"append", "extend", "pop", "insert", "remove", "sort", "reverse"}
MUTATING_METHODS = {"clear",
                    "update", "fill", "resize", "setdefault", "put", "itemset", "setflags"}

CONSTANT_TYPES = (int, float, complex, bool, str, type(None), np.ndarray, np.generic,
                  type(Ellipsis))


def is_embeddable(value) -> bool:
    """Values that may be embedded in a graph as constants."""
    if isinstance(value, tuple):
        return all(is_embeddable(v) for v in value)
    return isinstance(value, CONSTANT_TYPES) or (isinstance(value, type) and (
        issubclass(value, np.generic) or value in (float, int, bool)))


def frozen(value):
    """A constant as compiled code holds it: arrays copied and read-only, so the value is the
    one at compile time — in this process and in a program saved to disk alike — even if the
    program later writes into the array it came from."""
    if isinstance(value, np.ndarray):
        value = value.copy()
        value.flags.writeable = False
        return value
    if isinstance(value, tuple):
        return tuple(frozen(v) for v in value)
    return value


class Namespace:
    """A module used as a namespace (`np`, `math`): attribute access resolves statically."""

    def __init__(self, name: str, functions: dict[str, Primitive], values: dict):
        self.name = name
        self.functions = functions
        self.values = values

    def __repr__(self) -> str:
        return f"<namespace {self.name}>"


NAMESPACES = {np: Namespace("numpy", NUMPY, NUMPY_VALUES),
              np.linalg: Namespace("numpy.linalg", LINALG, {}),
              math: Namespace("math", MATH, MATH_VALUES)}


def namespace_of(value) -> Namespace | None:
    """The namespace a module value stands for (`np`, `math`), or None.  A numpy submodule
    without a table of its own (`np.fft`) is an empty namespace: its functions are refused
    by their full names rather than parsed from numpy's source."""
    if not isinstance(value, types.ModuleType):
        return None
    if value not in NAMESPACES and value.__name__.startswith("numpy."):
        NAMESPACES[value] = Namespace(value.__name__, {}, {})
    return NAMESPACES.get(value)


def module_of(namespace: Namespace) -> types.ModuleType:
    """The module a namespace stands for (`np.linalg` reached through `np`)."""
    return next(module for module, ns in NAMESPACES.items() if ns is namespace)


def numpy_member(value) -> tuple[Namespace, str] | None:
    """(namespace, name) of a supported numpy function reached without its module
    (`from numpy import exp`, `from numpy.linalg import norm`), or None if `value` is no
    supported numpy function; `unsupported_numpy(value)` says when it is an unsupported one."""
    for module, ns in list(NAMESPACES.items()):
        if not module.__name__.startswith("numpy"):
            continue
        for name in ns.functions:
            if getattr(module, name, None) is value:
                return ns, name
    return None


def is_numpy_function(value) -> bool:
    """Whether `value` is a function of numpy (which compiled code never parses)."""
    return callable(value) and not isinstance(value, type) and \
        str(getattr(value, "__module__", None)).partition(".")[0] == "numpy"


# Unsupported numpy functions with a supported form close to them, for the error's hint.
NEAREST = {
    "numpy.linalg.eig": "np.linalg.eigh(a) for a symmetric a",
    **{f"numpy.{name}": "a mask in arithmetic (x * (x > 0), np.where(x > 0, x, 0.0), "
                        "np.sum(x, where=x > 0)): compiled arrays have shapes that do not "
                        "depend on their values" for name in (
        "nonzero", "argwhere", "flatnonzero", "unique", "extract", "compress")},
    "numpy.mgrid": "np.reshape(np.arange(n), (-1, 1)) and np.reshape(np.arange(m), (1, -1))",
    "numpy.geomspace": "np.exp(np.linspace(np.log(start), np.log(stop), num))",
}


def unsupported(namespace: Namespace, attr: str) -> tuple[str, str]:
    """The error message and hint for `namespace.attr`, a function outside the coverage:
    its full name, and the supported functions nearest to it (docs/numpy.md lists them)."""
    candidates = [f"{ns.name}.{name}" for ns in NAMESPACES.values()
                  if ns.name.partition(".")[0] == namespace.name.partition(".")[0]
                  for name in ns.functions]
    full = f"{namespace.name}.{attr}"
    near = difflib.get_close_matches(full, candidates, n=3, cutoff=0.8)
    near += [c for c in candidates if c.rpartition(".")[2] == attr and c not in near]
    if full in NEAREST:
        hint = f"write {NEAREST[full]}"
    elif near:
        hint = f"the nearest supported: {', '.join(near)}"
    else:
        hint = f"write it with the supported {namespace.name.partition('.')[0]} functions"
    if namespace.name.startswith("numpy"):
        hint += "; docs/numpy.md lists every supported numpy function"
    return f"{namespace.name}.{attr} is not supported in compiled code", hint


def unwrap_function(value):
    """A user function behind a myir-compiled wrapper, or the value itself."""
    return getattr(value, "__myir_function__", value)


def lookup_global(name: str, fn_globals: dict):
    """The raw value of a global or builtin name, or raise KeyError."""
    if name in fn_globals:
        return fn_globals[name]
    b = fn_globals.get("__builtins__", builtins)
    b = b if isinstance(b, dict) else vars(b)
    return b[name]


def is_user_function(value) -> bool:
    return isinstance(value, types.FunctionType)
