"""Random programs in myir's Python subset, as a hypothesis strategy.

`programs()` draws a `Program`: the source of a small module (``import math``, a few
constants, one or more functions, the entry function `main` last in call order but anywhere
in the file) and the arguments to call `main` with.  Programs are built from drawn
*structure* (a typed syntax tree), never from a random seed, so hypothesis shrinks a failing
program statement by statement and expression by expression towards the simplest one that
still fails.

Every generated program terminates and, for the arguments drawn, does not raise in CPython
but in a computation of `main` whose result is never read (``unused = math.log(x)``,
``ignored = 7 // n``), which CPython runs all the same:

* Types are static.  Every expression is generated for a type (int, float, bool, a tuple of
  those, a list or a dict of ints or of floats, or a function type) and a variable keeps its
  type for its whole life, so branches,
  loops and calls never mix int with float (``x or y`` and ternaries have operands of one
  type; only conditions mix types, where only truthiness matters).
* Division and modulo have a divisor that cannot be zero: a non-zero literal,
  ``(d or 3)``, ``(abs(d) + 1)`` or ``(d if d != 0 else -2)``; or they divide by a variable
  only where control flow has ruled out zero: ``a // d if d != 0 else b``,
  ``d != 0 and a % d == 1``, ``not d or a / d > 2.0`` (so a compiler that evaluates both
  sides of a ternary or of ``and``/``or`` raises ZeroDivisionError).
* ``**`` has a bounded base or exponent: ``(x % 5) ** 3``, ``2 ** (n % 4)``,
  ``abs(x) ** 0.5``, ``x ** 2`` of a variable.  Integer powers never have a negative exponent
  (``2 ** -1`` is a float, which would make the type depend on a value).
* ``math.exp`` only sees bounded arguments (``-abs(x)``, ``math.sin(x)``, ``x % 4.0``);
  ``math.sqrt`` only ``abs(...)``.
* Loops are bounded: ``range`` with small bounds (literals, ``n % 5``, enclosing loop
  indices), ``for`` over tuples, ``while`` with a counter incremented first thing in the body
  (``while steps < 4 and total > 1.0:``), a count-down variable that shrinks first thing in
  the body (``while rest > 0: rest = rest // 2``), or ``while True:`` with a counter bumped
  and tested first thing in the body (``tries += 1; if tries >= 3: break``), before any
  ``continue``.  Loops nest two deep, and leave by ``break``, ``continue`` and ``return``
  from either level.  Loop variables are never assigned, and a loop test never calls a
  recursive function.
* Recursion is bounded: a recursive function (or a pair of mutually recursive ones) takes a
  ``depth`` first, returns at ``depth <= 0`` and calls its group only with ``depth - 1`` (at
  most twice per body, not inside loops); other calls only go to functions lower in the
  call order, and functions passed as values are always defined earlier in that order.
* Closures (``lambda`` and nested ``def``) only capture variables that are assigned once, at
  the top level of their function, before the closure; such a variable is never assigned
  again afterwards (myir captures values, CPython cells: they agree only then).
* Module-level lambdas come two or three to a line (``blend, twist = (lambda t: ...,
  lambda u: ...)``), all of one function type, so that compiling one in place of another
  still type-checks but gives another value; `main` calls any that nothing else calls.
* Lists and dicts are only changed by the function that built them (a literal or a
  comprehension), never through a parameter: updating an argument is an error in myir by
  design.  Nothing else holds them (no closure captures them, no tuple contains them, no
  second name refers to them), so updating in place and myir's values agree.  A list is only
  appended to; ``xs[i] = v`` / ``xs[i] += v`` index it with a literal below the length it
  certainly has, or with ``i % len(xs)`` on a list that is never empty.  Dicts have constant
  string keys (``{'a': x, 'b': y}``) and keep them: reads and updates (``d['a'] += v``) name
  a key the dict has, and ``for k in d`` reads ``d[k]`` of that dict only.  A helper may take
  a dict its caller made (or a literal) and read it.  ``*=`` on an element multiplies by a
  small literal.
* A local may shadow a module constant (``SCALE = x * 2``) only in a function that has not
  read the constant before: the name is local to the whole function.

Values can still grow (``total *= scale`` in a loop); the tests reject the rare program
whose intermediate values leave a bounded range (they trace the CPython run).

`features(source)` names the constructs a program uses; the generator's own test checks that
every name in `FEATURES` turns up.
"""

from __future__ import annotations

import ast
import functools
import math
import sys
from dataclasses import dataclass

from hypothesis import strategies as st

__all__ = ["Program", "programs", "features", "FEATURES", "GradProgram", "grad_programs"]


# ---------------------------------------------------------------------------------------------
# Types


@dataclass(frozen=True)
class Scalar:
    name: str

    def __repr__(self) -> str:
        return self.name


INT = Scalar("int")
FLOAT = Scalar("float")
BOOL = Scalar("bool")
NUMERIC = (INT, FLOAT)
SCALARS = (INT, FLOAT, BOOL)


@dataclass(frozen=True)
class TupleT:
    elts: tuple

    @property
    def item(self):
        """The element type of a homogeneous tuple (iterable with a static type), else None."""
        return self.elts[0] if len(set(self.elts)) == 1 else None


@dataclass(frozen=True)
class ListT:
    """A list of `item`s; `nonempty` when it certainly has an element (a literal, or a
    comprehension without `if`: it is only ever appended to)."""

    item: object
    nonempty: bool


@dataclass(frozen=True)
class DictT:
    """A dict with the constant string `keys` (in insertion order), every value an `item`:
    its keys never change, so any key read or updated is there."""

    keys: tuple
    item: object


@dataclass(frozen=True)
class KeyT:
    """A key of the dict `owner` (a loop variable of ``for k in d``): only indexes `owner`."""

    owner: str


@dataclass(frozen=True)
class FuncT:
    params: tuple
    ret: object


# ---------------------------------------------------------------------------------------------
# The program


class Program:
    """A module's source and the arguments to call its `main` with.  Its repr (also what
    hypothesis prints for a falsifying example) shows the source as it is in the file."""

    __slots__ = ("source", "entry", "args")

    def __init__(self, source: str, entry: str, args: tuple):
        self.source = source
        self.entry = entry
        self.args = args

    @property
    def call(self) -> str:
        return f"{self.entry}({', '.join(map(repr, self.args))})"

    def __eq__(self, other):
        return isinstance(other, Program) and (self.source, self.entry, self.args) == (
            other.source, other.entry, other.args)

    def __hash__(self):
        return hash((self.source, self.entry, self.args))

    def __repr__(self) -> str:
        quotes = "'" * 3
        return f"Program(call={self.call!r}, source={quotes}\n{self.source}{quotes})"

    def _repr_pretty_(self, printer, cycle):
        printer.text(repr(self))


# ---------------------------------------------------------------------------------------------
# Scopes and contexts


class Var:
    """A local variable while its function is generated.

    `assignable`: may be the target of a later assignment (false for loop variables,
    counters, `depth`, function values, and variables a closure has captured).
    `capturable`: assigned exactly once so far, at the top level of its function, so a
    closure may capture it (doing so clears `assignable`).
    `made`: a list or dict its function built itself, so it may update it in place (never
    a parameter: updating an argument is an error in myir).
    `length`: for a list, how many items it certainly has (appends only add)."""

    __slots__ = ("name", "ty", "owner", "assignable", "capturable", "bound", "made", "length")

    def __init__(self, name, ty, owner, *, assignable=True, capturable=True, bound=None,
                 made=False, length=0):
        self.name = name
        self.ty = ty
        self.owner = owner
        self.assignable = assignable
        self.capturable = capturable
        self.bound = bound  # for ints known to lie in a small range: (lo, hi)
        self.made = made
        self.length = length


@dataclass
class Sig:
    """A module-level function's signature, known before any body is generated."""

    name: str
    params: list  # [(name, type, default value or None)]
    ret: object
    index: int  # position in the call order: may call lower indices freely
    group: int | None = None  # recursive group: members call each other with depth - 1
    kind: str = "plain"
    line: int | None = None  # module-level lambdas: the lambdas sharing one source line

    @property
    def functype(self) -> FuncT:
        return FuncT(tuple(t for _, t, _ in self.params), self.ret)


@dataclass
class Ctx:
    """One function being generated (module-level, nested def or lambda)."""

    sig_index: int  # call-order index of the enclosing module-level function
    group: int | None
    ret: object
    nested: int = 0  # 0 for a module-level function, 1 inside a nested def / lambda, ...
    control: int = 0  # depth of if/loop nesting inside this function
    loops: int = 0
    budget: int = 6  # statements left
    group_calls: int = 0  # recursive calls still allowed (module-level recursive functions)
    self_sig: Sig | None = None


MAX_CONTROL = 3
MAX_LOOPS = 2


def _fn_args(params, defaults=()):
    return ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=p) for p in params],
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=list(defaults),
    )


def _fn_def(name, params, body, defaults=()):
    extra = {"type_params": []} if sys.version_info >= (3, 12) else {}
    return ast.FunctionDef(
        name=name,
        args=_fn_args(params, defaults),
        body=body,
        decorator_list=[],
        returns=None,
        type_comment=None,
        **extra,
    )


def load(name):
    return ast.Name(id=name, ctx=ast.Load())


def store(name):
    return ast.Name(id=name, ctx=ast.Store())


def lit(value):
    """A literal; negative numbers as unary minus so that precedence stays right."""
    if isinstance(value, (bool, str)) or value is None:
        return ast.Constant(value)
    if isinstance(value, tuple):
        return ast.Tuple([lit(v) for v in value], ast.Load())
    if value < 0 or (isinstance(value, float) and math.copysign(1.0, value) < 0):
        return ast.UnaryOp(ast.USub(), ast.Constant(-value))
    return ast.Constant(value)


def binop(a, op, b):
    return ast.BinOp(a, op, b)


def call(fn, args, keywords=()):
    if isinstance(fn, str):
        fn = load(fn)
    return ast.Call(fn, list(args), list(keywords))


def math_call(name, arg):
    return call(ast.Attribute(load("math"), name, ast.Load()), [arg])


def abs_(e):
    return call("abs", [e])


def compare(a, ops, rest):
    return ast.Compare(a, list(ops), list(rest))


# Names: readable pools per kind, made unique with a suffix when a pool runs out.
NAME_POOLS = {
    INT: ["count", "n", "k", "width", "total_n", "size", "limit", "bonus", "offset_n", "tally"],
    FLOAT: ["x", "y", "scale", "ratio", "level", "weight", "offset", "energy", "speed", "angle"],
    BOOL: ["flag", "ready", "found", "done", "valid", "active"],
    "tuple": ["pair", "point", "coords", "span", "triple", "extent"],
    "list": ["values", "history", "terms", "samples", "parts"],
    "dict": ["table", "stats", "config", "record", "params"],
    "key": ["key", "name", "field"],
    "func": ["scaler", "shift", "combine", "transform", "adjust", "warp"],
    "param_func": ["fn", "op", "f", "g"],
    "loop": ["i", "j", "m", "idx", "pos"],
    "item": ["item", "elem", "value", "part", "piece"],
    "counter": ["steps", "tries", "rounds"],
    "countdown": ["rest", "remaining", "left"],
    "lambda": ["t", "u", "s", "r"],
    "module_fn": ["helper", "blend", "twist", "spread", "fold", "measure", "mix", "bend"],
    "unused": ["unused", "ignored", "discarded"],
    "rec_fn": ["descend", "walk", "climb", "unwind"],
    "factory": ["make_scaler", "make_shift", "make_mixer"],
    "hof": ["apply", "apply_twice", "accumulate", "combine_with"],
    "nested_fn": ["inner", "step_fn", "local_op", "kernel"],
    "const": ["SCALE", "LIMIT", "BIAS", "RATE"],
}

FLOAT_LITERALS = [1.0, 0.5, 2.0, -1.5, 0.25, 3.0, -0.5, 2.5, 10.0, 0.0, 0.1, -4.0]
NONZERO_INTS = [2, 3, -2, 5, 1, -3, 7, -1]
NONZERO_FLOATS = [2.0, 0.5, -1.5, 3.0, 4.0, -0.25]

DICT_KEYS = ["a", "b", "w", "bias", "rate"]

CMP_OPS = [ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq]


@functools.lru_cache(maxsize=None)
def _ints(lo, hi):
    return st.integers(lo, hi)  # strategies are cached: building one costs more than a draw


class Gen:
    def __init__(self, draw):
        self.draw = draw
        self.used_names = {"math", "main", "depth", "abs", "range", "zip", "enumerate",
                           "float", "min", "max", "sum", "len", "list"}
        self.sigs: list[Sig] = []
        self.consts: list[tuple[str, object, object]] = []  # (name, type, value)
        self.called: set[str] = set()
        self.globals_read: set[str] = set()
        self.shadowed: set[str] = set()
        self.updated: set[str] = set()  # dicts updated somewhere so far
        self.passed: set[str] = set()  # dicts passed to a function

    # -- drawing helpers -----------------------------------------------------------------

    def pick(self, options):
        """Weighted choice among (weight, value); shrinks towards the first option."""
        options = [(w, v) for w, v in options if w > 0]
        total = sum(w for w, _ in options)
        k = self.draw(_ints(0, total - 1))
        for w, v in options:
            if k < w:
                return v
            k -= w
        raise AssertionError("unreachable")

    def choice(self, seq):
        seq = list(seq)
        return seq[self.draw(_ints(0, len(seq) - 1))]

    def flip(self, p_percent=50):
        """True with roughly the given probability; shrinks towards False."""
        return self.draw(_ints(0, 99)) >= 100 - p_percent

    def fresh(self, kind):
        pool = NAME_POOLS[kind]
        for name in pool:
            if name not in self.used_names:
                self.used_names.add(name)
                return name
        n = 2
        while True:
            for name in pool:
                candidate = f"{name}_{n}"
                if candidate not in self.used_names:
                    self.used_names.add(candidate)
                    return candidate
            n += 1

    def fresh_var(self, ty):
        if isinstance(ty, TupleT):
            return self.fresh("tuple")
        if isinstance(ty, FuncT):
            return self.fresh("func")
        if isinstance(ty, ListT):
            return self.fresh("list")
        if isinstance(ty, DictT):
            return self.fresh("dict")
        return self.fresh(ty)

    def draw_scalar(self, allow_bool=True):
        return self.pick([(4, FLOAT), (4, INT), (1 if allow_bool else 0, BOOL)])

    def draw_tuple_type(self):
        n = self.pick([(3, 2), (2, 3), (1, 4)])
        if self.flip(60):
            t = self.pick([(1, FLOAT), (1, INT)])
            return TupleT((t,) * n)
        return TupleT(tuple(self.pick([(1, FLOAT), (1, INT)]) for _ in range(n)))

    def draw_functype(self):
        n = self.pick([(3, 1), (2, 2)])
        params = tuple(self.pick([(3, FLOAT), (2, INT)]) for _ in range(n))
        return FuncT(params, self.pick([(3, FLOAT), (2, INT), (1, BOOL)]))

    def literal(self, ty):
        if ty is INT:
            return lit(self.draw(_ints(-4, 12)) if self.flip(95) else
                       self.draw(_ints(-1000, 1000)))
        if ty is FLOAT:
            return lit(self.choice(FLOAT_LITERALS))
        if ty is BOOL:
            return lit(self.flip())
        raise AssertionError(ty)

    # -- variables -------------------------------------------------------------------------

    def readable(self, cx, scope, pred):
        return [v for v in scope.values()
                if pred(v.ty) and (v.owner is cx or v.capturable)]

    def use(self, cx, v):
        if v.owner is not cx:  # captured by a closure: must never change from now on
            assert v.capturable
            v.assignable = False
        return load(v.name)

    def assignable(self, cx, scope, pred):
        return [v for v in scope.values() if v.owner is cx and v.assignable and pred(v.ty)]

    # -- expressions -----------------------------------------------------------------------

    def expr(self, cx, scope, ty, depth):
        if ty in NUMERIC:
            return self.numeric(cx, scope, ty, depth)
        if ty is BOOL:
            return self.boolean(cx, scope, depth)
        if isinstance(ty, TupleT):
            return self.tuple_expr(cx, scope, ty, depth)
        if isinstance(ty, FuncT):
            return self.func_expr(cx, scope, ty, depth)
        if isinstance(ty, DictT):
            return self.dict_expr(cx, scope, ty)
        raise AssertionError(ty)

    def leaf_options(self, cx, scope, ty):
        vs = self.readable(cx, scope, lambda t: t == ty)
        consts = [c for c in self.consts if c[1] == ty and c[0] not in self.shadowed]
        tuple_vs = self.readable(cx, scope, lambda t: isinstance(t, TupleT) and ty in t.elts)
        opts = [(1 if vs else 3, lambda: self.literal(ty)),
                (6 if vs else 0, lambda: self.use(cx, self.choice(vs))),
                (1 if consts else 0, lambda: self.read_const(self.choice(consts)[0])),
                (1 if tuple_vs else 0, lambda: self.tuple_index(cx, self.choice(tuple_vs), ty))]
        if ty is FLOAT:
            opts.append((1, lambda: ast.Attribute(load("math"), "pi", ast.Load())))
        lists = self.readable(cx, scope, lambda t: isinstance(t, ListT))
        same = [v for v in lists if v.ty.item == ty]
        nonempty = [v for v in same if v.ty.nonempty]
        opts += [(2 if nonempty else 0, lambda: ast.Subscript(
                      self.use(cx, self.choice(nonempty)), lit(self.choice([0, -1])), ast.Load())),
                 (1 if same else 0, lambda: self.list_sum(cx, self.choice(same))),
                 (1 if nonempty else 0, lambda: call(self.choice(["min", "max"]),
                                                     [self.use(cx, self.choice(nonempty))])),
                 (1 if lists and ty is INT else 0,
                  lambda: call("len", [self.use(cx, self.choice(lists))]))]
        dicts = self.readable(cx, scope, lambda t: isinstance(t, DictT))
        of_ty = [v for v in dicts if v.ty.item == ty]
        keyed = [(k, d) for k in self.readable(cx, scope, lambda t: isinstance(t, KeyT))
                 for d in of_ty if d.name == k.ty.owner]
        opts += [(3 if of_ty else 0, lambda: self.dict_read(cx, self.choice(of_ty))),
                 (6 if keyed else 0, lambda: ast.Subscript(
                     *[self.use(cx, v) for v in reversed(self.choice(keyed))], ast.Load())),
                 (1 if dicts and ty is INT else 0,
                  lambda: call("len", [self.use(cx, self.choice(dicts))]))]
        return opts

    # -- lists -----------------------------------------------------------------------------

    def list_sum(self, cx, v, items=None):
        """sum(xs), with a float start where a float list may be empty (sum([]) is 0)."""
        xs = self.use(cx, v) if items is None else items
        start = [lit(0.0)] if v.ty.item is FLOAT and not v.ty.nonempty else []
        return call("sum", [xs] + start)

    def new_list_var(self, cx, scope):
        """`name = [a, b]`, a comprehension over a range (with an `if` perhaps), or one
        over another list."""
        item = self.pick([(3, FLOAT), (1, INT)])
        lists = self.readable(cx, scope, lambda t: isinstance(t, ListT))
        kind = self.pick([(3, "literal"), (2, "range"), (1 if lists else 0, "list")])
        if kind == "literal":
            n = self.pick([(2, 2), (1, 1), (1, 3)])
            value = ast.List([self.expr(cx, scope, item, 1) for _ in range(n)], ast.Load())
            ty = ListT(item, True)
            length = n
        else:
            source = self.choice(lists) if kind == "list" else None
            v = self.fresh("item")
            inner = dict(scope)
            if source is None:
                count = length = self.draw(_ints(1, 4))
                inner[v] = Var(v, INT, cx, assignable=False, capturable=False,
                               bound=(0, count - 1))
                iterable = call("range", [lit(count)])
            else:
                inner[v] = Var(v, source.ty.item, cx, assignable=False, capturable=False)
                iterable = self.use(cx, source)
                length = source.length
            cx.loops += 1   # a comprehension is a loop: no recursive call in it
            elt = self.expr(cx, inner, item, 1)
            ifs = [self.condition(cx, inner, 1)] if self.flip(40) else []
            cx.loops -= 1
            value = ast.ListComp(elt, [ast.comprehension(store(v), iterable, ifs, 0)])
            ty = ListT(item, not ifs and (source is None or source.ty.nonempty))
            length = 0 if ifs else length
        name = self.fresh_var(ty)
        self.define(cx, scope, name, ty, assignable=False, capturable=False, made=True,
                    length=length)
        made = [ast.Assign([store(name)], value)]
        if length > 0 and self.flip(30):  # updated at once (updates later are rarer)
            made += self.element_update(cx, scope, [scope[name]])
        return made

    def element_update(self, cx, scope, lists):
        """`xs[i] = v` / `xs[i] += v` on a list this function made, at an index that is in
        range: a literal below the length it certainly has, or `i % len(xs)`."""
        v = self.choice(lists)
        index = self.pick([
            (2, lambda: lit(self.draw(_ints(-v.length, v.length - 1)))),
            (1, lambda: binop(self.numeric(cx, scope, INT, 1), ast.Mod(),
                              call("len", [load(v.name)]))),
        ])()
        return [self.item_update(cx, scope, ast.Subscript(load(v.name), index, ast.Store()),
                                 v.ty.item)]

    def item_update(self, cx, scope, target, item):
        """`target = v`, or `target += v` (or -=, or *= a small literal, so that values stay
        bounded in loops)."""
        kind = self.pick([(2, "assign"), (2, "add"), (1, "sub"), (1, "mul")])
        if kind == "assign":
            return ast.Assign([target], self.expr(cx, scope, item, 2))
        if kind == "mul":
            return ast.AugAssign(target, ast.Mult(),
                                 lit(self.choice([2, -1] if item is INT else [0.5, -1.0, 1.5])))
        op = ast.Add() if kind == "add" else ast.Sub()
        rhs = self.pick([(2, item), (1 if item is FLOAT else 0, INT)])
        return ast.AugAssign(target, op, self.numeric(cx, scope, rhs, 1))

    # -- dicts -----------------------------------------------------------------------------

    def draw_dict_type(self):
        n = self.pick([(3, 2), (2, 1), (2, 3)])
        start = self.draw(_ints(0, len(DICT_KEYS) - 1))
        keys = tuple(DICT_KEYS[(start + i) % len(DICT_KEYS)] for i in range(n))
        return DictT(keys, self.pick([(3, FLOAT), (1, INT)]))

    def dict_literal(self, cx, scope, ty):
        return ast.Dict([lit(k) for k in ty.keys],
                        [self.expr(cx, scope, ty.item, 1) for _ in ty.keys])

    def dict_expr(self, cx, scope, ty):
        """A dict argument: a literal, or a dict variable never updated so far, which then
        stays as it is (myir refuses to update a dict after passing it to a function whose
        result is still read: it cannot tell that the result is not the dict)."""
        vs = [v for v in self.readable(cx, scope, lambda t: t == ty)
              if v.name not in self.updated]
        return self.pick([(1, lambda: self.dict_literal(cx, scope, ty)),
                          (3 if vs else 0, lambda: self.pass_dict(cx, self.choice(vs)))])()

    def pass_dict(self, cx, v):
        v.made = False
        self.passed.add(v.name)
        return self.use(cx, v)

    def dict_read(self, cx, v):
        return ast.Subscript(self.use(cx, v), lit(self.choice(v.ty.keys)), ast.Load())

    def new_dict_var(self, cx, scope):
        """`name = {'a': x, 'b': y}`, of a type a callable function takes if there is one."""
        useful = [t for s in self.callable_sigs(cx) for _, t, _ in s.params
                  if isinstance(t, DictT)]
        ty = self.choice(useful) if useful and self.flip(70) else self.draw_dict_type()
        value = self.dict_literal(cx, scope, ty)
        name = self.fresh_var(ty)
        self.define(cx, scope, name, ty, assignable=False, capturable=False, made=True)
        made = [ast.Assign([store(name)], value)]
        then = self.pick([(3, None), (2, self.dict_update),
                          (2 if cx.control < MAX_CONTROL and cx.loops < MAX_LOOPS else 0,
                           self.for_dict)])
        return made + then(cx, scope, [scope[name]]) if then else made

    def dict_update(self, cx, scope, dicts):
        """`d['a'] = v` / `d['a'] += v` on a dict this function made, at a key it has."""
        v = self.choice(dicts)
        self.updated.add(v.name)
        target = ast.Subscript(load(v.name), lit(self.choice(v.ty.keys)), ast.Store())
        return [self.item_update(cx, scope, target, v.ty.item)]

    def for_dict(self, cx, scope, dicts):
        """`for k in d:` (the body may read `d[k]`), `for k, v in d.items():` or
        `for v in d.values():`."""
        d = self.choice(dicts)
        form = self.pick([(1, "values"), (1, "items"), (2, "keys")])
        key = self.loop_var(cx, "key", KeyT(d.name))
        value = self.loop_var(cx, "item", d.ty.item)
        if form == "keys":
            loop_vars, target, it = [key], store(key.name), self.use(cx, d)
        elif form == "values":
            loop_vars, target = [value], store(value.name)
            it = call(ast.Attribute(self.use(cx, d), "values", ast.Load()), [])
        else:
            loop_vars = [key, value]
            target = ast.Tuple([store(key.name), store(value.name)], ast.Store())
            it = call(ast.Attribute(self.use(cx, d), "items", ast.Load()), [])
        # CPython's loop over d.items() / d.values() sees an update of d in its body,
        # myir's does not: it refuses the update (and so never updates d there)
        made, d.made = d.made, d.made and form == "keys"
        first = []
        if form == "keys" and self.flip(50):  # `elem = d[k]` first thing in the body
            elem = Var(self.fresh("item"), d.ty.item, cx, capturable=False)
            first.append(ast.Assign([store(elem.name)],
                                    ast.Subscript(load(d.name), load(key.name), ast.Load())))
            loop_vars.append(elem)
        body = self.loop_body(cx, scope, loop_vars, first)
        d.made = made and d.name not in self.passed
        return [ast.For(target, it, body, [])]

    def list_append(self, cx, scope, lists):
        v = self.choice(lists)
        method = ast.Attribute(load(v.name), "append", ast.Load())
        return [ast.Expr(call(method, [self.expr(cx, scope, v.ty.item, 1)]))]

    def read_const(self, name):
        self.globals_read.add(name)
        return load(name)

    def tuple_index(self, cx, v, ty):
        positions = [i for i, t in enumerate(v.ty.elts) if t == ty]
        i = self.choice(positions)
        if self.flip(20) and i == len(v.ty.elts) - 1:
            index = lit(-1)
        else:
            index = lit(i)
        return ast.Subscript(self.use(cx, v), index, ast.Load())

    def numeric(self, cx, scope, ty, depth):
        opts = self.leaf_options(cx, scope, ty)
        if depth > 0:
            d = depth - 1
            opts += [
                (5, lambda: self.arith(cx, scope, ty, d)),
                (2, lambda: self.divmod_(cx, scope, ty, d)),
                (1, lambda: self.divmod_by_ternary(cx, scope, ty, d)),
                (1, lambda: ast.UnaryOp(ast.USub(), self.numeric(cx, scope, ty, d))),
                (1, lambda: self.power(cx, scope, ty, d)),
                (1, lambda: abs_(self.numeric(cx, scope, ty, d))),
                (1, lambda: self.ternary(cx, scope, ty, d)),
                (1, lambda: self.value_boolop(cx, scope, ty, d)),
                (1, lambda: self.minmax(cx, scope, ty, d)),
            ] + self.call_options(cx, scope, ty, d)
            if ty is FLOAT:
                opts += [(2, lambda: self.math_fn(cx, scope, d)),
                         (1, lambda: call("float", [self.numeric(cx, scope, INT, d)]))]
            else:
                # bool in arithmetic: True + 1 == 2
                opts.append((1, lambda: binop(self.boolean(cx, scope, d),
                                               self.choice([ast.Add(), ast.Mult()]),
                                               self.numeric(cx, scope, INT, d))))
        return self.pick(opts)()

    def operand_types(self, ty):
        if ty is INT:
            return INT, INT
        return self.pick([(2, (FLOAT, FLOAT)), (1, (FLOAT, INT)), (1, (INT, FLOAT))])

    def arith(self, cx, scope, ty, d):
        ta, tb = self.operand_types(ty)
        op = self.pick([(3, ast.Add()), (2, ast.Sub()), (2, ast.Mult())])
        return binop(self.numeric(cx, scope, ta, d), op, self.numeric(cx, scope, tb, d))

    def guard(self, cx, scope, ty, d):
        """An expression of type `ty` that is never zero."""
        vs = self.readable(cx, scope, lambda t: t == ty)
        nonzero = NONZERO_INTS if ty is INT else NONZERO_FLOATS
        one = lit(1) if ty is INT else lit(self.choice([0.5, 1.0]))
        return self.pick([
            (2, lambda: lit(self.choice(nonzero))),
            (2, lambda: ast.BoolOp(ast.Or(), [self.numeric(cx, scope, ty, d),
                                              lit(self.choice(nonzero))])),
            (1, lambda: binop(abs_(self.numeric(cx, scope, ty, d)), ast.Add(), one)),
            (1 if vs else 0, lambda: self.nonzero_ternary(cx, self.choice(vs), nonzero)),
        ])()

    def nonzero_ternary(self, cx, v, nonzero):
        zero = lit(0) if v.ty is INT else lit(0.0)
        return ast.IfExp(compare(self.use(cx, v), [ast.NotEq()], [zero]),
                         self.use(cx, v), lit(self.choice(nonzero)))

    def divmod_(self, cx, scope, ty, d):
        if ty is INT:
            op = self.pick([(1, ast.FloorDiv()), (1, ast.Mod())])
            return binop(self.numeric(cx, scope, INT, d), op, self.guard(cx, scope, INT, d))
        op = self.pick([(3, ast.Div()), (1, ast.FloorDiv()), (1, ast.Mod())])
        if isinstance(op, ast.Div):
            ta, tb = self.pick([(2, (FLOAT, FLOAT)), (1, (FLOAT, INT)), (1, (INT, FLOAT)),
                                (1, (INT, INT))])
        else:
            ta, tb = self.operand_types(FLOAT)
        return binop(self.numeric(cx, scope, ta, d), op, self.guard(cx, scope, tb, d))

    def unguarded_divisor(self, cx, scope, ty):
        """A variable of type `ty` (or a literal 0 when there is none) to divide by, with
        its `is zero` test: the division must only run where the test is false."""
        vs = self.readable(cx, scope, lambda t: t == ty)
        v = self.use(cx, self.choice(vs)) if vs else lit(0 if ty is INT else 0.0)
        zero = lit(0 if ty is INT else 0.0)
        if self.flip(50):
            return v, compare(v, [ast.Eq()], [zero]), compare(v, [ast.NotEq()], [zero])
        return v, ast.UnaryOp(ast.Not(), v), v  # truthiness of a number

    def unguarded_division(self, cx, scope, ty, d):
        """(a / v, v is zero, v is not zero) for a result of type `ty`."""
        if ty is INT:
            tb, op = INT, self.choice([ast.FloorDiv(), ast.Mod()])
            ta = INT
        else:
            op = self.pick([(2, ast.Div()), (1, ast.FloorDiv()), (1, ast.Mod())])
            ta, tb = self.operand_types(FLOAT) if not isinstance(op, ast.Div) else (
                self.choice([FLOAT, INT]), self.choice([FLOAT, INT]))
        v, is_zero, not_zero = self.unguarded_divisor(cx, scope, tb)
        return binop(self.numeric(cx, scope, ta, d), op, v), is_zero, not_zero

    def divmod_by_ternary(self, cx, scope, ty, d):
        """`a // v if v != 0 else b`: only the ternary keeps this from dividing by zero."""
        division, is_zero, not_zero = self.unguarded_division(cx, scope, ty, d)
        other = self.numeric(cx, scope, ty, d)
        if self.flip(50):
            return ast.IfExp(not_zero, division, other)
        return ast.IfExp(is_zero, other, division)

    def divmod_by_shortcircuit(self, cx, scope, d):
        """`v != 0 and a % v == 1` / `v == 0 or a / v > 2.0`: short-circuit as a guard."""
        ty = self.choice([INT, FLOAT])
        division, is_zero, not_zero = self.unguarded_division(cx, scope, ty, d)
        test = compare(division, [self.choice(CMP_OPS)()], [self.numeric(cx, scope, ty, d)])
        if self.flip(50):
            return ast.BoolOp(ast.And(), [not_zero, test])
        return ast.BoolOp(ast.Or(), [is_zero, test])

    def power(self, cx, scope, ty, d):
        if ty is INT:
            return self.pick([
                (2, lambda: binop(binop(self.numeric(cx, scope, INT, d), ast.Mod(),
                                        lit(self.draw(_ints(2, 6)))),
                                  ast.Pow(), lit(self.draw(_ints(0, 3))))),
                (1, lambda: binop(lit(self.choice([2, 3, -2])), ast.Pow(),
                                  binop(self.numeric(cx, scope, INT, d), ast.Mod(), lit(4)))),
            ])()
        vs = self.readable(cx, scope, lambda t: t in NUMERIC)
        return self.pick([
            (2, lambda: binop(binop(self.numeric(cx, scope, self.pick([(2, FLOAT), (1, INT)]), d),
                                    ast.Mod(), lit(self.choice([2.0, 3.0, 1.5]))),
                              ast.Pow(), lit(self.draw(_ints(0, 3))))),
            (1, lambda: binop(abs_(self.numeric(cx, scope, FLOAT, d)), ast.Pow(),
                              lit(self.choice([0.5, 1.5, 2.0])))),
            (1 if vs else 0, lambda: self.square(cx, self.choice(vs))),
            (1, lambda: binop(lit(self.choice([0.5, 2.0])), ast.Pow(),
                              binop(self.numeric(cx, scope, INT, d), ast.Mod(), lit(5)))),
        ])()

    def square(self, cx, v):
        """`x ** 2` / `x ** 3` of a variable (a float exponent if x is an int: float result)."""
        exponent = self.choice([2, 3, 2.0]) if v.ty is FLOAT else self.choice([2.0, 3.0])
        return binop(self.use(cx, v), ast.Pow(), lit(exponent))

    def math_fn(self, cx, scope, d):
        def arg():
            return self.numeric(cx, scope, self.pick([(3, FLOAT), (1, INT)]), d)

        def bounded_exp():
            return self.pick([
                (1, lambda: ast.UnaryOp(ast.USub(), abs_(arg()))),
                (1, lambda: math_call("sin", arg())),
                (1, lambda: binop(arg(), ast.Mod(), lit(4.0))),
                (1, lambda: binop(math_call("cos", arg()), ast.Mult(), lit(2.0))),
            ])()

        return self.pick([
            (2, lambda: math_call("sin", arg())),
            (2, lambda: math_call("cos", arg())),
            (2, lambda: math_call("exp", bounded_exp())),
            (2, lambda: math_call("sqrt", abs_(arg()))),
        ])()

    def ternary(self, cx, scope, ty, d):
        return ast.IfExp(self.condition(cx, scope, d),
                         self.expr(cx, scope, ty, d), self.expr(cx, scope, ty, d))

    def ternary_from(self, cx, scope, ty, value, value_ty):
        """An expression of type `ty` that uses `value` (of another type) in its test."""
        if value_ty is BOOL:
            test = value
        else:
            test = compare(value, [self.choice(CMP_OPS)()], [self.literal(value_ty)])
        return ast.IfExp(test, self.expr(cx, scope, ty, 1), self.expr(cx, scope, ty, 1))

    def value_boolop(self, cx, scope, ty, d):
        """`x or y` / `x and y` whose value is one of the operands (both of type `ty`)."""
        op = self.pick([(2, ast.Or()), (1, ast.And())])
        return ast.BoolOp(op, [self.expr(cx, scope, ty, d), self.expr(cx, scope, ty, d)])

    def minmax(self, cx, scope, ty, d):
        return call(self.choice(["min", "max"]),
                    [self.numeric(cx, scope, ty, d), self.numeric(cx, scope, ty, d)])

    def boolean(self, cx, scope, depth):
        opts = self.leaf_options(cx, scope, BOOL)
        opts[0] = (1 if depth == 0 else 0, opts[0][1])  # few True/False literals
        opts.append((6, lambda: self.comparison(cx, scope, max(depth - 1, 0))))
        if depth > 0:
            d = depth - 1
            opts += [
                (2, lambda: self.chained(cx, scope, d)),
                (1, lambda: self.divmod_by_shortcircuit(cx, scope, d)),
                (2, lambda: ast.UnaryOp(ast.Not(), self.condition(cx, scope, d))),
                (2, lambda: ast.BoolOp(self.choice([ast.And(), ast.Or()]),
                                       [self.boolean(cx, scope, d), self.boolean(cx, scope, d)])),
                (1, lambda: self.ternary(cx, scope, BOOL, d)),
            ] + self.call_options(cx, scope, BOOL, d)
        return self.pick(opts)()

    def comparison(self, cx, scope, d):
        if d > 0 and self.flip(10):
            op = self.choice([ast.Eq(), ast.NotEq()])
            return compare(self.boolean(cx, scope, d), [op], [self.boolean(cx, scope, d)])
        a = self.numeric(cx, scope, self.pick([(1, FLOAT), (1, INT)]), d)
        b = self.numeric(cx, scope, self.pick([(1, FLOAT), (1, INT)]), d)
        return compare(a, [self.choice(CMP_OPS)()], [b])

    def chained(self, cx, scope, d):
        n = self.pick([(3, 2), (1, 3)])
        operands = [self.numeric(cx, scope, self.pick([(1, FLOAT), (1, INT)]), d)
                    for _ in range(n + 1)]
        ops = [self.choice(CMP_OPS[:4] + [ast.Eq])() for _ in range(n)]
        return compare(operands[0], ops, operands[1:])

    def condition(self, cx, scope, depth):
        """An expression used only for its truthiness (if/while tests, `not`)."""
        d = max(depth - 1, 0)
        numeric = self.readable(cx, scope, lambda t: t in NUMERIC)
        return self.pick([
            (6, lambda: self.boolean(cx, scope, depth)),
            (2 if numeric else 0, lambda: self.use(cx, self.choice(numeric))),
            (1 if depth > 0 else 0, lambda: self.numeric(cx, scope, self.choice([INT, FLOAT]), d)),
            (1 if depth > 0 else 0,
             lambda: ast.BoolOp(self.choice([ast.And(), ast.Or()]),
                                [self.condition(cx, scope, d), self.condition(cx, scope, d)])),
        ])()

    def tuple_expr(self, cx, scope, ty, depth):
        vs = self.readable(cx, scope, lambda t: t == ty)
        d = max(depth - 1, 0)
        opts = [(3, lambda: ast.Tuple([self.expr(cx, scope, t, d) for t in ty.elts], ast.Load())),
                (4 if vs else 0, lambda: self.use(cx, self.choice(vs)))]
        if depth > 0:
            opts += [(1, lambda: self.ternary(cx, scope, ty, d))]
            opts += self.call_options(cx, scope, ty, d)
        return self.pick(opts)()

    # -- functions as values -----------------------------------------------------------------

    def module_fn_values(self, cx, ft):
        """Module-level functions usable as values of type `ft` from `cx`."""
        return [s for s in self.sigs
                if s.index < cx.sig_index and s.group is None and s.functype == ft]

    def factories(self, cx, ft):
        return [s for s in self.callable_sigs(cx) if s.ret == ft and s.group is None]

    def func_expr(self, cx, scope, ft, depth):
        vs = self.readable(cx, scope, lambda t: t == ft)
        fns = self.module_fn_values(cx, ft)
        facts = self.factories(cx, ft)
        d = max(depth - 1, 0)
        return self.pick([
            (3, lambda: self.lambda_expr(cx, scope, ft, min(depth, 2))),
            (3 if vs else 0, lambda: self.use(cx, self.choice(vs))),
            (2 if fns else 0, lambda: load(self.choice(fns).name)),
            (2 if facts else 0, lambda: self.sig_call(cx, scope, self.choice(facts), d)),
            (1 if depth > 0 else 0, lambda: self.ternary(cx, scope, ft, d)),
        ])()

    def inner_ctx(self, cx, ret, budget=0):
        return Ctx(sig_index=cx.sig_index, group=None, ret=ret, nested=cx.nested + 1,
                   budget=budget)

    def inner_scope(self, scope):
        """What a closure defined here may read: variables that can be captured."""
        return {n: v for n, v in scope.items() if v.capturable}

    def lambda_expr(self, cx, scope, ft, depth):
        inner = self.inner_ctx(cx, ft.ret)
        iscope = self.inner_scope(scope)
        params = [self.fresh("lambda") for _ in ft.params]
        for p, t in zip(params, ft.params):
            iscope[p] = Var(p, t, inner, assignable=False)
        body = self.expr(inner, iscope, ft.ret, max(depth, 1))
        return ast.Lambda(_fn_args(params), body)

    # -- calls -----------------------------------------------------------------------------

    def callable_sigs(self, cx):
        out = []
        for s in self.sigs:
            if cx.group is not None and s.group == cx.group:
                if cx.nested == 0 and cx.loops == 0 and cx.group_calls > 0:
                    out.append(s)
            elif s.index < cx.sig_index:
                out.append(s)
        return out

    def call_options(self, cx, scope, ty, d):
        sigs = [s for s in self.callable_sigs(cx) if s.ret == ty]
        uncalled = [s for s in sigs if s.name not in self.called]
        fvars = self.readable(cx, scope, lambda t: isinstance(t, FuncT) and t.ret == ty)
        facts = [s for s in self.callable_sigs(cx)
                 if isinstance(s.ret, FuncT) and s.ret.ret == ty and s.group is None]
        return [
            (6 if uncalled else 0, lambda: self.sig_call(cx, scope, self.choice(uncalled), d)),
            (3 if sigs else 0, lambda: self.sig_call(cx, scope, self.choice(sigs), d)),
            (3 if fvars else 0, lambda: self.value_call(cx, scope, self.choice(fvars), d)),
            (3 if facts else 0, lambda: self.factory_call(cx, scope, self.choice(facts), d)),
        ]

    def value_call(self, cx, scope, v, d):
        fn = self.use(cx, v)
        return call(fn, [self.expr(cx, scope, t, d) for t in v.ty.params])

    def factory_call(self, cx, scope, s, d):
        made = self.sig_call(cx, scope, s, d)
        return call(made, [self.expr(cx, scope, t, d) for t in s.ret.params])

    def bounded_int(self, cx, scope, lo, hi, d=1):
        """An int expression whose value lies in [lo, hi] (lo <= 0 < hi)."""
        bounded = [v for v in self.readable(cx, scope, lambda t: t is INT)
                   if v.bound is not None and lo <= v.bound[0] and v.bound[1] <= hi]
        return self.pick([
            (3, lambda: lit(self.draw(_ints(max(lo, -3), hi)))),
            (2, lambda: binop(self.numeric(cx, scope, INT, d), ast.Mod(),
                              lit(self.draw(_ints(2, hi + 1))))),
            (1 if lo < 0 else 0,
             lambda: ast.UnaryOp(ast.USub(), binop(self.numeric(cx, scope, INT, d), ast.Mod(),
                                                   lit(self.draw(_ints(2, 1 - lo)))))),
            (2 if bounded else 0, lambda: self.use(cx, self.choice(bounded))),
        ])()

    def sig_call(self, cx, scope, s, d):
        self.called.add(s.name)
        args, keywords = [], []
        by_keyword = False
        for i, (pname, pty, default) in enumerate(s.params):
            if i == 0 and s.group is not None:
                if s.group == cx.group:
                    cx.group_calls -= 1
                    value = binop(load("depth"), ast.Sub(), lit(1))
                else:
                    value = self.bounded_int(cx, scope, 0, 4)
                args.append(value)
                continue
            if default is not None and self.flip(40):
                by_keyword = True  # leave it out: the default is used
                continue
            value = self.expr(cx, scope, pty, d)
            if by_keyword or self.flip(15):
                by_keyword = True
                keywords.append(ast.keyword(pname, value))
            else:
                args.append(value)
        if len(keywords) > 1 and self.flip(50):
            keywords = [keywords[i] for i in self.draw(st.permutations(range(len(keywords))))]
        return call(s.name, args, keywords)

    # -- statements ------------------------------------------------------------------------

    def block(self, cx, scope, lo, hi):
        count = self.draw(_ints(lo, hi))
        out = []
        for _ in range(count):
            if cx.budget <= 0:
                break
            cx.budget -= 1
            out.extend(self.statement(cx, scope))
            if isinstance(out[-1], (ast.Break, ast.Continue)):
                return out  # nothing after it would run
        if len(out) < lo:
            out.extend(self.simple_statement(cx, scope))
        return out

    def simple_statement(self, cx, scope):
        targets = self.assignable(cx, scope, lambda t: t in SCALARS)
        numeric = [v for v in targets if v.ty in NUMERIC]
        return self.pick([
            (2, lambda: self.new_var(cx, scope)),
            (2 if targets else 0, lambda: self.reassign(cx, scope, targets)),
            (2 if numeric else 0, lambda: self.augassign(cx, scope)),
        ])()

    def statement(self, cx, scope):
        scalars = self.assignable(cx, scope, lambda t: t in SCALARS)
        numeric = self.assignable(cx, scope, lambda t: t in NUMERIC)
        tuples = self.assignable(cx, scope, lambda t: isinstance(t, TupleT))
        lists = [v for v in scope.values() if isinstance(v.ty, ListT) and v.owner is cx]
        updatable = [v for v in lists if v.made and v.length > 0]
        dicts = self.readable(cx, scope, lambda t: isinstance(t, DictT))
        made_dicts = [v for v in dicts if v.owner is cx and v.made]
        can_nest = cx.control < MAX_CONTROL
        can_loop = can_nest and cx.loops < MAX_LOOPS
        in_loop = cx.loops > 0
        return self.pick([
            (5, lambda: self.new_var(cx, scope)),
            (3 if scalars or tuples else 0, lambda: self.reassign(cx, scope, scalars + tuples)),
            (3 if numeric else 0, lambda: self.augassign(cx, scope)),
            (1, lambda: self.new_tuple_var(cx, scope)),
            (2, lambda: self.unpack(cx, scope)),
            (1 if len(scalars) >= 2 else 0, lambda: self.multi_assign(cx, scope, scalars)),
            (4 if can_nest else 0, lambda: self.if_stmt(cx, scope)),
            (2 if can_loop else 0, lambda: self.for_range(cx, scope)),
            (1 if can_loop else 0, lambda: self.for_tuple(cx, scope)),
            (1 if can_loop else 0, lambda: self.for_zip(cx, scope)),
            (1 if can_loop else 0, lambda: self.for_enumerate(cx, scope)),
            (1 if can_loop else 0, lambda: self.while_counter(cx, scope)),
            (1 if can_loop else 0, lambda: self.while_countdown(cx, scope)),
            (1 if can_loop else 0, lambda: self.while_true(cx, scope)),
            (3 if in_loop else 0, lambda: self.loop_exit(cx, scope)),
            (2 if cx.loops > 1 else 1 if cx.control > 0 or in_loop else 0,
             lambda: self.early_return(cx, scope)),
            (1 if cx.nested < 2 else 0, lambda: self.nested_def(cx, scope)),
            (1 if cx.nested < 2 else 0, lambda: self.new_func_var(cx, scope)),
            (2, lambda: self.new_list_var(cx, scope)),
            (4 if lists else 0, lambda: self.list_append(cx, scope, lists)),
            (4 if updatable else 0, lambda: self.element_update(cx, scope, updatable)),
            (1, lambda: self.new_dict_var(cx, scope)),
            (5 if made_dicts else 0, lambda: self.dict_update(cx, scope, made_dicts)),
            (3 if dicts and can_loop else 0, lambda: self.for_dict(cx, scope, dicts)),
        ])()

    def define(self, cx, scope, name, ty, **flags):
        flags.setdefault("capturable", cx.control == 0)
        scope[name] = Var(name, ty, cx, **flags)

    def new_var(self, cx, scope):
        ty = self.draw_scalar()
        value = self.expr(cx, scope, ty, 2)
        # A local that shadows a module constant (the name is local in the whole function,
        # so only where the function has not read the constant before).
        shadow = [n for n, t, _ in self.consts if t == ty and n not in self.globals_read
                  and n not in self.shadowed]
        if shadow and cx.nested == 0 and cx.control == 0 and self.flip(50):
            name = self.choice(shadow)
            self.shadowed.add(name)
            self.define(cx, scope, name, ty)
            return [ast.Assign([store(name)], value)]
        name = self.fresh_var(ty)
        self.define(cx, scope, name, ty)
        return [ast.Assign([store(name)], value)]

    def new_tuple_var(self, cx, scope):
        ty = self.draw_tuple_type()
        value = self.tuple_expr(cx, scope, ty, 2)
        name = self.fresh_var(ty)
        self.define(cx, scope, name, ty)
        return [ast.Assign([store(name)], value)]

    def reassign(self, cx, scope, targets):
        v = self.choice(targets)
        v.capturable = False  # assigned twice now; also keeps the value below from capturing it
        return [ast.Assign([store(v.name)], self.expr(cx, scope, v.ty, 2))]

    def augassign(self, cx, scope):
        v = self.choice(self.assignable(cx, scope, lambda t: t in NUMERIC))
        v.capturable = False
        if v.ty is INT:
            kind = self.pick([(3, "add"), (2, "sub"), (1, "mul"), (1, "floordiv"), (1, "mod")])
            rhs_ty = INT
        else:
            kind = self.pick([(3, "add"), (2, "sub"), (1, "mul"), (1, "div")])
            rhs_ty = self.pick([(2, FLOAT), (1, INT)])
        op = {"add": ast.Add, "sub": ast.Sub, "mul": ast.Mult, "floordiv": ast.FloorDiv,
              "mod": ast.Mod, "div": ast.Div}[kind]()
        if kind in ("floordiv", "mod", "div"):
            value = self.guard(cx, scope, rhs_ty, 1)
        elif kind == "mul":
            value = self.pick([(2, lambda: lit(self.choice([2, -1, 3] if rhs_ty is INT else
                                                           [0.5, -1.0, 1.5]))),
                               (1, lambda: self.numeric(cx, scope, rhs_ty, 1))])()
        else:
            value = self.numeric(cx, scope, rhs_ty, 2)
        return [ast.AugAssign(store(v.name), op, value)]

    def unpack(self, cx, scope):
        ty = self.draw_tuple_type()
        value = self.tuple_expr(cx, scope, ty, 2)
        names = [self.fresh_var(t) for t in ty.elts]
        for n, t in zip(names, ty.elts):
            self.define(cx, scope, n, t)
        target = ast.Tuple([store(n) for n in names], ast.Store())
        return [ast.Assign([target], value)]

    def multi_assign(self, cx, scope, targets):
        a = self.choice(targets)
        b = self.choice([v for v in targets if v is not a])
        a.capturable = b.capturable = False
        if a.ty == b.ty and self.flip(50):
            values = [load(b.name), load(a.name)]  # swap
        else:
            values = [self.expr(cx, scope, a.ty, 1), self.expr(cx, scope, b.ty, 1)]
        target = ast.Tuple([store(a.name), store(b.name)], ast.Store())
        return [ast.Assign([target], ast.Tuple(values, ast.Load()))]

    def sub_block(self, cx, scope, lo, hi, *, loop=False):
        inner = dict(scope)
        cx.control += 1
        cx.loops += loop
        try:
            return self.block(cx, inner, lo, hi), inner
        finally:
            cx.control -= 1
            cx.loops -= loop

    def if_stmt(self, cx, scope):
        n_elif = self.pick([(4, 0), (2, 1), (1, 2)])
        has_else = self.flip(60)
        phis = []
        if has_else:
            phis = [self.draw_scalar() for _ in range(self.pick([(3, 0), (2, 1), (1, 2)]))]
        phi_names = [self.fresh_var(t) for t in phis]
        branches = []
        for _ in range(1 + n_elif + has_else):
            test = self.condition(cx, scope, 2) if len(branches) <= n_elif else None
            body, inner = self.sub_block(cx, scope, 0 if phis else 1, 2)
            exit_ = [body.pop()] if body and isinstance(body[-1], (ast.Break, ast.Continue)) else []
            cx.control += 1
            for n, t in zip(phi_names, phis):
                body.append(ast.Assign([store(n)], self.expr(cx, inner, t, 2)))
            cx.control -= 1
            body += exit_
            branches.append((test, body))
        for n, t in zip(phi_names, phis):
            self.define(cx, scope, n, t, capturable=False)
        orelse = branches[-1][1] if has_else else []
        for test, body in reversed(branches[: 1 + n_elif]):
            orelse = [ast.If(test, body, orelse)]
        return orelse

    def loop_body(self, cx, scope, loop_vars, first=()):
        inner = dict(scope)
        for v in loop_vars:
            inner[v.name] = v
        cx.control += 1
        cx.loops += 1
        try:
            body = list(first) + self.block(cx, inner, 1, 3)
        finally:
            cx.control -= 1
            cx.loops -= 1
        return body

    def loop_var(self, cx, kind, ty, bound=None):
        return Var(self.fresh(kind), ty, cx, assignable=False, capturable=False, bound=bound)

    def for_range(self, cx, scope):
        form = self.pick([(2, 1), (2, 2), (3, 3)])
        if form == 1:
            args = [self.bounded_int(cx, scope, 0, 6)]
        elif form == 2:
            args = [self.bounded_int(cx, scope, -3, 4), self.bounded_int(cx, scope, 0, 7)]
        else:
            step = self.choice([-1, 2, -2, 3, 1, -3, -1])
            lo_hi = [self.bounded_int(cx, scope, -3, 4), self.bounded_int(cx, scope, -3, 7)]
            if step < 0:
                lo_hi.reverse()
            args = lo_hi + [lit(step)]
        i = self.loop_var(cx, "loop", INT, bound=(-3, 7))
        body = self.loop_body(cx, scope, [i])
        return [ast.For(store(i.name), call("range", args), body, [])]

    def iterable_tuple(self, cx, scope, item=None):
        """A homogeneous tuple expression, returning (expr, element type)."""
        vs = self.readable(cx, scope, lambda t: isinstance(t, TupleT) and t.item is not None
                           and (item is None or t.item == item))
        if vs and self.flip(50):
            v = self.choice(vs)
            return self.use(cx, v), v.ty.item
        item = item or self.pick([(1, FLOAT), (1, INT)])
        n = self.pick([(3, 3), (2, 2), (1, 4)])
        return ast.Tuple([self.numeric(cx, scope, item, 1) for _ in range(n)], ast.Load()), item

    def for_tuple(self, cx, scope):
        it, item = self.iterable_tuple(cx, scope)
        v = self.loop_var(cx, "item", item)
        body = self.loop_body(cx, scope, [v])
        return [ast.For(store(v.name), it, body, [])]

    def for_zip(self, cx, scope):
        a_it, a_ty = self.iterable_tuple(cx, scope)
        b_it, b_ty = self.iterable_tuple(cx, scope)
        a = self.loop_var(cx, "item", a_ty)
        b = self.loop_var(cx, "item", b_ty)
        body = self.loop_body(cx, scope, [a, b])
        target = ast.Tuple([store(a.name), store(b.name)], ast.Store())
        return [ast.For(target, call("zip", [a_it, b_it]), body, [])]

    def for_enumerate(self, cx, scope):
        if self.flip(40):
            return self.for_enumerate_zip(cx, scope)
        it, item = self.iterable_tuple(cx, scope)
        i = self.loop_var(cx, "loop", INT, bound=(0, 3))
        v = self.loop_var(cx, "item", item)
        body = self.loop_body(cx, scope, [i, v])
        target = ast.Tuple([store(i.name), store(v.name)], ast.Store())
        return [ast.For(target, call("enumerate", [it]), body, [])]

    def for_enumerate_zip(self, cx, scope):
        """`for i, (a, b) in enumerate(zip(s, t)):` (a nested target)."""
        a_it, a_ty = self.iterable_tuple(cx, scope)
        b_it, b_ty = self.iterable_tuple(cx, scope)
        i = self.loop_var(cx, "loop", INT, bound=(0, 3))
        a = self.loop_var(cx, "item", a_ty)
        b = self.loop_var(cx, "item", b_ty)
        body = self.loop_body(cx, scope, [i, a, b])
        pair = ast.Tuple([store(a.name), store(b.name)], ast.Store())
        target = ast.Tuple([store(i.name), pair], ast.Store())
        return [ast.For(target, call("enumerate", [call("zip", [a_it, b_it])]), body, [])]

    def loop_test(self, cx, scope, depth):
        """A condition evaluated on every iteration (so no recursive calls in it)."""
        cx.loops += 1
        try:
            return self.condition(cx, scope, depth)
        finally:
            cx.loops -= 1

    def while_counter(self, cx, scope):
        counter = self.loop_var(cx, "counter", INT, bound=(0, 6))
        limit = self.draw(_ints(1, 6))
        test = compare(load(counter.name), [ast.Lt()], [lit(limit)])
        if self.flip(60):
            test = ast.BoolOp(ast.And(), [test, self.loop_test(cx, scope, 2)])
        init = ast.Assign([store(counter.name)], lit(0))
        scope[counter.name] = counter  # readable after the loop, never assigned
        bump = ast.AugAssign(store(counter.name), ast.Add(), lit(1))
        body = self.loop_body(cx, scope, [], first=[bump])
        return [init, ast.While(test, body, [])]

    def while_countdown(self, cx, scope):
        if self.flip(50):
            rest = self.loop_var(cx, "countdown", INT, bound=(0, 15))
            start = binop(abs_(self.numeric(cx, scope, INT, 1)), ast.Mod(), lit(16))
            test = compare(load(rest.name), [ast.Gt()], [lit(0)])
            shrink = self.pick([
                (1, lambda: ast.Assign([store(rest.name)],
                                       binop(load(rest.name), ast.FloorDiv(), lit(2)))),
                (1, lambda: ast.AugAssign(store(rest.name), ast.Sub(),
                                          lit(self.draw(_ints(1, 4))))),
            ])()
        else:
            rest = self.loop_var(cx, "countdown", FLOAT)
            start = binop(abs_(self.numeric(cx, scope, FLOAT, 1)), ast.Mod(), lit(50.0))
            test = compare(load(rest.name), [ast.Gt()], [lit(1.0)])
            shrink = self.pick([
                (1, lambda: ast.Assign([store(rest.name)],
                                       binop(load(rest.name), ast.Mult(), lit(0.5)))),
                (1, lambda: ast.AugAssign(store(rest.name), ast.Div(), lit(3.0))),
                (1, lambda: ast.AugAssign(store(rest.name), ast.Sub(), lit(7.5))),
            ])()
        if self.flip(40):
            test = ast.BoolOp(ast.And(), [test, self.loop_test(cx, scope, 1)])
        init = ast.Assign([store(rest.name)], start)
        scope[rest.name] = rest
        body = self.loop_body(cx, scope, [], first=[shrink])
        return [init, ast.While(test, body, [])]

    def while_true(self, cx, scope):
        """`while True:` that only `break` leaves: a counter bumped first thing in the body,
        then the exit test, before anything that could `continue` past it."""
        counter = self.loop_var(cx, "counter", INT, bound=(0, 6))
        test = compare(load(counter.name), [ast.GtE()], [lit(self.draw(_ints(1, 6)))])
        if self.flip(50):
            test = ast.BoolOp(ast.Or(), [test, self.loop_test(cx, scope, 2)])
        init = ast.Assign([store(counter.name)], lit(0))
        scope[counter.name] = counter  # readable after the loop, never assigned
        bump = ast.AugAssign(store(counter.name), ast.Add(), lit(1))
        body = self.loop_body(cx, scope, [], first=[bump, ast.If(test, [ast.Break()], [])])
        return [init, ast.While(ast.Constant(True), body, [])]

    def loop_exit(self, cx, scope):
        """`if cond: [stmt] break|continue`, `if cond: stmt else: break|continue`, or a bare
        one."""
        exit_ = self.pick([(1, ast.Break()), (1, ast.Continue())])
        if self.flip(15):
            return [exit_]
        test = self.condition(cx, scope, 2)
        if self.flip(25):
            stay, _ = self.sub_block(cx, scope, 1, 1)
            return [ast.If(test, stay, [exit_])]
        before = []
        if self.flip(40):
            before, _ = self.sub_block(cx, scope, 1, 1)
        return [ast.If(test, before + [exit_], [])]

    def early_return(self, cx, scope):
        test = self.condition(cx, scope, 2)
        before = []
        if self.flip(30):
            before, inner = self.sub_block(cx, scope, 1, 1)
        else:
            inner = scope
        cx.control += 1
        value = self.expr(cx, inner, cx.ret, 2)
        cx.control -= 1
        return [ast.If(test, before + [ast.Return(value)], [])]

    def nested_def(self, cx, scope, ft=None, name=None):
        ft = ft or self.draw_functype()
        name = name or self.fresh("nested_fn")
        inner = self.inner_ctx(cx, ft.ret, budget=self.draw(_ints(0, 3)))
        iscope = self.inner_scope(scope)
        params = [self.fresh_var(t) for t in ft.params]
        for p, t in zip(params, ft.params):
            iscope[p] = Var(p, t, inner)
        body = self.block(inner, iscope, 0, 3) + self.final_return(inner, iscope)
        self.define(cx, scope, name, ft, assignable=False)
        return [_fn_def(name, params, body)]

    def new_func_var(self, cx, scope):
        # Prefer the types something here can use: higher-order parameters, factory results.
        useful = [t for s in self.callable_sigs(cx) for _, t, _ in s.params if isinstance(t, FuncT)]
        useful += [s.ret for s in self.callable_sigs(cx) if isinstance(s.ret, FuncT)]
        ft = self.choice(useful) if useful and self.flip(70) else self.draw_functype()
        value = self.func_expr(cx, scope, ft, 2)
        name = self.fresh("func")
        self.define(cx, scope, name, ft, assignable=False)
        return [ast.Assign([store(name)], value)]

    def final_return(self, cx, scope):
        """The last statement(s) of a function: `return e`, or if/else returning on both sides."""
        if cx.control < MAX_CONTROL and self.flip(15):
            test = self.condition(cx, scope, 2)
            then, inner = self.sub_block(cx, scope, 0, 1)
            then.append(ast.Return(self.expr(cx, inner, cx.ret, 2)))
            other, inner = self.sub_block(cx, scope, 0, 1)
            other.append(ast.Return(self.expr(cx, inner, cx.ret, 2)))
            return [ast.If(test, then, other)]
        if self.flip(40):
            return [ast.Return(self.observe(cx, scope, cx.ret))]
        return [ast.Return(self.expr(cx, scope, cx.ret, 3))]

    def observe(self, cx, scope, ty):
        """A value of type `ty` that depends on every local of a matching type, so that
        what the function computed along the way shows in its result."""
        if isinstance(ty, TupleT):
            return ast.Tuple([self.observe(cx, scope, t) for t in ty.elts], ast.Load())
        if ty is BOOL:
            vs = self.readable(cx, scope, lambda t: t in SCALARS)
            parts = [self.use(cx, v) if v.ty is BOOL else
                     compare(self.use(cx, v), [self.choice(CMP_OPS)()], [self.literal(v.ty)])
                     for v in vs]
            op = self.choice([ast.And(), ast.Or()])
            return ast.BoolOp(op, parts) if len(parts) > 1 else (
                parts[0] if parts else self.boolean(cx, scope, 2))
        if not isinstance(ty, Scalar):
            return self.expr(cx, scope, ty, 2)
        accepted = (INT, BOOL) if ty is INT else SCALARS
        vs = self.readable(cx, scope, lambda t: t in accepted)
        total = self.numeric(cx, scope, ty, 1)
        for v in vs:
            total = binop(total, self.choice([ast.Add(), ast.Sub()]), self.use(cx, v))
        return total

    # -- module ----------------------------------------------------------------------------

    def draw_sigs(self):
        n = self.pick([(3, 0), (4, 1), (3, 2), (2, 3)])
        group = 0
        while len(self.sigs) < n:
            kind = self.pick([(4, "plain"), (2, "recursive"), (2, "mutual"), (2, "hof"),
                              (2, "factory"), (2, "lambdas")])
            index = len(self.sigs)
            if kind in ("recursive", "mutual"):
                members = 2 if kind == "mutual" else 1
                for _ in range(members):
                    params = [("depth", INT, None)] + self.draw_params(1, 2, defaults=False)
                    self.sigs.append(Sig(self.fresh("rec_fn"), params,
                                         self.pick([(3, FLOAT), (2, INT), (1, BOOL)]),
                                         index, group=group, kind="recursive"))
                group += 1
            elif kind == "hof":
                fparam = (self.fresh("param_func"), self.draw_functype(), None)
                params = [fparam] + self.draw_params(1, 2, defaults=True)
                if self.flip(30):
                    params.reverse()
                    params = [p for p in params if p[2] is None] + [p for p in params
                                                                    if p[2] is not None]
                self.sigs.append(Sig(self.fresh("hof"), params, fparam[1].ret, index, kind=kind))
            elif kind == "lambdas":
                ft = self.draw_functype()
                for _ in range(self.pick([(3, 2), (1, 3)])):
                    params = [(self.fresh("lambda"), t, None) for t in ft.params]
                    self.sigs.append(Sig(self.fresh("module_fn"), params, ft.ret, index,
                                         kind="lambda", line=index))
            elif kind == "factory":
                ft = FuncT(tuple(self.pick([(3, FLOAT), (2, INT)])
                                 for _ in range(self.pick([(3, 1), (1, 2)]))),
                           self.pick([(3, FLOAT), (1, INT)]))
                self.sigs.append(Sig(self.fresh("factory"), self.draw_params(1, 2, defaults=True),
                                     ft, index, kind=kind))
            else:
                ret = self.pick([(3, FLOAT), (2, INT), (1, BOOL), (1, "tuple")])
                if ret == "tuple":
                    ret = self.draw_tuple_type()
                params = self.draw_params(1, 3, defaults=True, tuples=True)
                if self.flip(30):  # a helper that reads a dict its caller passes
                    ty = self.draw_dict_type()
                    params.insert(0, (self.fresh_var(ty), ty, None))
                self.sigs.append(Sig(self.fresh("module_fn"), params, ret, index, kind=kind))
        self.sigs.append(Sig("main", self.draw_params(1, 3, defaults=False, tuples=True),
                             self.pick([(3, FLOAT), (3, INT), (1, BOOL), (1, "tuple")]),
                             len(self.sigs), kind="main"))
        if self.sigs[-1].ret == "tuple":
            self.sigs[-1].ret = self.draw_tuple_type()
        # Recursive groups are one node in the call order.
        for s in self.sigs:
            if s.group is not None:
                s.index = min(o.index for o in self.sigs if o.group == s.group)

    def draw_params(self, lo, hi, *, defaults, tuples=False):
        n = self.draw(_ints(lo, hi))
        out = []
        n_defaults = self.draw(_ints(0, n - 1)) if defaults and n > 1 else 0
        for k in range(n):
            if tuples and self.flip(15):
                ty = self.draw_tuple_type()
            else:
                ty = self.draw_scalar()
            default = None
            if k >= n - n_defaults:
                default = self.draw_default(ty)
            out.append((self.fresh_var(ty), ty, default))
        return out

    def draw_default(self, ty):
        if isinstance(ty, TupleT):
            return tuple(self.draw_default(t) for t in ty.elts)
        if ty is INT:
            return self.choice([1, 2, 0, -1, 5])
        if ty is FLOAT:
            return self.choice([1.0, 0.5, -2.0, 0.0])
        return self.choice([True, False])

    def function(self, s):
        cx = Ctx(sig_index=s.index, group=s.group, ret=s.ret,
                 budget=8 if s.kind == "main" else 5, self_sig=s)
        scope = {}
        for pname, pty, _ in s.params:
            scope[pname] = Var(pname, pty, cx, assignable=s.kind != "lambda")
        self.globals_read = set()  # module constants this function has read so far
        self.shadowed = set()  # module constants a local of this function shadows
        if s.kind == "lambda":
            return ast.Lambda(_fn_args([p for p, _, _ in s.params]),
                              self.expr(cx, scope, s.ret, 2))
        body = []
        if s.kind == "main":    # every module-level lambda is called
            for lam in [o for o in self.sigs if o.kind == "lambda" and o.name not in self.called]:
                name = self.fresh_var(lam.ret)
                body.append(ast.Assign([store(name)], self.sig_call(cx, scope, lam, 1)))
                scope[name] = Var(name, lam.ret, cx)
        if s.group is not None:
            scope["depth"].assignable = False
            scope["depth"].capturable = False
            scope["depth"].bound = None
            test = compare(load("depth"), [self.choice([ast.LtE(), ast.Lt()])],
                           [lit(self.choice([0, 1]))])
            cx.control += 1
            base = self.expr(cx, scope, s.ret, 2)
            cx.control -= 1
            body.append(ast.If(test, [ast.Return(base)], []))
            cx.group_calls = 2
        body += self.block(cx, scope, 0, 4)
        if s.kind == "hof" and self.flip(80):
            # a higher-order function calls its function parameter
            fn = next(scope[p] for p, t, _ in s.params if isinstance(t, FuncT))
            body.append(ast.Return(self.value_call(cx, scope, fn, 2)))
        elif s.group is not None and cx.group_calls > 0 and self.flip(85):
            # recurse: into the other member of a mutually recursive pair if there is one
            members = [o for o in self.sigs if o.group == s.group]
            callee = self.choice([o for o in members if o is not s] or members)
            rec = self.sig_call(cx, scope, callee, 1)
            if callee.ret != s.ret:
                rec = self.ternary_from(cx, scope, s.ret, rec, callee.ret)
            elif self.flip(60):
                op = ast.Or() if s.ret is BOOL else self.choice([ast.Add(), ast.Mult(), ast.Sub()])
                other = self.expr(cx, scope, s.ret, 1)
                rec = ast.BoolOp(op, [other, rec]) if s.ret is BOOL else binop(rec, op, other)
            body.append(ast.Return(rec))
        elif s.kind == "factory" and self.flip(50):
            name = self.fresh("nested_fn")
            body += self.nested_def(cx, scope, ft=s.ret, name=name)
            body.append(ast.Return(load(name)))
        else:
            body += self.final_return(cx, scope)
        defaults = [lit(d) for _, _, d in s.params if d is not None]
        return _fn_def(s.name, [p for p, _, _ in s.params], body, defaults)

    def module(self):
        n_consts = self.pick([(3, 0), (1, 1), (1, 2)])
        for _ in range(n_consts):
            ty = self.pick([(1, FLOAT), (1, INT)])
            value = self.choice([2.5, 0.75, -1.25, 4.0] if ty is FLOAT else [3, 10, -2, 7])
            self.consts.append((self.fresh("const"), ty, value))
        self.draw_sigs()
        defs, lines = [], {}
        for s in self.sigs:
            node = self.function(s)
            if s.kind != "lambda":
                defs.append(node)
            elif s.line in lines:   # `a, b = (lambda ..., lambda ...)`: one line
                lines[s.line].targets[0].elts.append(store(s.name))
                lines[s.line].value.elts.append(node)
            else:
                lines[s.line] = ast.Assign([ast.Tuple([store(s.name)], ast.Store())],
                                           ast.Tuple([node], ast.Load()))
                defs.append(lines[s.line])
        order = self.draw(st.permutations(range(len(defs))))
        parts = ["import math\n"]
        if self.consts:
            parts.append("".join(f"{n} = {v!r}\n" for n, _, v in self.consts))
        main = self.sigs[-1]
        args = tuple(self.draw(value_strategy(t)) for _, t, _ in main.params)
        self.unused_raising(defs[-1], main)
        parts += [ast.unparse(ast.fix_missing_locations(defs[i])) + "\n" for i in order]
        source = "\n\n".join(parts)
        return Program(source=source, entry="main", args=args)

    def unused_raising(self, fn, sig):
        """Put `unused = <an operation that raises for some values of a parameter>`, never
        read, into main's body (`1 / n` for n == 0, `math.log(x)` for x <= 0, `math.acos(x)`
        for |x| > 1): the compiled program must still raise where CPython does.  Drawn after
        everything else, so the programs drawn without it stay what they were."""
        params = [(name, t) for name, t, _ in sig.params if t in NUMERIC]
        for _ in range(self.pick([(6, 0), (2, 1), (1, 2)]) if params else 0):
            name, ty = self.choice(params)
            if ty is INT:
                value = binop(lit(self.choice([1, 7, 2.5])),
                              self.choice([ast.Div(), ast.FloorDiv(), ast.Mod()]), load(name))
            else:
                value = self.pick([
                    (3, lambda: math_call(self.choice(["log", "sqrt", "acos"]), load(name))),
                    (1, lambda: binop(lit(1.0), ast.Div(), load(name))),
                ])()
            at = self.draw(_ints(0, len(fn.body) - 1))
            fn.body.insert(at, ast.Assign([store(self.fresh("unused"))], value))


def value_strategy(ty):
    if ty is INT:
        return st.one_of(st.integers(-20, 20), st.integers(-10**6, 10**6))
    if ty is FLOAT:
        return st.one_of(st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0, -0.0, 3.5]),
                         st.floats(-20.0, 20.0), st.floats(-1e6, 1e6))
    if ty is BOOL:
        return st.booleans()
    if isinstance(ty, TupleT):
        return st.tuples(*(value_strategy(t) for t in ty.elts))
    raise AssertionError(ty)


@st.composite
def programs(draw):
    """A `Program`: a module's source in myir's subset and arguments for its `main`."""
    return Gen(draw).module()


# ---------------------------------------------------------------------------------------------
# Programs to differentiate: parameters of mixed float types


# A parameter's kind: how its value is made from a float (shape (3,) for arrays).
GRAD_PARAM_KINDS = ("float", "np.float64", "np.float32", "0-d float64", "0-d float32",
                    "float64[3]", "float32[3]")
_UNARY_NUMPY = ("np.tanh({})", "np.sin({})", "np.cos({})", "np.exp(-np.abs({}))",
                "np.sqrt(np.abs({}) + 1.0)", "({} * {})")


def grad_param_value(kind: str, value: float):
    """The argument of `kind` holding `value` (arrays: value, value / 2, -value)."""
    import numpy as np

    if kind == "float":
        return float(value)
    if kind.startswith("np."):
        return getattr(np, kind[3:])(value)
    dtype = kind.split()[-1].split("[")[0]
    if kind.startswith("0-d"):
        return np.array(value, dtype)
    return np.array([value, value / 2, -value], dtype)


@dataclass(frozen=True)
class GradProgram:
    """`main(p0, ..., pn)`, a float function of parameters of mixed float types (Python
    floats, numpy scalars, 0-d and 1-d arrays of float32 and float64) built from elementwise
    numpy functions and arithmetic, and its arguments; `outer` takes main's gradient
    with respect to every parameter inside compiled code."""

    source: str
    kinds: tuple
    args: tuple

    def __repr__(self) -> str:
        quotes = "'" * 3
        return f"GradProgram(kinds={self.kinds!r}, source={quotes}\n{self.source}{quotes})"


@st.composite
def grad_programs(draw):
    """A `GradProgram`: its parameters' kinds are drawn, so float32 meets float64 (arrays
    and scalars, strong and weak types) in its arithmetic."""
    n = draw(st.integers(1, 4))
    kinds = tuple(draw(st.sampled_from(GRAD_PARAM_KINDS)) for _ in range(n))
    names = [f"p{i}" for i in range(n)]

    def expr(depth):
        choice = draw(st.integers(0, 3 if depth else 0))
        if choice == 0:
            return draw(st.sampled_from(names + ["0.5", "2.0"]))
        if choice == 1:
            template = draw(st.sampled_from(_UNARY_NUMPY))
            inner = expr(depth - 1)
            return template.format(inner, inner)
        op = draw(st.sampled_from(["+", "-", "*"]))
        return f"({expr(depth - 1)} {op} {expr(depth - 1)})"

    body = [f"    t = {expr(3)}"]
    if draw(st.booleans()):
        body.append(f"    t = t * {expr(2)}")
    body.append("    return np.sum(t)")
    params = ", ".join(names)
    source = "\n".join([
        "import numpy as np", "", "from myir import grad", "", "",
        f"def main({params}):", *body, "", "",
        f"def outer({params}):",
        f"    return grad(main, {', '.join(map(str, range(n)))})({params})", ""])
    args = tuple(grad_param_value(k, draw(st.sampled_from([0.25, -0.75, 1.5, 0.6])))
                 for k in kinds)
    return GradProgram(source, kinds, args)


# ---------------------------------------------------------------------------------------------
# What a program exercises (for the generator's own coverage test and for reports)


def _calls_named(node, name):
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _divides_by_name(node):
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv, ast.Mod))
               and isinstance(n.right, ast.Name) for n in ast.walk(node))


def _is_dict(node):
    return isinstance(node, ast.Name) and node.id.startswith(tuple(NAME_POOLS["dict"]))


def _in_function(stmts):
    """The nodes of `stmts`, not those of functions defined in them."""
    stack = list(stmts)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def features(source: str) -> set[str]:
    """The constructs a generated module uses, by name (see FEATURES)."""
    tree = ast.parse(source)
    found = set()
    constants = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                 if isinstance(t, ast.Name)}
    module_fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    called = {n.func.id for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    for n in tree.body:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Tuple) \
                and isinstance(n.targets[0], ast.Tuple):
            names = [t.id for t, v in zip(n.targets[0].elts, n.value.elts)
                     if isinstance(v, ast.Lambda)]
            if len(names) > 1 and sum(name in called for name in names) > 1:
                found.add("lambdas sharing a line")
    order = list(module_fns)

    def visit_fn(fn, nested):
        if nested:
            found.add("nested def")
        defaults = fn.args.defaults
        if defaults:
            found.add("default argument")
        for node in ast.walk(fn):
            if isinstance(node, ast.FunctionDef) and node is not fn:
                continue  # visited on its own
            if isinstance(node, ast.BinOp):
                found.add({ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
                           ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}[type(node.op)])
            elif isinstance(node, ast.UnaryOp):
                found.add({ast.USub: "unary -", ast.Not: "not"}.get(type(node.op), "unary"))
            elif isinstance(node, ast.Compare):
                found.add("chained comparison" if len(node.ops) > 1 else "comparison")
            elif isinstance(node, ast.BoolOp):
                found.add("and" if isinstance(node.op, ast.And) else "or")
                if any(_divides_by_name(v) for v in node.values[1:]):
                    found.add("division guarded by short-circuit")
            elif isinstance(node, ast.IfExp):
                found.add("ternary")
                if _divides_by_name(node.body) or _divides_by_name(node.orelse):
                    found.add("division guarded by ternary")
            elif isinstance(node, ast.If):
                found.add("if")
                if node.orelse and isinstance(node.orelse[0], ast.If) and len(node.orelse) == 1:
                    found.add("elif")
                elif node.orelse:
                    found.add("else")
            elif isinstance(node, ast.While):
                found.add("while")
                if isinstance(node.test, ast.Constant):
                    found.add("while True")
            elif isinstance(node, ast.For):
                it = node.iter
                if _is_dict(it):
                    found.add("for over dict")
                elif isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
                        and it.func.attr in ("items", "values"):
                    found.add(f"for over dict.{it.func.attr}()")
                elif _calls_named(it, "range"):
                    found.add("for range")
                    if len(it.args) == 3 and isinstance(it.args[2], ast.UnaryOp):
                        found.add("range negative step")
                elif _calls_named(it, "zip"):
                    found.add("for zip")
                elif _calls_named(it, "enumerate"):
                    found.add("for enumerate")
                    if isinstance(node.target, ast.Tuple) and any(
                            isinstance(e, ast.Tuple) for e in node.target.elts):
                        found.add("nested for target")
                else:
                    found.add("for tuple")
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Return):
                        found.add("return in loop")
            elif isinstance(node, ast.Break):
                found.add("break")
            elif isinstance(node, ast.Continue):
                found.add("continue")
            elif isinstance(node, (ast.Assign, ast.AugAssign)) \
                    and isinstance(getattr(node, "target", None) or node.targets[0],
                                   ast.Subscript):
                target = getattr(node, "target", None) or node.targets[0]
                kind = "dict" if _is_dict(target.value) else "list element"
                aug = " augmented" if isinstance(node, ast.AugAssign) else ""
                found.add(f"{kind}{aug} update")
            elif isinstance(node, ast.AugAssign):
                found.add("augmented assignment")
            elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
                found.add("tuple unpacking")
            elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                if node.targets[0].id in constants:
                    found.add("local shadows module constant")
                if node.targets[0].id.startswith(tuple(NAME_POOLS["unused"])):
                    found.add("unused computation that can raise")
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                lists = isinstance(node.value, ast.Name) and node.value.id.startswith(
                    tuple(NAME_POOLS["list"]))
                if _is_dict(node.value):
                    found.add("dict read by loop key" if isinstance(node.slice, ast.Name)
                              else "dict read")
                else:
                    found.add("list index" if lists else "tuple index")
            elif isinstance(node, ast.Dict):
                found.add("dict literal")
            elif isinstance(node, ast.List) and isinstance(node.ctx, ast.Load):
                found.add("list literal")
            elif isinstance(node, ast.ListComp):
                found.add("list comprehension")
                if any(gen.ifs for gen in node.generators):
                    found.add("comprehension with if")
            elif isinstance(node, ast.Tuple) and isinstance(node.ctx, ast.Load):
                found.add("tuple")
            elif isinstance(node, ast.Lambda):
                found.add("lambda")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "math":
                found.add(f"math.{node.attr}")
            elif isinstance(node, ast.Call):
                if node.keywords:
                    found.add("keyword argument")
                if isinstance(node.func, ast.Call):
                    found.add("call of returned closure")
                if isinstance(node.func, ast.Attribute) and node.func.attr == "append":
                    found.add("append")
                if _calls_named(node, "sum"):
                    found.add("sum of list")
                if _calls_named(node, "len") and _is_dict(node.args[0]):
                    found.add("len of dict")
                if isinstance(node.func, ast.Name):
                    callee = node.func.id
                    if callee in ("abs", "min", "max", "float"):
                        found.add(f"{callee}()")
                    if callee == fn.name and not nested:
                        found.add("recursion")
                    elif callee in module_fns and not nested:
                        if order.index(callee) > order.index(fn.name):
                            found.add("call to function defined later")
                        found.add("call to module function")
                        if any(_is_dict(a) or isinstance(a, ast.Dict) for a in node.args):
                            found.add("dict passed to function")
                        if any(isinstance(a, ast.Lambda) or (isinstance(a, ast.Name)
                                                             and a.id in module_fns)
                               for a in node.args):
                            found.add("function passed as argument")
            if isinstance(node, (ast.For, ast.While)):
                for inner in _in_function(node.body):
                    if isinstance(inner, (ast.For, ast.While)):
                        found.add("nested loop")
                        for sub in _in_function(inner.body):
                            kind = {ast.Break: "break", ast.Continue: "continue",
                                    ast.Return: "return"}.get(type(sub))
                            if kind:
                                found.add(f"{kind} in nested loop")
            if isinstance(node, ast.If) and node.orelse \
                    and isinstance(node.orelse[-1], (ast.Break, ast.Continue)):
                found.add("loop exit in else")
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Lambda):
                found.add("closure returned")
        for node in ast.walk(fn):
            if isinstance(node, ast.FunctionDef) and node is not fn:
                visit_fn(node, True)
                if any(isinstance(b, ast.Return) and isinstance(b.value, ast.Name)
                       and b.value.id == node.name for b in fn.body):
                    found.add("closure returned")

    for fn in module_fns.values():
        visit_fn(fn, False)
    # mutual recursion: a -> b -> a among module functions
    calls = {name: {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Name) and n.func.id in module_fns}
             for name, fn in module_fns.items()}
    if any(b != a and a in calls[b] for a in calls for b in calls[a]):
        found.add("mutual recursion")
    return found


FEATURES = frozenset([
    "+", "-", "*", "/", "//", "%", "**", "unary -", "not", "comparison", "chained comparison",
    "and", "or", "ternary", "if", "elif", "else", "while", "for range", "range negative step",
    "for tuple", "for zip", "for enumerate", "break", "continue", "return in loop",
    "while True", "nested loop", "break in nested loop", "continue in nested loop",
    "return in nested loop", "loop exit in else",
    "augmented assignment", "tuple unpacking", "tuple index", "tuple", "lambda", "nested def",
    "closure returned", "call of returned closure", "function passed as argument", "recursion",
    "mutual recursion", "call to module function", "call to function defined later",
    "default argument", "keyword argument", "math.sin", "math.cos", "math.exp", "math.sqrt",
    "abs()", "division guarded by ternary", "division guarded by short-circuit",
    "nested for target", "local shadows module constant", "lambdas sharing a line",
    "unused computation that can raise",
    "list literal", "list comprehension", "comprehension with if", "append", "list index",
    "sum of list", "list element update", "list element augmented update",
    "dict literal", "dict read", "dict read by loop key", "dict update",
    "dict augmented update", "len of dict", "for over dict", "for over dict.items()",
    "for over dict.values()", "dict passed to function",
])
