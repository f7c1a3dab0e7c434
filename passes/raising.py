"""Which operations can raise at run time: what dead code must keep.

CPython runs every statement, so `unused = 1 / x` raises ZeroDivisionError for x = 0 and
`grad(math.log)(-1.0)` must raise the forward's ValueError, although neither value is used.
The graph IR runs only what an output needs, so the frontend and `grad` tie a computation
that can raise to the output with `depend(output, computation)`; the optimizer then narrows
each such `depend` to the operations that can still raise once types are known
(`passes.opt.depend_on_what_raises`), and the python backend runs a kept operation whose value
nobody reads as a guard, one comparison in the common case (`backends.python.impls.GUARDS`).

One table, `RAISES`, says for each primitive that can raise on some values of the types
its type rule accepts when it can, given its operands' abstract values (`None`, `ANY` or a
union: unknown, so it can).  `CANNOT_RAISE` says why each other primitive cannot.  What can
raise on values only:

* Python numbers: division, floor division and modulo by zero, `0.0 ** -1` and overflow in
  `**`, a negative shift count, an int too large for a float (wherever one meets a float
  or numpy, `float(10**400)`), `int(nan)`, `range(0, n, 0)`, `min(())`;
* `math` functions: domain errors (`math.log(0.0)`, `math.sin(inf)`) and range errors
  (`math.exp(1000.0)`);
* numpy: integers to negative integer powers, reductions with no identity (`np.max`) of
  empty arrays, `np.int8(300)`; otherwise numpy returns inf or nan (and warns);
* indexing out of range, unpacking the wrong number of elements, the truth of an array.

An array whose shape inference cannot know (a dimension that depends on data) may fail to
broadcast, so every operation on one can raise; shapes inference knows were checked when
the program was compiled.  A call of a graph (not of a primitive) can raise: what it runs
is decided where it is inlined.
"""

from __future__ import annotations

import numpy as np

from myir.ir.analysis import compilation_cache, primitive_name
from myir.ir.graph import Apply, Node
from myir.ir.primitives import IN_PLACE
from passes.abstract import ANY, BOTTOM, AArray, ADict, AEnv, AFunction, AList, ANone, AObject, ARecord, AScalar, \
    ASlice, AStack, ATuple, options

_PY_NUMBERS = (bool, int, float, complex)


def _python_number(t) -> bool:
    return isinstance(t, AScalar) and t.pytype in _PY_NUMBERS


def _numpy(t) -> bool:
    return isinstance(t, AArray) or (isinstance(t, AScalar) and issubclass(t.pytype, np.generic))


def _kind(t) -> str:
    """The dtype kind of a number or array ("b", "i", "u", "f", "c"), "" for anything else."""
    if isinstance(t, AArray):
        return t.dtype.kind
    if isinstance(t, AScalar) and issubclass(t.pytype, (*_PY_NUMBERS, np.number, np.bool_)):
        return np.dtype(t.pytype).kind
    return ""


def _big_int(t) -> bool:
    """A Python int that may not fit a float (an unknown one, or a known huge one)."""
    if not (isinstance(t, AScalar) and t.pytype is int):
        return False
    return not t.known or abs(t.value) >= 2 ** 1000


def _all_python(args) -> bool:
    return not any(_numpy(a) for a in args)


def _division(args, out) -> bool:
    """Python numbers raise ZeroDivisionError for a zero divisor (a str on the left formats
    with `%`, which raises too); numpy gives inf, nan or 0 and warns."""
    return _all_python(args)


def _power(args, out) -> bool:
    """Python: `0.0 ** -1` raises ZeroDivisionError, `10.0 ** 400` OverflowError; numpy:
    integers to negative integer powers raise ValueError, floats overflow to inf."""
    return _all_python(args) or all(_kind(a) in "biu" for a in args)


def _shift(args, out) -> bool:
    """A negative shift count raises ValueError for Python ints (numpy's is undefined)."""
    return _all_python(args)


def _math(args, out) -> bool:
    """Domain and range errors: `math.log(0.0)`, `math.sqrt(-1.0)`, `math.sin(inf)`,
    `math.floor(nan)`, `math.exp(1000.0)`."""
    return True


def _math_total(args, out) -> bool:
    """atan, tanh, fabs, atan2, hypot, cbrt, asinh, erf, erfc, degrees, radians and the
    float tests are defined (and finite or inf) for every float, NaN and inf included; an
    int is converted to a float first (see `_int_to_float`)."""
    return False


def _to_int(args, out) -> bool:
    """int(nan) raises ValueError, int(inf) OverflowError, int("x") ValueError."""
    return _kind(args[0]) not in ("b", "i", "u")


def _round(args, out) -> bool:
    """round(nan) and round(inf) raise as int() does; with ndigits they stay nan and inf."""
    return _to_int(args, out) and isinstance(args[1], ANone)


def _to_float(args, out) -> bool:
    """float("x") raises ValueError (an int too large: `_int_to_float`)."""
    return _kind(args[0]) == ""


def _cast(args, out) -> bool:
    """np.int8(300) raises OverflowError; np.float32("x") ValueError."""
    return isinstance(args[0], AScalar) and args[0].pytype is int or _kind(args[0]) == ""


def _truth(args, out) -> bool:
    """The truth of an array with other than one element raises ValueError."""
    return any(isinstance(a, AArray) and not (None not in a.shape and _size(a) == 1)
               for a in args)


def _positional(x) -> bool:
    """Tuples, records or lists whose items inference knows one by one (a union of them: an
    `if` whose branches return tuples of different kinds)."""
    return all(isinstance(o, (ATuple, ARecord)) or (isinstance(o, AList) and o.items is not None)
               for o in options(x))


def _getitem(args, out) -> bool:
    """An index out of range raises IndexError; a constant index of a tuple is checked at
    compile time, and basic slices of an array (not 0-d) never raise."""
    x, index = args
    if isinstance(x, ADict):    # a constant key is checked at compile time
        return not (isinstance(index, (AScalar, AObject)) and index.value is not ANY)
    if _positional(x):
        return not (isinstance(index, AScalar) and index.known and index.pytype is int
                    and all(-len(o.items) <= index.value < len(o.items) for o in options(x)))
    if isinstance(x, AArray):
        slices = index.items if isinstance(index, ATuple) else (index,)
        return not (all(isinstance(s, ASlice) for s in slices) and len(slices) <= x.ndim)
    return True


def _getattr(args, out) -> bool:
    """A record's field is checked at compile time; another object may lack it."""
    return not isinstance(args[0], ARecord)


def _contains(args, out) -> bool:
    """`k in d` of a dict is a lookup; `x in xs` compares with `==`, whose truth may raise
    (an array's)."""
    return not isinstance(args[1], ADict)


def _unpack(args, out) -> bool:
    """Unpacking a tuple is checked at compile time; an array's first dimension is not."""
    return not isinstance(args[0], ATuple)


def _range(args, out) -> bool:
    """range(a, b, 0) raises ValueError."""
    return len(args) == 3 and not (isinstance(args[2], AScalar) and args[2].known
                                   and args[2].value != 0)


def _builtin_min_max(args, out) -> bool:
    """min(()) raises ValueError, and arrays compared with `<` have no truth value."""
    if len(args) == 1:
        return not (isinstance(args[0], (ATuple, AList)) and args[0].items)
    return any(isinstance(a, AArray) for a in args)


def _reduction_no_identity(args, out) -> bool:
    """np.max, np.min, np.argmax, np.argmin of an empty array raise ValueError."""
    x = args[0]
    return isinstance(x, AArray) and (None in x.shape or 0 in x.shape)


def _aug(args, out) -> bool:
    """`x op= y` refuses (MyirTypeError) to update an array another name shares."""
    return any(isinstance(a, AArray) for a in args)


def _aug_division(args, out) -> bool:
    return _division(args, out) or _aug(args, out)


def _aug_power(args, out) -> bool:
    return _power(args, out) or _aug(args, out)


def _in_place(name: str):
    def raises(args, out) -> bool:
        """`y[index] op= v` on the indexed part: numpy raises where the result does not
        fit it (its type rule gives BOTTOM); otherwise it raises where the operator does."""
        return out is BOTTOM or may_raise(name, args, out)
    return raises


def _list_pop(args, out) -> bool:
    """`xs.pop(i)` raises IndexError for an index out of range (an empty list)."""
    xs, index = args
    return not (isinstance(xs, AList) and xs.items is not None and isinstance(index, AScalar)
                and index.known and -len(xs.items) <= index.value < len(xs.items))


def _sequence(args, out) -> bool:
    """list(x), tuple(x), xs.extend(x): TypeError unless x is iterable."""
    return not isinstance(args[-1], (ATuple, AList))


def _list_order(args, out) -> bool:
    """sorted(xs): TypeError or ValueError where items do not compare (a number and a
    string, arrays of more than one element), or `reverse` is no int."""
    xs, reverse = args
    numbers = (int, float, bool, np.integer, np.floating, np.bool_)
    items = options(xs.element) if isinstance(xs, AList) else ()
    return not (items and all(isinstance(t, AScalar) and issubclass(t.pytype, numbers)
                              for t in items)
                and isinstance(reverse, AScalar) and reverse.pytype in (bool, int))


def _list_unpop(args, out) -> bool:
    """`xs.insert(i, v)` (at i clamped to the list: frontend/builtin_functions.py), or pop's
    adjoint: TypeError unless i is an int."""
    index = args[1]
    return not (isinstance(index, AScalar) and issubclass(index.pytype, (int, np.integer)))


def _always(args, out) -> bool:
    return True


def _size(t: AArray) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


def _table(groups: list[tuple[str, object]]) -> dict:
    return {name: value for names, value in groups for name in names.split()}


RAISES = _table([
    ("truediv floordiv mod builtin_divmod", _division),
    ("pow power", _power),
    # gradient rules' `/` and `**`, inf where x / 0 (myir/ir/ieee.py); an int too large for a
    # float still raises OverflowError, so they are kept like `/` and `**` (the cost: a
    # check kept that never fires on 0)
    ("ieee_truediv", _division),
    ("ieee_pow", _power),
    ("lshift rshift", _shift),
    ("math_exp math_log math_log1p math_expm1 math_sqrt math_sin math_cos math_tan math_asin "
     "math_acos math_sinh math_cosh math_floor math_ceil math_pow", _math),
    ("math_atan math_tanh math_fabs math_atan2 math_hypot", _math_total),
    ("math_log2 math_log10 math_exp2 math_acosh math_atanh math_trunc", _math),
    ("math_cbrt math_asinh math_erf math_erfc math_degrees math_radians math_isnan math_isinf "
     "math_isfinite", _math_total),
    ("to_int", _to_int),
    ("builtin_round", _round),
    ("to_float", _to_float),
    ("cast", _cast),
    ("truth not_ to_bool", _truth),
    ("getitem", _getitem),
    ("unpack", _unpack),
    ("getattr_", _getattr),
    ("contains", _contains),
    ("range", _range),
    ("builtin_min builtin_max", _builtin_min_max),
    ("max min argmax argmin", _reduction_no_identity),
    ("aug_add aug_sub aug_mul aug_matmul", _aug),
    ("aug_truediv aug_floordiv aug_mod", _aug_division),
    ("aug_pow", _aug_power),
    ("format", _always),            # a bad spec; an int of more than 4300 digits
    ("print_", _always),            # an object's __str__ may raise; printing is the effect
    ("raise_ check_bound grad_check_input grad_seed", _always),   # raising is what they do
    ("jvp_check_tangent", _always),   # a tangent that does not fit its primal
    # LinAlgError: a singular matrix (solve, inv), one not positive definite (cholesky), no
    # convergence (eigh, svd, qr of NaN); IndexError: an index out of range (take)
    ("linalg_solve linalg_inv linalg_cholesky linalg_eigh linalg_qr linalg_svd", _always),
    ("take take_along_axis", _always),
    # IndexError: an index out of range; ValueError: a value of a shape that does not
    # broadcast to the indexed one, or a float nan assigned into an int array
    ("setitem", _always),
    ("vectorize_call", _always),    # the scalar function may raise (or not broadcast)
    ("list_pop", _list_pop),
    ("list_order", _list_order),
    ("list_unpop", _list_unpop),
    *(("inplace_" + name, _in_place(name)) for name in IN_PLACE),
    ("to_list to_tuple list_extend", _sequence),
])

CANNOT_RAISE = _table([
    ("add sub mul neg pos matmul dot", "numbers overflow to inf, not an exception; shapes "
     "inference knows were checked at compile time"),
    ("np_add np_subtract np_multiply np_divide np_remainder np_floor_divide", "numpy: inf, "
     "nan or 0 (x / 0 and x % 0 too), with a "
     "warning; shapes inference knows were checked at compile time"),
    ("lt le gt ge eq ne is_ is_not", "comparisons of numbers are exact (int with float "
     "too); arrays of shapes inference knows broadcast"),
    ("bitand bitor bitxor invert", "bitwise operations of ints and bools are total"),
    ("exp log log1p expm1 sqrt sin cos tan arcsin arccos arctan sinh cosh tanh abs sign floor "
     "ceil square negative reciprocal maximum minimum arctan2 where clip cbrt log2 exp2 log10 "
     "arcsinh arccosh arctanh rint trunc hypot logaddexp logaddexp2", "numpy: inf or nan "
     "outside the domain, with a warning"),
    ("strong_zero", "a comparison and a choice of two values (myir/ir/ieee.py)"),
    ("sum mean prod argsort", "numpy reductions with an identity, and sorting, accept empty "
     "arrays"),
    ("reshape transpose swapaxes broadcast_to expand_dims squeeze concatenate stack astype",
     "shapes and axes inference knows were checked at compile time; astype converts as C"),
    ("shape ndim size dtype len", "read a type's facts"),
    ("isnan isinf isfinite", "classify every float, int and bool"),
    ("zeros ones empty full zeros_like ones_like array asarray arange eye", "a shape "
     "inference knows was checked at compile time"),
    ("builtin_abs", "abs of a number or array is total"),
    ("make_tuple make_slice concat_str make_exception switch", "build a value from values"),
    ("grad_cast grad_zeros gadd env_getitem env_setitem sum_to_like broadcast_to_like reduce_grad "
     "getitem_grad select_grad concat_grad unstack sum_to_side broadcast_to_side", "gradient code, on values of shapes the "
     "forward computed"),
    ("depend", "passes its operands on: what raises is one of them"),
    ("copy", "a copy of a value that has `.copy()`, which inference checked"),
    ("not_a_view", "checked by inference"),
    ("make_dict make_record record_replace dict_setitem dict_get dict_keys dict_values "
     "dict_items dict_cons iter_keys comp_length comp_next children rebuild dict_pick "
     "dict_items_grad iter_keys_grad", "dicts of keys and records of fields inference knows were checked at "
     "compile time"),
    ("tree_ravel tree_unravel jacobian_blocks jacobian_unblocks", "trees of numbers and "
     "arrays whose structures and shapes inference checked"),
    ("stack_push stack_pop stack_empty", "a loop gradient's residual stack: the backward "
     "loop pops exactly what the forward loop pushed"),
    ("linalg_det linalg_slogdet", "a singular matrix has determinant 0 (log -inf), numpy "
     "does not raise"),
    ("einsum tensordot convolve cumsum cumprod sort searchsorted", "shapes and axes inference knows "
     "were checked at compile time"),
    ("einsum_grad tensordot_grad take_grad take_along_axis_grad", "gradient code, on values "
     "of shapes the forward computed"),
    ("make_list list_append seq_repeat list_of_length list_permute", "build a list from "
     "values (append's object is a "
     "list, the count an int: inference checked)"),
    ("builtin_sum", "adds numbers and arrays of shapes inference knows, as `+` does"),
    ("sum_grad seq_grad array_grad setitem_slot", "gradient code, on values of the structure "
     "the forward computed"),
])


def _int_to_float(args, out) -> bool:
    """A Python int too large for a float raises OverflowError where it meets a float, a
    complex number or numpy (`np.float64(1.0) * 10**400`, `math.atan(10**400)`)."""
    if not any(_big_int(a) for a in args):
        return False
    return any(_kind(a) in "fc" or _numpy(a) for a in (*args, out)) or \
        any(_kind(a) == "" and not isinstance(a, (AScalar, ATuple, ANone, ASlice, AObject))
            for a in args)


def _unknown(t) -> bool:
    """A value of an unknown or uncertain kind, or an array of a shape inference does not
    know (it may fail to broadcast).  A function, a gradient env and a residual stack are
    kinds of their own (a loop gradient's forward loop returns its value, its adjoint and
    its stack in one tuple, whose items a constant index reads without raising).  Kept
    per value (by identity): the code generator asks of every operand, and a loop's tuple
    of state, as large as the program, is the operand of each of its items' reads."""
    hit = _UNKNOWN.get(id(t))
    if hit is not None and hit[0] is t:
        return hit[1]
    if len(_UNKNOWN) >= 1 << 16:
        _UNKNOWN.clear()
    result = _unknown_kind(t)
    _UNKNOWN[id(t)] = (t, result)
    return result


# id(value) -> (value, _unknown(value)), for one compilation: a value may be a function whose
# closure holds the frames of the inference that made it, and the whole program with them
_UNKNOWN: dict[int, tuple] = compilation_cache()


def _unknown_kind(t) -> bool:
    if isinstance(t, AArray):
        return None in t.shape
    if isinstance(t, (ATuple, ADict, ARecord)):
        return any(_unknown(i) for i in t.items)
    if isinstance(t, AList):
        return any(_unknown(i) for i in t.items) if t.items is not None else _unknown(t.item)
    if isinstance(t, AStack):
        return t.item is not BOTTOM and _unknown(t.item)
    if isinstance(t, AEnv):
        return any(_unknown(v) for _, v in t.items)
    return not isinstance(t, (AScalar, ANone, ASlice, AObject, AFunction))


def may_raise(name: str | None, args: list | None = None, out=None) -> bool:
    """Whether the primitive `name` (None: a call of a graph) can raise on operands of the
    abstract values `args` with result `out`.  With `args` None (types unknown), whether
    `RAISES` lists it: what the frontend keeps before types are known (an operation that
    raises only on an array of a shape inference cannot know, or on an int too large for a
    float, `unused = n * 0.5`, is not kept when unused)."""
    if name is None:
        return True
    if args is None:
        return name in RAISES
    if name in KIND_BLIND:
        return False
    if name == "getitem" and _positional(args[0]):
        # an item read by position: what kinds the items are (a sensitivity `None | int`
        # among them) does not matter, only whether the index is in range
        return _getitem(args, out)
    if any(_unknown(a) for a in (*args, out)):
        return True
    rule = RAISES.get(name)
    return (rule is not None and rule(args, out)) \
        or (name not in HOLDS and _int_to_float(args, out))


# Primitives that raise on no operand of any kind, so that an operand of an uncertain kind
# (a union: the sensitivity `None | int` of a loop variable, unbound before the first
# iteration) does not make them "may raise" and keep them, and what they read, where nothing
# reads their value: they build a value from values or pass values on, or are a gradient's
# operations on sensitivities of values the forward computed.
KIND_BLIND = frozenset("""
    make_tuple switch depend grad_zeros gadd getitem_grad env_getitem env_setitem stack_push
    stack_pop stack_empty
""".split())


# Primitives that hold their operands as they are: an int meets no float there (a loop's
# exit returning `(r, i)`).
HOLDS = frozenset({"make_tuple", "make_list", "make_dict", "make_record", "switch"})


# Primitives whose exceptions are arithmetic (ZeroDivisionError, a math domain error,
# OverflowError): what `fastmath=True` assumes never happens.
ARITHMETIC_ERRORS = frozenset("""
    truediv floordiv mod pow power aug_truediv aug_floordiv aug_mod aug_pow inplace_truediv
    inplace_floordiv inplace_mod inplace_pow math_exp
    math_log math_log1p math_expm1 math_sqrt math_sin math_cos math_tan math_asin math_acos
    math_sinh math_cosh math_floor math_ceil math_pow
""".split())


def raising_node(node: Node) -> bool:
    """An apply of a primitive that can raise on some values, or of a graph."""
    return isinstance(node, Apply) and may_raise(primitive_name(node))


# Primitives that read the values of only some of their operands (by position) and read
# the others' types or shapes only, or carry them without reading (a tuple element, a
# branch, an argument of a graph): the optimizer may drop such an operand while keeping the
# node, so reaching a computation through one does not evaluate it.  A gradient's
# reshaping of its sensitivity `d` reads d (the seed, where the output is a scalar), not the
# value it takes its shape from.
READS_ONLY = {"make_tuple": (), "env_setitem": (), "switch": (0,), "grad_seed": (),
              "shape": (), "ndim": (), "size": (), "dtype": (), "len": (), "grad_zeros": (),
              "zeros_like": (), "ones_like": (), "sum_to_like": (0,), "broadcast_to_like": (0,),
              "reduce_grad": (0,), "getitem_grad": (2,), "sum_to_side": (0,),
              "broadcast_to_side": (0,)}


def evaluates(x: Node, e: Node) -> bool:
    """Whether computing x surely computes e: e is reached from x through operands whose
    values are read (not through a tuple element, the arguments of a call of a graph or
    an operand that only its shape is read from, a branch not taken), in x's graph."""
    stack, seen = [x], set()
    while stack:
        n = stack.pop()
        if n is e:
            return True
        if id(n) in seen or not isinstance(n, Apply) or n.graph is not x.graph:
            continue
        seen.add(id(n))
        name = primitive_name(n)
        if name is None:
            stack.append(n.fn)
        elif name in READS_ONLY:
            stack.extend(n.args[i] for i in READS_ONLY[name])
        else:
            stack.extend(n.args)
    return False
