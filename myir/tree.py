"""Trees of values: the containers a program's parameters come in, taken apart and rebuilt.

A *tree* is a value built from containers — tuples, lists, dicts, NamedTuples and
dataclass instances — nested to any depth, with anything else at its *leaves* (numbers,
arrays, None, functions).  A gradient has its parameter's structure (the gradient of a dict
of arrays is a dict of arrays, of a dataclass an instance of the same class), so the
operations on gradients (zeros, addition, casting to the parameter's types) act leaf by leaf
over matching trees; distributed training sends and reduces a tree's leaves.  This module
is that one walk, for runtime values, in the spirit of JAX's pytrees but with no registry:
the container types are Python's own, and a dataclass is a container by being one.

    >>> leaves, tree = flatten({"W": [1.0, 2.0], "b": 3.0})
    >>> leaves
    [1.0, 2.0, 3.0]
    >>> tree
    {'W': [*, *], 'b': *}
    >>> unflatten(tree, [10.0, 20.0, 30.0])
    {'W': [10.0, 20.0], 'b': 30.0}

Dicts keep their insertion order (CPython's), not sorted keys: a gradient prints, iterates
and compares like its parameter.
"""

from __future__ import annotations

import dataclasses

from myir.ir.values import is_stack_cell

LEAF = None     # the kind of a leaf


def kind(x):
    """The container kind of `x`: `tuple`, `list` or `dict`, a NamedTuple or dataclass
    class, or LEAF (None) for a leaf."""
    t = type(x)
    if t is tuple and is_stack_cell(x):
        return LEAF                    # a residual stack, held as cells (myir/ir/values.py)
    if t is tuple or t is list or t is dict:
        return t
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        return t                       # a NamedTuple
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return t
    return LEAF


def is_namedtuple(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def keys(x) -> tuple:
    """What names the children of container `x`: positions, dict keys, or field names."""
    t = kind(x)
    if t is dict:
        return tuple(x)
    if t is tuple or t is list:
        return tuple(range(len(x)))
    if is_namedtuple(t):
        return t._fields
    return tuple(f.name for f in dataclasses.fields(x))


def children(x) -> tuple:
    """The children of container `x`, in the order of `keys(x)`."""
    t = kind(x)
    if t is dict:
        return tuple(x.values())
    if t is tuple or t is list or is_namedtuple(t):
        return tuple(x)
    return tuple(getattr(x, f.name) for f in dataclasses.fields(x))


def rebuild(like, values) -> object:
    """A container of `like`'s kind and keys holding `values`."""
    t = kind(like)
    values = list(values)
    if t is dict:
        return dict(zip(like, values))
    if t is tuple:
        return tuple(values)
    if t is list:
        return values
    if is_namedtuple(t):
        return t(*values)
    fields = dataclasses.fields(like)
    new = t(**{f.name: v for f, v in zip(fields, values) if f.init})
    for f, v in zip(fields, values):
        if not f.init:
            object.__setattr__(new, f.name, v)   # frozen dataclasses too
    return new


def map(fn, tree, *rest):
    """`fn` applied to the leaves of `tree` (and the matching leaves of `rest`, trees of the
    same structure), in a tree of `tree`'s structure."""
    if kind(tree) is LEAF:
        return fn(tree, *rest)
    for other in rest:
        _check_same(tree, other)
    return rebuild(tree, [map(fn, *items)
                          for items in zip(children(tree), *(children(o) for o in rest))])


def _check_same(a, b) -> None:
    if kind(a) is not kind(b) or keys(a) != keys(b):
        raise ValueError(f"trees of different structures: {structure(a)} and {structure(b)}")


class Structure:
    """The shape of a tree without its leaves: what `flatten` takes away and `unflatten`
    needs to put the leaves back.  Prints as the tree with `*` for each leaf."""

    __slots__ = ("kind", "keys", "like", "children")

    def __init__(self, kind, keys, like, children):
        self.kind = kind
        self.keys = keys
        self.like = like            # a container of this kind and keys (to rebuild from)
        self.children = children    # Structures, or None for a leaf

    @property
    def num_leaves(self) -> int:
        if self.children is None:
            return 1
        return sum(c.num_leaves for c in self.children)

    def detached(self) -> "Structure":
        """An equal structure that holds none of the tree's containers (and so none of its
        leaves): a key to keep, e.g. in a cache, without keeping the tree alive.  It prints
        and compares as this one, but cannot `unflatten`."""
        if self.children is None:
            return self
        return Structure(self.kind, self.keys, None, tuple(c.detached() for c in self.children))

    def __eq__(self, other) -> bool:
        return (isinstance(other, Structure) and self.kind is other.kind
                and self.keys == other.keys and self.children == other.children)

    def __hash__(self) -> int:
        return hash((self.kind, self.keys, self.children and tuple(self.children)))

    def __repr__(self) -> str:
        if self.children is None:
            return "*"
        items = [repr(c) for c in self.children]
        if self.kind is dict:
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(self.keys, items)) + "}"
        if self.kind is list:
            return "[" + ", ".join(items) + "]"
        if self.kind is tuple:
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        return f"{self.kind.__name__}(" + ", ".join(
            f"{k}={v}" for k, v in zip(self.keys, items)) + ")"


_LEAF_STRUCTURE = Structure(LEAF, (), None, None)


def structure(tree) -> Structure:
    return _walk(tree, None)


def _walk(tree, out: list | None) -> Structure:
    """The structure of `tree`, its leaves appended to `out` on the way (unless None): one
    walk for `flatten`."""
    t = kind(tree)
    if t is LEAF:
        if out is not None:
            out.append(tree)
        return _LEAF_STRUCTURE
    return Structure(t, keys(tree), tree, tuple(_walk(c, out) for c in children(tree)))


def leaves(tree) -> list:
    """The leaves of `tree`, depth first, in key order."""
    out = []
    _collect(tree, out)
    return out


def _collect(tree, out: list) -> None:
    if kind(tree) is LEAF:
        out.append(tree)
    else:
        for c in children(tree):
            _collect(c, out)


def flatten(tree) -> tuple[list, Structure]:
    out: list = []
    return out, _walk(tree, out)


def unflatten(s: Structure, values) -> object:
    """The tree of structure `s` whose leaves are `values`, in `flatten`'s order."""
    values = list(values)
    if len(values) != s.num_leaves:
        raise ValueError(f"{s} has {s.num_leaves} leaves, got {len(values)} values")
    it = iter(values)
    return _build(s, it)


def _build(s: Structure, it) -> object:
    if s.children is None:
        return next(it)
    return rebuild(s.like, [_build(c, it) for c in s.children])
