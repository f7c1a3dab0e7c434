"""The registry of primitives: the named operations graphs are built from.

A `Primitive` is only a name and a call signature (parameter names and defaults, so the
frontend can bind keyword arguments).  What a primitive *does* lives elsewhere, one table per
concern: its Python implementation in `backends.python.impls`, its gradient rule in
`passes`, its type rule in `passes.infer`, its TVM lowering in `backends.tvm`.  A test checks
that every table covers every primitive.
"""

from __future__ import annotations

from dataclasses import dataclass

from myir.ir.signature import bind_arguments, shown_parameters


@dataclass(frozen=True, eq=False)
class Primitive:
    name: str
    params: tuple[str, ...] = ()
    defaults: tuple = ()          # defaults for the last len(defaults) params
    varargs: bool = False         # takes any number of positional arguments
    pure: bool = True             # False for raise_ and other effects

    def __repr__(self) -> str:
        return self.name

    def signature(self) -> str:
        """The parameters as a call would pass them: `x, y` or `x, axis=None`."""
        return "*args" if self.varargs else shown_parameters(self.params, self._defaults())

    def bind(self, args: list, kwargs: dict, error, called: str | None = None) -> list:
        """Map positional and keyword arguments onto the signature, filling defaults.
        `error(msg)` raises the caller's located error, naming the function as the program
        `called` it (`np.add`, not the primitive's own name `np_add`)."""
        name = called or self.name
        if self.varargs:
            if kwargs:
                error(f"{name}() takes no keyword arguments")
            return list(args)
        return bind_arguments(name, self.params, self._defaults(), args, kwargs, error)

    def _defaults(self) -> dict:
        return dict(zip(self.params[len(self.params) - len(self.defaults):], self.defaults))


class _Unbound:
    """The value of a local variable that has not been assigned (on some path)."""

    def __repr__(self) -> str:
        return "UNBOUND"

    def __reduce__(self) -> str:
        return "UNBOUND"    # the one instance, also in a program loaded from disk


UNBOUND = _Unbound()

PRIMITIVES: dict[str, Primitive] = {}


def primitive(name: str, params: str = "", *, varargs: bool = False, pure: bool = True) -> Primitive:
    """Register a primitive.  `params` is a signature like "x, axis=None, keepdims=False"."""
    names, defaults = [], []
    for part in filter(None, (p.strip() for p in params.split(","))):
        if "=" in part:
            key, default = part.split("=")
            names.append(key.strip())
            defaults.append(eval(default))  # literal defaults only: None, False, 0, ...
        else:
            assert not defaults, f"{name}: non-default parameter after default"
            names.append(part)
    p = Primitive(name, tuple(names), tuple(defaults), varargs, pure)
    assert name not in PRIMITIVES, name
    PRIMITIVES[name] = p
    return p


def _family(names: str, params: str) -> None:
    for n in names.split():
        primitive(n, params)


# Python operators (the python backend emits them as operators: exact CPython semantics).
_family("add sub mul truediv floordiv mod pow matmul lt le gt ge eq ne is_ is_not", "x, y")
_family("bitand bitor bitxor lshift rshift", "x, y")
_family("neg pos invert not_ truth", "x")
# `x op= y` where the old x may be shared: like `op`, but refuses to act on an array (where
# Python would update the shared array in place).
_family("aug_add aug_sub aug_mul aug_truediv aug_floordiv aug_mod aug_pow aug_matmul", "x, y")
# `y[index] op= v`: Python applies `op=` to the indexed part, `y[index]`.  Where that is an
# array (a view, or a copy for an index array) numpy updates it in place: the result keeps its
# dtype and shape, and numpy raises (UFuncTypeError) where the result cannot be cast to its
# dtype by the `same_kind` rule (`y[1:3] += 0.5` on an int array).  A number (`y[1]` of a
# 1-d array) or a list's element gets the plain operator.
# Operator -> the name of its in-place function in the `operator` module.
IN_PLACE = {**{name: "i" + name for name in "add sub mul truediv floordiv mod pow matmul "
               "lshift rshift".split()}, "bitand": "iand", "bitor": "ior", "bitxor": "ixor"}
_family(" ".join("inplace_" + name for name in IN_PLACE), "x, y")


def plain_operator(name: str) -> str:
    """The operator `aug_op` and `inplace_op` compute where neither updates an array in
    place: the name of the primitive whose gradient and tangent rules they share."""
    for prefix in ("aug_", "inplace_"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name

# Elementwise math on scalars and arrays, with numpy semantics (np.sin(2.0) -> np.float64).
_family("exp log log1p expm1 sqrt sin cos tan arcsin arccos arctan sinh cosh tanh abs sign "
        "floor ceil square negative reciprocal", "x")
_family("maximum minimum arctan2 power", "x, y")
# np.add, np.subtract, np.multiply, np.divide, np.remainder, np.floor_divide: numpy's
# arithmetic, which differs from Python's operators on Python numbers (np.multiply(2.0, 3.0) is
# an np.float64, np.add(True, True) is True, np.divide(1.0, 0.0) is inf with a warning), and
# from a composition through np.asarray, which would make a Python float operand a strong
# float64 (np.remainder(2.5, x) keeps x's float32).
_family("np_add np_subtract np_multiply np_divide np_remainder np_floor_divide", "x, y")
primitive("where", "cond, x, y")
# numpy ufuncs that no composition of the others reproduces to the last bit (numpy's own loops).
_family("cbrt log2 exp2 log10 arcsinh arccosh arctanh rint trunc isnan isinf isfinite", "x")
_family("hypot logaddexp logaddexp2", "x, y")
primitive("clip", "x, lo, hi")

# More of the `math` module: `math.NAME` is the primitive `math_NAME`, its implementation,
# type rule and TVM status are math's (the tables read this list).
MATH_MORE = ("log2 log10 cbrt exp2 asinh acosh atanh erf erfc degrees radians isnan isinf "
             "isfinite trunc")

# `math` module functions keep their own semantics (math.sqrt(-1) raises, np.sqrt gives nan).
_family("math_exp math_log math_log1p math_expm1 math_sqrt math_sin math_cos math_tan "
        "math_asin math_acos math_atan math_sinh math_cosh math_tanh math_fabs math_floor "
        "math_ceil", "x")
_family("math_pow math_atan2 math_hypot", "x, y")
_family(" ".join("math_" + n for n in MATH_MORE.split()), "x")

# Reductions.
_family("sum mean prod", "x, axis=None, keepdims=False")
_family("max min", "x, axis=None, keepdims=False")
_family("argmax argmin", "x, axis=None")

# Linear algebra and shapes.
primitive("dot", "x, y")
primitive("reshape", "x, shape")
primitive("transpose", "x, axes=None")
primitive("swapaxes", "x, axis1, axis2")
primitive("argsort", "x, axis=-1, stable=False")   # stable: numpy's kind='stable'
primitive("broadcast_to", "x, shape")
primitive("expand_dims", "x, axis")
primitive("squeeze", "x, axis=None")
primitive("concatenate", "arrays, axis=0")
primitive("stack", "arrays, axis=0")
primitive("astype", "x, dtype")
primitive("cast", "x, dtype")               # np.float32(x): a numpy scalar of that type
primitive("shape", "x")
primitive("ndim", "x")
primitive("size", "x")
primitive("dtype", "x")

# numpy.linalg, einsum, scans, sorting and gathers: numpy's own algorithms, run by numpy.
primitive("linalg_solve", "a, b")
primitive("linalg_inv", "a")
primitive("linalg_det", "a")
primitive("linalg_slogdet", "a")            # the tuple (sign, logabsdet)
primitive("linalg_cholesky", "a")
primitive("linalg_eigh", "a, UPLO='L'")     # the tuple (eigenvalues, eigenvectors)
primitive("linalg_qr", "a, mode='reduced'")
primitive("linalg_svd", "a, full_matrices=True, compute_uv=True")
primitive("einsum", varargs=True)           # einsum(subscripts, *operands)
primitive("einsum_grad", varargs=True)      # einsum_grad(subscripts, *operands, dout): a tuple
primitive("tensordot", "a, b, axes=2")
primitive("tensordot_grad", "a, b, axes, dout")      # (da, db), as einsum_grad finds them
primitive("convolve", "a, v, mode='full'")
primitive("cumsum", "x, axis=None")
primitive("cumprod", "x, axis=None")
primitive("sort", "x, axis=-1")
primitive("take", "x, indices, axis=None")
primitive("take_grad", "x, indices, axis, dout")      # scatter-add dout into zeros like x
primitive("take_along_axis", "x, indices, axis=-1")
primitive("take_along_axis_grad", "x, indices, axis, dout")
primitive("searchsorted", "a, v, side='left'")

# Array constructors.
_family("zeros ones empty", "shape, dtype=None")
primitive("full", "shape, fill_value, dtype=None")
_family("zeros_like ones_like", "x, dtype=None")
primitive("array", "x, dtype=None")
primitive("asarray", "x, dtype=None")
primitive("arange", "start, stop=None, step=None, dtype=None")
primitive("eye", "n, dtype=None")

# Python builtins.
primitive("len", "x")
primitive("range", varargs=True)
primitive("builtin_abs", "x")
primitive("builtin_round", "x, ndigits=None")
primitive("builtin_divmod", "x, y")
primitive("builtin_min", varargs=True)
primitive("builtin_max", varargs=True)
primitive("to_float", "x")
primitive("to_int", "x")
primitive("to_bool", "x")
# The type each conversion is, passed as a value: `np.zeros(n, dtype=bool)` names the type.
CONVERSION_TYPES = {"to_float": float, "to_int": int, "to_bool": bool}

# Structure: tuples, indexing, slices.
primitive("make_tuple", varargs=True)
primitive("getitem", "x, index")
primitive("unpack", "x, n")                 # x, checked to have n elements (tuple unpacking)
primitive("make_slice", "start, stop, step")
# Updates of local values (`y[i] = v`, `x.copy()`): compiled code is functional, so setitem
# returns a NEW value equal to x but for x[index] = value; the frontend binds it to the name
# again (frontend/ownership.py proves no alias sees the difference) and the python backend
# writes in place where the old value is dead (backends/python/codegen.py).
primitive("setitem", "x, index, value")
primitive("copy", "x")                      # x.copy(): a new value equal to x
primitive("not_a_view", "x, message, hint")  # x, refused by inference if it is an array

# Dicts (constant keys) and records (NamedTuple and dataclass instances).  Compiled code is
# functional: an update is a new dict or record, which the frontend binds to the name again.
primitive("make_dict", varargs=True)          # make_dict(k0, v0, k1, v1, ...): {k0: v0, ...}
primitive("make_record", varargs=True)        # make_record(cls, *field values): cls(...)
primitive("getattr_", "x, name")              # x.name: a record's field
primitive("record_replace", "x, name, value")  # dataclasses.replace(x, name=value), x._replace
primitive("dict_setitem", "d, key, value")    # {**d, key: value}: `d[key] = value`, functional
primitive("dict_get", "d, key, default=None")      # d.get(key, default)
primitive("dict_keys", "d")                   # tuple(d): the keys, in order
primitive("dict_values", "d")                 # tuple(d.values())
primitive("dict_items", "d")                  # tuple(d.items())
primitive("dict_cons", "key, value, rest")    # {key: value, **rest}: a dict comprehension's step
primitive("contains", "item, x")              # item in x
primitive("iter_keys", "x")                   # what `for v in x` walks: x, or a dict's keys
primitive("comp_length", "n, what")           # n, a length (or a `while` loop's condition)
                                              # that must be known when compiling (`what`
                                              # says why, for the error)
primitive("comp_next", "i, n")                # i + 1, the next step of a comprehension (or a
                                              # loop adding keys to a dict) of n steps
# Their gradients' helpers.
primitive("dict_pick", "d, like")             # like's keys, in order: d's entries (zeros where
                                              # d has no such key); d where like is no dict
primitive("children", "x")                    # a dict's values or a record's fields, a tuple
primitive("rebuild", "like, values")          # like's kind and keys (class, fields), with values
primitive("dict_items_grad", "d, dout")       # d's keys with the second items of dout's pairs
primitive("iter_keys_grad", "x, dout")        # dout, or zeros where x is a dict (keys)

# Jacobians of trees (passes/jacobian_loops.py): a Jacobian is one matrix, a row per number of
# the output and a column per number of the input, handed out as JAX's tree of blocks.
primitive("tree_ravel", "x")                  # x's numbers, leaf by leaf, as one vector
primitive("tree_unravel", "like, v")          # a tree like `like` holding v's numbers
primitive("jacobian_blocks", "out, x, jac")   # jac's block per leaf of out, per leaf of x
primitive("jacobian_unblocks", "out, x, blocks")  # the matrix jacobian_blocks cut up

# Differentiation (passes.ad): generic zeros and addition of gradients (numbers, arrays,
# tuples, envs), envs mapping a closure's free variables to their gradients, and the adjoints
# of broadcasting, reductions and indexing.
primitive("grad_zeros", "x")                # the zero gradient shaped like x
primitive("gadd", "x, y")                   # gradient addition
primitive("env_getitem", "env, key, default")
primitive("env_setitem", "env, key, value")
primitive("sum_to_like", "d, x")            # d summed down to x's shape (undo broadcasting)
primitive("broadcast_to_like", "d, x")      # d broadcast up to x's shape
# `x + y` of sequences concatenates: x's sensitivity is its side of the result's (`right`:
# x is the right operand); of numbers and arrays, these are sum_to_like / broadcast_to_like.
primitive("sum_to_side", "d, x, right")     # x's side of d, d the sensitivity of x + y / y + x
primitive("broadcast_to_side", "d, x, right")  # d put at its side of x, zeros elsewhere
primitive("reduce_grad", "dout, x, axis, keepdims")   # dout of a reduction spread over x
primitive("getitem_grad", "x, index, dout")           # scatter-add dout into zeros like x
primitive("grad_seed", "out")               # 1 like a scalar output (errors otherwise)
primitive("grad_check_input", "x, name")    # x, if it can be differentiated with respect to
primitive("jvp_check_tangent", "x, t, index")  # t, if it can be x's tangent (passes.forward)
primitive("ieee_truediv", "x, y")          # x / y, inf or nan where Python raises (myir.ir.ieee)
primitive("ieee_pow", "x, y")              # x ** y, inf where Python raises (myir.ir.ieee)
primitive("strong_zero", "d, x")            # x, but 0 where the sensitivity d is 0 (myir.ir.ieee)
primitive("grad_cast", "d, x")              # d, x's gradient, in x's type, dtype and shape
primitive("select_grad", "out, x, dout, count")       # min()/max(): dout/count where x == out
primitive("concat_grad", "arrays, axis, dout")        # dout split like the concatenated arrays
primitive("unstack", "x, axis")                       # the tuple of x's slices along axis
# The residual stack of a loop's gradient (passes.ad): persistent, so pushing is O(1) and a
# stack a closure holds never changes.  `EMPTY_STACK` (myir.ir.values) is the empty one.
primitive("stack_push", "s, x")              # the stack s with x on top
primitive("stack_pop", "s")                  # (top, rest) of a non-empty stack
primitive("stack_empty", "s")                # whether s is empty

# Control flow and effects.
primitive("switch", "cond, if_true, if_false")
# vectorize_call(f, *xs): the scalar function f broadcast over the arrays xs, as
# np.vectorize(f)(*xs) (myir.vectorize; passes/vectorize.py)
primitive("vectorize_call", varargs=True)
primitive("make_exception", varargs=True)   # make_exception(cls, *args)
primitive("raise_", "exception", pure=False)
primitive("depend", "x, effect")            # x, once `effect` has been evaluated
# print(*args, sep=sep, end=end) after the print `previous` (frontend: program order); None
primitive("print_", "previous, sep, end, args", pure=False)
primitive("check_bound", "x, name")         # x, or UnboundLocalError if x is UNBOUND
primitive("format", "x, conversion, spec")  # one f-string field: format(x, spec)
primitive("concat_str", varargs=True)       # the parts of an f-string joined

# Lists: compiled code is functional, so an update returns a new list, which the frontend
# binds to the name again (`xs.append(v)` is `xs = list_append(xs, v)`).
primitive("make_list", varargs=True)        # [a, b, ...]
primitive("list_append", "xs, x")           # xs + [x]
primitive("list_extend", "xs, ys")            # xs + list(ys)
primitive("seq_repeat", "xs, n")            # xs * n of a list or tuple the frontend knows is one
primitive("list_pop", "xs, index=-1")       # (xs[index], xs without it): `xs.pop(index)`
primitive("list_unpop", "rest, index, x")   # the list `rest` was popped from (pop's adjoint)
# (where value is in setitem(x, index, value), what it replaced): setitem's adjoint
primitive("setitem_slot", "x, index, value")
primitive("to_list", "x")                   # list(x)
# xs itself, which holds n items (a comprehension without `if` over n values): inference
# then knows the list's length, which the loop that built it widened away
primitive("list_of_length", "xs, n")
# The positions of xs's items in the order `sorted(xs, reverse=reverse)` puts them (CPython's
# own sort of the positions by item: the same comparisons, so the same order, ties too)
primitive("list_order", "xs, reverse")
primitive("list_permute", "xs, order")      # [xs[i] for i in order]
primitive("to_tuple", "x")                  # tuple(x)
primitive("builtin_sum", "xs, start=0")     # sum(xs, start)
primitive("sum_grad", "xs, dout")           # each item's share of sum(xs)'s dout, like xs
primitive("seq_grad", "d, x")               # d, a sequence of x's items' gradients, as x's kind
primitive("array_grad", "x, dout")          # np.array(x)'s dout, in x's (nested) structure

# Ownership (frontend/ownership.py, and the python backend's updates in place): primitives
# whose result is always a new object, never one of their operands nor a view of one ...
FRESH = frozenset((
    "add sub mul truediv floordiv mod pow matmul neg pos invert bitand bitor bitxor lshift "
    "rshift exp log log1p expm1 sqrt sin cos tan arcsin arccos arctan sinh cosh tanh abs sign "
    "floor ceil square negative reciprocal maximum minimum arctan2 power where cbrt log2 exp2 "
    "log10 arcsinh arccosh arctanh rint trunc hypot logaddexp logaddexp2 clip dot concatenate "
    "stack astype zeros ones empty full zeros_like ones_like array arange eye cumsum cumprod "
    "sort setitem copy getitem_grad reduce_grad builtin_abs sum mean prod max min argmax argmin "
    "argsort tensordot convolve take take_along_axis linalg_solve linalg_inv linalg_det "
    "linalg_cholesky ieee_truediv ieee_pow to_list seq_repeat list_append list_extend list_unpop "
    "list_order list_permute").split()
                   + ["inplace_" + name for name in IN_PLACE])
# ... and primitives whose result may be their first operand or share its memory.
VIEWS = frozenset("getitem reshape transpose swapaxes squeeze expand_dims broadcast_to asarray "
                  "unpack check_bound depend not_a_view list_of_length".split())

