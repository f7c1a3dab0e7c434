"""The type and shape rule of every primitive: `TYPE_RULES[name](*abstract_args)`.

A rule returns the abstract value of the primitive's result (`passes.abstract`), `ANY` when
it cannot tell, `BOTTOM` when the call certainly raises at run time (a Python exception the
program may expect, such as an IndexError), and raises `RuleError` for a type error certain
to happen whatever the values are (the interpreter reports it at the user's source line).

Result *types* are not re-derived from numpy's documentation: a rule runs the very numpy or
Python operation the python backend runs (backends/python/impls.py) on small stand-in values
of the argument types — arrays of the right dtype and rank with every dimension 1, scalars of
the right Python type — and reads the result's type.  So NEP 50 promotion with weak Python
scalars, `np.sum(a)` being a `np.float64` rather than a 0-d array, `np.where` of scalars being
a 0-d array, and the TypeErrors of integer-only operations on floats are numpy's own answers.
Result *shapes* come from the rules below (broadcasting, reductions, matmul, indexing, ...),
which also check the shapes.  When every argument is a known constant, the operation is
simply computed (constant folding), so branches on constants are resolved.
"""

from __future__ import annotations

import contextvars
import dataclasses
import math
import operator
import warnings

import numpy as np

from myir.ir import einsum, tangents
from myir.ir.ieee import ieee_pow, ieee_truediv, strong_zero
from myir.ir.primitives import CONVERSION_TYPES, IN_PLACE, MATH_MORE, UNBOUND
from myir import tree
from passes.abstract import (ANY, BOTTOM, AArray, ADict, AEnv, AFunction, ANone, AObject,
                             ARecord, AScalar, ASlice, AStack, ATuple, AUnion, _value_key,
                             abstract_of, containers, join, options, with_items)
from passes.abstract import kind as kind_of
from passes.abstract import AList


class RuleError(Exception):
    """A type error certain to happen when the primitive runs: message and hint."""

    def __init__(self, message: str, hint: str | None = None, about: tuple | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint or "check the types and shapes of the values used here"
        # (i, phrase): the phrase of the message that names the operand i, which the
        # interpreter replaces by the program's name for it (`d` for "this dict")
        self.about = about


class Unsupported(RuleError):
    """What compiled code cannot do, where CPython would run on (a dict key or a number of
    steps not known when compiling): an error before running wherever the code may run,
    not only where it certainly does -- inference would type what follows as if it never
    ran, and the compiled code would go on from a wrong type."""


class TypeFailure(RuleError):
    """A `Fails` of a rule applied by `strict_rule`: CPython's TypeError for these types."""


class Unknown(Exception):
    """A stand-in value cannot be made for an argument: the result is ANY."""


class Fails(Exception):
    """The operation raises a Python exception (a TypeError) whatever the values: the result
    is BOTTOM, and the program raises CPython's own exception when it runs (programs may
    expect it) -- unless the rule is applied by `strict_rule`.  `message` is CPython's."""

    def __init__(self, message: str = ""):
        super().__init__(message)
        self.message = message


# Set while `strict_rule` applies a rule: a `Fails` then raises TypeFailure instead of giving
# BOTTOM.  A context variable, so that rules nested in rules see it and threads compiling
# at the same time do not.
_STRICT = contextvars.ContextVar("strict_rules", default=False)


def strict_rule(name: str, args: tuple):
    """`TYPE_RULES[name](*args)`, where an operation that raises a TypeError whatever the
    values raises TypeFailure.  The interpreter applies rules so to each type a value of
    several types (an AUnion) may have: there a TypeError for one of them is the branches'
    types disagreeing where that matters, reported before running (see passes/infer.py)."""
    token = _STRICT.set(True)
    try:
        return TYPE_RULES[name](*args)
    finally:
        _STRICT.reset(token)


_SAMPLE_OF_TYPE = {bool: True, int: 1, float: 0.5, complex: 0.5 + 0.5j}


def sample(a):
    """A concrete value of the abstract value's type (its value when known)."""
    if isinstance(a, AScalar):
        if a.known:
            return a.value
        if a.pytype in _SAMPLE_OF_TYPE:
            return _SAMPLE_OF_TYPE[a.pytype]
        return a.pytype(1)
    if isinstance(a, AArray):
        return np.ones((1,) * a.ndim, a.dtype)
    if isinstance(a, ATuple):
        return tuple(sample(x) for x in a.items)
    if isinstance(a, AList) and a.items is not None:
        return [sample(x) for x in a.items]
    if isinstance(a, ANone):
        return None
    if isinstance(a, AObject):
        if a.value is not ANY:
            return a.value
        if a.pytype is str:
            return "s"
    if isinstance(a, ASlice):
        return slice(sample(a.start), sample(a.stop), sample(a.step))
    raise Unknown


def known(a) -> bool:
    """Whether `a` describes a single value that the rules can compute with."""
    if isinstance(a, AScalar):
        return a.known
    if isinstance(a, ATuple):
        return all(known(x) for x in a.items)
    if isinstance(a, AList):
        return a.items is not None and all(known(x) for x in a.items)
    if isinstance(a, ASlice):
        return known(a.start) and known(a.stop) and known(a.step)
    return isinstance(a, ANone) or (isinstance(a, AObject) and a.value is not ANY)


def _too_big(fn, values) -> bool:
    """Integer powers and shifts whose exact result is too large to compute while compiling."""
    if fn in (operator.pow, operator.lshift, pow) and len(values) == 2:
        x, y = values
        return isinstance(y, int) and isinstance(x, int) and abs(y) > 256
    return False


def type_failure(fn, error: TypeError):
    """A TypeError of the operation on these types: an early RuleError for the integer-only
    operations (a float where an int is needed), else Fails (CPython's own error at run
    time)."""
    if fn in INTEGER_ONLY:
        return RuleError(str(error), "this operation needs integers; convert with int(...) "
                                     "or use an integer dtype")
    return Fails(str(error))


def _stand_in_key(a):
    """What `sample(a)` depends on: types, ranks and known values, not shapes."""
    if isinstance(a, AScalar):
        return (a.pytype, _value_key(a.value)) if a.known else a.pytype
    if isinstance(a, AArray):
        return a.dtype, a.ndim
    if isinstance(a, ATuple):
        return (ATuple,) + tuple(map(_stand_in_key, a.items))
    if isinstance(a, AList) and a.items is not None:
        return (AList,) + tuple(map(_stand_in_key, a.items))
    if isinstance(a, ANone):
        return None
    if isinstance(a, AObject) and (a.value is not ANY or a.pytype is str):
        return AObject, a.pytype, None if a.value is ANY else _value_key(a.value)
    if isinstance(a, ASlice):
        return ASlice, _stand_in_key(a.start), _stand_in_key(a.stop), _stand_in_key(a.step)
    raise Unknown


# `evaluate`'s outcomes by function and stand-ins, for every compilation in the process: the
# rules of a program evaluate the same few operations on the same few dtypes and ranks over
# and over, and running numpy under `warnings.catch_warnings` costs more than the rest of a
# rule.  Cleared when it holds this many.
_EVALUATED: dict = {}
_EVALUATED_MAX = 4096


def evaluate(fn, args, kwargs=None):
    """`fn` run on stand-ins of `args`: the concrete result.  A TypeError depends on the
    types only (see `type_failure`); any other failure of a stand-in gives Unknown.
    Results are shared (see _EVALUATED): callers only read them."""
    try:
        key = (fn, tuple(map(_stand_in_key, args)),
               tuple(sorted(kwargs.items())) if kwargs else ())
        outcome = _EVALUATED.get(key)
    except (Unknown, TypeError):  # no stand-in, or an unhashable argument
        return _evaluate(fn, args, kwargs)
    if outcome is None:
        try:
            outcome = (_evaluate(fn, args, kwargs),)
        except RuleError as e:
            outcome = (RuleError, e.message, e.hint)
        except Fails as e:
            outcome = (Fails, e.message)
        except Unknown:
            outcome = (Unknown,)
        if len(_EVALUATED) >= _EVALUATED_MAX:
            _EVALUATED.clear()
        _EVALUATED[key] = outcome
    if len(outcome) == 1:
        return outcome[0]
    raise outcome[0](*outcome[1:])  # a fresh exception: a raised one keeps its traceback


def _evaluate(fn, args, kwargs):
    values = [sample(a) for a in args]
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*values, **(kwargs or {}))
    except TypeError as e:
        raise type_failure(fn, e) from None
    except Exception:  # noqa: BLE001 - a stand-in's value may be outside the domain
        raise Unknown from None


def fold(fn, args):
    """The constant result of `fn` on known arguments; BOTTOM if it raises (at run time the
    same exception is raised)."""
    values = [sample(a) for a in args]
    if _too_big(fn, values):
        return widened(evaluate(fn, [AScalar(type(v)) for v in values]))
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("error", DeprecationWarning)
            result = fn(*values)
    except TypeError as e:
        raise type_failure(fn, e) from None
    except Exception:  # noqa: BLE001 - raised at run time too
        return BOTTOM
    return abstract_of(result)


def widened(result, shape=None):
    """The abstract value of a stand-in's result: its type, and `shape` for an array."""
    if isinstance(result, np.ndarray):
        if shape is None or len(shape) != result.ndim:
            return ANY
        return AArray(result.dtype, tuple(shape))
    if isinstance(result, (bool, int, float, complex, np.generic)):
        return AScalar(type(result))
    if isinstance(result, str):
        return AObject(str)
    return ANY


def rule(fn):
    """Decorate a rule: ANY in, ANY out, and a stand-in that cannot be made gives ANY."""
    def checked(*args):
        if ANY in args:
            return ANY
        try:
            return fn(*args)
        except Unknown:
            return ANY
        except Fails as e:
            if _STRICT.get():
                raise TypeFailure(e.message) from None
            return BOTTOM
    checked.__name__ = fn.__name__
    checked.__doc__ = fn.__doc__
    return checked


# ---------------------------------------------------------------------------------- shapes


def shape_of(a) -> tuple | None:
    """The shape numpy gives the value (scalars (), tuples of scalars (n,)), or None."""
    if isinstance(a, AArray):
        return a.shape
    if isinstance(a, AScalar):
        return ()
    if isinstance(a, ATuple):
        shapes = {shape_of(x) for x in a.items}
        if len(shapes) == 1 and None not in shapes:
            return (len(a.items),) + shapes.pop()
        return (0,) if not a.items else None
    if isinstance(a, AList):
        if a.items is not None:
            return shape_of(ATuple(a.items))
        inner = shape_of(a.item) if a.item is not BOTTOM else None
        return None if inner is None else (None,) + inner
    return None


def _dims(shape) -> str:
    return "(" + ",".join("?" if d is None else str(d) for d in shape) + \
        ("," if len(shape) == 1 else "") + ")"


def broadcast(*shapes) -> tuple:
    """numpy broadcasting of shapes with unknown (None) dimensions; RuleError if they
    certainly do not broadcast."""
    ndim = max(map(len, shapes), default=0)
    result = []
    for i in range(-ndim, 0):
        dims = [s[i] for s in shapes if len(s) >= -i]
        sizes = {d for d in dims if d is not None and d != 1}
        if len(sizes) > 1:
            raise RuleError("operands could not be broadcast together with shapes "
                            + " ".join(map(_dims, shapes)),
                            "make the shapes equal, or 1 where one operand should be repeated")
        if sizes:
            result.append(sizes.pop())
        elif None in dims:
            result.append(None)
        else:
            result.append(1)
    return tuple(result)


def int_value(a):
    """The value of a known integer argument, ANY for an unknown one (ANY itself too: an
    item of a tuple may be), or RuleError (a float where an int is needed is an error early;
    anything else fails at run time)."""
    if a is ANY:
        return ANY
    if isinstance(a, AScalar) and (a.pytype in (int, bool) or issubclass(a.pytype, np.integer)):
        return int(a.value) if a.known else ANY
    if isinstance(a, AScalar) and issubclass(a.pytype, (float, np.floating)):
        raise RuleError(f"'{type_name(a)}' object cannot be interpreted as an integer",
                        "use an int here: int(x), or x // 1 for a whole number")
    raise Fails(f"'{type_name(a)}' object cannot be interpreted as an integer")


def type_name(a) -> str:
    if isinstance(a, (AScalar, AObject)):
        return a.pytype.__name__
    if isinstance(a, AUnion):
        return " or ".join(map(type_name, a.options))
    if isinstance(a, ARecord):
        return a.cls.__name__
    return {ADict: "dict", AArray: "numpy.ndarray", ATuple: "tuple", ANone: "NoneType",
            ASlice: "slice", AList: "list"}.get(type(a), "object")


def shape_value(a) -> tuple | None:
    """A shape argument (an int, or a tuple or list of ints) as a tuple of ints and
    Nones."""
    if isinstance(a, AScalar):
        n = int_value(a)
        return (None if n is ANY else n,)
    if isinstance(a, (ATuple, AList)) and a.items is not None:
        return tuple(None if n is ANY else n for n in map(int_value, a.items))
    return None


def axes_value(a, ndim: int):
    """A known axis argument (None, an int or a tuple of ints), normalised; ANY if
    unknown."""
    if isinstance(a, ANone):
        return None
    items = a.items if isinstance(a, ATuple) else (a,)
    axes = []
    for item in items:
        axis = int_value(item)
        if axis is ANY:
            return ANY
        if ndim == 0 and axis in (0, -1):
            return ()  # numpy lets a 0-d array be reduced or squeezed along "axis 0"
        if not -ndim <= axis < ndim:
            raise RuleError(f"axis {axis} is out of bounds for array of dimension {ndim}",
                            f"axes of a {ndim}-d array are {-ndim} to {ndim - 1}")
        axes.append(axis % ndim)
    return tuple(axes) if isinstance(a, ATuple) else axes[0]


def as_dtype(a):
    """A known dtype argument as np.dtype, None for `dtype=None`, ANY if unknown."""
    if isinstance(a, ANone):
        return None
    if isinstance(a, AFunction) and len(a.options) == 1:   # `dtype=bool`: the conversion
        option, = a.options
        if getattr(option, "name", None) in CONVERSION_TYPES:
            return np.dtype(CONVERSION_TYPES[option.name])
    if isinstance(a, AObject) and a.value is not ANY:
        try:
            return np.dtype(a.value)
        except TypeError:
            raise RuleError(f"{a.value!r} is not a dtype", "use a numpy dtype such as "
                            "np.float64") from None
    return ANY


# ---------------------------------------------------------------------------- elementwise


def elementwise(fn):
    """A numpy ufunc or Python operator: the stand-ins' result type, broadcast shape."""
    @rule
    def apply(*args):
        if all(map(known, args)):
            return fold(fn, args)
        shapes = [shape_of(a) for a in args if isinstance(a, (AArray, ATuple))]
        shape = broadcast(*shapes) if None not in shapes else None
        return widened(evaluate(fn, args), shape)
    apply.__name__ = getattr(fn, "__name__", "elementwise")
    return apply


@rule
def add_rule(x, y):
    """`+`: tuples concatenate, lists too; a tuple and an array broadcast."""
    if isinstance(x, AList) or isinstance(y, AList):
        return _list_concat(x, y)
    if isinstance(x, ATuple) and isinstance(y, ATuple):
        return ATuple(x.items + y.items)
    other = y if isinstance(x, ATuple) else x if isinstance(y, ATuple) else None
    if other is not None and not isinstance(other, AArray):
        raise RuleError(f'can only concatenate tuple (not "{type_name(other)}") to tuple',
                        "both operands of + must be tuples to concatenate them")
    return _add(x, y)


def _list_concat(x, y):
    """`x + y` where one operand is a list: lists concatenate, an array broadcasts with it,
    anything else is CPython's TypeError."""
    if isinstance(x, AArray) or isinstance(y, AArray):
        return _add(x, y)
    if x is ANY or y is ANY:
        return ANY
    if not isinstance(x, AList) or not isinstance(y, AList):
        kind = "list" if isinstance(x, AList) else "tuple" if isinstance(x, ATuple) else None
        message = f'can only concatenate {kind} (not "{type_name(y)}") to {kind}' if kind \
            else f"unsupported operand type(s) for +: '{type_name(x)}' and 'list'"
        raise RuleError(message, "convert the other operand with list(...) to concatenate "
                        "lists" if isinstance(x if isinstance(y, AList) else y, ATuple)
                        else "both operands of + must be lists to concatenate them")
    if x.items is not None and y.items is not None:
        return AList(x.items + y.items)
    return AList(None, join(x.element, y.element))


def _list_repeat(x: AList, y):
    """`x * n` of a list."""
    count = _repeat_count(y)
    if count is not ANY and x.items is not None:
        return AList(x.items * max(count, 0))
    return AList(None, x.element)


@rule
def mul_rule(x, y):
    """`*`: a tuple or list times an int repeats it."""
    if isinstance(x, AList) and not isinstance(y, AArray):
        return _list_repeat(x, y)
    if isinstance(y, AList) and not isinstance(x, AArray):
        return _list_repeat(y, x)
    if isinstance(x, ATuple) and not isinstance(y, AArray):
        count = _repeat_count(y)
        return ANY if count is ANY else ATuple(x.items * max(count, 0))
    if isinstance(y, ATuple) and not isinstance(x, AArray):
        return mul_rule(y, x)
    return _mul(x, y)


def _repeat_count(y):
    """How many times `tuple * y` repeats the tuple, with CPython's message if y is no int."""
    message = f"can't multiply sequence by non-int of type '{type_name(y)}'"
    try:
        return int_value(y)
    except RuleError:
        raise RuleError(message, "repeat a tuple an int number of times") from None
    except Fails:
        raise Fails(message) from None


@rule
def pow_rule(x, y):
    """`**`: an int to an int power is a float when the exponent is negative."""
    if _is_int(x) and _is_int(y) and not y.known:
        return ANY
    return _pow(x, y)


_pow = elementwise(operator.pow)
_add = elementwise(operator.add)
_mul = elementwise(operator.mul)


def _in_place(name):
    op = getattr(operator, IN_PLACE[name])

    @rule
    def apply(x, y):
        """`y[index] op= v` on the indexed part x: an array keeps its dtype and shape (numpy
        updates it in place); BOTTOM where numpy raises, for a result that does not fit x's
        shape (ValueError) or cannot be cast to its dtype (UFuncTypeError: `same_kind`).
        Anything else: the plain operator."""
        result = TYPE_RULES[name](x, y)
        if not isinstance(x, AArray) or result in (ANY, BOTTOM):
            return result
        shape = shape_of(result)
        if shape is not None and (len(shape) != len(x.shape) or any(
                r is not None and d is not None and r != d for r, d in zip(shape, x.shape))):
            return BOTTOM
        evaluate(op, [x, y])    # numpy's casting error for these dtypes: Fails
        return x
    return apply


def _augmented(name, symbol):
    @rule
    def apply(x, y):
        if isinstance(x, AArray):
            raise RuleError(
                f"`{symbol}=` on the array x would update it in place, and here the array "
                "is shared (with another variable, a tuple, a closure or the caller); "
                "compiled functions never mutate arrays",
                f"write `x = x {symbol} y` to make a new array, or copy it first: "
                "`x = x.copy()`", about=(0, "the array x"))
        return TYPE_RULES[name](x, y)
    return apply


def _math(fn):
    """math.* functions: Python floats in, floats out (arrays are left to run time)."""
    base = elementwise(fn)

    @rule
    def apply(*args):
        if any(isinstance(a, AArray) for a in args):
            return ANY
        return base(*args)
    return apply


def _identity_test(negate):
    @rule
    def apply(x, y):
        def definite(a):  # surely not None (a string: `ord is None` on np.linalg.norm's)
            return isinstance(a, (AScalar, AArray, ATuple, AFunction, AEnv)) or (
                isinstance(a, AObject) and a.pytype is str)
        def unbound(a):  # a parameter left to its computed default (parser.nested_function)
            return isinstance(a, AObject) and a.value is UNBOUND
        if (isinstance(x, ANone) and isinstance(y, ANone)) or (unbound(x) and unbound(y)):
            return AScalar(bool, not negate)
        if (isinstance(x, ANone) and definite(y)) or (isinstance(y, ANone) and definite(x)) \
                or (unbound(x) and (definite(y) or isinstance(y, ANone))) \
                or (unbound(y) and (definite(x) or isinstance(x, ANone))):
            return AScalar(bool, negate)
        return AScalar(bool)
    return apply


def truthiness(a):
    """`bool(a)` when it is certain, else None."""
    if isinstance(a, AScalar) and a.known:
        return bool(a.value)
    if isinstance(a, ATuple):
        return bool(a.items)
    if isinstance(a, ANone):
        return False
    if isinstance(a, (AFunction, AEnv)):
        return True
    if isinstance(a, AObject) and a.value is not ANY and a.value is not UNBOUND:
        return bool(a.value)
    if isinstance(a, AUnion):  # the same for every option, or unknown
        found = {truthiness(x) for x in a.options}
        return found.pop() if len(found) == 1 else None
    return None


def _truth(negate):
    @rule
    def apply(x):
        if isinstance(x, AArray):
            size = math.prod(x.shape) if None not in x.shape else None
            if size is not None and size != 1:
                return BOTTOM  # ValueError: the truth value of an array is ambiguous
            return AScalar(bool)
        t = truthiness(x)
        return AScalar(bool) if t is None else AScalar(bool, t != negate)
    return apply


# ----------------------------------------------------------------------------- reductions


def _reduction(fn, keepdims_param=True):
    @rule
    def apply(x, axis, keepdims=AScalar(bool, False)):
        if not isinstance(x, AArray):
            shape = shape_of(x)
            if shape is None:
                return ANY
            x = AArray(np.asarray(sample(x)).dtype, shape)
        axes = axes_value(axis, x.ndim)
        keep = truthiness(keepdims)
        if axes is ANY or keep is None:
            return ANY
        kwargs = {"axis": sample(axis)}
        if keepdims_param:
            kwargs["keepdims"] = keep
        result = evaluate(fn, [x], kwargs)
        reduced = set(range(x.ndim)) if axes is None else \
            set(axes if isinstance(axes, tuple) else (axes,))
        shape = tuple(1 if i in reduced else d for i, d in enumerate(x.shape)
                      if keep or i not in reduced)
        return widened(result, shape)
    return apply


# ------------------------------------------------------------------------- linear algebra


def _core_mismatch(name, xs, ys, a, b):
    raise RuleError(f"{name}: shapes {_dims(xs)} and {_dims(ys)} are not aligned: "
                    f"{a} (dim {len(xs) - 1}) != {b} (dim {max(len(ys) - 2, 0)})",
                    "the last dimension of the left operand must equal the "
                    "second-to-last (or only) dimension of the right one")


def _same(a, b) -> bool:
    return a is None or b is None or a == b


@rule
def matmul_rule(x, y):
    xs, ys = shape_of(x), shape_of(y)
    if xs is None or ys is None or not isinstance(x, (AArray, ATuple)) \
            or not isinstance(y, (AArray, ATuple)):
        if isinstance(x, AScalar) or isinstance(y, AScalar):
            raise RuleError("matmul: an operand is a scalar, it needs at least one dimension",
                            "use * to multiply by a scalar")
        return ANY
    if not xs or not ys:
        raise RuleError("matmul: an operand is a 0-d array, it needs at least one dimension",
                        "use * to multiply by a scalar")
    if not _same(xs[-1], ys[-2 if len(ys) > 1 else -1]):
        _core_mismatch("matmul", xs, ys, xs[-1], ys[-2 if len(ys) > 1 else -1])
    batch = broadcast(xs[:-2], ys[:-2])
    shape = batch + (xs[-2:-1] if len(xs) > 1 else ()) + (ys[-1:] if len(ys) > 1 else ())
    return widened(evaluate(operator.matmul, [x, y]), shape)


@rule
def dot_rule(x, y):
    xs, ys = shape_of(x), shape_of(y)
    if xs is None or ys is None:
        return ANY
    if not xs or not ys:
        return elementwise(np.dot)(x, y)
    inner = ys[-2] if len(ys) > 1 else ys[-1]
    if not _same(xs[-1], inner):
        _core_mismatch("dot", xs, ys, xs[-1], inner)
    shape = xs[:-1] + ys[:-2] + ys[-1:] if len(ys) > 1 else xs[:-1]
    return widened(evaluate(np.dot, [x, y]), shape)


# ------------------------------------------------------------------------- shape functions


def _array_arg(x):
    """An array-like argument as AArray (numpy converts scalars and tuples), or None."""
    if isinstance(x, AArray):
        return x
    shape = shape_of(x)
    if shape is None:
        return None
    if isinstance(x, AList) and x.items is None:
        element = _array_arg(x.item)
        return None if element is None else AArray(element.dtype, shape)
    try:
        return AArray(np.asarray(sample(x)).dtype, shape)
    except Unknown:
        return None


def _shaped_like(x: AArray, d):
    """A sensitivity of array x: x's shape, in the dtype of d (array-like); ANY if unknown."""
    a = _array_arg(d)
    return ANY if a is None else AArray(a.dtype, x.shape)


@rule
def reshape_rule(x, shape):
    a = _array_arg(x)
    target = shape_value(shape)
    if a is None or target is None:
        return ANY
    if sum(d == -1 for d in target) > 1:
        raise RuleError("can only specify one unknown dimension", "use -1 at most once")
    size = math.prod(a.shape) if None not in a.shape else None
    rest = [d for d in target if d != -1]
    if None not in rest and size is not None:
        if -1 in target:
            n = math.prod(rest)
            if n == 0 or size % n:
                raise RuleError(f"cannot reshape array of size {size} into shape "
                                f"{_dims(target)}", "the sizes must match")
            target = tuple(size // n if d == -1 else d for d in target)
        elif math.prod(target) != size:
            raise RuleError(f"cannot reshape array of size {size} into shape {_dims(target)}",
                            "the new shape must have as many elements as the array")
    target = tuple(None if d == -1 else d for d in target)
    return widened(evaluate(_reshape_to_rank, [x], {"ndim": len(target)}), target)


def _reshape_to_rank(x, ndim):
    return np.reshape(x, (1,) * ndim)


@rule
def transpose_rule(x, axes):
    a = _array_arg(x)
    if a is None:
        return ANY
    if isinstance(axes, ANone):
        perm = tuple(reversed(range(a.ndim)))
    else:
        perm = axes_value(axes, a.ndim)
        if perm is ANY:
            return ANY
        if sorted(perm) != list(range(a.ndim)):
            raise RuleError("axes don't match array", f"give a permutation of 0..{a.ndim - 1}")
    return widened(evaluate(np.transpose, [x], {"axes": perm}), tuple(a.shape[i] for i in perm))


@rule
def swapaxes_rule(x, a1, a2):
    a = _array_arg(x)
    if a is None:
        return ANY
    i, j = axes_value(a1, a.ndim), axes_value(a2, a.ndim)
    if i is ANY or j is ANY:
        return ANY
    if i is None or j is None:
        raise RuleError("swapaxes: an axis must be an integer, not None",
                        "give both axes as integers")
    shape = list(a.shape)
    shape[i], shape[j] = shape[j], shape[i]
    return widened(evaluate(np.swapaxes, [x], {"axis1": i, "axis2": j}), shape)


@rule
def argsort_rule(x, axis, stable):
    a = _array_arg(x)
    if a is None:
        return ANY
    if axes_value(axis, max(a.ndim, 1)) is ANY:
        return ANY
    return widened(evaluate(np.argsort, [x]), a.shape if a.ndim else (1,))


@rule
def broadcast_to_rule(x, shape):
    a = _array_arg(x)
    target = shape_value(shape)
    if a is None or target is None:
        return ANY
    if a.ndim > len(target):
        raise RuleError(f"cannot broadcast a {a.ndim}-d array to the {len(target)}-d shape "
                        f"{_dims(target)}", "the target shape needs at least as many dimensions")
    for d, t in zip(reversed(a.shape), reversed(target)):
        if d is not None and t is not None and d != 1 and d != t:
            raise RuleError(f"operands could not be broadcast together: shape {_dims(a.shape)} "
                            f"to {_dims(target)}", "dimensions must be equal or 1")
    return AArray(a.dtype, target)


@rule
def expand_dims_rule(x, axis):
    a = _array_arg(x)
    if a is None:
        return ANY
    axes = axes_value(axis, a.ndim + (len(axis.items) if isinstance(axis, ATuple) else 1))
    if axes is ANY:
        return ANY
    if axes is None:
        raise RuleError("expand_dims: the axis must be an integer or a tuple, not None",
                        "give the position of the new axis")
    shape = list(a.shape)
    for i in sorted(axes if isinstance(axes, tuple) else (axes,)):
        shape.insert(i, 1)
    return widened(evaluate(np.expand_dims, [x], {"axis": axes}), shape)


@rule
def squeeze_rule(x, axis):
    a = _array_arg(x)
    if a is None:
        return ANY
    axes = axes_value(axis, a.ndim)
    if axes is ANY or (axes is None and None in a.shape):
        return ANY
    if axes is None:
        axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
    axes = axes if isinstance(axes, tuple) else (axes,)
    for i in axes:
        if a.shape[i] not in (1, None):
            raise RuleError("cannot select an axis to squeeze out which has size not equal "
                            "to one", f"axis {i} has size {a.shape[i]}")
    shape = tuple(d for i, d in enumerate(a.shape) if i not in axes)
    return widened(evaluate(np.squeeze, [x]), shape) if x is a else AArray(a.dtype, shape)


def _array_items(arrays):
    if isinstance(arrays, AList) and arrays.items is not None:
        arrays = ATuple(arrays.items)
    if not isinstance(arrays, ATuple) or not arrays.items:
        return None
    items = [_array_arg(x) for x in arrays.items]
    return None if None in items else items


def _common_dim(items, k: int, message: str, hint: str):
    """Dimension k, which every array must share (None where none of them knows it)."""
    sizes = {a.shape[k] for a in items if a.shape[k] is not None}
    if len(sizes) > 1:
        raise RuleError(f"{message}: {' '.join(_dims(a.shape) for a in items)}", hint)
    return sizes.pop() if sizes else None


@rule
def concatenate_rule(arrays, axis):
    if isinstance(arrays, AList) and arrays.items is None:   # the axis's length is unknown
        return _unknown_count(concatenate_rule, arrays, axis)
    items = _array_items(arrays)
    if items is None:
        return ANY
    if isinstance(axis, ANone):     # the arrays flattened, one after the other
        sizes = [None if None in a.shape else math.prod(a.shape) for a in items]
        return AArray(np.result_type(*[a.dtype for a in items]),
                      (None if None in sizes else sum(sizes),))
    ndim = items[0].ndim
    if any(a.ndim != ndim for a in items) or ndim == 0:
        raise RuleError("all the input arrays must have the same number of dimensions, "
                        "at least 1", "concatenate arrays of one rank")
    i = axes_value(axis, ndim)
    if i is ANY:
        return ANY
    shape = []
    for k in range(ndim):
        dims = [a.shape[k] for a in items]
        shape.append((None if None in dims else sum(dims)) if k == i else _common_dim(
            items, k, "all the input array dimensions except for the concatenation axis "
            "must match exactly", f"the arrays differ in dimension {k}"))
    return AArray(np.result_type(*[a.dtype for a in items]), tuple(shape))


def _unknown_count(rule_of, arrays: AList, axis):
    """np.stack / np.concatenate of a list of unknown length: the rule for two of its
    elements, with the dimension whose size the length makes unknown."""
    result = rule_of(ATuple((arrays.item, arrays.item)), axis)
    if not isinstance(result, AArray):
        return result
    i = axes_value(axis, result.ndim)
    if i is ANY:
        return ANY
    return AArray(result.dtype, result.shape[:i] + (None,) + result.shape[i + 1:])


@rule
def stack_rule(arrays, axis):
    if isinstance(arrays, AList) and arrays.items is None:
        return _unknown_count(stack_rule, arrays, axis)
    items = _array_items(arrays)
    if items is None:
        return ANY
    ndim = items[0].ndim
    if any(a.ndim != ndim for a in items):
        raise RuleError("all input arrays must have the same shape",
                        "stack arrays of one shape")
    i = axes_value(axis, ndim + 1)
    if i is ANY:
        return ANY
    shape = [_common_dim(items, k, "all input arrays must have the same shape",
                         "stack arrays of one shape") for k in range(ndim)]
    shape.insert(i, len(items))
    return AArray(np.result_type(*[a.dtype for a in items]), tuple(shape))


@rule
def astype_rule(x, dtype):
    dt = as_dtype(dtype)
    if not isinstance(x, AArray) and not (isinstance(x, AScalar)
                                          and issubclass(x.pytype, np.generic)):
        raise RuleError(f"`.astype` needs a numpy array or scalar, got {type_name(x)}",
                        "convert with np.asarray(x) first, or call the dtype: np.float32(x)")
    if dt is ANY or dt is None:
        return ANY
    return AArray(dt, x.shape) if isinstance(x, AArray) else AScalar(dt.type)


@rule
def cast_rule(x, dtype):
    if not (isinstance(dtype, AObject) and isinstance(dtype.value, type)):
        return ANY
    if known(x) and not isinstance(x, ATuple):
        return fold(dtype.value, [x])
    return widened(evaluate(dtype.value, [x]), shape_of(x))


def _attribute(name, of_array):
    @rule
    def apply(x):
        if isinstance(x, AArray) or (isinstance(x, AScalar) and issubclass(x.pytype, np.generic)):
            return of_array(x if isinstance(x, AArray) else AArray(x.dtype, ()))
        if isinstance(x, (AScalar, ATuple, AList, ANone, AFunction, AEnv)) or \
                (isinstance(x, AObject) and x.pytype is str):
            raise RuleError(f"'{type_name(x)}' object has no attribute '{name}'",
                            f"`.{name}` is an attribute of numpy arrays; convert with "
                            "np.asarray(x) first")
        return ANY
    return apply


def _size(a):
    return AScalar(int, math.prod(a.shape)) if None not in a.shape else AScalar(int)


# ---------------------------------------------------------------------------- constructors


@rule
def constructor_rule(shape, dtype):
    """np.zeros, np.ones, np.empty."""
    return full_rule(shape, AScalar(float), dtype)


@rule
def full_rule(shape, fill, dtype):
    dims = shape_value(shape)
    dt = as_dtype(dtype)
    if dims is None or dt is ANY:
        return ANY
    if dt is None:
        dt = evaluate(np.full, [ATuple(()), fill]).dtype
    return AArray(dt, dims)


@rule
def array_rule(x, dtype):
    """np.array, np.asarray, np.zeros_like, np.ones_like."""
    a = _array_arg(x)
    dt = as_dtype(dtype)
    if a is None or dt is ANY:
        return ANY
    return AArray(a.dtype if dt is None else dt, a.shape)


@rule
def arange_rule(start, stop, step, dtype):
    dt = as_dtype(dtype)
    if dt is ANY:
        return ANY
    args = [a for a in (start, stop, step) if not isinstance(a, ANone)]
    if all(map(known, args)):
        result = fold(lambda *v: np.arange(*v, dtype=dt), args)
        return result
    return widened(evaluate(np.arange, args, {"dtype": dt}), (None,))


@rule
def eye_rule(n, dtype):
    size = int_value(n)
    dt = as_dtype(dtype)
    if dt is ANY:
        return ANY
    size = None if size is ANY else size
    return AArray(np.dtype(np.float64) if dt is None else dt, (size, size))


# ------------------------------------------------------------------------------- builtins


@rule
def len_rule(x):
    if isinstance(x, (ATuple, ADict)) or isinstance(x, ARecord) and tree.is_namedtuple(x.cls):
        return AScalar(int, len(x.items))
    if isinstance(x, AList):
        return AScalar(int) if x.items is None else AScalar(int, len(x.items))
    if isinstance(x, AArray):
        if not x.shape:
            raise RuleError("len() of unsized object", "a 0-d array has no length")
        return AScalar(int, x.shape[0]) if x.shape[0] is not None else AScalar(int)
    if isinstance(x, AObject) and x.pytype is range and x.value is ANY:
        return AScalar(int)
    return elementwise(len)(x)


def _builtin_extremum(fn):
    @rule
    def apply(*args):
        if len(args) == 1 and isinstance(args[0], AList) and args[0].items is None:
            element = args[0].item   # ValueError if empty, else one of the elements
            return AScalar(element.pytype) if isinstance(element, AScalar) else element
        items = args[0].items if len(args) == 1 and isinstance(args[0], (ATuple, AList)) \
            else args
        if not items:
            return BOTTOM  # ValueError: empty sequence
        if any(isinstance(a, AArray) for a in items):
            return ANY
        if all(map(known, items)):
            return fold(fn, items)
        result = BOTTOM
        for item in items:
            result = join(result, AScalar(item.pytype) if isinstance(item, AScalar) else item)
        return result
    return apply


@rule
def range_rule(*args):
    for a in args:
        int_value(a)
    return fold(range, args) if all(map(known, args)) else AObject(range)


def _conversion(pytype):
    @rule
    def apply(x):
        if isinstance(x, AArray):
            size = math.prod(x.shape) if None not in x.shape else None
            return AScalar(pytype) if size in (1, None) else BOTTOM
        return elementwise(pytype)(x)
    return apply


# ------------------------------------------------------------------------------ structure


def make_tuple_rule(*args):
    return ATuple(args)


@rule
def getitem_rule(x, index):
    if isinstance(x, ATuple):
        return _tuple_item(x, index)
    if isinstance(x, AList):
        return _list_item(x, index)
    if isinstance(x, AArray):
        return _array_item(x, index)
    if isinstance(x, ADict):
        return _dict_item(x, index)
    if isinstance(x, ARecord):
        if not tree.is_namedtuple(x.cls):
            raise RuleError(f"'{x.cls.__name__}' object is not subscriptable",
                            "read a dataclass's fields by name: `p.W`")
        return _tuple_item(ATuple(x.items), index)
    if isinstance(x, AObject) and x.pytype is range and x.value is ANY:
        return AObject(range) if isinstance(index, ASlice) else AScalar(int)
    if isinstance(x, AObject) and x.pytype in (str, range):
        return elementwise(operator.getitem)(x, index)
    if isinstance(x, (ANone, AFunction)) or (isinstance(x, AScalar)
                                             and not issubclass(x.pytype, np.generic)):
        raise RuleError(f"'{type_name(x)}' object is not subscriptable",
                        "only tuples, strings and arrays can be indexed")
    return ANY


def setitem_rule(x, index, value):
    """`y[index] = value`: an array keeps its type whatever the index and value (numpy
    casts, or raises), though they are not known (`y[[1, 3]] += v`)."""
    if isinstance(x, AArray) and ANY in (index, value):
        return x
    return _setitem_rule(x, index, value)


@rule
def _setitem_rule(x, index, value):
    """`y[index] = value` on an array: y's type (numpy casts the value to y's dtype), the
    value broadcast to the indexed part's shape as numpy broadcasts it (leading dimensions
    of 1 dropped)."""
    if isinstance(x, AArray):
        item = getitem_rule(x, index)
        target, shape = shape_of(item) if item not in (ANY, BOTTOM) else None, shape_of(value)
        if target is not None and shape is not None:
            shape = list(shape)
            while len(shape) > len(target) and shape[0] in (1, None):
                shape.pop(0)
            fits = len(shape) <= len(target) and all(
                d in (1, None) or t is None or d == t
                for d, t in zip(reversed(shape), reversed(target)))
            if not fits:
                raise RuleError(f"could not broadcast input array from shape "
                                f"{_dims(tuple(shape_of(value)))} into shape {_dims(target)}",
                                "assign a value of the indexed part's shape, or one that "
                                "broadcasts to it")
        if isinstance(value, (ATuple, AScalar, AArray)):
            evaluate(_assign_into, [AArray(x.dtype, ()), value if not isinstance(value, AArray)
                                    else AArray(value.dtype, ())])
        return BOTTOM if item is BOTTOM else x
    if isinstance(x, ADict):
        return dict_setitem_rule(x, index, value)
    if isinstance(x, AList):
        return _list_setitem(x, index, value)
    if isinstance(x, (ATuple, AScalar, ANone, AFunction)) or \
            (isinstance(x, AObject) and x.pytype is str):
        raise RuleError(f"'{type_name(x)}' object does not support item assignment",
                        "only arrays (and lists and dicts) can be updated; build a new "
                        "value instead")
    return ANY


def _list_setitem(x: AList, index, value):
    """`xs[i] = v` and `xs[a:b] = ys` of a list: its items where the length and the index
    are known (a slice may change the length: CPython's `xs[1:3] = [v]`), else the list of
    unknown length whose element may also be the new value."""
    if isinstance(index, ASlice):
        if not isinstance(value, (AList, ATuple)) and not (
                isinstance(value, AObject) and value.pytype in (range, str)):
            if isinstance(value, (AScalar, ANone, AFunction, ARecord, ADict)):
                raise Fails("must assign iterable to extended slice" if known(index)
                            and sample(index).step not in (None, 1)
                            else "can only assign an iterable")
            return AList(None, join(x.element, ANY))
        items = value.items if isinstance(value, (AList, ATuple)) else None
        if x.items is not None and items is not None and known(index):
            new = list(x.items)
            try:
                new[sample(index)] = items
            except ValueError as e:     # an extended slice of another length
                raise Fails(str(e)) from None
            return AList(tuple(new))
        element = value.element if isinstance(value, AList) else \
            AList(items).element if items is not None else ANY
        return AList(None, join(x.element, element))
    _list_item(x, index)   # the index's own errors: its type, out of range (BOTTOM)
    if x.items is not None and isinstance(index, AScalar) and index.known:
        i = int(index.value)
        if not -len(x.items) <= i < len(x.items):
            return BOTTOM   # IndexError: list assignment index out of range
        new = list(x.items)
        new[i] = value
        return AList(tuple(new))
    if x.items is not None:    # an index not known: any item may be the new value
        return AList(tuple(join(item, value) for item in x.items))
    return AList(None, join(x.item, value))


def _assign_into(x, value):
    """numpy's assignment of a value into an element of x (a TypeError for a complex value
    into a real array, for instance)."""
    y = x.copy()
    y[...] = value if not isinstance(value, tuple) else value[0] if value else 0
    return y


@rule
def copy_rule(x):
    """`x.copy()`, `dict(d)`: a value of x's own type."""
    if isinstance(x, (AArray, ADict, AList)) or (isinstance(x, AScalar)
                                          and issubclass(x.pytype, np.generic)):
        return x
    if isinstance(x, (ATuple, AScalar, ANone, AFunction)) or \
            (isinstance(x, AObject) and x.pytype is str):
        raise RuleError(f"'{type_name(x)}' object has no attribute 'copy'",
                        "`.copy()` copies arrays (and lists and dicts)")
    return ANY


def not_a_view_rule(x, message, hint):
    """A variable bound to `y[i]` and read after y is updated in place, or the element
    `y[i] op= v` changes (frontend/ownership.py): a number is a copy, an array is a view that
    would see the update, a list or dict an object `op=` changes in place."""
    if isinstance(x, (AArray, AList, ADict)):
        raise RuleError(message.value, hint.value)
    return x


def _tuple_item(x, index):
    if isinstance(index, ASlice):
        if not known(index):
            return ANY
        return ATuple(x.items[sample(index)])
    if not (isinstance(index, AScalar) and (index.pytype in (int, bool)
                                            or issubclass(index.pytype, np.integer))):
        if not (isinstance(index, AScalar) and issubclass(index.pytype, (float, np.floating))):
            raise Fails(f"tuple indices must be integers or slices, not {type_name(index)}")
        raise RuleError(f"tuple indices must be integers or slices, not {type_name(index)}",
                        "index a tuple with an int")
    if index.known:
        i = int(index.value)
        return x.items[i] if -len(x.items) <= i < len(x.items) else BOTTOM
    result = BOTTOM
    for item in x.items:
        result = join(result, item)
    return result


def _list_item(x: AList, index):
    """`xs[i]` and `xs[a:b]` of a list: like a tuple's where the length is known."""
    if x.items is not None:
        if isinstance(index, ASlice):
            return AList(_tuple_item(ATuple(x.items), index).items) if known(index) \
                else AList(None, x.element)
        try:
            return _tuple_item(ATuple(x.items), index)
        except RuleError as e:
            raise RuleError(e.message.replace("tuple", "list"),
                            e.hint.replace("tuple", "list")) from None
        except Fails as e:
            raise Fails(str(e).replace("tuple", "list")) from None
    if isinstance(index, ASlice):
        return x
    if not _is_int(index) and not (isinstance(index, AScalar) and index.pytype is bool):
        raise Fails(f"list indices must be integers or slices, not {type_name(index)}")
    return x.item


def _is_int(a) -> bool:
    return isinstance(a, AScalar) and (a.pytype is int or issubclass(a.pytype, np.integer))


def _array_item(x, index):
    items = index.items if isinstance(index, ATuple) else (index,)
    if any(isinstance(i, AArray) for i in items):
        return _advanced_item(x, items)
    for i in items:
        if isinstance(i, AScalar) and i.pytype in (bool, np.bool_):
            return ANY  # x[True] adds an axis
        if isinstance(i, AScalar) and not _is_int(i):
            raise RuleError("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis "
                            "(`None`) and integer or boolean arrays are valid indices",
                            f"index with an int, not a {type_name(i)}")
        if not isinstance(i, (AScalar, ASlice, ANone)) and not _is_ellipsis(i):
            return ANY
    ellipses = [i for i in items if _is_ellipsis(i)]
    used = sum(1 for i in items if isinstance(i, (AScalar, ASlice)))
    if used > x.ndim or len(ellipses) > 1:
        return BOTTOM  # IndexError: too many indices
    if not ellipses:
        items = items + (_ELLIPSIS,)
    whole = ASlice(ANone(), ANone(), ANone())
    at = next(k for k, i in enumerate(items) if _is_ellipsis(i))
    items = items[:at] + (whole,) * (x.ndim - used) + items[at + 1:]
    dims = iter(x.shape)
    shape = []
    for i in items:
        if isinstance(i, ANone):
            shape.append(1)
            continue
        d = next(dims)
        if isinstance(i, AScalar):
            if i.known and d is not None and not -d <= int(i.value) < d:
                return BOTTOM  # IndexError: out of bounds
        elif known(i) and d is not None:
            shape.append(len(range(*sample(i).indices(d))))
        else:
            shape.append(None)
    if not shape and not ellipses:
        return AScalar(x.dtype.type)
    return AArray(x.dtype, tuple(shape))


_ELLIPSIS = AObject(type(Ellipsis), Ellipsis)


def _is_ellipsis(a) -> bool:
    return isinstance(a, AObject) and a.value is Ellipsis


def _advanced_item(x, items):
    if len(items) != 1:
        return ANY
    (idx,) = items
    if idx.dtype.kind == "b":
        k = idx.ndim
        for d, m in zip(x.shape, idx.shape):
            if d is not None and m is not None and d != m:
                return BOTTOM  # IndexError: boolean index did not match
        return AArray(x.dtype, (None,) + x.shape[k:])
    if idx.dtype.kind not in "iu" or not x.shape:
        return ANY
    return AArray(x.dtype, idx.shape + x.shape[1:])


@rule
def unpack_rule(x, n):
    count = int_value(n)
    if (containers(x) or isinstance(x, AList) and x.items is not None) and count is not ANY:
        return x if len(x.items) == count else BOTTOM  # ValueError at run time
    return x


@rule
def builtin_divmod_rule(x, y):
    """divmod(x, y) is (x // y, x % y), but for its ZeroDivisionError's message."""
    return ATuple((TYPE_RULES["floordiv"](x, y), TYPE_RULES["mod"](x, y)))


def make_slice_rule(start, stop, step):
    return ASlice(start, stop, step)


# ------------------------------------------------------------------------- differentiation


def grad_zeros_rule(x):
    if x is ANY:
        return ANY
    if isinstance(x, AUnion):  # an item of a tuple (the interpreter splits top-level ones)
        result = BOTTOM
        for option in x.options:
            result = join(result, grad_zeros_rule(option))
        return result
    if isinstance(x, AArray):
        return x
    if isinstance(x, AScalar):
        if x.pytype in (bool, int):
            return AScalar(int, 0)
        return AScalar(x.pytype, x.pytype(0))
    if containers(x):
        return with_items(x, tuple(map(grad_zeros_rule, x.items)))
    if isinstance(x, AList):
        return _list_map(grad_zeros_rule, x)
    if isinstance(x, (AEnv, AFunction)) or (isinstance(x, AObject) and _callable(x)):
        return AEnv()
    if isinstance(x, AStack):
        return AStack(BOTTOM)   # EMPTY_STACK, a stack's zero sensitivity
    return ANone()


def _list_map(fn, x: AList, *others) -> AList:
    """fn of x's items (and those of `others`, lists too), position by position where every
    length is known and equal, else of the elements."""
    lists = (x,) + others
    if all(a.items is not None for a in lists) and len({len(a.items) for a in lists}) == 1:
        return AList(tuple(map(fn, *(a.items for a in lists))))
    return AList(None, fn(*(a.element for a in lists)) if all(
        a.element is not BOTTOM for a in lists) else BOTTOM)


def _callable(x: AObject) -> bool:
    """Whether every value x stands for is callable (grad_zeros gives them an empty env,
    as for functions): a type (`np.float64` passed to astype), or a known callable."""
    return issubclass(x.pytype, type) or (x.value is not ANY and callable(x.value))


def gadd_rule(x, y):
    if isinstance(x, AUnion) or isinstance(y, AUnion):
        # items of tuples (the interpreter splits top-level ones): a loop's sensitivity of
        # a variable that is a float on its first iteration and a float64 after, say; the
        # sum of each pair of options, joined (ANY where one pair cannot be added), so
        # that the array gradients added next to it keep their type
        result = BOTTOM
        for a in options(x):
            for b in options(y):
                try:
                    result = join(result, gadd_rule(a, b))
                except RuleError:
                    return ANY
        return result
    if isinstance(x, AStack) and isinstance(y, AStack):
        if x.item is BOTTOM or y.item is BOTTOM:
            return AStack(join(x.item, y.item))
        return AStack(join(join(x.item, y.item), gadd_rule(x.item, y.item)))
    if containers(x) and containers(y) and kind_of(x) == kind_of(y):
        return with_items(x, tuple(gadd_rule(a, b) for a, b in zip(x.items, y.items)))
    if isinstance(x, AList) and isinstance(y, AList):
        return _list_map(gadd_rule, x, y)
    if isinstance(x, AEnv) and isinstance(y, AEnv):
        env = AEnv(x.items, x.complete and y.complete)
        for key, value in y.items:
            old = x.get(key)
            if old is None and not x.complete:
                env = AEnv(tuple((k, v) for k, v in env.items if k is not key), False)
            else:
                env = env.set(key, value if old is None else gadd_rule(old, value))
        return env
    if isinstance(x, ANone):
        return y
    if isinstance(y, ANone):
        return x
    if x is ANY or y is ANY or containers(x) or isinstance(x, (AEnv, AList)):
        return ANY
    return TYPE_RULES["add"](x, y)


def stack_push_rule(s, x):
    if isinstance(s, AStack):
        return AStack(join(s.item, x))
    return ANY


def stack_pop_rule(s):
    if isinstance(s, AStack):
        return BOTTOM if s.item is BOTTOM else ATuple((s.item, s))
    return ANY


def stack_empty_rule(s):
    if isinstance(s, AStack) and s.item is BOTTOM:
        return AScalar(bool, True)
    return AScalar(bool)


def env_getitem_rule(env, key, default):
    if isinstance(env, AEnv) and isinstance(key, AObject) and key.value is not ANY:
        found = env.get(key.value)
        if found is not None:
            return found
        return default if env.complete else ANY
    return ANY


def env_setitem_rule(env, key, value):
    if isinstance(env, AEnv) and isinstance(key, AObject) and key.value is not ANY:
        return env.set(key.value, value)
    return ANY


@rule
def sum_to_like_rule(d, x):
    if isinstance(x, (AList, ATuple)) and type(d) is type(x) and (
            x.items is None or d.items is None or len(x.items) != len(d.items)):
        # `mul`'s rule of a sequence repeated: its copies' sensitivities are not summed
        kind = "list" if isinstance(x, AList) else "tuple"
        raise RuleError(f"the gradient of repeating a {kind} (`xs * n`) that is known to be "
                        f"a {kind} only when it runs is not supported",
                        f"repeat a {kind} the function makes: `{kind}(xs) * n`")
    if not isinstance(x, AArray):
        return TYPE_RULES["sum"](d, ANone(), AScalar(bool, False)) if isinstance(d, AArray) \
            else d
    if isinstance(d, AArray):
        if d.shape == x.shape and None not in d.shape:
            return d
        return AArray(evaluate(np.sum, [d]).dtype, x.shape)
    return d if x.shape == () else ANY


# The abstract values of containers whose `+` concatenates (`sum_to_side`): the sensitivity
# of an operand is the result's items at its side.
CONCATENATED = (ATuple, AList)


def _side(whole, part, right):
    """The slice of `whole`'s items that `part`, the left (or, if `right`, the right)
    operand of the concatenation `whole`, takes; None where a length is not known."""
    n, total = len_rule(part), len_rule(whole)
    if not (isinstance(n, AScalar) and n.known and isinstance(total, AScalar) and total.known
            and isinstance(right, AScalar) and right.known):
        return None
    start = total.value - n.value if right.value else 0
    return ASlice(AScalar(int, start), AScalar(int, start + n.value), ANone())


@rule
def sum_to_side_rule(d, x, right):
    if not isinstance(x, CONCATENATED):
        return sum_to_like_rule(d, x)
    side = _side(d, x, right)
    return ANY if side is None else getitem_rule(d, side)


@rule
def broadcast_to_side_rule(d, x, right):
    if not isinstance(x, CONCATENATED):
        return broadcast_to_like_rule(d, x)
    side = _side(x, d, right)
    return ANY if side is None else getitem_grad_rule(x, side, d)


@rule
def broadcast_to_like_rule(d, x):
    if not isinstance(x, AArray):
        return d
    return _shaped_like(x, d)


@rule
def reduce_grad_rule(dout, x, axis, keepdims):
    if isinstance(x, (AList, ATuple)):      # numpy reduced the array it makes of x
        a = _array_arg(x)
        return ANY if a is None else array_grad_rule(x, reduce_grad_rule(dout, a, axis,
                                                                          keepdims))
    if not isinstance(x, AArray):
        return dout
    return _shaped_like(x, dout)


@rule
def getitem_grad_rule(x, index, dout):
    if isinstance(x, ATuple):
        zeros = list(grad_zeros_rule(x).items)
        if isinstance(index, ASlice):
            if not known(index):
                return ANY
            positions = range(*sample(index).indices(len(zeros)))
            for i, g in zip(positions, dout.items if isinstance(dout, ATuple) else ()):
                zeros[i] = g
            return ATuple(tuple(zeros))
        if isinstance(index, AScalar) and index.known:
            i = int(index.value)
            if not -len(zeros) <= i < len(zeros):
                return BOTTOM   # as getitem's rule has it: a path that never runs
            zeros[i] = dout
            return ATuple(tuple(zeros))
        return ANY
    if isinstance(x, AList):
        zeros = grad_zeros_rule(x)
        if x.items is not None and (isinstance(index, ASlice) and known(index)
                                    or isinstance(index, AScalar) and index.known):
            done = getitem_grad_rule(ATuple(x.items), index,
                                     ATuple(dout.items) if isinstance(dout, AList)
                                     and dout.items is not None else dout)
            if isinstance(done, ATuple):
                return AList(done.items)
        part = dout.element if isinstance(index, ASlice) and isinstance(dout, AList) else dout
        return AList(None, join(zeros.element, part)) if x.items is None else \
            AList(tuple(join(z, part) for z in zeros.items))
    if isinstance(x, AArray):
        return x
    if isinstance(x, AScalar) and issubclass(x.pytype, np.inexact):
        return AScalar(x.pytype)    # a numpy scalar indexed as a 0-d array: x[()], x[None]
    if isinstance(x, (ADict, ARecord)):
        return _record_item_grad(x, index, dout)
    return grad_zeros_rule(x)


@rule
def grad_seed_rule(out):
    if isinstance(out, AUnion):
        return _union_seed(out)
    if isinstance(out, AScalar) and issubclass(out.pytype, (float, np.floating)):
        return AScalar(out.pytype, out.pytype(1.0))
    if isinstance(out, AArray):
        if out.shape != ():    # an array of one element is no scalar either, as in JAX
            raise RuleError(
                "grad() and hessian() need a function returning a scalar; this one "
                "returned an array of "
                f"shape {_dims(out.shape)}",
                "reduce the output to a scalar (e.g. np.sum without keepdims, or `[0]` of "
                "a 1-element array), or take a vector-Jacobian product: value_and_grad of "
                "`np.sum(f(x) * v)`")
        if out.dtype.kind == "f":
            return out
    if isinstance(out, (AScalar, ATuple, ANone, AFunction)):
        kind = "function" if isinstance(out, AFunction) else type_name(out)
        raise RuleError(f"grad() needs a function returning a float; this one returned {kind}",
                        "return a float (an integer or boolean output has no gradient)")
    return ANY


def _integer_scalar(a) -> bool:
    return isinstance(a, AScalar) and issubclass(a.pytype, (int, np.integer, np.bool_))


def _union_seed(out: AUnion):
    """The seed of an output of several types (passes.infer passes grad_seed the union
    whole): a float on some paths and an int or a bool on others (an accumulator started at
    `0`) is differentiable, and the paths where it is an integer are constant, so their seed
    is 0.  Any other option fails as alone, named as one of the output's types."""
    seed = BOTTOM
    for option in out.options:
        if _integer_scalar(option):
            seed = join(seed, AScalar(int, 0))
            continue
        try:
            seed = join(seed, grad_seed_rule(option))
        except RuleError as e:
            kinds = " or ".join(map(type_name, out.options))
            raise RuleError(f"{e.message}, on the paths where it returns {type_name(option)} "
                            f"(it returns {kinds})", e.hint) from None
    if all(map(_integer_scalar, out.options)):
        raise RuleError(f"grad() needs a function returning a float; this one returned "
                        f"{' or '.join(map(type_name, out.options))}",
                        "return a float (an integer or boolean output has no gradient)")
    return seed


def grad_check_input_rule(x, name):
    bad = (isinstance(x, AScalar) and (x.pytype in (bool, int)
                                       or issubclass(x.pytype, (np.integer, np.bool_)))) \
        or (isinstance(x, AArray) and x.dtype.kind in "biu")
    if bad:
        label = name.value if isinstance(name, AObject) else "?"
        dtype = f" of dtype {x.dtype}" if isinstance(x, AArray) else ""
        raise RuleError(f"cannot differentiate with respect to '{label}': it is "
                        f"{type_name(x) if not isinstance(x, AArray) else 'ndarray'}{dtype}",
                        f"pass a float for '{label}', or differentiate with respect to other "
                        "parameters")
    return x


def jvp_check_tangent_rule(x, t, index):
    """t, if it can be the tangent of x (`myir/ir/tangents.py`): a located error when
    compiling where shapes or dtypes say it cannot; x's zero for an integer x."""
    if isinstance(x, ATuple) and isinstance(t, ATuple) and len(x.items) == len(t.items):
        return ATuple(tuple(jvp_check_tangent_rule(a, b, index)
                            for a, b in zip(x.items, t.items)))
    if not (isinstance(x, (AArray, AScalar)) and isinstance(t, (AArray, AScalar, ATuple, ANone))):
        return t
    if isinstance(x, AArray) and any(d is None for d in x.shape) or \
            isinstance(t, AArray) and any(d is None for d in t.shape):
        return t    # checked when it runs
    fx = (x.shape if isinstance(x, AArray) else (), x.dtype)
    ft = (t.shape if isinstance(t, AArray) else (), t.dtype) \
        if isinstance(t, (AArray, AScalar)) else ((), np.dtype(object))
    i = int(index.value) if isinstance(index, AScalar) and index.known else 0
    problem = tangents.mismatch(fx, ft, i)
    if problem is not None:
        raise RuleError(*problem)
    return grad_zeros_rule(x) if fx[1].kind in "biu" else t


def grad_cast_rule(d, x):
    """What `impls.grad_cast` makes of d: x's type without its value (see there)."""
    if isinstance(x, AUnion):
        result = BOTTOM
        for option in x.options:
            result = join(result, grad_cast_rule(d, option))
        return result
    numeric = d is ANY or isinstance(d, (AArray, AScalar, AUnion))
    if isinstance(d, (AArray, AScalar)) and d.dtype.kind == "c" \
            and isinstance(x, (AArray, AScalar)) and x.dtype.kind != "c":
        return d
    if isinstance(x, AArray) and x.dtype.kind in "fc" and numeric:
        return AArray(x.dtype, x.shape)
    if isinstance(x, AScalar) and issubclass(x.pytype, (float, complex, np.inexact)) \
            and numeric:
        return AScalar(x.pytype)
    if containers(x) and containers(d) and len(d.items) == len(x.items):
        return with_items(x, tuple(map(grad_cast_rule, d.items, x.items)))
    if containers(x) and d is ANY:
        return ANY
    if isinstance(x, AList) and isinstance(d, AList):
        return _list_map(grad_cast_rule, d, x)
    return d


# Jacobians of trees (impls.tree_ravel and co.): the leaves must be numbers or arrays, and a
# list's length must be known, so that the Jacobian's blocks are known when compiling.


class _UnknownTree(Exception):
    """A tree inference cannot take apart (an unknown value, a union): the rule gives ANY."""


def _tree_leaves(a) -> list:
    if containers(a):
        return [leaf for item in a.items for leaf in _tree_leaves(item)]
    if isinstance(a, AList):
        if a.items is None:
            raise RuleError("a Jacobian of a list whose length is not known when compiling",
                            "give the function a tuple, or a list of a known length (a "
                            "literal, or the argument itself)")
        return [leaf for item in a.items for leaf in _tree_leaves(item)]
    if isinstance(a, (AScalar, AArray)) and a.dtype.kind in "biufc":
        return [a]
    if a is ANY or isinstance(a, AUnion):
        raise _UnknownTree
    raise RuleError(f"a Jacobian is taken of numbers and arrays (in tuples, lists, dicts "
                    f"and records), and this function's input or output holds {a!r}",
                    "return (and differentiate with respect to) only numbers and arrays")


def _tree_map(fn, a):
    if containers(a):
        return with_items(a, tuple(_tree_map(fn, item) for item in a.items))
    if isinstance(a, AList):
        return AList(tuple(_tree_map(fn, item) for item in a.items))
    return fn(a)


def _tree_size(leaves: list) -> int | None:
    """How many numbers the leaves hold (None if a dimension is not known)."""
    shapes = [shape_of(leaf) for leaf in leaves]
    return None if any(None in shape for shape in shapes) else sum(map(math.prod, shapes))


def _tree_rule(fn):
    def checked(*args):
        try:
            return fn(*args)
        except _UnknownTree:
            return ANY
    checked.__name__ = fn.__name__
    return checked


@_tree_rule
def tree_ravel_rule(x):
    leaves = _tree_leaves(x)
    dtype = np.result_type(*(leaf.dtype for leaf in leaves)) if leaves else np.dtype(float)
    return AArray(dtype, (_tree_size(leaves),))


@_tree_rule
def tree_unravel_rule(like, v):
    _tree_leaves(like)
    return _tree_map(lambda leaf: grad_cast_rule(v, leaf) if leaf.dtype.kind in "fc"
                     else grad_zeros_rule(leaf), like)


@_tree_rule
def jacobian_blocks_rule(out, x, jac):
    _tree_leaves(out), _tree_leaves(x)
    return _tree_map(lambda o: _tree_map(
        lambda xi: AArray(o.dtype, shape_of(o) + shape_of(xi)), x), out)


@_tree_rule
def jacobian_unblocks_rule(out, x, blocks):
    parts = _tree_leaves(blocks)
    dtype = np.result_type(*(p.dtype for p in parts)) if parts else np.dtype(float)
    return AArray(dtype, (_tree_size(_tree_leaves(out)), _tree_size(_tree_leaves(x))))


@rule
def select_grad_rule(out, x, dout, count):
    hit = TYPE_RULES["eq"](x, out)
    ratio = TYPE_RULES["truediv"](dout, count)
    zero = grad_zeros_rule(dout)
    t = truthiness(hit)
    if t is None:
        return join(ratio, zero)
    return ratio if t else zero


@rule
def concat_grad_rule(arrays, axis, dout):
    items = _array_items(arrays)
    if items is None or not isinstance(dout, AArray):
        return ANY
    if isinstance(axis, ANone):
        return ATuple(tuple(AArray(dout.dtype, a.shape) for a in items))
    i = axes_value(axis, dout.ndim)
    if i is ANY:
        return ANY
    return ATuple(tuple(AArray(dout.dtype, dout.shape[:i] + (a.shape[i],) + dout.shape[i + 1:])
                        for a in items))


@rule
def unstack_rule(x, axis):
    if not isinstance(x, AArray):
        return ANY
    i = axes_value(axis, x.ndim)
    if i is ANY or x.shape[i] is None:
        return ANY
    rest = x.shape[:i] + x.shape[i + 1:]
    item = AArray(x.dtype, rest) if rest else AScalar(x.dtype.type)
    return ATuple((item,) * x.shape[i])


# ----------------------------------------------------------------------- control, effects


def switch_rule(cond, if_true, if_false):
    t = truthiness(cond)
    if t is None:
        return join(if_true, if_false)
    return if_true if t else if_false


@rule
def make_exception_rule(cls, *args):
    if isinstance(cls, AObject) and isinstance(cls.value, type):
        return AObject(cls.value)
    return ANY


def raise_rule(exception):
    return BOTTOM


def print_rule(previous, sep, end, args):
    """None; the rule never prints (rules run on stand-ins, once per type)."""
    return ANone()


def depend_rule(x, effect):
    return x


def check_bound_rule(x, name):
    return BOTTOM if isinstance(x, AObject) and x.value is UNBOUND else x


def _string(fn):
    @rule
    def apply(*args):
        if all(map(known, args)):
            return fold(fn, args)
        return AObject(str)
    return apply


def _format(x, conversion, spec):
    x = {"r": repr, "s": str, "a": ascii}.get(conversion, lambda v: v)(x)
    return format(x, spec)


# ------------------------------------------- numpy.linalg, einsum, scans, sorting, gathers
# Shapes from numpy's documented rules; dtypes from numpy run on stand-ins (1x1 matrices).


def _matrices(x, name, square=True):
    """A stack of matrices (..., M, N) argument, square unless told."""
    a = _array_arg(x)
    if a is None:
        raise Unknown
    if a.ndim < 2:
        raise RuleError(f"numpy.linalg.{name}: {a.ndim}-dimensional array given; it must be "
                        "at least two-dimensional", "pass a matrix, or a stack of matrices "
                        "of shape (..., M, M)")
    if square and not _same(a.shape[-1], a.shape[-2]):
        raise RuleError(f"numpy.linalg.{name}: the last 2 dimensions of the array must be "
                        f"square, not {_dims(a.shape[-2:])}", "pass square matrices")
    return a


def _linalg_result(fn, args, shapes, kwargs=None):
    """The abstract result of a linalg function: an array (or numpy scalar) of each shape."""
    result = evaluate(fn, args, kwargs)
    if isinstance(result, tuple):
        return ATuple(tuple(widened(r, s) for r, s in zip(result, shapes)))
    return widened(result, shapes[0])


def _matrix_rule(name, fn, shapes_of):
    @rule
    def apply(x, *options):  # eigh's UPLO: the result's shapes do not depend on it
        a = _matrices(x, name)
        return _linalg_result(fn, [x], shapes_of(a.shape))
    return apply


@rule
def linalg_solve_rule(a, b):
    m = _matrices(a, "solve")
    v = _array_arg(b)
    if v is None:
        return ANY
    if v.ndim == 1:
        if not _same(v.shape[0], m.shape[-1]):
            raise RuleError(f"numpy.linalg.solve: b of shape {_dims(v.shape)} does not match "
                            f"a of shape {_dims(m.shape)}", "b needs as many rows as a")
        shape = m.shape[:-1]
    else:
        if not _same(v.shape[-2], m.shape[-1]):
            raise RuleError(f"numpy.linalg.solve: b of shape {_dims(v.shape)} does not match "
                            f"a of shape {_dims(m.shape)}", "b needs as many rows as a: "
                            "(..., M) or (..., M, K) for a of shape (..., M, M)")
        shape = broadcast(m.shape[:-2], v.shape[:-2]) + v.shape[-2:]
    return _linalg_result(np.linalg.solve, [a, b], [shape])


def _min_dim(m, n):
    return None if m is None or n is None else min(m, n)


@rule
def linalg_qr_rule(x, mode):
    a = _matrices(x, "qr", square=False)
    if not known(mode):
        return ANY
    *batch, m, n = a.shape
    batch, k = tuple(batch), _min_dim(m, n)
    shapes = {"reduced": [batch + (m, k), batch + (k, n)],
              "complete": [batch + (m, m), batch + (m, n)], "r": [batch + (k, n)]}
    if sample(mode) not in shapes:
        raise RuleError(f"numpy.linalg.qr: unrecognized mode {sample(mode)!r}",
                        "mode is 'reduced', 'complete' or 'r'")
    return _linalg_result(lambda v: _as_tuple(np.linalg.qr(v, sample(mode))), [x],
                          shapes[sample(mode)])


@rule
def linalg_svd_rule(x, full_matrices, compute_uv):
    a = _matrices(x, "svd", square=False)
    full, uv = truthiness(full_matrices), truthiness(compute_uv)
    if full is None or uv is None:
        return ANY
    *batch, m, n = a.shape
    batch, k = tuple(batch), _min_dim(m, n)
    shapes = [batch + (k,)] if not uv else [
        batch + (m, m if full else k), batch + (k,), batch + (n if full else k, n)]
    return _linalg_result(lambda v: _as_tuple(np.linalg.svd(v, full, uv)), [x], shapes)


def _as_tuple(result):
    """numpy's named tuple of results as the plain tuple compiled code gets."""
    return tuple(result) if isinstance(result, tuple) else result


def _subscripts(a) -> str:
    if not (isinstance(a, AObject) and a.pytype is str and a.value is not ANY):
        raise RuleError("numpy.einsum: the subscripts must be a string known when compiling",
                        "write them as a string literal, e.g. np.einsum('ij,jk->ik', a, b)")
    return a.value


@rule
def einsum_rule(subscripts, *operands):
    spec = _subscripts(subscripts)
    arrays = [_array_arg(x) for x in operands]
    if None in arrays:
        return ANY
    try:
        shape = einsum.output_shape(spec, [a.shape for a in arrays])
    except ValueError as e:
        raise RuleError(str(e), "one subscript letter per dimension of each operand, and "
                        "'...' for broadcast dimensions") from None
    return widened(evaluate(np.einsum, [subscripts, *operands]), shape)


@rule
def einsum_grad_rule(subscripts, *operands_and_dout):
    arrays = [_array_arg(x) for x in operands_and_dout]
    if None in arrays:
        return ANY
    dtype = np.result_type(*(a.dtype for a in arrays))
    return ATuple(tuple(AArray(dtype, a.shape) for a in arrays[:-1]))


@rule
def tensordot_rule(a, b, axes):
    x, y = _array_arg(a), _array_arg(b)
    if x is None or y is None or not known(axes):
        return ANY
    try:
        spec = einsum.tensordot_subscripts(x.ndim, y.ndim, sample(axes))
        shape = einsum.output_shape(spec, [x.shape, y.shape])
    except (ValueError, IndexError, TypeError):
        raise RuleError("numpy.tensordot: axes do not match the operands",
                        "axes is an int N (a's last N axes with b's first N) or a pair of "
                        "axis lists of equal length") from None
    return widened(evaluate(np.tensordot, [a, b], {"axes": sample(axes)}), shape)


@rule
def convolve_rule(a, v, mode):
    x, y = _array_arg(a), _array_arg(v)
    if x is None or y is None or not known(mode):
        return ANY
    if x.ndim != 1 or y.ndim != 1:
        raise RuleError("numpy.convolve: a and v must be 1-dimensional",
                        "convolve 1-d arrays (np.reshape(x, -1) flattens)")
    n, m = x.shape[0], y.shape[0]
    if n is None or m is None:
        return AArray(evaluate(np.convolve, [a, v]).dtype, (None,))
    sizes = {"full": n + m - 1, "same": max(n, m), "valid": max(n, m) - min(n, m) + 1}
    if sample(mode) not in sizes:
        raise RuleError(f"numpy.convolve: mode must be one of 'valid', 'same', or 'full' "
                        f"(got {sample(mode)!r})", "use one of them")
    return AArray(evaluate(np.convolve, [a, v]).dtype, (sizes[sample(mode)],))


def _scan(fn):
    @rule
    def apply(x, axis):
        a = _array_arg(x)
        if a is None:
            return ANY
        i = axes_value(axis, a.ndim)
        if i is ANY:
            return ANY
        shape = a.shape if i is not None else (
            (math.prod(a.shape) if None not in a.shape else None),)
        return widened(evaluate(fn, [x], {"axis": sample(axis)}), shape)
    return apply


@rule
def sort_rule(x, axis):
    a = _array_arg(x)
    if a is None:
        return ANY
    i = axes_value(axis, max(a.ndim, 1))
    if i is ANY:
        return ANY
    if i is None:
        return AArray(a.dtype, (math.prod(a.shape) if None not in a.shape else None,))
    if a.ndim == 0:
        raise RuleError("numpy.sort: a 0-d array has no axis to sort along",
                        "sort a 1-d array, or pass axis=None")
    return AArray(a.dtype, a.shape)


def _integer_indices(indices, name):
    i = _array_arg(indices)
    if i is None:
        raise Unknown
    if i.dtype.kind not in "iub":
        raise RuleError(f"numpy.{name}: indices of dtype {i.dtype} must be integers",
                        "convert them with .astype(np.int64), or use integer arrays")
    return i


def _array_or_scalar(dtype, shape):
    return AArray(dtype, tuple(shape)) if len(shape) else AScalar(dtype.type)


@rule
def take_rule(x, indices, axis):
    a, i = _array_arg(x), _integer_indices(indices, "take")
    if a is None:
        return ANY
    k = axes_value(axis, a.ndim)
    if k is ANY:
        return ANY
    if k is None:
        return _array_or_scalar(a.dtype, i.shape)
    return _array_or_scalar(a.dtype, a.shape[:k] + i.shape + a.shape[k + 1:])


@rule
def take_along_axis_rule(x, indices, axis):
    a, i = _array_arg(x), _integer_indices(indices, "take_along_axis")
    if a is None:
        return ANY
    k = axes_value(axis, a.ndim)
    if k is ANY:
        return ANY
    if k is None:
        return AArray(a.dtype, i.shape)
    if i.ndim != a.ndim:
        raise RuleError(f"numpy.take_along_axis: indices of {i.ndim} dimensions for an array "
                        f"of {a.ndim}", "indices need the array's number of dimensions "
                        "(np.expand_dims, or the output of np.argsort)")
    rest = broadcast(a.shape[:k] + (1,) + a.shape[k + 1:], i.shape[:k] + (1,) + i.shape[k + 1:])
    return AArray(a.dtype, rest[:k] + i.shape[k:k + 1] + rest[k + 1:])


@rule
def gather_grad_rule(x, indices, axis, dout):
    a, d = _array_arg(x), _array_arg(dout)
    if a is None or d is None:
        return ANY
    return AArray(d.dtype, a.shape)


@rule
def searchsorted_rule(a, v, side):
    s, w = _array_arg(a), _array_arg(v)
    if s is None or w is None:
        return ANY
    if s.ndim != 1:
        raise RuleError(f"numpy.searchsorted: a must be 1-dimensional, not {s.ndim}-dimensional",
                        "search a sorted 1-d array")
    return _array_or_scalar(np.dtype(np.intp), w.shape)


LINALG_RULES = {
    "linalg_solve": linalg_solve_rule,
    "linalg_inv": _matrix_rule("inv", np.linalg.inv, lambda s: [s]),
    "linalg_det": _matrix_rule("det", np.linalg.det, lambda s: [s[:-2]]),
    "linalg_slogdet": _matrix_rule("slogdet", lambda v: _as_tuple(np.linalg.slogdet(v)),
                                   lambda s: [s[:-2], s[:-2]]),
    "linalg_cholesky": _matrix_rule("cholesky", np.linalg.cholesky, lambda s: [s]),
    "linalg_eigh": _matrix_rule("eigh", lambda v: _as_tuple(np.linalg.eigh(v)),
                                lambda s: [s[:-1], s]),
    "linalg_qr": linalg_qr_rule,
    "linalg_svd": linalg_svd_rule,
    "einsum": einsum_rule,
    "einsum_grad": einsum_grad_rule,
    "tensordot": tensordot_rule,
    "tensordot_grad": lambda a, b, axes, dout: einsum_grad_rule(AObject(str), a, b, dout),
    "convolve": convolve_rule,
    "cumsum": _scan(np.cumsum),
    "cumprod": _scan(np.cumprod),
    "sort": sort_rule,
    "take": take_rule,
    "take_grad": gather_grad_rule,
    "take_along_axis": take_along_axis_rule,
    "take_along_axis_grad": gather_grad_rule,
    "searchsorted": searchsorted_rule,
}


# ---------------------------------------------------------------------------------- lists


def make_list_rule(*args):
    return AList(args)


def _needs_list(xs, method: str):
    """RuleError unless xs may be a list (CPython: AttributeError)."""
    if not isinstance(xs, AList) and xs is not ANY:
        raise RuleError(f"'{type_name(xs)}' object has no attribute '{method}'",
                        f"`.{method}()` is a method of lists: make one with list(...)")


@rule
def list_append_rule(xs, x):
    _needs_list(xs, "append")
    if xs is ANY:
        return ANY
    return AList(xs.items + (x,)) if xs.items is not None else AList(None, join(xs.item, x))


@rule
def list_extend_rule(xs, ys):
    _needs_list(xs, "extend")
    rows = _rows(ys)
    if xs is ANY or rows is None:
        return ANY
    if xs.items is not None and isinstance(rows, tuple):
        return AList(xs.items + rows)
    return AList(None, join(xs.element, rows.element if isinstance(rows, AList)
                            else AList(rows).element))


@rule
def list_pop_rule(xs, index):
    _needs_list(xs, "pop")
    i = int_value(index)
    if xs is ANY:
        return ANY
    if xs.items is None:
        return ATuple((xs.item, xs)) if xs.item is not BOTTOM else BOTTOM
    if i is ANY:    # one item fewer, whichever it is
        rest = AList((xs.element,) * (len(xs.items) - 1))
        return ATuple((xs.element, rest)) if xs.items else BOTTOM
    if not -len(xs.items) <= i < len(xs.items):
        return BOTTOM   # IndexError: pop from empty list, pop index out of range
    rest = list(xs.items)
    item = rest.pop(i)
    return ATuple((item, AList(tuple(rest))))


@rule
def list_unpop_rule(rest, index, x):
    i = int_value(index)
    if not isinstance(rest, AList):
        return ANY
    if rest.items is None or i is ANY:
        return AList(None, join(rest.element, x))
    items = list(rest.items)
    items.insert(i if i >= 0 else i + len(items) + 1, x)
    return AList(tuple(items))


def setitem_slot_rule(x, index, value):
    """backends/python/impls.py's `_setitem_slot`: (index, value) but for a list's slice."""
    if not (isinstance(x, AList) and isinstance(index, ASlice)):
        return ATuple((index, value)) if x is not ANY else ANY
    if not known(index):
        return ATuple((ANY, _list_item(x, index)))
    if sample(index).step not in (None, 1):
        return ATuple((index, value))
    n = len(value.items) if isinstance(value, (AList, ATuple)) and value.items is not None \
        else None
    start = sample(index).indices(len(x.items))[0] if x.items is not None else None
    if n is None or start is None:
        return ATuple((ASlice(AScalar(int), AScalar(int), ANone()), _list_item(x, index)))
    return ATuple((abstract_of(slice(start, start + n)), _list_item(x, index)))


def _rows(x) -> tuple | AList | None:
    """The items `for v in x` sees: a tuple of them when their number is known, else an
    AList of unknown length; None where inference cannot tell."""
    if isinstance(x, (ATuple, AList)):
        return x.items if x.items is not None else x
    if isinstance(x, AArray) and x.ndim:
        row = AArray(x.dtype, x.shape[1:]) if x.ndim > 1 else AScalar(x.dtype.type)
        return (row,) * x.shape[0] if x.shape[0] is not None else AList(None, row)
    if isinstance(x, AObject) and x.pytype is range:
        if x.value is not ANY:
            return tuple(AScalar(int, v) for v in x.value)
        return AList(None, AScalar(int))
    if isinstance(x, ADict):    # its keys, constants
        return tuple(map(abstract_of, x.keys))
    return None


@rule
def to_list_rule(x):
    rows = _rows(x)
    if rows is None:
        return ANY
    return rows if isinstance(rows, AList) else AList(rows)


def list_of_length_rule(xs, n):
    """xs with n items: the list a comprehension without `if` built over n values, whose
    loop widened its length away.  Before the loop's inference converges, xs may be its
    value at an earlier step (fewer items): each of the n items is then any item xs has,
    and none yet (BOTTOM, which joins leave out) while xs has none."""
    if not (isinstance(xs, AList) and isinstance(n, AScalar) and n.known
            and type(n.value) is int) or xs.items is not None and len(xs.items) == n.value:
        return xs
    return _items_like(xs.element, n.value)


def _items_like(item, n: int | None):
    """A list of n items (an unknown number: None), each any value `item` describes; none
    yet (BOTTOM) while no item is known."""
    if n is None:
        return AList(None, item)
    return AList((item,) * n) if item is not BOTTOM or n == 0 else BOTTOM


@rule
def list_order_rule(xs, reverse):
    if isinstance(xs, AArray):  # `x.sort()`: refused by list_permute, at the user's line
        return AList(None, AScalar(int))
    _needs_list(xs, "sort")
    return _items_like(AScalar(int), None if xs.items is None else len(xs.items))


@rule
def list_permute_rule(xs, order):
    """`[xs[i] for i in order]`: `sorted(xs)`'s list, or the update of `xs.sort()` or
    `xs.reverse()`, which an array does not have (numpy's `x.sort()` sorts in place)."""
    if isinstance(xs, AArray):
        raise RuleError("`.sort()` or `.reverse()` of an array: compiled code does not "
                        "change arrays in place", "write `x = np.sort(x)` or `x = x[::-1]`")
    _needs_list(xs, "sort")
    if not isinstance(order, AList):
        return ANY
    return _items_like(xs.element, None if order.items is None else len(order.items))


@rule
def to_tuple_rule(x):
    rows = _rows(x)
    return ATuple(rows) if isinstance(rows, tuple) else ANY


@rule
def builtin_sum_rule(xs, start):
    rows = _rows(xs)
    if rows is None:
        return ANY
    add = TYPE_RULES["add"]
    if isinstance(rows, tuple):
        total = start
        for row in rows:
            total = add(total, row)
        return total
    if rows.item is BOTTOM:
        return start
    total = start                    # start, or a sum of one or more elements
    for _ in range(8):   # sum([floats]) is start=0 (an int) if the list is empty, else a float
        more = total
        for option in options(total):
            more = join(more, add(option, rows.item))
        if more == total:
            return total
        total = more
    return ANY


@rule
def sum_grad_rule(xs, dout):
    def share(x):
        return TYPE_RULES["sum_to_like"](dout, x)

    if isinstance(xs, ATuple):
        return ATuple(tuple(map(share, xs.items)))
    if isinstance(xs, AList):
        return _list_map(share, xs)
    if isinstance(xs, AArray):
        return _shaped_like(xs, dout)
    return ANY


@rule
def seq_grad_rule(d, x):
    if isinstance(x, (ATuple, AList)):
        if isinstance(d, (ATuple, AList)) and d.items is not None:
            return type(x)(d.items)
        return d if isinstance(x, AList) and isinstance(d, AList) else ANY
    if isinstance(x, AArray):
        return _shaped_like(x, d)
    return ANY


@rule
def array_grad_rule(x, dout):
    if isinstance(x, (ATuple, AList)):
        if x.items is None:
            return AList(None, array_grad_rule(x.item, getitem_rule(dout, AScalar(int))))
        return type(x)(tuple(array_grad_rule(v, getitem_rule(dout, AScalar(int, i)))
                             for i, v in enumerate(x.items)))
    return grad_cast_rule(dout, x)


LIST_RULES = {
    "make_list": make_list_rule,
    "list_append": list_append_rule,
    "list_extend": list_extend_rule,
    "seq_repeat": mul_rule,
    "list_pop": list_pop_rule,
    "list_unpop": list_unpop_rule,
    "setitem_slot": setitem_slot_rule,
    "to_list": to_list_rule,
    "list_of_length": list_of_length_rule,
    "list_order": list_order_rule,
    "list_permute": list_permute_rule,
    "to_tuple": to_tuple_rule,
    "builtin_sum": builtin_sum_rule,
    "sum_grad": sum_grad_rule,
    "seq_grad": seq_grad_rule,
    "array_grad": array_grad_rule,
}


# ---------------------------------------------------------------------------------- table

# Operations defined on integers only: using them on floats is reported before running.
INTEGER_ONLY = {operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift,
                operator.invert, range}

_OPERATORS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
    "pow": operator.pow, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
    "ge": operator.ge, "eq": operator.eq, "ne": operator.ne, "bitand": operator.and_,
    "bitor": operator.or_, "bitxor": operator.xor, "lshift": operator.lshift,
    "rshift": operator.rshift, "neg": operator.neg, "pos": operator.pos,
    "invert": operator.invert, "builtin_abs": abs,
}
_NUMPY_ELEMENTWISE = (
    "exp log log1p expm1 sqrt sin cos tan arcsin arccos arctan sinh cosh tanh abs sign floor "
    "ceil square negative reciprocal maximum minimum arctan2 power where clip "
    "cbrt log2 exp2 log10 arcsinh arccosh arctanh rint trunc isnan isinf isfinite hypot "
    "logaddexp logaddexp2").split()
_MATH = ("exp log log1p expm1 sqrt sin cos tan asin acos atan sinh cosh tanh fabs floor ceil "
         "pow atan2 hypot").split()
_AUGMENTED = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//",
              "mod": "%", "pow": "**", "matmul": "@"}

# ------------------------------------------------------------------------ dicts, records


class _NotConstant(Exception):
    pass


def key_value(a):
    """The constant a dict key's abstract value stands for (raises _NotConstant)."""
    if isinstance(a, ANone):
        return None
    if isinstance(a, ATuple):
        return tuple(key_value(x) for x in a.items)
    if isinstance(a, (AScalar, AObject)) and a.value is not ANY \
            and (isinstance(a, AScalar) or a.pytype is str):
        return a.value
    raise _NotConstant


def _constant_key(a, what: str):
    try:
        return key_value(a)
    except _NotConstant:
        raise Unsupported(f"{what} is {type_name(a)} whose value is not known when compiling; "
                        "compiled dicts have keys known when compiling",
                        "use constant keys (strings, numbers), or a tuple or array indexed by "
                        "an int for values chosen at run time") from None


def _set(d: ADict, key, value) -> ADict:
    """d with `key` set to value: replaced in place, or added at the end (CPython's order)."""
    keys, items = list(d.keys), list(d.items)
    for i, k in enumerate(keys):
        if _value_key(k) == _value_key(key):
            items[i] = value
            return ADict(d.keys, tuple(items))
    return ADict(tuple(keys) + (key,), tuple(items) + (value,))


def _known_key(d: ADict, key) -> bool:
    return any(_value_key(k) == _value_key(key) for k in d.keys)


def _missing_key(d: ADict, key):
    keys = ", ".join(map(repr, d.keys)) or "none"
    return RuleError(f"KeyError: {key!r} is not a key of this dict (its keys: {keys})",
                     "use one of its keys, or `.get(key, default)` for a key it may lack",
                     about=(0, "this dict"))


def _dict_item(d: ADict, index):
    if index is ANY:
        return ANY
    try:
        key = key_value(index)
    except _NotConstant:   # a key chosen at run time: any of the values
        result = BOTTOM
        for item in d.items:
            result = join(result, item)
        return result
    found = d.get(key, BOTTOM)
    if found is BOTTOM:
        raise _missing_key(d, key)
    return found


def _record_item_grad(x, index, dout):
    """getitem_grad of a dict's key or a record's field (or a NamedTuple's position)."""
    items = list(grad_zeros_rule(x).items)
    if isinstance(x, ARecord) and isinstance(index, AScalar) and index.known:
        items[int(index.value)] = dout
        return with_items(x, tuple(items))
    try:
        key = key_value(index)
    except _NotConstant:
        return ANY
    keys = x.keys if isinstance(x, ADict) else x.fields
    for i, k in enumerate(keys):
        if _value_key(k) == _value_key(key):
            items[i] = dout
    return with_items(x, tuple(items))


def make_dict_rule(*keys_and_values):
    d = ADict((), ())
    for k, v in zip(keys_and_values[::2], keys_and_values[1::2]):
        if k is ANY:
            return ANY
        d = _set(d, _constant_key(k, "a key of this dict"), v)
    return d


def make_record_rule(cls, *values):
    if not (isinstance(cls, AObject) and isinstance(cls.value, type)):
        return ANY
    fields = cls.value._fields if tree.is_namedtuple(cls.value) else \
        tuple(f.name for f in dataclasses.fields(cls.value))
    return ARecord(cls.value, fields, values)


def getattr_rule(x, name):
    if x is ANY or not isinstance(name, AObject) or name.value is ANY:
        return ANY
    if isinstance(x, ARecord):
        if name.value not in x.fields:
            raise RuleError(f"'{x.cls.__name__}' object has no attribute '{name.value}'",
                            f"its fields: {', '.join(x.fields)}")
        return x.get(name.value)
    if isinstance(x, AObject) and x.value is ANY:
        return ANY
    raise RuleError(f"'{type_name(x)}' object has no attribute '{name.value}'",
                    "attributes are read from dataclasses and NamedTuples (and arrays' "
                    "`.shape`, `.T`, ...)")


def record_replace_rule(x, name, value):
    if isinstance(x, ARecord) and isinstance(name, AObject) and name.value is not ANY:
        getattr_rule(x, name)
        return ARecord(x.cls, x.fields, tuple(value if f == name.value else v
                                              for f, v in zip(x.fields, x.items)))
    return ANY


def _dict_arg(d, what: str):
    """d, a dict of known keys; None for an unknown value; an error for anything else."""
    if isinstance(d, ADict):
        return d
    if d is ANY or isinstance(d, AObject) and d.pytype is dict:
        return None
    raise RuleError(f"{what} needs a dict, not {type_name(d)}")


def dict_setitem_rule(d, key, value):
    d = _dict_arg(d, "`d[key] = value`")
    return ANY if d is None or key is ANY else _set(d, _constant_key(key, "the key"), value)


def dict_get_rule(d, key, default):
    d = _dict_arg(d, "`.get()`")
    if d is None or key is ANY:
        return ANY
    return d.get(_constant_key(key, "the key"), default)


def _dict_method(fn, what: str):
    def apply(d):
        d = _dict_arg(d, what)
        return ANY if d is None else ATuple(tuple(fn(k, v) for k, v in zip(d.keys, d.items)))
    return apply


def dict_cons_rule(key, value, rest):
    rest = _dict_arg(rest, "a dict comprehension")
    if rest is None or key is ANY:
        return ANY
    k = _constant_key(key, "a key of this dict comprehension")
    if _known_key(rest, k):     # a later item sets the value; the first one the position
        return ADict((k,) + rest.keys, (rest.get(k),) + rest.items)
    return ADict((k,) + rest.keys, (value,) + rest.items)


def contains_rule(item, x):
    if isinstance(x, ADict) and item is not ANY:
        try:
            return AScalar(bool, _known_key(x, key_value(item)))
        except _NotConstant:
            return AScalar(bool)
    if isinstance(x, ATuple) and known(x) and known(item):
        return fold(lambda a, b: a in b, [item, x])
    return AScalar(bool)


def iter_keys_rule(x):
    """What `for v in x` walks (a dict's keys, else x): a TypeError as CPython's where x is
    no iterable, rather than the `len()` the loop takes of it failing at run time."""
    if isinstance(x, (AScalar, ANone, AFunction)) or (
            isinstance(x, ARecord) and not tree.is_namedtuple(x.cls)):
        kind = "function" if isinstance(x, AFunction) else type_name(x)
        raise RuleError(f"'{kind}' object is not iterable",
                        "`for` walks a tuple, a list, a string, an array, a dict or a range "
                        "(a loop or a comprehension)")
    if isinstance(x, AArray) and not x.shape:
        raise RuleError("iteration over a 0-d array", "a 0-d array holds one value: read it "
                        "with `x[()]` or `float(x)`")
    if isinstance(x, ADict):
        return ATuple(tuple(abstract_of(k) for k in x.keys))
    if isinstance(x, AObject) and x.pytype is dict:
        return ANY
    return x


def iter_keys_grad_rule(x, dout):
    return grad_zeros_rule(x) if isinstance(x, ADict) else dout


def comp_length_rule(n, what):
    """n, a comprehension's or a loop's length, or a `while` loop's condition at one step:
    a constant, or the keys its dict gains are not known when compiling."""
    if not (isinstance(n, AScalar) and n.known):
        if isinstance(n, AScalar) and n.pytype is bool:
            raise Unsupported(f"{what.value}, but its condition is not known until run time",
                            "loop over `range` of a constant, a dict's keys or `.items()`, or "
                            "a tuple; or build a list, tuple or array of the values instead")
        raise Unsupported(f"{what.value}, but it goes over values whose number is not known "
                        "until run time",
                        "go over a dict's keys or `.items()`, a tuple, or `range` of a "
                        "constant; or build a tuple or array of the values instead")
    return n


def comp_next_rule(i, n):
    """i + 1 for a step i < n; none past the end (BOTTOM), so that inference, which may
    evaluate a step again after its condition turned false, never goes past it."""
    if isinstance(i, AScalar) and i.known and isinstance(n, AScalar) and n.known:
        return AScalar(int, i.value + 1) if i.value < n.value else BOTTOM
    return BOTTOM


def dict_pick_rule(d, like):
    if isinstance(d, ADict) and isinstance(like, ADict):
        return ADict(like.keys, tuple(d.get(k) if _known_key(d, k) else grad_zeros_rule(v)
                                      for k, v in zip(like.keys, like.items)))
    if like is not ANY and not any(isinstance(o, (ADict, AObject)) for o in options(like)):
        return d
    return ANY


def children_rule(x):
    return ATuple(x.items) if isinstance(x, (ADict, ARecord)) else ANY


def rebuild_rule(like, values):
    if isinstance(like, (ADict, ARecord)) and isinstance(values, ATuple) \
            and len(values.items) == len(like.items):
        return with_items(like, values.items)
    return ANY


def dict_items_grad_rule(d, dout):
    if isinstance(d, ADict) and isinstance(dout, ATuple) and all(
            isinstance(p, ATuple) and len(p.items) == 2 for p in dout.items):
        return ADict(d.keys, tuple(p.items[1] for p in dout.items))
    return ANY


DICT_RULES = {
    "make_dict": make_dict_rule,
    "make_record": make_record_rule,
    "getattr_": getattr_rule,
    "record_replace": record_replace_rule,
    "dict_setitem": dict_setitem_rule,
    "dict_get": dict_get_rule,
    "dict_keys": _dict_method(lambda k, v: abstract_of(k), "`.keys()`"),
    "dict_values": _dict_method(lambda k, v: v, "`.values()`"),
    "dict_items": _dict_method(lambda k, v: ATuple((abstract_of(k), v)), "`.items()`"),
    "dict_cons": dict_cons_rule,
    "contains": contains_rule,
    "iter_keys": iter_keys_rule,
    "iter_keys_grad": iter_keys_grad_rule,
    "comp_length": comp_length_rule,
    "comp_next": comp_next_rule,
    "dict_pick": dict_pick_rule,
    "children": children_rule,
    "rebuild": rebuild_rule,
    "dict_items_grad": dict_items_grad_rule,
}


TYPE_RULES = {
    **{name: elementwise(fn) for name, fn in _OPERATORS.items()},
    **{name: elementwise(getattr(np, name)) for name in _NUMPY_ELEMENTWISE},
    **{"np_" + name: elementwise(getattr(np, name))
       for name in ("add", "subtract", "multiply", "divide", "remainder", "floor_divide")},
    **{"math_" + name: _math(getattr(math, name)) for name in _MATH + MATH_MORE.split()},
    "add": add_rule,
    "mul": mul_rule,
    "pow": pow_rule,
    "matmul": matmul_rule,
    "is_": _identity_test(False),
    "is_not": _identity_test(True),
    "truth": _truth(False),
    "to_bool": _truth(False),
    "not_": _truth(True),
    **{"aug_" + name: _augmented(name, symbol) for name, symbol in _AUGMENTED.items()},
    **{"inplace_" + name: _in_place(name) for name in IN_PLACE},
    **{name: _reduction(getattr(np, name)) for name in ("sum", "mean", "prod", "max", "min")},
    "argmax": _reduction(np.argmax, keepdims_param=False),
    "argmin": _reduction(np.argmin, keepdims_param=False),
    "dot": dot_rule,
    "reshape": reshape_rule,
    "transpose": transpose_rule,
    "swapaxes": swapaxes_rule,
    "argsort": argsort_rule,
    "broadcast_to": broadcast_to_rule,
    "expand_dims": expand_dims_rule,
    "squeeze": squeeze_rule,
    "concatenate": concatenate_rule,
    "stack": stack_rule,
    "astype": astype_rule,
    "cast": cast_rule,
    "shape": _attribute("shape", lambda a: ATuple(tuple(
        AScalar(int) if d is None else AScalar(int, d) for d in a.shape))),
    "ndim": _attribute("ndim", lambda a: AScalar(int, a.ndim)),
    "size": _attribute("size", _size),
    "dtype": _attribute("dtype", lambda a: abstract_of(a.dtype)),
    "zeros": constructor_rule,
    "ones": constructor_rule,
    "empty": constructor_rule,
    "full": full_rule,
    "zeros_like": array_rule,
    "ones_like": array_rule,
    "array": array_rule,
    "asarray": array_rule,
    "arange": arange_rule,
    "eye": eye_rule,
    "len": len_rule,
    "range": range_rule,
    "builtin_min": _builtin_extremum(min),
    "builtin_max": _builtin_extremum(max),
    "to_float": _conversion(float),
    "to_int": _conversion(int),
    "builtin_round": elementwise(round),
    "builtin_divmod": builtin_divmod_rule,
    "make_tuple": make_tuple_rule,
    "getitem": getitem_rule,
    "setitem": setitem_rule,
    "copy": copy_rule,
    "not_a_view": not_a_view_rule,
    "unpack": unpack_rule,
    "make_slice": make_slice_rule,
    "grad_zeros": grad_zeros_rule,
    "gadd": gadd_rule,
    "env_getitem": env_getitem_rule,
    "env_setitem": env_setitem_rule,
    "stack_push": stack_push_rule,
    "stack_pop": stack_pop_rule,
    "stack_empty": stack_empty_rule,
    "sum_to_like": sum_to_like_rule,
    "broadcast_to_like": broadcast_to_like_rule,
    "sum_to_side": sum_to_side_rule,
    "broadcast_to_side": broadcast_to_side_rule,
    "reduce_grad": reduce_grad_rule,
    "getitem_grad": getitem_grad_rule,
    "grad_seed": grad_seed_rule,
    "grad_check_input": grad_check_input_rule,
    "jvp_check_tangent": jvp_check_tangent_rule,
    "grad_cast": grad_cast_rule,
    "tree_ravel": tree_ravel_rule,
    "tree_unravel": tree_unravel_rule,
    "jacobian_blocks": jacobian_blocks_rule,
    "jacobian_unblocks": jacobian_unblocks_rule,
    "ieee_truediv": elementwise(ieee_truediv),
    "ieee_pow": elementwise(ieee_pow),
    "strong_zero": elementwise(strong_zero),
    "select_grad": select_grad_rule,
    "concat_grad": concat_grad_rule,
    "unstack": unstack_rule,
    "switch": switch_rule,
    # typed by the interpreter, which calls the scalar function (passes/infer.py)
    "vectorize_call": lambda *args: ANY,
    "make_exception": make_exception_rule,
    "raise_": raise_rule,
    "depend": depend_rule,
    "print_": print_rule,
    "check_bound": check_bound_rule,
    "format": _string(_format),
    "concat_str": _string(lambda *parts: "".join(parts)),
    **LINALG_RULES,
    **DICT_RULES,
    **LIST_RULES,
}
