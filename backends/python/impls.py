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

from myir import tree
from myir.errors import Location, MyirTypeError, raises_for_the_caller
from myir.ir import einsum, tangents
from myir.ir.ieee import ieee_pow, ieee_truediv, strong_zero
from myir.ir.primitives import CONVERSION_TYPES, IN_PLACE, MATH_MORE, UNBOUND
from myir.ir.values import EMPTY_STACK, NEWENV, Env, is_stack, stack_push

SYNTAX = {
    "add": "{} + {}", "sub": "{} - {}", "mul": "{} * {}", "truediv": "{} / {}",
    "floordiv": "{} // {}", "mod": "{} % {}", "pow": "{} ** {}", "matmul": "{} @ {}",
    "lt": "{} < {}", "le": "{} <= {}", "gt": "{} > {}", "ge": "{} >= {}", "eq": "{} == {}",
    "ne": "{} != {}", "bitand": "{} & {}", "bitor": "{} | {}", "bitxor": "{} ^ {}",
    "lshift": "{} << {}", "rshift": "{} >> {}", "is_": "{} is {}", "is_not": "{} is not {}",
    "neg": "-{}", "pos": "+{}", "invert": "~{}", "not_": "not {}", "truth": "bool({})",
    "getitem": "{}[{}]", "len": "len({})", "builtin_abs": "abs({})",
    "builtin_round": "round({}, {})", "builtin_divmod": "divmod({}, {})",
    "to_float": "float({})", "to_int": "int({})", "to_bool": "bool({})",
    "make_slice": "slice({}, {}, {})", "shape": "{}.shape", "ndim": "{}.ndim",
    "size": "{}.size", "dtype": "{}.dtype", "raise_": "raise {}",
    # dicts (see `_DICT_IMPLS`)
    "dict_setitem": "{{**{}, {}: {}}}", "dict_get": "{}.get({}, {})", "copy": "{}.copy()",
    "dict_keys": "{}.keys()", "dict_values": "{}.values()", "dict_items": "{}.items()",
    "dict_cons": "{{{}: {}, **{}}}", "contains": "{} in {}",
    "to_list": "list({})", "to_tuple": "tuple({})", "builtin_sum": "sum({}, {})",
    "list_append": "{} + [{}]", "list_extend": "[*{}, *{}]", "seq_repeat": "{} * {}",
    "stack_empty": "not {}",   # EMPTY_STACK is the one false stack (myir/ir/values.py)
}

# Variadic primitives written as Python syntax: name -> (prefix, suffix).
VARIADIC_SYNTAX = {
    "make_tuple": ("(", ")"), "range": ("range(", ")"), "builtin_min": ("min(", ")"),
    "builtin_max": ("max(", ")"), "make_list": ("[", "]"),
}


# Operations kept only for the exception they may raise (`passes.raising`): a condition on
# real-number operands (Python or numpy scalars, named by `{}` in order) under which the
# operation cannot raise.  The generated code runs `if not (guard): operation`, so where the
# guard fails (x <= 0 for math.log, say, or NaN) the operation itself runs and raises
# exactly what CPython raises, or nothing; the common case costs one comparison.
GUARDS = {
    "truediv": "{1}", "floordiv": "{1}", "mod": "{1}",
    "math_log": "{0} > 0", "math_log1p": "{0} > -1", "math_sqrt": "{0} >= 0",
    "math_asin": "{0} * {0} <= 1", "math_acos": "{0} * {0} <= 1",
    "math_exp": "{0} < 709", "math_expm1": "{0} < 709",
    "math_sinh": "{0} * {0} < 5e5", "math_cosh": "{0} * {0} < 5e5",
    "math_sin": "{0} - {0} == 0", "math_cos": "{0} - {0} == 0", "math_tan": "{0} - {0} == 0",
    "math_floor": "{0} - {0} == 0", "math_ceil": "{0} - {0} == 0", "to_int": "{0} - {0} == 0",
}


def pow_guard(exponent) -> str | None:
    """The guard of `x ** n` for a constant n > 0 (Python floats: only an overflow raises,
    0.0 ** n and a negative x ** 0.5, a complex number, do not): |x| below the n-th root of
    1e308, as x * x against its square.  None for other exponents."""
    if type(exponent) not in (int, float) or not 0 < exponent < 1e6:
        return None
    return "{0} * {0} < " + repr(1e308 if exponent <= 2 else 1e308 ** (2 / exponent))


@raises_for_the_caller
def _unpack(x, n):
    """Tuple unpacking `a, b = x`: x must have exactly n elements, as Python checks."""
    if len(x) != n:
        if len(x) > n:
            raise ValueError(f"too many values to unpack (expected {n})")
        raise ValueError(f"not enough values to unpack (expected {n}, got {len(x)})")
    return x


@raises_for_the_caller
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
                hint=f"write `x = x {symbol} y` to make a new array, or copy it first: "
                "`x = x.copy()`")
        return op(x, y)
    aug.__name__ = f"aug_{op.__name__}"
    return aug


def _in_place(name):
    """`y[index] op= v`'s operation on the indexed part `x`: Python's `x op= v`, on a copy
    of an array or list (which Python would update in place, seen through `y` only after
    the setitem that follows), so numpy casts, broadcasts and raises as in CPython."""
    op = getattr(operator, IN_PLACE[name])

    def update(x, y):
        return op(x.copy() if isinstance(x, (np.ndarray, list)) else x, y)
    update.__name__ = f"inplace_{name}"
    return update


def grad_zeros(x):
    if isinstance(x, np.ndarray):
        return np.zeros_like(x)
    if isinstance(x, (bool, int)) and not isinstance(x, np.generic):
        return 0
    if isinstance(x, float):
        return type(x)(0.0) if isinstance(x, np.generic) else 0.0
    if isinstance(x, np.generic):
        return type(x)(0)
    if is_stack(x):         # before containers: a stack's cells are tuples
        return EMPTY_STACK      # a stack's zero sensitivity (passes/ad.py)
    if tree.kind(x) is not tree.LEAF:
        return tree.map(grad_zeros, x)
    if isinstance(x, Env) or callable(x):
        return NEWENV
    return None


def gadd(x, y):
    if isinstance(x, (np.ndarray, np.generic, float, int)):   # most sensitivities: no walk
        return x if y is None else x + y
    if is_stack(x):         # before containers: a stack's cells are tuples
        return _gadd_stacks(x, y)
    if tree.kind(x) is not tree.LEAF:
        return tree.map(gadd, x, y)
    if isinstance(x, Env):
        items = dict(x.items)
        for key, value in y.items.items():
            items[key] = gadd(items[key], value) if key in items else value
        return Env(items)
    if x is None:
        return y
    if y is None:
        return x
    return x + y


def _gadd_stacks(x, y):
    """The sum of two stacks of sensitivities, item by item; an exhausted one stands for
    zeros (EMPTY_STACK is a stack's zero).  Iterative: a stack is as deep as its loop."""
    tops = []
    while x is not EMPTY_STACK and y is not EMPTY_STACK:
        tops.append(gadd(x[0], y[0]))
        x, y = x[1], y[1]
    s = y if x is EMPTY_STACK else x
    for top in reversed(tops):
        s = stack_push(s, top)
    return s


def _env_getitem(env, key, default):
    return env.items.get(key, default)


def _env_setitem(env, key, value):
    items = dict(env.items)
    items[key] = value
    return Env(items)


def sum_to_like(d, x):
    if not isinstance(x, np.ndarray):
        return d.sum() if isinstance(d, np.ndarray) else d
    if np.shape(d) == x.shape:
        return d
    d = np.asarray(d)
    lead = d.ndim - x.ndim
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(x.shape) if n == 1 and d.shape[lead + i] != 1)
    return d.sum(axis=axes, keepdims=True).reshape(x.shape)


def sum_to_side(d, x, right):
    """x's part of d, the sensitivity of `x + y` (or of `y + x` if `right`): where `+`
    concatenates sequences (tuples, lists), the items of d at x's side, as many as x has,
    in x's container type; for numbers and arrays, d summed down to x's shape."""
    if isinstance(x, (tuple, list)):
        n = len(x)
        return tree.rebuild(x, d[len(d) - n:] if right else d[:n])
    return sum_to_like(d, x)


def broadcast_to_side(d, x, right):
    """The adjoint of `sum_to_side`: d, the sensitivity of one side of the concatenation x
    (the right one if `right`), at its place in a sensitivity of x, zeros elsewhere; for
    numbers and arrays, d broadcast up to x's shape."""
    if isinstance(x, (tuple, list)):
        start = len(x) - len(d) if right else 0
        return getitem_grad(x, slice(start, start + len(d)), d)
    return broadcast_to_like(d, x)


def broadcast_to_like(d, x):
    # np.array, not np.ascontiguousarray: that makes a 0-d array 1-d
    return np.array(np.broadcast_to(d, x.shape)) if isinstance(x, np.ndarray) else d


def reduce_grad(dout, x, axis, keepdims):
    if type(x) is list or type(x) is tuple:   # numpy reduced the array it makes of x
        return array_grad(x, reduce_grad(dout, np.asarray(x), axis, keepdims))
    if not isinstance(x, np.ndarray):
        return dout
    if axis is not None and not keepdims:
        dout = np.expand_dims(dout, axis)
    # A real array, not a stride-0 view: BLAS (matmul) would not take a view of a row
    # (np.array: np.ascontiguousarray makes a 0-d array 1-d).
    return np.array(np.broadcast_to(dout, x.shape))


def getitem_grad(x, index, dout):
    """The sensitivity of container or array `x` when `x[index]` has sensitivity `dout`:
    zeros but there."""
    if tree.kind(x) is not tree.LEAF:
        grads = list(tree.children(grad_zeros(x)))
        if isinstance(index, slice):
            for i, g in zip(range(*index.indices(len(x))), dout):
                grads[i] = g
        else:
            by_name = tree.kind(x) is dict or isinstance(index, str)   # a key, a field
            grads[tree.keys(x).index(index) if by_name else index] = dout
        return tree.rebuild(x, grads)
    if isinstance(x, np.ndarray):
        d = np.zeros_like(x)
        np.add.at(d, index, dout)
        return d
    if isinstance(x, np.inexact):   # a numpy float indexed as a 0-d array: x[()], x[None]
        d = np.zeros_like(np.asarray(x))
        np.add.at(d, index, dout)
        return d[()]
    return grad_zeros(x)


def grad_seed(out):
    """The gradient of the output with respect to itself: 1, for a float scalar output (a
    0-d array is one; an array of shape (1,) is not, as in JAX); 0 for an integer or a
    bool, which inference refuses as the only type of the output but lets through where the
    output is a float on other paths (an accumulator started at `0`): where it is an
    integer, it is constant."""
    if isinstance(out, (float, np.floating)):
        return type(out)(1.0)
    if isinstance(out, (int, np.integer, np.bool_)):
        return 0
    if isinstance(out, np.ndarray) and out.ndim == 0 and out.dtype.kind == "f":
        return np.ones_like(out)
    if isinstance(out, np.ndarray) and out.ndim:
        raise MyirTypeError(
            f"grad() and hessian() need a function returning a scalar; this one returned an "
            f"array of shape "
            f"{out.shape}", _caller_location(),
            hint="reduce the output to a scalar (e.g. np.sum without keepdims, or `[0]` of a "
                 "1-element array), or take a vector-Jacobian product: value_and_grad of "
                 "`np.sum(f(x) * v)`")
    raise MyirTypeError(f"grad() needs a function returning a float; this one returned "
                        f"{type(out).__name__}", _caller_location(),
                        hint="return a float (an integer or boolean output has no gradient)")


def grad_check_input(x, name):
    kind = type(x).__name__
    bad = isinstance(x, (bool, int, np.integer, np.bool_)) or (
        isinstance(x, np.ndarray) and x.dtype.kind in "biu")
    if bad:
        raise MyirTypeError(
            f"cannot differentiate with respect to '{name}': it is {kind}"
            + (f" of dtype {x.dtype}" if isinstance(x, np.ndarray) else ""),
            _caller_location(),
            hint=f"pass a float for '{name}', or differentiate with respect to other parameters")
    return x


def jvp_check_tangent(x, t, index):
    """t, the tangent of jvp's primal x, if it fits x (`myir/ir/tangents.py`); the zero of x
    for an integer or boolean x, which has no tangent.  Inference checks what it can when
    compiling; this checks what it could not tell."""
    if tree.kind(x) is not tree.LEAF and tree.kind(t) is tree.kind(x):
        return tree.map(lambda a, b: jvp_check_tangent(a, b, index), x, t)
    fx = tangents.of_value(x)
    if fx is None:
        return t
    problem = tangents.mismatch(fx, tangents.of_value(t) or ((), np.dtype(object)), index)
    if problem is not None:
        raise MyirTypeError(problem[0], _caller_location(), hint=problem[1])
    return grad_zeros(x) if fx[1].kind in "biu" else t


def grad_cast(d, x):
    """d, the gradient of parameter x, in x's type, as JAX gives a gradient its parameter's
    dtype: a float's gradient is a float, a numpy scalar's a scalar of its type, an array's
    an array of its dtype and shape (a float32 array multiplied by a float64 one gets a
    float32 gradient); containers (myir.tree) leaf by leaf.  Anything else (ints, functions) keeps d, and so
    does a complex d of a real x (`x ** 0.5` of a negative float is complex in CPython)."""
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "fc" or not isinstance(d, (np.ndarray, np.generic, float, int)) \
                or np.result_type(d).kind == "c" != x.dtype.kind:
            return d
        if type(d) is np.ndarray and d.dtype == x.dtype and d.shape == x.shape:
            return d
        return np.asarray(d, x.dtype).reshape(x.shape)
    if isinstance(x, (float, complex, np.inexact)):
        if type(d) is type(x):
            return d
        if isinstance(d, np.ndarray):
            d = d.reshape(())
        if isinstance(d, (complex, np.complexfloating)) \
                and not isinstance(x, (complex, np.complexfloating)):
            return d
        return type(x)(d)
    if tree.kind(x) is not tree.LEAF and tree.kind(d) is tree.kind(x):
        return tree.map(grad_cast, d, x)
    return d


# Jacobians of trees (passes/jacobian_loops.py).  A Jacobian is computed as one matrix, a row
# per number of the output tree and a column per number of the input tree (leaves in
# myir.tree's order, each in C order); these take trees apart into that matrix's vectors and
# cut the matrix into JAX's blocks.  Inference refuses leaves that are not numbers or arrays.


def tree_ravel(x):
    """x's numbers as one vector, of the dtype numpy gives them together (an array alone:
    its elements)."""
    if isinstance(x, np.ndarray):
        return x.reshape(-1)
    leaves = tree.leaves(x)
    dtype = np.result_type(*(np.asarray(leaf).dtype for leaf in leaves)) if leaves \
        else np.dtype(float)
    return np.concatenate([np.asarray(leaf, dtype).reshape(-1) for leaf in leaves]) \
        if leaves else np.zeros(0, dtype)


def tree_unravel(like, v):
    """The tree of `like`'s structure and types holding the numbers of vector v: a float
    leaf takes its part of v (`grad_cast` to its type), any other leaf its zero (an integer
    has no tangent)."""
    if isinstance(like, np.ndarray):
        return grad_cast(v, like) if like.dtype.kind in "fc" else grad_zeros(like)
    leaves, structure = tree.flatten(like)
    parts, start = [], 0
    for leaf in leaves:
        n = np.size(leaf)
        inexact = isinstance(leaf, (float, complex, np.inexact)) or (
            isinstance(leaf, np.ndarray) and leaf.dtype.kind in "fc")
        parts.append(grad_cast(v[start:start + n].reshape(np.shape(leaf)), leaf) if inexact
                     else grad_zeros(leaf))
        start += n
    return tree.unflatten(structure, parts)


def _offsets(leaves) -> list:
    sizes = [int(np.size(leaf)) for leaf in leaves]
    return [sum(sizes[:k]) for k in range(len(sizes) + 1)]


def jacobian_blocks(out, x, jac):
    """The blocks of jac, as JAX's Jacobians: a tree of out's structure whose leaf o is a
    tree of x's structure whose leaf xi is the block of o's rows and xi's columns, of shape
    `o.shape + xi.shape` and o's dtype."""
    outs, out_structure = tree.flatten(out)
    xs, x_structure = tree.flatten(x)
    rows, cols = _offsets(outs), _offsets(xs)
    blocks = [tree.unflatten(x_structure, [
        jac[rows[k]:rows[k + 1], cols[j]:cols[j + 1]].astype(np.asarray(o).dtype).reshape(
            np.shape(o) + np.shape(xi)) for j, xi in enumerate(xs)])
        for k, o in enumerate(outs)]
    return tree.unflatten(out_structure, blocks)


def jacobian_unblocks(out, x, blocks):
    """The matrix `jacobian_blocks` cuts into `blocks` (their transposition, for gradients)."""
    outs, xs = tree.leaves(out), tree.leaves(x)
    parts = tree.leaves(blocks)
    if not outs or not xs:
        return np.zeros((_offsets(outs)[-1], _offsets(xs)[-1]))
    return np.block([[np.reshape(parts[k * len(xs) + j], (np.size(o), np.size(xi)))
                      for j, xi in enumerate(xs)] for k, o in enumerate(outs)])


# Dicts and records.  make_dict, make_record and getattr_ are written as Python syntax by the
# code generator (`{'W': w}`, `Layer(w, b)`, `p.W`); these callables are for a primitive
# passed around as a value.
def _make_dict(*keys_and_values):
    return dict(zip(keys_and_values[::2], keys_and_values[1::2]))


def _record_replace(x, name, value):
    """x with its field `name` set to value: a new NamedTuple or dataclass instance."""
    return tree.rebuild(x, [value if k == name else v
                            for k, v in zip(tree.keys(x), tree.children(x))])


_DICT_VIEWS = (dict, type({}.keys()), type({}.values()), type({}.items()))


def _iter_keys(x):
    """What `for v in x` walks, as a sequence the loop indexes: a dict's keys, the items of
    a dict's view (`.items()`), else x."""
    return tuple(x) if isinstance(x, _DICT_VIEWS) else x


_DICT_IMPLS = {
    "make_dict": _make_dict,
    "make_record": lambda cls, *values: cls(*values),
    "getattr_": getattr,
    "record_replace": _record_replace,
    "iter_keys": _iter_keys,
    "comp_length": lambda n, what: n,
    "comp_next": lambda i, n: i + 1,
    "dict_pick": lambda d, like: {k: d[k] if k in d else grad_zeros(like[k]) for k in like}
    if type(like) is dict else d,
    "children": lambda x: tuple(tree.children(x)),
    "rebuild": tree.rebuild,
    "dict_items_grad": lambda d, dout: dict(zip(d, (pair[1] for pair in dout))),
    "iter_keys_grad": lambda x, dout: grad_zeros(x) if type(x) is dict else dout,
}


def select_grad(out, x, dout, count):
    return dout / count if x == out else grad_zeros(dout)


def concat_grad(arrays, axis, dout):
    if axis is None:    # the arrays were flattened: each piece back in its array's shape
        ends = np.cumsum([np.size(a) for a in arrays])[:-1]
        return tuple(np.reshape(d, np.shape(a)) for d, a in zip(np.split(dout, ends), arrays))
    ends = np.cumsum([np.shape(a)[axis] for a in arrays])[:-1]
    return tuple(np.split(dout, ends, axis=axis))


def _list_pop(xs, index=-1):
    """`xs.pop(index)` without changing xs: (the item, a new list without it), raising
    CPython's IndexError and TypeError."""
    rest = list(xs)
    return rest.pop(index), rest


def _setitem_slot(x, index, value):
    """(the index of `setitem(x, index, value)` that holds value, the part of x it
    replaced, or value where that has value's structure): for a list's slice of step 1,
    which the assignment may lengthen or shorten (`xs[1:3] = [v]`), the slice of value's
    length at its start and x's items there; else index and value themselves."""
    if isinstance(x, list) and isinstance(index, slice):
        start, stop, step = index.indices(len(x))
        if step == 1:
            return slice(start, start + len(value)), x[index]
    return index, value


def _list_unpop(rest, index, x):
    """The list that `pop(index)` took x from, leaving `rest` (pop's adjoint)."""
    k = index if index >= 0 else index + len(rest) + 1
    return rest[:k] + [x] + rest[k:]


def _list_order(xs, reverse):
    return sorted(range(len(xs)), key=xs.__getitem__, reverse=reverse)


def sum_grad(xs, dout):
    """The gradient of each item of `xs` in `sum(xs, start)` with gradient dout: dout summed
    to the item's shape, in xs's structure (the rows of an array; a tuple for a dict's
    `.values()`, which compiled code treats as the tuple of its values)."""
    if isinstance(xs, np.ndarray):
        if not len(xs):
            return np.zeros_like(xs)
        return np.array(np.broadcast_to(sum_to_like(dout, xs[0]), xs.shape))
    return (list if type(xs) is list else tuple)(sum_to_like(dout, x) for x in xs)


_DICT_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))


def seq_grad(d, x):
    """d, the gradients of x's items as a sequence, in x's kind: a list for a list, a tuple
    for a tuple, the array of the rows for an array (the adjoint of list(x) and tuple(x),
    and of np.stack / np.concatenate of a list); a tuple for a dict's view (`list(d.values())`),
    as inference types it."""
    if type(x) is list or type(x) is tuple:
        return type(x)(d)
    if isinstance(x, _DICT_VIEWS):
        return tuple(d)
    return np.asarray(d)


def array_grad(x, dout):
    """The gradient of x, nested lists and tuples of numbers and arrays, in `np.array(x)`
    whose gradient is the array dout: dout's parts in x's structure."""
    if type(x) is list or type(x) is tuple:
        return type(x)(array_grad(v, dout[i]) for i, v in enumerate(x))
    return grad_cast(dout, x)


def _print(previous, sep, end, args):
    print(*args, sep=sep, end=end)


def _make_exception(cls, *args):
    return cls(*args)


def _switch(cond, if_true, if_false):
    return if_true if cond else if_false


def _transpose(x, axes=None):
    return np.transpose(x, axes)


def _reshape(x, shape):
    return np.reshape(x, shape)


def _astype(x, dtype):
    if not isinstance(x, (np.ndarray, np.generic)):
        raise MyirTypeError(f"`.astype` needs a numpy array or scalar, got {type(x).__name__}",
                            _caller_location())
    return x.astype(dtype)


def setitem(x, index, value):
    """x with x[index] = value, as a new value: x itself is never changed (the generated
    code writes `x[index] = value` in place instead where x is dead, see codegen.py).  Any
    value with `.copy()` and item assignment: arrays (numpy casts the value to x's dtype),
    lists, dicts."""
    y = x.copy()
    y[index] = value
    return y


def _sum_like(fn):
    def reduce(x, axis=None, keepdims=False):
        return fn(x, axis=axis, keepdims=keepdims)
    reduce.__name__ = fn.__name__
    return reduce


# numpy.linalg, einsum, scans, sorting and gathers: numpy computes them.  Results numpy
# gives as named tuples (`EighResult`, ...) are plain tuples, what compiled code unpacks.


def _tuple_result(fn):
    def call(*args):
        result = fn(*args)
        return tuple(result) if isinstance(result, tuple) else result
    call.__name__ = fn.__name__
    return call


def _linalg_svd(a, full_matrices=True, compute_uv=True):
    result = np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(result) if compute_uv else result


def _axis_index(ndim, axis, index):
    """The index that puts `index` at `axis` of an array of `ndim` dimensions."""
    return (slice(None),) * (axis % ndim) + (index,)


def take_grad(x, indices, axis, dout):
    """The gradient of np.take: dout added into zeros like x at the indices taken."""
    d = np.zeros(np.shape(x), np.result_type(dout))
    indices = np.asarray(indices)  # a tuple of indices is one index array, as np.take reads it
    if axis is None:
        np.add.at(d.reshape(-1), indices, dout)
    else:
        np.add.at(d, _axis_index(d.ndim, axis, indices), dout)
    return d


def take_along_axis_grad(x, indices, axis, dout):
    """The gradient of np.take_along_axis: dout added into zeros like x where it was read."""
    d = np.zeros(np.shape(x), np.result_type(dout))
    if axis is None:
        np.add.at(d.reshape(-1), indices, dout)
        return d
    axis %= d.ndim
    shape = np.shape(dout)
    index = list(np.ix_(*(np.arange(n) for n in shape)))
    index[axis] = np.broadcast_to(indices, shape)
    np.add.at(d, tuple(index), dout)
    return d


LINALG_IMPLS = {
    "linalg_solve": np.linalg.solve,
    "linalg_inv": np.linalg.inv,
    "linalg_det": np.linalg.det,
    "linalg_slogdet": _tuple_result(np.linalg.slogdet),
    "linalg_cholesky": np.linalg.cholesky,
    "linalg_eigh": _tuple_result(np.linalg.eigh),
    "linalg_qr": _tuple_result(np.linalg.qr),
    "linalg_svd": _linalg_svd,
    "einsum": np.einsum,
    "einsum_grad": einsum.gradients,
    "tensordot": np.tensordot,
    "tensordot_grad": einsum.tensordot_gradients,
    "convolve": np.convolve,
    "cumsum": np.cumsum,
    "cumprod": np.cumprod,
    "sort": np.sort,
    "take": np.take,
    "take_grad": take_grad,
    "take_along_axis": np.take_along_axis,
    "take_along_axis_grad": take_along_axis_grad,
    "searchsorted": np.searchsorted,
}

# numpy ufuncs added for numpy's API coverage (myir.ir.primitives, "numpy ufuncs").
_NUMPY_UFUNCS = ("cbrt log2 exp2 log10 arcsinh arccosh arctanh rint trunc isnan isinf isfinite "
                 "hypot logaddexp logaddexp2").split()

# np.add and co.: numpy's arithmetic, apart from Python's operators (myir.ir.primitives).
_NUMPY_ARITHMETIC = ("add", "subtract", "multiply", "divide", "remainder", "floor_divide")

IMPLS = {
    **{name: getattr(np, name) for name in (
        "exp log log1p expm1 sqrt sin cos tan arcsin arccos arctan sinh cosh tanh abs sign "
        "floor ceil square negative reciprocal maximum minimum arctan2 power where clip "
        "argmax argmin dot broadcast_to expand_dims squeeze concatenate stack zeros ones empty "
        "full zeros_like ones_like array asarray arange swapaxes").split()},
    **{name: getattr(np, name) for name in _NUMPY_UFUNCS},
    **{"np_" + name: getattr(np, name) for name in _NUMPY_ARITHMETIC},
    **{name: _sum_like(getattr(np, name)) for name in ("sum", "mean", "prod", "max", "min")},
    **{"math_" + name: getattr(math, name) for name in MATH_MORE.split()},
    **{"math_" + name: getattr(math, name) for name in (
        "exp log log1p expm1 sqrt sin cos tan asin acos atan sinh cosh tanh fabs floor ceil "
        "pow atan2 hypot").split()},
    "argsort": lambda x, axis=-1, stable=False: np.argsort(x, axis, "stable" if stable else None),
    "eye": lambda n, dtype=None: np.eye(n, dtype=dtype),   # np.eye's second parameter is M
    "transpose": _transpose,
    "reshape": _reshape,
    "astype": _astype,
    "cast": lambda x, dtype: dtype(x),
    "unpack": _unpack,
    "setitem": setitem,
    "not_a_view": lambda x, message, hint: x,
    "list_of_length": lambda xs, n: xs,
    **{"aug_" + name: _augmented(getattr(operator, name), symbol) for name, symbol in (
        ("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"), ("floordiv", "//"),
        ("mod", "%"), ("pow", "**"), ("matmul", "@"))},
    **{"inplace_" + name: _in_place(name) for name in IN_PLACE},
    "make_exception": _make_exception,
    "grad_zeros": grad_zeros,
    "gadd": gadd,
    "env_getitem": _env_getitem,
    "env_setitem": _env_setitem,
    "sum_to_like": sum_to_like,
    "sum_to_side": sum_to_side,
    "broadcast_to_side": broadcast_to_side,
    "broadcast_to_like": broadcast_to_like,
    "reduce_grad": reduce_grad,
    "getitem_grad": getitem_grad,
    "grad_seed": grad_seed,
    "grad_check_input": grad_check_input,
    "jvp_check_tangent": jvp_check_tangent,
    "grad_cast": grad_cast,
    "tree_ravel": tree_ravel,
    "tree_unravel": tree_unravel,
    "jacobian_blocks": jacobian_blocks,
    "jacobian_unblocks": jacobian_unblocks,
    "ieee_truediv": ieee_truediv,
    "ieee_pow": ieee_pow,
    "strong_zero": strong_zero,
    "select_grad": select_grad,
    "concat_grad": concat_grad,
    "unstack": lambda x, axis: tuple(np.moveaxis(x, axis, 0)),
    "check_bound": _check_bound,
    "depend": lambda x, effect: x,
    "print_": _print,
    "format": _format,
    "concat_str": lambda *parts: "".join(parts),
    "switch": _switch,
    # np.vectorize's semantics exactly: the output dtype is that of f's result on the first
    # element (inference typed it statically: passes/vectorize.py)
    "vectorize_call": lambda f, *xs: np.vectorize(f)(*xs),
    "list_pop": _list_pop,
    "list_unpop": _list_unpop,
    "list_order": _list_order,
    "list_permute": lambda xs, order: [xs[i] for i in order],
    "setitem_slot": _setitem_slot,
    "sum_grad": sum_grad,
    "seq_grad": seq_grad,
    "array_grad": array_grad,
    "stack_push": stack_push,
    "stack_pop": operator.itemgetter(0, 1),     # (top, rest); the generated code indexes the cell
    **LINALG_IMPLS,
    **_DICT_IMPLS,
}


def callable_of(name: str):
    """A Python callable for any primitive, also those the generated code writes as syntax
    (needed when a primitive is passed around as a value, e.g. `apply(len, x)`)."""
    if name in IMPLS:
        return IMPLS[name]
    if name in CONVERSION_TYPES:    # `float` as a value is the type: also a dtype
        return CONVERSION_TYPES[name]
    if name in VARIADIC_SYNTAX:
        open_, close = VARIADIC_SYNTAX[name]
        if name == "make_tuple":
            return lambda *xs: xs
        return eval(f"lambda *xs: {open_}*xs{close}")
    template = SYNTAX[name]
    params = [f"x{i}" for i in range(template.count("{}"))]
    body = template.format(*params)
    if name == "raise_":
        return _raise
    return eval(f"lambda {', '.join(params)}: {body}")


@raises_for_the_caller
def _raise(exception):
    raise exception
