"""Abstract values: what type inference knows about a runtime value.

Each class describes a set of runtime values, exactly as precise as the backends need: a
scalar's Python type (`float` is not `np.float64`) and, when known, its value; an array's
dtype and shape (`None` for a dimension that depends on data); tuples item by item;
functions as the graphs (with the frame they close over) or primitives they may be.
`ANY` is "unknown": inference answers it whenever it cannot tell, so it never rejects a
valid program.  `BOTTOM` is the value of a computation that never returns (it raises, or
its recursion has not produced a result yet); it is the neutral element of `join`.

`join(a, b)` is the least value describing both (used at branches and to widen recursion:
different constants widen to their type, different dimensions to `None`).  Values of
different kinds (an array and a tuple, an int and a float, arrays of different ranks) join
to an `AUnion` of both rather than to ANY: Python lets the branches of an `if` give a
variable different types, and the program may pass such a value around or use it where
either type works; inference keeps both so that a use where one of them fails can be
reported, naming the two types and the `if` they came from (see passes/infer.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from myir import tree
from myir.ir.values import EMPTY_STACK, Env, is_stack, is_stack_cell


class _Marker:
    """ANY (unknown: any runtime value) and BOTTOM (no value: the computation never
    returns); each is its only instance, and pickles as itself."""

    __slots__ = ("text", "name")

    def __init__(self, text: str, name: str):
        self.text = text
        self.name = name

    def __repr__(self) -> str:
        return self.text

    def __reduce__(self):
        return self.name


ANY = _Marker("?", "ANY")
BOTTOM = _Marker("never", "BOTTOM")


def _value_key(value):
    """Equality of constant values as Python sees identity of results: -0.0 is not 0.0, a nan
    is a nan, True is not 1."""
    if isinstance(value, (float, complex, np.floating, np.complexfloating)):
        return type(value), repr(value)
    return type(value), value


class AbstractValue:
    __slots__ = ()

    def __getstate__(self):
        """The fields, without the hash that `_hashed_once` keeps: a string's hash differs
        from process to process."""
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state


def _hashed_once(key):
    """A `__hash__` that hashes `key(self)` once per object.  A value's hash is that of all
    its parts, and a tuple of N values hashed at each of N uses (a loop's gradient reads each
    item of its state with `getitem`, whose rule results are cached by argument values)
    cost time in N squared."""
    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(key(self))
            object.__setattr__(self, "_hash", h)
        return h
    return __hash__


@dataclass(frozen=True, eq=False)
class AScalar(AbstractValue):
    """A Python or numpy scalar of exactly type `pytype`; `value` when it is a known
    constant."""

    pytype: type
    value: object = ANY

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.pytype)

    @property
    def known(self) -> bool:
        return self.value is not ANY

    def __eq__(self, other) -> bool:
        return isinstance(other, AScalar) and self.pytype is other.pytype and (
            self.value is other.value
            or (self.value is not ANY and other.value is not ANY
                and _value_key(self.value) == _value_key(other.value)))

    def __hash__(self) -> int:
        return hash((self.pytype, None if self.value is ANY else _value_key(self.value)))

    def __repr__(self) -> str:
        name = self.pytype.__name__
        return f"{name}={self.value!r}" if self.known else name


_DTYPE_NAMES = {"float64": "f64", "float32": "f32", "float16": "f16", "int64": "i64",
                "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool",
                "complex128": "c128", "complex64": "c64"}


@dataclass(frozen=True)
class AArray(AbstractValue):
    """A numpy array (`np.ndarray`, 0-d included) of `dtype` and `shape`."""

    dtype: np.dtype
    shape: tuple

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{_DTYPE_NAMES.get(self.dtype.name, self.dtype.name)}[{dims}]"


@dataclass(frozen=True)
class ATuple(AbstractValue):
    items: tuple

    __hash__ = _hashed_once(lambda self: self.items)

    def __repr__(self) -> str:
        inner = ", ".join(map(repr, self.items))
        return f"({inner}{',' if len(self.items) == 1 else ''})"


@dataclass(frozen=True)
class ADict(AbstractValue):
    """A dict whose keys are the compile-time constants `keys`, in insertion order (CPython's
    order, which iteration, printing and gradients keep), holding `items` (one abstract value
    per key)."""

    keys: tuple
    items: tuple

    __hash__ = _hashed_once(lambda self: (tuple(map(_value_key, self.keys)), self.items))

    def __eq__(self, other) -> bool:
        return type(other) is ADict and _keys_equal(self.keys, other.keys) \
            and self.items == other.items

    def get(self, key, default=None):
        for k, v in zip(self.keys, self.items):
            if _value_key(k) == _value_key(key):
                return v
        return default

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in zip(self.keys, self.items)) + "}"


@dataclass(frozen=True)
class ARecord(AbstractValue):
    """An instance of `cls`, a NamedTuple or dataclass, whose fields (`fields`, the names,
    in declaration order) hold `items`."""

    cls: type
    fields: tuple
    items: tuple

    __hash__ = _hashed_once(lambda self: (self.cls, self.items))

    def get(self, name, default=None):
        return self.items[self.fields.index(name)] if name in self.fields else default

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={v!r}" for f, v in zip(self.fields, self.items))
        return f"{self.cls.__name__}({inner})"


def _keys_equal(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(_value_key(x) == _value_key(y) for x, y in zip(a, b))


def containers(a) -> bool:
    """Whether `a` is a tuple, dict or record: a value whose `items` are abstract values."""
    return type(a) in (ATuple, ADict, ARecord)


def parts(a) -> tuple:
    """The abstract values that values of type a hold directly: a container's items, a
    union's options, an env's gradients, a list's elements, a stack's item.  (Not a
    function's: the values its closures read are their contexts', passes/infer.py.)"""
    if containers(a):
        return a.items
    if type(a) is AUnion:
        return a.options
    if isinstance(a, AEnv):
        return tuple(v for _, v in a.items)
    if isinstance(a, AList):
        return a.items or (a.item,)
    if isinstance(a, AStack):
        return (a.item,)
    return ()


def holds_stack(a) -> bool:
    """Whether values of type a are or hold a residual stack (passes/ad.py)."""
    return isinstance(a, AStack) or any(map(holds_stack, parts(a)))


def with_items(a, items: tuple):
    """The container `a` (see `containers`) holding `items` instead (`a` if they are the same
    objects)."""
    if _same(items, a.items) and len(items) == len(a.items):
        return a
    if type(a) is ATuple:
        return ATuple(tuple(items))
    if type(a) is ADict:
        return ADict(a.keys, tuple(items))
    return ARecord(a.cls, a.fields, tuple(items))


@dataclass(frozen=True)
class AList(AbstractValue):
    """A Python list: `items`, position by position, when its length is known; else `items`
    is None and `item` is the join of every element (BOTTOM: no element is known to exist).
    Lists of different lengths join to the unknown length, so a list that grows in a loop
    (or a comprehension with an `if`) gets one value and inference of the loop converges."""

    items: tuple | None
    item: object = BOTTOM

    __hash__ = _hashed_once(lambda self: (self.items, self.item))

    @property
    def element(self):
        """What any element is: the join of the items (BOTTOM for an empty list)."""
        if self.items is None:
            return self.item
        result = BOTTOM
        for x in self.items:
            result = join(result, x)
        return result

    def __repr__(self) -> str:
        if self.items is None:
            return f"list[{self.item!r}]"
        return "[" + ", ".join(map(repr, self.items)) + "]"


@dataclass(frozen=True)
class ANone(AbstractValue):
    def __repr__(self) -> str:
        return "None"


@dataclass(frozen=True)
class ASlice(AbstractValue):
    start: object
    stop: object
    step: object

    def __repr__(self) -> str:
        return f"slice({self.start!r}, {self.stop!r}, {self.step!r})"


@dataclass(frozen=True, eq=False)
class AObject(AbstractValue):
    """Any other value, by its Python type: a string, a dtype, a type such as `np.float32`, a
    gradient key, an exception; `value` when known."""

    pytype: type
    value: object = ANY

    def __eq__(self, other) -> bool:
        return isinstance(other, AObject) and self.pytype is other.pytype and (
            self.value is other.value or (self.value is not ANY and other.value is not ANY
                                          and _value_key(self.value) == _value_key(other.value)))

    def __hash__(self) -> int:
        return hash((self.pytype, _value_key(self.value) if self.value is not ANY else None))

    def __repr__(self) -> str:
        if self.value is ANY:
            return self.pytype.__name__
        if isinstance(self.value, type):
            return self.value.__name__
        return repr(self.value)


@dataclass(frozen=True)
class AEnv(AbstractValue):
    """A gradient env: `items` pairs each key (a `GradKey`) with its gradient's value, for the
    keys it certainly holds; `complete` when it certainly holds no other key."""

    items: tuple = ()
    complete: bool = True

    __hash__ = _hashed_once(lambda self: (self.items, self.complete))

    def get(self, key, default=None):
        for k, v in self.items:
            if k is key:
                return v
        return default

    def set(self, key, value) -> "AEnv":
        return AEnv(tuple((k, v) for k, v in self.items if k is not key) + ((key, value),),
                    self.complete)

    def __repr__(self) -> str:
        more = "" if self.complete else ", ..."
        return "env{" + ", ".join(f"{k!r}: {v!r}" for k, v in self.items) + more + "}"


@dataclass(frozen=True)
class AStack(AbstractValue):
    """A residual stack (passes/ad.py) whose items are all described by `item` (BOTTOM: the
    empty stack).  One value for every depth: a loop pushing at each iteration keeps one
    type, so inference of the loop converges."""

    item: object

    def __repr__(self) -> str:
        return f"stack[{self.item!r}]"


@dataclass(frozen=True)
class Closure:
    """A graph with the context its free variables are read from (passes/infer.py; None
    for a top-level graph)."""

    graph: object
    context: object

    def __repr__(self) -> str:
        return "@" + self.graph.name


@dataclass(frozen=True)
class AFunction(AbstractValue):
    """A function: one of `options`, each a `Closure` or a `Primitive`."""

    options: frozenset

    def __repr__(self) -> str:
        return "fn(" + " | ".join(sorted(map(repr, self.options))) + ")"


def function(option) -> AFunction:
    return AFunction(frozenset((option,)))


@dataclass(frozen=True, eq=False)
class AUnion(AbstractValue):
    """One of `options`, values of different kinds (see `kind`): a variable the branches of
    an `if` set to an array in one and a tuple in the other, say.  `origin` is the location
    where the kinds met (the `if`), for error messages; it is not part of the value: two
    unions of the same options are equal, so it never keeps a fixpoint from converging."""

    options: tuple
    origin: object = None

    def __eq__(self, other) -> bool:
        return type(other) is AUnion and frozenset(self.options) == frozenset(other.options)

    __hash__ = _hashed_once(lambda self: frozenset(self.options))

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.options))


# A union of more kinds than this is ANY: it bounds the lattice's height (a recursion that
# makes a longer tuple at each level would otherwise grow a union without end).
MAX_UNION = 4


def kind(a):
    """What values must share to be joined into one abstract value of their own class: the
    type of a scalar or object, an array's dtype and rank, a tuple's length."""
    t = type(a)
    if t is AScalar or t is AObject:
        return t, a.pytype
    if t is AArray:
        return t, a.dtype, a.ndim
    if t is ATuple:
        return t, len(a.items)
    if t is ADict:
        return t, tuple(map(_value_key, a.keys))
    if t is ARecord:
        return t, a.cls
    return t


def join(a, b):
    """The least abstract value that describes every value `a` or `b` describes."""
    if a is BOTTOM:
        return b
    if b is BOTTOM or a is b or a == b:
        return a
    if a is ANY or b is ANY:
        return ANY
    if type(a) is AUnion or type(b) is AUnion or kind(a) != kind(b):
        return _union(a, b)
    if isinstance(a, AScalar):
        return AScalar(a.pytype)
    if isinstance(a, AArray):
        return AArray(a.dtype, tuple(x if x == y else None for x, y in zip(a.shape, b.shape)))
    if containers(a):
        return with_items(a, tuple(join(x, y) for x, y in zip(a.items, b.items)))
    if isinstance(a, ASlice):
        return ASlice(join(a.start, b.start), join(a.stop, b.stop), join(a.step, b.step))
    if isinstance(a, AObject):
        return AObject(a.pytype)
    if isinstance(a, AEnv):  # a key only one of them holds may be absent
        both = [(k, join(v, b.get(k))) for k, v in a.items if b.get(k) is not None]
        return AEnv(tuple(both), a.complete and b.complete and len(both) == len(a.items)
                    == len(b.items))
    if isinstance(a, AFunction):
        return AFunction(a.options | b.options)
    if isinstance(a, AStack):
        return AStack(join(a.item, b.item))
    if isinstance(a, AList):
        if a.items is not None and b.items is not None and len(a.items) == len(b.items):
            return AList(tuple(join(x, y) for x, y in zip(a.items, b.items)))
        return AList(None, join(a.element, b.element))
    return ANY


def options(a) -> tuple:
    """The values of different kinds `a` may be: a union's options, or `a` itself."""
    return a.options if type(a) is AUnion else (a,)


def _union(a, b):
    """The join of values of different kinds: each option of `b` joins the option of `a` of
    its kind, or is added."""
    merged = list(options(a))
    for x in options(b):
        k = kind(x)
        for i, y in enumerate(merged):
            if kind(y) == k:
                merged[i] = join(y, x)
                break
        else:
            merged.append(x)
    if len(merged) > MAX_UNION:
        return ANY
    if len(merged) == 1:
        return merged[0]
    origin = getattr(a, "origin", None) or getattr(b, "origin", None)
    return AUnion(tuple(sorted(merged, key=repr)), origin)  # an order that messages keep


def located(a, origin):
    """`a` with `origin` as the origin of the unions in it that have none (nested in tuples
    too): where the interpreter sees kinds meet, it records where."""
    if type(a) is AUnion:
        if a.origin is None:
            return AUnion(tuple(located(x, origin) for x in a.options), origin)
        return a
    if containers(a):
        return with_items(a, tuple(located(x, origin) for x in a.items))
    if type(a) is AList:
        if a.items is None:
            item = located(a.item, origin)
            return a if item is a.item else AList(None, item)
        items = tuple(located(x, origin) for x in a.items)
        return a if _same(items, a.items) else AList(items)
    return a


def truncate(a, depth: int):
    """`a` with tuples and envs nested deeper than `depth` replaced by ANY: the widening
    that stops a recursion from building ever deeper values (a chain of gradient envs)."""
    if type(a) is AUnion:
        items = tuple(truncate(x, depth) for x in a.options)
        if any(x is ANY for x in items):
            return ANY
        return a if _same(items, a.options) else AUnion(items, a.origin)
    if containers(a):
        if depth == 0:
            return ANY
        return with_items(a, tuple(truncate(x, depth - 1) for x in a.items))
    if isinstance(a, AList):
        if depth == 0:
            return ANY
        if a.items is None:
            item = truncate(a.item, depth - 1)
            return a if item is a.item else AList(None, item)
        items = tuple(truncate(x, depth - 1) for x in a.items)
        return a if _same(items, a.items) else AList(items)
    if isinstance(a, AEnv):
        if depth == 0:
            return ANY
        items = tuple((k, truncate(v, depth - 1)) for k, v in a.items)
        return a if all(x[1] is y[1] for x, y in zip(items, a.items)) \
            else AEnv(items, a.complete)
    return a


def _same(new: tuple, old: tuple) -> bool:
    """Whether a rebuilt tuple of values holds the very same objects: then the value is
    returned itself, not a copy (equality tests then stop at identity)."""
    return all(x is y for x, y in zip(new, old))


def widen(a):
    """`a` without its constant values (scalars keep their type)."""
    if isinstance(a, AScalar):
        return AScalar(a.pytype) if a.known else a
    if containers(a):
        return with_items(a, tuple(map(widen, a.items)))
    if isinstance(a, AList):
        return AList(None, widen(a.item)) if a.items is None else AList(tuple(map(widen, a.items)))
    if isinstance(a, ASlice):
        return ASlice(widen(a.start), widen(a.stop), widen(a.step))
    if isinstance(a, AObject) and a.value is not ANY and a.pytype is str:
        return AObject(str)
    if type(a) is AUnion:
        return AUnion(tuple(map(widen, a.options)), a.origin)
    return a


def abstract_of(value, keep_values: bool = True):
    """The abstract value describing one runtime value (constants keep their value; arguments
    of the root graph do not: compiled code is shared by every value of a signature)."""
    if isinstance(value, np.ndarray):
        return AArray(value.dtype, value.shape)
    if isinstance(value, (bool, int, float, complex, np.bool_, np.number)):
        return AScalar(type(value), value if keep_values else ANY)
    if is_stack_cell(value):     # a tuple, but not one of the program's (myir/ir/values.py)
        return AStack(abstract_of(value[0], keep_values=False))
    if type(value) is dict and all(_constant_key(k) for k in value):
        return ADict(tuple(value), tuple(abstract_of(v, keep_values) for v in value.values()))
    if tree.kind(value) not in (tree.LEAF, tuple, list, dict):    # a NamedTuple or dataclass
        return ARecord(type(value), tree.keys(value),
                       tuple(abstract_of(v, keep_values) for v in tree.children(value)))
    if isinstance(value, tuple):
        return ATuple(tuple(abstract_of(v, keep_values) for v in value))
    if type(value) is list:
        return AList(tuple(abstract_of(v, keep_values) for v in value))
    if value is None:
        return ANone()
    if isinstance(value, slice):
        return ASlice(abstract_of(value.start, keep_values), abstract_of(value.stop, keep_values),
                      abstract_of(value.step, keep_values))
    if isinstance(value, str):
        return AObject(str, value if keep_values else ANY)
    if value is EMPTY_STACK:
        return AStack(BOTTOM)
    if isinstance(value, Env):
        return AEnv(tuple((k, abstract_of(v, keep_values)) for k, v in value.items.items()))
    if isinstance(value, (type, np.dtype)) or value is Ellipsis:
        return AObject(type(value), value)
    if callable(value) and not keep_values:
        return ANY  # a Python function passed in: calling it may return anything
    try:
        hash(value)
    except TypeError:
        return AObject(type(value))
    return AObject(type(value), value if keep_values else ANY)


def _constant_key(k) -> bool:
    """Whether a dict key can be a compile-time constant key of an ADict."""
    return type(k) in (str, int, bool, float) or k is None or (
        type(k) is tuple and all(map(_constant_key, k)))


def conforms(value, abstract) -> bool:
    """Whether the runtime `value` is one of the values `abstract` describes (the tests'
    check that inference tells the truth)."""
    if abstract is ANY:
        return True
    if abstract is BOTTOM:
        return False
    if isinstance(abstract, AScalar):
        return type(value) is abstract.pytype and (
            not abstract.known or _value_key(value) == _value_key(abstract.value))
    if isinstance(abstract, AArray):
        return isinstance(value, np.ndarray) and value.dtype == abstract.dtype \
            and value.ndim == abstract.ndim \
            and all(d is None or d == n for d, n in zip(abstract.shape, value.shape))
    if isinstance(abstract, ATuple):
        return isinstance(value, tuple) and len(value) == len(abstract.items) \
            and all(conforms(v, a) for v, a in zip(value, abstract.items))
    if isinstance(abstract, ADict):
        return type(value) is dict and _keys_equal(tuple(value), abstract.keys) \
            and all(conforms(v, a) for v, a in zip(value.values(), abstract.items))
    if isinstance(abstract, ARecord):
        return type(value) is abstract.cls \
            and all(conforms(v, a) for v, a in zip(tree.children(value), abstract.items))
    if isinstance(abstract, AList):
        return type(value) is list and (
            all(conforms(v, abstract.item) for v in value) if abstract.items is None
            else len(value) == len(abstract.items)
            and all(conforms(v, a) for v, a in zip(value, abstract.items)))
    if isinstance(abstract, ANone):
        return value is None
    if isinstance(abstract, AObject):
        return isinstance(value, abstract.pytype) and (
            abstract.value is ANY or _value_key(value) == _value_key(abstract.value))
    if isinstance(abstract, ASlice):
        return isinstance(value, slice) and conforms(value.start, abstract.start) \
            and conforms(value.stop, abstract.stop) and conforms(value.step, abstract.step)
    if isinstance(abstract, AEnv):
        return isinstance(value, Env)
    if isinstance(abstract, AFunction):
        return callable(value)
    if isinstance(abstract, AStack):
        return is_stack(value)
    if isinstance(abstract, AUnion):
        return any(conforms(value, a) for a in abstract.options)
    return False
