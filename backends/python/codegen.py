"""Graphs → Python source.

Every graph is a function, and the simplest correct translation makes each one a `def` and
each call a call.  The generated code is faster and reads like hand-written Python because
the common shapes are recognised and written as Python's own control flow:

* a graph used once, as a branch of `switch(c, then, else)()`     →  `if c: ... else: ...`
* a graph called once                                            →  its body, inline
* a graph that calls itself in tail position (a loop)            →  `while True:`; the self
  call rebinds the parameters and `continue`s, so loops run in constant stack.  Its exits
  `break`; a loop that is the tail of an enclosing loop's body leaves that loop next.  A
  loop called from several places (the optimizer peeled its first iteration: inference
  specialised it for a variable unbound before the loop) is a `def` whose body is the
  `while True:`, its exits `return`.  A loop that starts with its test, `if c:` a body
  that goes round, else the exit, is `while c:` the body, then the exit
  (`_test_in_header`)
* a graph tail-called by several branches of one `if` (a join)   →  code after the `if`
* any other nested graph (a closure used as a value)             →  a nested `def`, its free
  variables captured at definition through keyword-only defaults, exactly like the graph
  semantics (a closure made in a loop keeps that iteration's values)

Each generated line remembers the user's source location; `compile_module` gives those
locations to the compiled code, so tracebacks point into the user's file.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib
import keyword
import linecache
import math
import re
import types
from dataclasses import dataclass

import numpy as np

from backends.python.impls import GUARDS, SYNTAX, VARIADIC_SYNTAX, callable_of, pow_guard
from frontend.parser import child_nodes
from myir.errors import Location
from myir.ir.analysis import OUTPUT, SwitchCall, computed_before, free_variables, graph_uses, \
    is_nested_in, primitive_name, reachable_graphs, scope, switch_call, toposort, users
from myir.ir.graph import Apply, Constant, Graph, Node, Parameter, is_graph_constant
from myir.ir.primitives import FRESH, Primitive
from myir.ir.values import EMPTY_STACK, STACK_CELL
from passes.abstract import AArray, AScalar, AStack, holds_stack
from passes.opt import RULE_FILES
from passes.raising import may_raise


def _real_scalar(node: Node) -> bool:
    """A Python or numpy int, float or bool (not complex, not an array)."""
    if isinstance(node, Constant):
        return type(node.value) in (int, float, bool)
    t = node.abstract
    return isinstance(t, AScalar) and issubclass(t.pytype, (int, float, np.integer,
                                                            np.floating, np.bool_))


@dataclass(frozen=True)
class Tail:
    """What to do with a graph's result: `return` it, or assign it to `var` (and `break` out
    of the loop being emitted when `exits_loop`)."""

    var: str | None = None
    exits_loop: bool = False


RETURN = Tail()


def _is_tail(app: Apply) -> bool:
    return app.graph is not None and app.graph.output is app


def _defaults_first(graphs: list[Graph]) -> list[Graph]:
    """The functions in an order where each follows the functions its defaults name
    (`def f(x, g=lambda y: 2 * y)`): Python evaluates a default when the `def` runs."""
    order, placed = [], set()
    for g in graphs:
        stack = [(g, False)]
        while stack:
            h, ready = stack.pop()
            if h in placed:
                continue
            if ready:
                placed.add(h)
                order.append(h)
                continue
            stack.append((h, True))
            stack.extend((d.value, False) for d in reversed(h.defaults.values())
                         if is_graph_constant(d) and d.value in graphs and d.value not in placed)
    return order


class Layout:
    """How each graph of a program is emitted (see the module docstring)."""

    def __init__(self, root: Graph):
        self.graphs = reachable_graphs(root)
        uses = graph_uses(root)
        node_users = users(root)
        self.kind: dict[Graph, str] = {}
        self.switch_apps: set[int] = set()        # switch applies absorbed into an `if`
        self.join_of: dict[Graph, Graph] = {}     # graph P -> the join emitted after P's if
        self.if_of: dict[Graph, Apply] = {}       # a branch -> the call of its `if`
        for g in self.graphs:
            for node in toposort(g):
                sc = switch_call(node) if node.graph is g else None
                if sc is None or len(node_users.get(node.fn, ())) != 1:
                    continue
                branches = (sc.then, sc.else_)
                if all(len(uses[b]) == 1 and len(b.parameters) == len(sc.args)
                       and b.parent is not None for b in branches) \
                        and sc.then is not sc.else_:
                    self.switch_apps.add(id(sc.switch))
                    for b in branches:
                        self.kind[b] = "branch"
                        self.if_of[b] = node
                    if primitive_name(sc.cond) == "truth" \
                            and len(node_users.get(sc.cond, ())) == 1:
                        self.switch_apps.add(id(sc.cond))  # `if x:` tests truth itself
        for g in self.graphs:
            if g not in self.kind:
                self.kind[g] = "top" if g.parent is None else self._classify(g, uses[g])
        self._keep_tail_calls_in_place(uses)
        # functions whose body is a `while True:` (see the module docstring)
        self.looping = {g for g, kind in self.kind.items()
                        if kind in ("closure", "top") and self._loops_in_place(g, uses)}

    def _loops_in_place(self, g: Graph, uses) -> bool:
        """Whether g calls itself, from its own code, in tail position only, written inside
        its code (`_written_inside`): then each such call can rebind its parameters and
        `continue` a loop that is g's body."""
        calls = [a for a, i in uses[g] if i == 0 and is_nested_in(a.graph, g)]
        return bool(calls) and all(_is_tail(a) and self._written_inside(a.graph, g, uses)
                                   for a in calls)

    def _keep_tail_calls_in_place(self, uses):
        """A loop's self-call becomes `continue`, and a join's call falls through to the code
        after the `if`: right only where the call is written inside that loop's `while` (or
        that `if`) with no other loop or function between.  `continue` and `break` reach the
        innermost loop only, so a call from inside a nested loop or a nested `def` would
        continue the wrong loop, or write the graph again inside itself: such a graph is
        written as a function instead.  So is a join that some branch of its `if` skips by
        producing the result where that result is assigned (`z = ...`) rather than returned:
        the code after the `if` would run for that branch too."""
        changed = True
        while changed:
            changed = False
            for g, kind in self.kind.items():
                if kind == "loop":
                    calls = [(a.graph, g) for a, _ in uses[g] if is_nested_in(a.graph, g)]
                elif kind == "join":
                    calls = [(a.graph, g.parent) for a, _ in uses[g]]
                    if self._result_assigned(g.parent, uses) \
                            and not self._ends_in(g.parent, g):
                        calls = [(None, None)]
                else:
                    continue
                if not all(h is not None and self._written_inside(h, target, uses)
                           for h, target in calls):
                    self.kind[g] = "closure"
                    if kind == "join":
                        del self.join_of[g.parent]
                    changed = True

    def _result_assigned(self, g: Graph, uses) -> bool:
        """Whether the code of g ends by assigning its result to a variable and going on
        (`z = ...` for a call that is not in tail position), rather than with `return` or
        with the `break` that leaves a loop."""
        while True:
            kind = self.kind[g]
            if kind == "join":
                g = g.parent
                continue
            if kind == "branch":
                call = self.if_of[g]
            elif kind == "block":
                call = uses[g][0][0]
            else:
                return False        # a function returns; a loop's exits break
            if not _is_tail(call):
                return True
            g = call.graph

    def _ends_in(self, g: Graph, join: Graph) -> bool:
        """Whether every way through g's code ends calling `join` or raising."""
        out = g.output
        sc = switch_call(out) if isinstance(out, Apply) and out.graph is g else None
        if sc is not None and self.kind.get(sc.then) == "branch" == self.kind.get(sc.else_):
            inner = self.join_of.get(g)
            if inner is not None:
                return self._ends_in(inner, join)
            return self._ends_in(sc.then, join) and self._ends_in(sc.else_, join)
        return isinstance(out, Apply) and (primitive_name(out) == "raise_" or (
            is_graph_constant(out.fn) and out.fn.value is join))

    def _written_inside(self, h: Graph, target: Graph, uses) -> bool:
        """Whether graph h's code is written inside target's code, through `if`s and inlined
        blocks in tail position only: a block or an `if` whose result is assigned
        (`z = ...`, then more code) would have that code skipped by a `continue`, or run
        by the code after an `if` that its join's call falls through to."""
        seen = set()
        while h is not target:
            kind = self.kind[h]
            if kind not in ("branch", "block", "join") or h in seen:
                return False
            seen.add(h)
            if kind == "join":
                h = h.parent
                continue
            call = self.if_of[h] if kind == "branch" else uses[h][0][0]
            if not _is_tail(call):
                return False
            h = call.graph
        return True

    def _classify(self, g: Graph, uses) -> str:
        if not all(i == 0 for _, i in uses):
            return "closure"   # used as a value
        if len(uses) == 1 and not is_nested_in(uses[0][0].graph, g):
            return "block"
        inner = [a for a, _ in uses if is_nested_in(a.graph, g)]
        outer = [a for a, _ in uses if not is_nested_in(a.graph, g)]
        if inner and len(outer) == 1 and all(_is_tail(a) for a in inner):
            return "loop"
        if all(_is_tail(a) for a, _ in uses):
            if not inner and len(outer) >= 2 and switch_call(g.parent.output) is not None \
                    and g.parent not in self.join_of \
                    and all(is_nested_in(a.graph, g.parent) for a in outer):
                self.join_of[g.parent] = g
                return "join"
        return "closure"


_IDENT = re.compile(r"[^0-9a-zA-Z_]")


class Names:
    """Readable, unique Python identifiers for nodes and graphs across one module."""

    def __init__(self, reserved=()):
        self.taken = set(reserved)
        self.of: dict[int, str] = {}
        self.suffix: dict[str, int] = {}   # base -> the next suffix to try for it

    def fresh(self, base: str) -> str:
        """`base`, or `base_k` with k counting up per base: each name tried is either
        taken once (by a user's name like `x_1`, or another base's) or returned, so a module
        of n names costs O(n), not a search from `base_1` for each."""
        base = _IDENT.sub("_", base or "t") or "t"
        if base[0].isdigit() or keyword.iskeyword(base):
            base = "_" + base
        name, k = base, self.suffix.get(base, 0)
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.suffix[base] = k
        self.taken.add(name)
        return name

    def __call__(self, thing, base: str) -> str:
        key = id(thing)
        if key not in self.of:
            self.of[key] = self.fresh(base)
        return self.of[key]


ATOM = 20
COMPARE = 6
PRECEDENCE = {  # Python's operator precedence, loosest first
    "not_": 5, "stack_empty": 5,
    "lt": COMPARE, "le": COMPARE, "gt": COMPARE, "ge": COMPARE, "eq": COMPARE, "ne": COMPARE,
    "is_": COMPARE, "is_not": COMPARE, "contains": COMPARE,
    "bitor": 7, "bitxor": 8, "bitand": 9, "lshift": 10, "rshift": 10,
    "add": 11, "sub": 11,
    "mul": 12, "truediv": 12, "floordiv": 12, "mod": 12, "matmul": 12,
    "neg": 13, "pos": 13, "invert": 13,
    "pow": 14,
    "list_append": 11,     # xs + [x]
    "seq_repeat": 12,     # xs * n
}


@dataclass
class Expr:
    """Python expression text, its precedence, and its text inside `[...]` (slices)."""

    text: str
    prec: int
    index_text: str | None = None

    @property
    def index(self) -> str:
        return self.index_text if self.index_text is not None else self.text

    def wrap(self, min_prec: int) -> str:
        return self.text if self.prec >= min_prec else f"({self.text})"


class Pending:
    """Expressions of single-use nodes not yet written, in evaluation order.  A user may
    absorb them only if they are exactly the most recent ones, in its operands' order:
    then inlining never reorders evaluation (nor which exception is raised first)."""

    def __init__(self):
        self.items: list[tuple[Node, Expr]] = []
        self._count: dict[int, int] = {}    # id(node) -> its items (`has` in constant time)

    def add(self, node: Node, expr: Expr) -> None:
        self.items.append((node, expr))
        self._count[id(node)] = self._count.get(id(node), 0) + 1

    def clear(self) -> None:
        self.items.clear()
        self._count.clear()

    def has(self, node: Node) -> bool:
        return id(node) in self._count

    def takes(self, user: Apply, operands: list[Node]) -> bool:
        mine = [n for n in operands if self.has(n)]  # `user` is documentation only
        if not mine:
            return True
        if len({id(n) for n in mine}) != len(mine):
            return False
        tail = [n for n, _ in self.items[-len(mine):]]
        return len(tail) == len(mine) and all(a is b for a, b in zip(tail, mine))

    def take(self, node: Node) -> Expr:
        for i, (n, e) in enumerate(self.items):
            if n is node:
                del self.items[i]
                if self._count[id(node)] == 1:
                    del self._count[id(node)]
                else:
                    self._count[id(node)] -= 1
                return e
        raise KeyError(node)


class Emitter:
    """Writes the Python module for a program rooted at one graph."""

    def __init__(self, root: Graph):
        self.root = root
        self.layout = Layout(root)
        self.users = users(root)
        self.names = Names(["np", "math", *dir(builtins)])
        self.namespace: dict = {"np": np, "math": math}
        # how to rebuild the namespace's values that are not data (`Generated.recipes`)
        self.recipes: dict = {"np": ("module", "numpy"), "math": ("module", "math")}
        self.lines: list[tuple[str, Location | None]] = []
        self.globals_of: dict[int, str] = {}
        self.loop_stack: list[Graph] = []
        self.defined: set[int] = set()   # nodes and closures whose variable holds a value already
        self.referenced: dict[Graph, list[Graph]] = {}
        self.home: Location | None = None   # see `call_site`
        self.in_place = InPlace(root, self.users, self.layout)
        self.list_stacks = self.in_place.stacks_in_place(root)
        self.drained: set[int] = set()      # pops that are a `for`'s target (`drain_loop`)
        self.raising: dict[int, bool] = {}  # `_note_raising`, by node
        self.crossing: dict[int, bool] = {}     # the same
        self.holds_crossing: dict[int, bool] = {}

    # -- output

    def line(self, indent: int, text: str, location: Location | None):
        if self.home is not None and (location is None or location.filename in RULE_FILES):
            location = self.home
        self.lines.append(("    " * indent + text, location))

    def module(self) -> str:
        uses = graph_uses(self.root)
        for g in _defaults_first([g for g in self.layout.graphs if self.layout.kind[g] == "top"]):
            if self.lines:
                self.line(0, "", None)
            self.home = self.call_site(g, uses, set())
            self.function(g, 0)
            self.home = None
        return "\n".join(text for text, _ in self.lines) + "\n"

    def call_site(self, g: Graph, uses, seen: set) -> Location | None:
        """For a function myir wrote (a primitive's J, a gradient rule) and did not inline
        (the optimizer is off, or it recurses), the user's line that calls it: its code
        reports that line, as inlined code does (`myir.ir.edit.inline`).  None for the user's
        own functions."""
        if g.location is not None and g.location.filename not in RULE_FILES:
            return None
        seen.add(g)
        for apply, _ in uses.get(g, ()):
            at = apply.location
            if at is not None and at.filename not in RULE_FILES:
                return at
            top = apply.graph
            while top.parent is not None:
                top = top.parent
            if top not in seen:
                at = self.call_site(top, uses, seen)
                if at is not None:
                    return at
        return None

    # -- names and expressions

    def name(self, node: Node) -> str:
        same = self._same_object(node)
        if same is not None:
            return self.name(same)
        base = node.debug.name
        if base is None and isinstance(node, Apply) and isinstance(node.fn, Constant):
            fn = node.fn.value
            base = fn.name if isinstance(fn, (Primitive, Graph)) else None
        return self.names(node, base or "t")

    def _same_object(self, node: Node) -> Node | None:
        """Where stacks are lists: the node whose variable holds node's value, for a push
        (its stack, appended to), a pop's rest (its stack, popped) and top (the pop)."""
        if not self.list_stacks or not isinstance(node, Apply):
            return None
        prim = primitive_name(node)
        if prim == "stack_push" and not isinstance(node.args[0], Constant):
            return node.args[0]
        if prim == "getitem" and primitive_name(node.args[0]) == "stack_pop":
            pop = node.args[0]
            return pop if node.args[1].value == 0 else pop.args[0]
        return None

    def graph_name(self, g: Graph) -> str:
        return self.names(g, g.name)

    def global_ref(self, value, base: str, recipe: tuple | None = None) -> str:
        key = id(value)
        if key not in self.globals_of:
            name = self.names.fresh("_" + base)
            self.namespace[name] = value
            if recipe is not None:
                self.recipes[name] = recipe
            self.globals_of[key] = name
        return self.globals_of[key]

    def constant(self, value) -> str:
        if isinstance(value, Graph):
            return self.graph_name(value)
        if isinstance(value, bool) or value is None or value is Ellipsis:
            return repr(value)
        if isinstance(value, (int, float)) and type(value) in (int, float) and math.isfinite(value):
            text = repr(value)
            return f"({text})" if value < 0 or text.startswith("-") else text
        if isinstance(value, str):
            return repr(value)
        if isinstance(value, tuple) and all(isinstance(v, (int, bool, str, type(None))) for v in value):
            return repr(value)
        if value is EMPTY_STACK and self.list_stacks:    # a new list: stacks are updated
            return "[]"                                  # in place (`InPlace`)
        if isinstance(value, Primitive):
            return self.global_ref(callable_of(value.name), value.name,
                                   ("primitive", value.name))
        base = getattr(value, "__name__", type(value).__name__)
        return self.global_ref(value, str(base))

    def ref(self, node: Node) -> str:
        if isinstance(node, Constant):
            return self.constant(node.value)
        return self.name(node)

    def operand(self, node: Node, pending: "Pending | None") -> Expr:
        if pending is not None and pending.has(node):
            return pending.take(node)
        text = self.ref(node)
        if isinstance(node, Constant) and type(node.value) in (int, float) \
                and text.startswith("(-"):                  # a negative number: `xs[-1]`,
            return Expr(text[1:-1], PRECEDENCE["neg"])      # `f(-2.0)` (not a tuple `(-1, 2)`)
        return Expr(text, ATOM)

    def render(self, node: Apply, pending: "Pending | None" = None,
               statement: bool = False) -> Expr:
        """The Python expression computing `node`; operands waiting in `pending` are
        substituted (innermost last, so evaluation order is unchanged).  `statement`: the
        node is a whole statement, so `raise_` can be the `raise` statement; anywhere else
        (a gradient's `(raise_(e), bprop)`) it is a call of a function that raises."""
        fn = node.fn
        prim = primitive_name(node)
        if pending is not None and not pending.takes(node, self._operands(node)):
            pending = None
        if prim in ("depend", "not_a_view", "list_of_length"):  # what depend waits for is a
            # statement of its own, before it; not_a_view, list_of_length: checked, typed
            return self.operand(node.args[0], pending)
        if prim == "stack_pop" and _taken_apart(node, self.users):
            return self.operand(node.args[0], pending)  # the cell is (top, rest, mark)
        if prim == "grad_zeros" and _python_number(node.args[0]):
            # impls.grad_zeros' answer for a Python number, without its checks of the type
            return Expr("0.0" if node.args[0].abstract.pytype is float else "0", ATOM)
        if prim == "strong_zero" and _python_number(node.args[0]) \
                and _python_number(node.args[1]) and node.args[1].abstract.pytype is float:
            # impls.strong_zero's answer for Python numbers, as a conditional expression
            d, x = (self.operand(a, pending) for a in node.args)
            return Expr(f"({x.wrap(5)} if {d.wrap(5)} else 0.0)", ATOM)
        if prim in _CONTAINER_SYNTAX:
            return _CONTAINER_SYNTAX[prim](self, [self.operand(a, pending) for a in node.args])
        if prim is None or prim not in SYNTAX and prim not in VARIADIC_SYNTAX:
            callee = self.operand(fn, pending) if prim is None else Expr(self.ref(fn), ATOM)
            args = [self.operand(a, pending).text for a in node.args]
            return Expr(f"{callee.wrap(ATOM)}({', '.join(args)})", ATOM)
        args = [self.operand(a, pending) for a in node.args]
        if prim in VARIADIC_SYNTAX:
            open_, close = VARIADIC_SYNTAX[prim]
            texts = [a.text for a in args]
            if prim == "make_tuple":
                text = "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"
                index = ", ".join(a.index for a in args) + ("," if len(args) == 1 else "") \
                    if args else "()"
                return Expr(text, ATOM, index)
            return Expr(open_ + ", ".join(texts) + close, ATOM)
        if prim == "make_slice":
            parts = ["" if a.text == "None" else a.wrap(COMPARE + 1) for a in args]
            index = f"{parts[0]}:{parts[1]}" + (f":{parts[2]}" if parts[2] else "")
            return Expr(SYNTAX[prim].format(*(a.text for a in args)), ATOM, index)
        if prim == "getitem":
            return Expr(f"{args[0].wrap(ATOM)}[{args[1].index}]", ATOM)
        if prim == "raise_" and not statement:
            return Expr(f"{self.ref(fn)}({args[0].text})", ATOM)
        prec = PRECEDENCE.get(prim, ATOM)
        if len(args) == 2 and prec != ATOM:
            left_min, right_min = (prec + 1, prec) if prim == "pow" else (prec, prec + 1)
            if prec == COMPARE:
                left_min = right_min = COMPARE + 1
            texts = [args[0].wrap(left_min), args[1].wrap(right_min)]
        elif prec == ATOM:
            texts = [a.text for a in args]   # builtins like len(x): any expression inside
        else:
            texts = [a.wrap(prec) for a in args]
        return Expr(SYNTAX[prim].format(*texts), prec)

    def _operands(self, node: Apply) -> list[Node]:
        """Inputs in the order Python evaluates them in the rendered expression."""
        prim = node.fn.value if isinstance(node.fn, Constant) else None
        if primitive_name(node) == "depend":
            return [node.args[0]]
        return list(node.args) if isinstance(prim, Primitive) else list(node.inputs)

    # -- functions

    def function(self, g: Graph, indent: int, captured: list[Node] = ()):
        # Parameters keep the user's defaults, so the function can be called like the
        # original, also when it is passed around as a value.
        params, unpacked = [], []
        given = iter(g.parameters)
        for spec in g.entry_leaves or [None] * len(g.parameters):
            if spec is not None:    # a dict taken apart on entry
                name, keys = spec
                leaves = [next(given) for _ in keys]
                params.append(name)
                unpacked.append(f"{', '.join(map(self.name, leaves))} = "
                                f"{', '.join(f'{name}[{k!r}]' for k in keys)}")
                self.defined.update(id(p) for p in leaves)
                continue
            p = next(given)
            default = g.defaults.get(p.debug.name)
            params.append(self.name(p) + (f"={self.ref(default)}" if default is not None else ""))
            self.defined.add(id(p))
        if captured:
            params.append("*")
            # two captured nodes may go by one name (`branch`): captured once
            names = dict.fromkeys(self.graph_name(fv) if isinstance(fv, Graph)
                                  else self.name(fv) for fv in captured)
            params += [f"{name}={name}" for name in names]
        self.line(indent, f"def {self.graph_name(g)}({', '.join(params)}):", g.location)
        for line in unpacked:
            self.line(indent + 1, line, g.location)
        outer_loops, self.loop_stack = self.loop_stack, []
        start = len(self.lines)
        if g in self.layout.looping:
            self.line(indent + 1, "while True:", g.location)
            self.loop_stack.append(g)
            self.block(g, RETURN, indent + 2)
            self._test_in_header(start, keep_break=False)
        else:
            self.block(g, RETURN, indent + 1)
        if len(self.lines) == start:
            self.line(indent + 1, "pass", g.location)
        self.loop_stack = outer_loops

    def closure_def(self, g: Graph, indent: int):
        """`def g` capturing its free variables, and the closures defined outside it that it
        calls or passes on, by value: a name read through Python's enclosing scope is
        read when g runs, and a `def` in a loop's body binds it again on each iteration, so
        a closure made in one iteration and called after a later one would call the later
        iteration's closure.  (A closure not defined yet, one calling g back say, stays a name;
        closures defined at one point are defined referees first: `_referees_first`.)"""
        defined = [k for k in self._closures_referenced(g) if id(k) in self.defined]
        self.function(g, indent, [*free_variables(g), *defined])
        self.defined.add(id(g))

    def _closures_referenced(self, g: Graph) -> list[Graph]:
        """The graphs emitted as `def`s outside g that g's scope refers to."""
        if g not in self.referenced:
            found: dict[Graph, None] = {}
            for s in scope(g):
                for node in toposort(s):
                    for k in [i.value for i in getattr(node, "inputs", [node])
                              if is_graph_constant(i)]:
                        if self.layout.kind.get(k) == "closure" and not is_nested_in(k, g):
                            found[k] = None
            self.referenced[g] = list(found)
        return self.referenced[g]

    # -- blocks

    def block(self, g: Graph, tail: Tail, indent: int) -> bool:
        """Emit graph `g`'s nodes and its output according to `tail`; return whether the code
        falls through (False when it ends in return/raise/continue/break)."""
        order = self._pushes_early([n for n in toposort(g) if isinstance(n, Apply)
                                    and n.graph is g and n is not g.output])
        self._note_raising(order)
        closures = self._closures_of(g)
        self._emit_ready_closures(closures, indent)
        releases = self._releases(order)
        pending = Pending()
        dead: list[Apply] = []
        for i, node in enumerate(order):
            if id(node) in self.layout.switch_apps:
                continue
            if any(is_graph_constant(a) and a.value is h for a in node.inputs
                   for h, _ in closures):
                # it reads a closure whose `def` waits for a value still pending (a lambda's
                # default `i=i`, appended to a list): the value first, then the `def`
                self.flush(pending, indent)
                self._emit_ready_closures(closures, indent)
            self.statement(node, indent, pending)
            self._emit_ready_closures(closures, indent)
            dead += releases.get(i, ())
            if dead and not pending.items:  # every use is written: the names are free
                names = [self.name(n) for n in dead if id(n) in self.defined]
                if names:
                    self.line(indent, f"del {', '.join(names)}", None)
                dead.clear()
        return self.tail(g, tail, indent, pending)

    def _pushes_early(self, order: list[Apply]) -> list[Apply]:
        """`order` with each push onto a list stack moved up to just after its operands: a
        push cannot raise, so it may go before anything, and the values computed after it
        are then the last ones, which the loop's next iteration takes into the assignment
        of its variables (`r, i = r * x, i + 1`) rather than naming each one first.  A push
        of a closure stays: its `def` is written when what it captures is computed."""
        if not self.list_stacks:
            return order
        moved: list[Apply] = []
        for node in order:
            if primitive_name(node) == "stack_push" \
                    and not any(is_graph_constant(x) for x in node.inputs[1:]):
                at = max((i + 1 for i, n in enumerate(moved)
                          if any(n is x for x in node.inputs)), default=0)
                moved.insert(at, node)
            else:
                moved.append(node)
        return moved

    def _releases(self, order: list[Apply]) -> dict[int, list[Apply]]:
        """Array temporaries to `del` after the statement at each position of `order`: those
        whose every use is a later statement of the same block.  Dropping the name at its last
        use gives the memory back to numpy while the block goes on, as in an expression,
        instead of holding every intermediate of a long straight-line gradient until the
        function returns: blackscholes' gradient on 2^20 elements runs twice as fast so, its
        arrays coming from freed memory rather than new pages.  Scalars are left alone."""
        position = {node: i for i, node in enumerate(order)}
        releases: dict[int, list[Apply]] = {}
        for node in order:
            if not (isinstance(node.abstract, AArray) and node.abstract.ndim > 0):
                continue
            uses = self.users.get(node, ())
            at = [position.get(user) for user, _ in uses]
            if at and None not in at and not any(id(order[i]) in self.layout.switch_apps
                                                 for i in at):
                releases.setdefault(max(at), []).append(node)
        return releases

    def flush(self, pending: Pending, indent: int):
        for node, expr in pending.items:
            self.line(indent, f"{self.name(node)} = {expr.text}", node.location)
            self.defined.add(id(node))
        pending.clear()

    def _closures_of(self, g: Graph) -> list:
        """Nested graphs of g emitted as `def`s, with the nodes of g each one waits for."""
        waiting = []
        for h in self.layout.graphs:
            if h.parent is g and self.layout.kind[h] == "closure":
                deps = [fv for fv in [*free_variables(h), *h.defaults.values()]
                        if fv.graph is g and not isinstance(fv, Parameter)]
                waiting.append([h, deps])
        return waiting

    def _emit_ready_closures(self, waiting: list, indent: int):
        ready = [entry for entry in waiting if all(id(d) in self.defined for d in entry[1])]
        for entry in ready:
            waiting.remove(entry)
        for h in self._referees_first([h for h, _ in ready]):
            self.closure_def(h, indent)

    def _referees_first(self, graphs: list[Graph]) -> list[Graph]:
        """`graphs` with each one after those of them it refers to (but for cycles), so that
        it captures them (`closure_def`)."""
        order: list[Graph] = []
        among = set(graphs)
        visited: set[Graph] = set()
        for start in graphs:    # depth first, with a stack: a recursive closure is a cycle
            if start in visited:
                continue
            visited.add(start)
            stack = [(start, iter(self._closures_referenced(start)))]
            while stack:
                h, referred = stack[-1]
                for k in referred:
                    if k in among and k not in visited:
                        visited.add(k)
                        stack.append((k, iter(self._closures_referenced(k))))
                        break
                else:
                    stack.pop()
                    order.append(h)
        return order

    def _inlinable(self, node: Apply) -> bool:
        """A plain node used once, by a node of its own graph that renders it in place."""
        uses = self.users.get(node, ())
        if len(uses) != 1 or self._waited_for(node):
            return False
        user, index = uses[0]
        if index == OUTPUT or user.graph is not node.graph:
            return False
        if _other_line(node, user) and not self.crossing.get(id(node), False):
            return False  # keep one statement per source line: tracebacks name the right one
        if id(user) in self.layout.switch_apps:       # the test of an `if`
            return True
        return switch_call(user) is None

    def _note_raising(self, order: list[Apply]):
        """`raising` and `crossing` for the nodes of a block, in evaluation order.
        `raising`: whether node's expression may raise, given its operands' types
        (passes/raising.py): node itself or an operand on its line (written inside it).
        `crossing`: whether node may be written on its user's line although it comes from
        another (`_inlinable`): a traceback never names an expression that cannot raise
        (`r, i = r * x, i + 1` for a loop's next values).  Not one that holds another such
        expression: a chain of them would nest as deep as the program is long."""
        for node in order:
            name = primitive_name(node)
            self.raising[id(node)] = name is None \
                or may_raise(name, [a.abstract for a in node.args], node.abstract) \
                or any(self.raising.get(id(a), False) and not _other_line(a, node)
                       for a in node.args)
            # whether node's expression holds one written on its user's line
            holds = self.holds_crossing[id(node)] = any(
                self._same_object(a) is None and (self.crossing.get(id(a), False) or (
                    self.holds_crossing.get(id(a), False) and not _other_line(a, node)))
                for a in node.args)     # (a pop's top is a variable, not an expression)
            uses = self.users.get(node, ())
            self.crossing[id(node)] = not self.raising[id(node)] and not holds \
                and len(uses) == 1 and _other_line(node, uses[0][0])

    def _waited_for(self, node: Apply) -> bool:
        """Whether node's value is unused: only `depend` waits for it, for the exception it
        may raise (see passes/raising.py)."""
        uses = self.users.get(node, ())
        return bool(uses) and all(primitive_name(u) == "depend" and i == 2 for u, i in uses)

    def guard(self, node: Apply) -> str | None:
        """A condition under which node, run only for the exception it may raise, cannot
        raise (`impls.GUARDS`), for operands that are real numbers."""
        prim = primitive_name(node)
        if prim == "pow" and isinstance(node.args[1], Constant):
            template = pow_guard(node.args[1].value)
        else:
            template = GUARDS.get(prim)
        if template is None or not all(_real_scalar(a) for a in node.args):
            return None
        return template.format(*(self.ref(a) for a in node.args))

    def statement(self, node: Apply, indent: int, pending: Pending):
        var = self.name(node)
        sc = switch_call(node)
        if self._waited_for(node) and sc is None and self._callee_kind(node) is None:
            self.flush(pending, indent)
            guard, expr = self.guard(node), self.render(node).text
            self.line(indent, f"if not ({guard}): {expr}" if guard else expr, node.location)
            return
        if primitive_name(node) in IN_PLACE_UPDATES and self.in_place.writable(node):
            x, *operands = node.args
            if primitive_name(node) == "setitem":  # Python evaluates the value, then the index
                index, value = operands
                if not pending.takes(node, [value, index]):
                    self.flush(pending, indent)
                value_text, index_text = self.operand(value, pending).text, \
                    self.operand(index, pending).index
                text = f"{self.ref(x)}[{index_text}] = {value_text}"
            else:
                if not pending.takes(node, operands):
                    self.flush(pending, indent)
                text = IN_PLACE_UPDATES[primitive_name(node)].format(
                    self.ref(x), self.operand(operands[0], pending).text)
            self.flush(pending, indent)
            self.line(indent, text, node.location)
            self.line(indent, f"{var} = {self.ref(x)}", node.location)
        elif primitive_name(node) == "getitem" and self._same_object(node) is not None:
            pass    # a pop's top or rest: the pop's variable or its stack's
        elif id(node) in self.drained:
            pass    # the target of a backward loop's `for` (`drain_loop`)
        elif primitive_name(node) in ("stack_push", "stack_pop") and self.list_stacks:
            stack, item = node.args[0], node.args[1:]
            if not pending.takes(node, [*item, stack]):
                self.flush(pending, indent)
            item_text = [self.operand(x, pending).text for x in item]
            self.flush(pending, indent)
            if item_text and isinstance(stack, Constant):      # onto a new empty stack
                self.line(indent, f"{var} = [{item_text[0]}]", node.location)
            elif item_text:     # the push is the stack's variable (`_same_object`)
                self.line(indent, f"{self.ref(stack)}.append({item_text[0]})", node.location)
            else:
                self.line(indent, f"{var} = {self.ref(stack)}.pop()", node.location)
        elif sc is not None and self._is_branch_pair(sc):
            self.if_statement(sc, Tail(var), node.location, indent, pending)
        elif self._callee_kind(node) in ("loop", "block"):
            self.inline_call(node, Tail(var), indent, pending)
        else:
            expr = self.render(node, pending)
            if self._inlinable(node):
                pending.add(node, expr)
                return
            self.flush(pending, indent)
            self.line(indent, f"{var} = {expr.text}", node.location)
        self.defined.add(id(node))

    def _callee_kind(self, node: Apply) -> str | None:
        if is_graph_constant(node.fn):
            return self.layout.kind.get(node.fn.value)
        return None

    def _is_branch_pair(self, sc) -> bool:
        return self.layout.kind.get(sc.then) == "branch" == self.layout.kind.get(sc.else_)

    def bind_parameters(self, g: Graph, args: list[Node], location, indent: int,
                        pending: Pending, parameters: list[Parameter] | None = None):
        """`parameters = args` (g's, or those given), as one assignment."""
        parameters = g.parameters if parameters is None else parameters
        kept = [(p, a) for p, a in zip(parameters, args) if a is not p]
        if not pending.takes(None, [a for _, a in kept]):
            self.flush(pending, indent)
        pairs = [(self.name(p), self.operand(a, pending).text) for p, a in kept]
        pairs = [(p, a) for p, a in pairs if p != a]   # a name passed on as itself
        self.flush(pending, indent)
        for p in parameters:
            self.defined.add(id(p))
        if pairs:
            left = ", ".join(p for p, _ in pairs)
            right = ", ".join(a for _, a in pairs)
            self.line(indent, f"{left} = {right}", location)

    def inline_call(self, node: Apply, tail: Tail, indent: int, pending: Pending) -> bool:
        g = node.fn.value
        self.bind_parameters(g, node.args, node.location, indent, pending)
        if self.layout.kind[g] == "block":
            return self.block(g, tail, indent)
        drain = self._drain(g)
        if drain is not None:
            return self.drain_loop(g, drain, tail, indent)
        # a loop: its exits produce the call's result
        inner = tail if tail.var is None else Tail(tail.var, exits_loop=True)
        head = len(self.lines)
        self.line(indent, "while True:", g.location)
        self.loop_stack.append(g)
        self.block(g, inner, indent + 1)
        self.loop_stack.pop()
        if tail.exits_loop:
            # The loop is the tail of an enclosing loop's body: its result is that loop's
            # result too, and its `break` leaves only itself, so leave the enclosing one next
            # (the exit's own `break` does, where the test moves into the `while`).
            if not self._test_in_header(head, keep_break=True):
                self.line(indent, "break", g.location)
            return False
        self._test_in_header(head, keep_break=False)
        return tail.var is not None

    def _test_in_header(self, head: int, keep_break: bool) -> bool:
        """Write the loop emitted from line `head` on, `while True:` then `if c:` the body
        ending in `continue`, then the exit, as `while c:` the body, then the exit after
        the loop, where that means the same: no statement before the test (`while`
        evaluates c anew each time round, as the `if` did), no `break` of this loop in
        the body (it would now run the exit), and no `continue` of it in the exit, whose
        one `break`, its last line, goes (or stays, with `keep_break`, to leave the
        enclosing loop: the exit is now that loop's code).  Returns whether it did."""
        lines = self.lines
        pad = lines[head][0][:len(lines[head][0]) - len("while True:")]
        test = lines[head + 1][0] if head + 1 < len(lines) else ""
        if not (test.startswith(pad + "    if ") and test.endswith(":")):
            return False
        inner = pad + "        "
        end = head + 2
        while end < len(lines) and lines[end][0].startswith(inner):
            end += 1
        body, exit_ = lines[head + 2:end], lines[end:]
        if not body or body[-1][0] != inner + "continue" \
                or "break" in _own_jumps(body).values() \
                or "continue" in _own_jumps(exit_).values():
            return False
        breaks = [k for k, s in _own_jumps(exit_).items() if s == "break"]
        if breaks and breaks != [len(exit_) - 1]:
            return False
        if breaks and not keep_break:
            exit_ = exit_[:-1]
        if not breaks and keep_break:
            return False    # (an exit that returns or raises: the caller's `break` stays)
        body = [(text[4:], loc) for text, loc in body[:-1]] \
            or [(pad + "    pass", lines[head][1])]
        lines[head:] = [(pad + "while " + test[len(pad) + 7:], lines[head][1]), *body,
                        *((text[4:], loc) for text, loc in exit_)]
        return True

    def _drain(self, g: Graph) -> tuple[SwitchCall, Apply] | None:
        """Where g, a loop, is a gradient's backward loop over a list stack
        (passes/ad.py's `backward_loop`: `if not stack: done(...)`, else pop one record,
        apply its adjoint and go round again), its `if` and the pop.  Such a loop is
        written `for top in reversed(stack): ...` then the exit's code, which reads each
        record where `stack.pop()` and the emptiness test cost twice as much per
        iteration.  The list is left whole: nothing reads it after the loop (the exit's
        stack is unused, and `InPlace` proved nothing else sees it)."""
        out = g.output
        sc = switch_call(out) if self.list_stacks and isinstance(out, Apply) else None
        if sc is None or not self._is_branch_pair(sc) or primitive_name(sc.cond) != "stack_empty" \
                or not isinstance(sc.cond.args[0], Parameter) or sc.cond.args[0] not in sc.args \
                or not all(isinstance(a, Parameter) and a.graph is g for a in sc.args) \
                or len(set(sc.args)) != len(sc.args):
            return None     # (the `if` may take fewer of g's parameters: those it reads)
        k = sc.args.index(sc.cond.args[0])     # the stack's position in the `if`'s call,
        own = [n for n in toposort(g) if isinstance(n, Apply) and n.graph is g and n is not out]
        if any(n is not sc.cond and id(n) not in self.layout.switch_apps for n in own) \
                or self.users.get(sc.cond.args[0], ()) != [(sc.cond, 1), (out, k + 1)] \
                or self.users.get(sc.then.parameters[k]):
            return None
        step = sc.else_
        pops = self.users.get(step.parameters[k], ())
        if len(pops) != 1 or primitive_name(pops[0][0]) != "stack_pop":
            return None
        pop = pops[0][0]
        if not _taken_apart(pop, self.users):   # each use is pop[0] or pop[1]
            return None
        call = step.output     # and in g's, which the step's call of g passes
        rests = [u for u, _ in self.users.get(pop, ()) if u.args[1].value == 1]
        if not (isinstance(call, Apply) and is_graph_constant(call.fn) and call.fn.value is g
                and len(rests) == 1 and self.users.get(rests[0])
                == [(call, g.parameters.index(sc.cond.args[0]) + 1)]):
            return None
        return sc, pop

    def drain_loop(self, g: Graph, drain: tuple[SwitchCall, Apply], tail: Tail,
                   indent: int) -> bool:
        """`for top in reversed(stack):` the step, then the exit (`_drain`)."""
        sc, pop = drain
        stack = self.name(sc.cond.args[0])
        self.drained.add(id(pop))
        self.line(indent, f"for {self.name(pop)} in reversed({stack}):", g.location)
        start = len(self.lines)
        self.loop_stack.append(g)
        self.branch(sc.else_, sc.args, tail, g.location, indent + 1)
        self.loop_stack.pop()
        if self.lines[-1][0] == "    " * (indent + 1) + "continue":
            self.lines.pop()    # the step's last statement: `for` goes round anyway
        if len(self.lines) == start:
            self.line(indent + 1, "pass", g.location)   # a step that changes nothing
        return self.branch(sc.then, sc.args, tail, g.location, indent)

    def if_statement(self, sc: SwitchCall, tail: Tail, location, indent: int,
                     pending: Pending) -> bool:
        cond, then, else_, args = sc.cond, sc.then, sc.else_, sc.args
        test = cond.inputs[1] if id(cond) in self.layout.switch_apps else cond
        if not pending.takes(None, [test]):
            self.flush(pending, indent)
        text = self.operand(test, pending).text
        self.flush(pending, indent)
        self.line(indent, f"if {text}:", location)
        start = len(self.lines)
        then_falls = self.branch(then, args, tail, location, indent + 1)
        if len(self.lines) == start:
            self.line(indent + 1, "pass", location)  # the branch computes nothing
        if not then_falls:
            return self.branch(else_, args, tail, location, indent)
        start = len(self.lines)
        self.line(indent, "else:", location)
        else_falls = self.branch(else_, args, tail, location, indent + 1)
        if len(self.lines) == start + 1:
            self.lines.pop()   # empty else
        return then_falls or else_falls

    def branch(self, g: Graph, args: list[Node], tail: Tail, location, indent: int) -> bool:
        """A branch's parameters that take a named value go by that value's name: each
        iteration of a loop's body would otherwise copy the loop's variables into the
        branch's.  The name is not rebound while the branch still reads it: a branch is
        the tail of its `if`, and the only rebinding after it is the `continue` of the loop
        it ends, whose right-hand side is read first."""
        copied = []
        for p, a in zip(g.parameters, args):
            if isinstance(a, (Apply, Parameter)) and id(a) in self.defined:
                self.names.of[id(p)] = self.name(a)
                self.defined.add(id(p))
            else:
                copied.append((p, a))
        self.bind_parameters(g, [a for _, a in copied], location, indent, Pending(),
                             parameters=[p for p, _ in copied])
        return self.block(g, tail, indent)

    def tail(self, g: Graph, tail: Tail, indent: int, pending: Pending) -> bool:
        out = g.output
        loc = out.location or g.location
        if isinstance(out, Apply) and out.graph is g:
            sc = switch_call(out)
            if sc is not None and self._is_branch_pair(sc):
                falls = self.if_statement(sc, tail, loc, indent, pending)
                join = self.layout.join_of.get(g)
                if join is not None:
                    return self.block(join, tail, indent)
                return falls
            if is_graph_constant(out.fn):
                callee = out.fn.value
                kind = self.layout.kind.get(callee)
                if self.loop_stack and callee is self.loop_stack[-1]:
                    self.bind_parameters(callee, out.args, loc, indent, pending)
                    self.line(indent, "continue", loc)
                    return False
                if kind == "join":
                    self.bind_parameters(callee, out.args, loc, indent, pending)
                    return True
                if kind in ("block", "loop"):
                    return self.inline_call(out, tail, indent, pending)
            if primitive_name(out) in IN_PLACE_UPDATES and self.in_place.writable(out):
                self.statement(out, indent, pending)
                value = self.ref(out)
            else:
                expr = self.render(out, pending, statement=True)
                self.flush(pending, indent)
                if primitive_name(out) == "raise_":
                    self.line(indent, expr.text, loc)
                    return False
                value = expr.text
        else:
            self.flush(pending, indent)
            value = self.ref(out)
        if tail.var is None:
            self.line(indent, f"return {value}", loc)
            return False
        self.line(indent, f"{tail.var} = {value}", loc)
        if tail.exits_loop:
            self.line(indent, "break", loc)
            return False
        return True


# The updates that write into their first operand's object where `InPlace` proves nothing
# else sees it (elsewhere a copy: `_setitem(x, i, v)`, `xs + [v]`), as the statement that
# does (setitem's, `x[i] = v`, is written in `statement`).
IN_PLACE_UPDATES = {"setitem": None, "list_append": "{}.append({})",
                    "list_extend": "{}.extend({})"}


class InPlace:
    """Which updates (`setitem(x, index, value)`, `list_append(x, v)`, `list_extend(x, ys)`:
    `IN_PLACE_UPDATES`) may write into x's object instead of a copy: those after which
    nothing sees that object.  `_owned(x, s)` proves it: every other use of x is consumed
    before s (reads s depends on, and nothing they make survives s: a view or tuple of x is
    itself consumed before) or runs on another path (the other branch of an `if` around s);
    and x's object is new (`FRESH`: np.zeros, arithmetic, an earlier update; a list
    literal), or handed down the same way: an `if`'s result whose branches' results are
    owned, a loop's carried value each of whose incoming values (the initial one, the one
    each iteration passes on) is owned by the loop's call (the parameter of code after an
    `if`, or of a block, likewise), a loop's result owned at its exits.  So a loop
    `y[i] = f(i)` (or `xs.append(f(i))`) over n elements costs O(n), not O(n^2), with the
    update under an `if` or in an inner loop too.  An update whose value is x itself
    (`xs.append(xs)`) copies: in place, the list would hold itself."""

    def __init__(self, root: Graph, users: dict, layout: "Layout"):
        self.users = users
        self.graph_uses = graph_uses(root)
        self.layout = layout
        self.pushes: list[Apply] = []
        self._records_own: bool | None = None

    def writable(self, s: Apply) -> bool:
        return s.args[0] not in s.args[1:] and self._owned(s.args[0], s, set())

    def stacks_in_place(self, root: Graph) -> bool:
        """Whether the program's residual stacks (passes/ad.py) may be Python lists that
        `stack_push` appends to and `stack_pop` pops from, rather than cells of tuples
        (myir/ir/values.py): where every push and pop owns its stack (nothing else sees the
        object from then on: a loop's gradient threads its stack from one iteration to the
        next, out of the forward loop and into the backward one), each pop's result is only
        taken apart, and no stack reaches anything but these, tuples and calls.  A list is
        one object for the collector to walk however deep the stack; cells of tuples are
        each walked by every full collection (they link young to old, so the collector
        never untracks them), which cost a 10^6-iteration loop's gradient half its time.
        A grad of grad, which adds stacks of sensitivities (`gadd`), keeps cells."""
        ops = [n for g in reachable_graphs(root) for n in toposort(g)
               if isinstance(n, Apply) and n.graph is g
               and primitive_name(n) in ("stack_push", "stack_pop")]
        if not ops:
            return False
        holding = [n for n in self.users if holds_stack(n.abstract)]
        seen = set(holding)
        while holding:  # and the untyped nodes they go into (typed ones say what they hold)
            node = holding.pop()
            for user, index in self.users.get(node, ()):
                if index != OUTPUT and not _passes_stack(user, index):
                    return False
                after = [c for c, i in self.graph_uses.get(user, ()) if i == 0] \
                    if index == OUTPUT else [user]
                for n in after:
                    if n.abstract is None and n not in seen:
                        seen.add(n)
                        holding.append(n)
        self.pushes = [n for n in ops if primitive_name(n) == "stack_push"]
        return all(self._owned(n.args[0], n, set()) and (
            primitive_name(n) == "stack_push" or _taken_apart(n, self.users)) for n in ops)

    def _records_own_their_stacks(self) -> bool:
        """Whether every record pushed that holds stacks (a nested loop's iteration pushes
        the inner loop's stacks) is a tuple made for its push alone, each stack in it owned
        by the tuple, or is a stack (a record of one field is pushed bare) owned by the push:
        a stack popped out of a record is then seen by nothing else."""
        if self._records_own is None:
            self._records_own = all(
                not holds_stack(r.abstract) or (
                    primitive_name(r) == "make_tuple" and self.users.get(r) == [(push, 2)]
                    and all(self._owned(f, r, set()) for f in r.args if holds_stack(f.abstract))
                ) or (isinstance(r.abstract, AStack) and self._owned(r, push, set()))
                for push in self.pushes for r in [push.args[1]])
        return self._records_own

    def _owned(self, node: Node, keeper, assumed: set) -> bool:
        """Whether node's object is new or handed down, and nothing but `keeper` (an apply,
        or a graph whose output node is) sees it from keeper on.  `assumed`: the pairs being
        proven (a loop's carried value is owned if it is owned on the way round)."""
        key = (id(node), id(keeper))
        if key in assumed:
            return True
        if isinstance(node, Constant) and node.value is EMPTY_STACK:
            return True     # written `[]`: a new list where it is evaluated
        assumed.add(key)
        if not self._kept_only_by(node, keeper):
            return False
        if isinstance(node, Parameter):
            g = node.graph
            calls = self.graph_uses.get(g, ())
            if self.layout.kind.get(g) == "branch":     # called by `switch(c, g, h)(...)`
                calls = [(call, 0) for sw, i in calls if primitive_name(sw) == "switch"
                         and i in (2, 3) for call, j in self.users.get(sw, ()) if j == 0]
            elif self.layout.kind.get(g) not in ("loop", "block", "join") \
                    and g not in self.layout.looping:   # a loop written as a function
                return False    # (called from several places): its calls are its callers
            if not calls or any(i != 0 for _, i in calls):
                return False
            k = g.parameters.index(node)
            return all(self._owned(call.args[k], call, assumed) for call, _ in calls)
        if not isinstance(node, Apply):
            return False
        if primitive_name(node) in FRESH or primitive_name(node) == "make_list":
            return True
        if primitive_name(node) in ("stack_push", "list_of_length"):  # s itself, appended to
            return self._owned(node.args[0], node, assumed)          # or passed on
        if primitive_name(node) == "getitem" and primitive_name(node.args[0]) == "stack_pop" \
                and isinstance(node.args[1], Constant) and node.args[1].value == 1:
            pop = node.args[0]                      # the rest: s itself, popped
            return self._owned(pop.args[0], pop, assumed)
        if _field_of_popped_record(node):     # the pop's record[k]: pushed, owned, alone
            record = node.args[0]
            pop = record.args[0]
            return self._unpacked_only(record) and self._records_own_their_stacks() \
                and self._owned(pop.args[0], pop, assumed)
        if _top_of_popped(node) and isinstance(node.abstract, AStack):  # a record that is a
            pop = node.args[0]                                          # stack, pushed bare
            return self._records_own_their_stacks() and self._owned(pop.args[0], pop, assumed)
        if primitive_name(node) == "getitem" and isinstance(node.args[1], Constant) \
                and type(node.args[1].value) is int:
            k, result = node.args[1].value, node.args[0]
            exits = self._exits(result)
            if exits is None or not self._unpacked_only(result):
                return False
            return all(self._element_owned(g, k, assumed) for g in exits)
        exits = self._exits(node)
        return exits is not None and all(self._owned(g.output, g, assumed) for g in exits)

    def _element_owned(self, g: Graph, k: int, assumed: set) -> bool:
        """Whether element k of the tuple g returns (g: an exit of an `if` or loop whose
        result is taken apart) is owned: the tuple's, or that of the `if` or loop g ends
        with (as in `_owned`, an element owned on the way round a loop is)."""
        key = (id(g), k)
        if key in assumed:
            return True
        assumed.add(key)
        out = g.output
        if primitive_name(out) == "raise_":
            return True     # an exit that raises returns nothing
        if not isinstance(out, Apply) or out.graph is not g or len(self.users.get(out, ())) != 1:
            return False
        if primitive_name(out) == "make_tuple":
            return self._owned(out.args[k], out, assumed)
        exits = self._exits(out)
        return exits is not None and all(self._element_owned(h, k, assumed) for h in exits)

    def _exits(self, call: Node) -> list[Graph] | None:
        """The graphs whose output is the result of `call`, an `if`, a loop (written in
        place, or as a function) or a block written in place (None for anything else):
        both branches, a loop's exits, the block."""
        sc = switch_call(call)
        if sc is not None and id(sc.switch) in self.layout.switch_apps:
            return [sc.then, sc.else_]
        if isinstance(call, Apply) and is_graph_constant(call.fn) \
                and self.layout.kind.get(call.fn.value) == "block":
            return [call.fn.value]
        if isinstance(call, Apply) and is_graph_constant(call.fn) \
                and (self.layout.kind.get(call.fn.value) == "loop"
                     or call.fn.value in self.layout.looping):
            loop = call.fn.value
            exits, stack = [], [loop]
            while stack:
                g = stack.pop()
                out, sc = g.output, switch_call(g.output)
                if sc is not None and id(sc.switch) in self.layout.switch_apps:
                    stack.extend((sc.then, sc.else_))
                elif not (isinstance(out, Apply) and is_graph_constant(out.fn)
                          and out.fn.value is loop):
                    exits.append(g)
            return exits
        return None

    def _unpacked_only(self, result: Node) -> bool:
        """Whether result, a tuple, is only taken apart: each element read once (a
        `depend` kept for what computing it may raise reads no element)."""
        indexes = []
        for user, index in self.users.get(result, ()):
            if _only_evaluated(user, index):
                continue
            if index != 1 or primitive_name(user) != "getitem" \
                    or not isinstance(user.args[1], Constant):
                return False
            indexes.append(user.args[1].value)
        return len(indexes) == len(set(indexes))

    def _kept_only_by(self, node: Node, keeper) -> bool:
        """Whether every use of node but keeper runs before it (and what it makes does not
        outlive it) or on another path."""
        graph = keeper if isinstance(keeper, Graph) else keeper.graph
        before = _ancestors(keeper.output if isinstance(keeper, Graph) else keeper)
        others: list[tuple[Graph, bool]] = []   # (graph, whether it ends a loop)
        g = graph
        while g is not None:    # the other branch of each `if` around keeper
            for sw, i in self.graph_uses.get(g, ()):
                if primitive_name(sw) == "switch" and i in (2, 3) \
                        and is_graph_constant(sw.inputs[5 - i]):
                    other = sw.inputs[5 - i].value
                    out = other.output
                    ends = self.layout.kind.get(sw.graph) == "loop" and not (
                        isinstance(out, Apply) and is_graph_constant(out.fn)
                        and out.fn.value is sw.graph)
                    others.append((other, ends))
                    before |= _ancestors(sw)
            g = g.parent
        for user, index in self.users.get(node, ()):
            if user is keeper or _only_evaluated(user, index):
                continue    # (what `depend` waits for is not read: a loop's result)
            where = user if index == OUTPUT else user.graph
            path = [ends for o, ends in others if is_nested_in(where, o)]
            if path:    # a loop's exit may keep anything: the loop is over; a branch that
                packs = user is user.graph.output if index != OUTPUT else True  # goes on may
                if path[0] or packs or primitive_name(user) in MADE_NEW:   # carry a view on
                    continue
                return False
            if index == OUTPUT or id(user) not in before \
                    or (self._reruns(user.graph) and user.graph is not node.graph):
                return False
            if primitive_name(user) not in MADE_NEW and not self._consumed(user, keeper, before):
                return False
        return True

    def _consumed(self, node: Node, keeper, before: set) -> bool:
        """Whether every use of node is in `before`, and what those uses make (unless it is
        a new object) is consumed there too."""
        for user, index in self.users.get(node, ()):
            if user is keeper and primitive_name(keeper) in IN_PLACE_UPDATES and index >= 2:
                continue    # the update's index or value, copied into the array or list
            if index == OUTPUT or id(user) not in before or self._reruns(user.graph) \
                    or user is keeper:
                return False
            if primitive_name(user) not in MADE_NEW and not self._consumed(user, keeper, before):
                return False
        return True

    def _reruns(self, g: Graph) -> bool:
        """Whether g is a closure, which may run again after the update (a branch, a block
        or a loop runs where it is written), reading the values of the graphs around it
        again (its own are made anew)."""
        return self.layout.kind.get(g) == "closure"


# What the uses of an object make that cannot hold it: FRESH's new objects, and whether a
# stack is empty.
MADE_NEW = FRESH | {"stack_empty"}

# Where a stack, or a tuple holding one, may go when stacks are lists (`stacks_in_place`):
# primitive -> the input positions (1: the first operand) that may take it.
_STACK_USES = {"stack_push": {1, 2}, "stack_pop": {1}, "stack_empty": {1}, "getitem": {1},
               "make_tuple": None}


def _python_number(node: Node) -> bool:
    """Whether node is typed as a Python bool, int or float (not a numpy scalar)."""
    t = node.abstract
    return isinstance(t, AScalar) and t.pytype in (bool, int, float)


def _other_line(node: Node, user: Node) -> bool:
    """Whether node and its user come from different source lines."""
    return bool(node.location and user.location and node.location.line != user.location.line)


def _own_jumps(lines: list) -> dict[int, str]:
    """The `break` and `continue` statements among generated lines (text, location) that
    leave or go round the loop the lines are in, by index: not those of a loop or function
    nested in them."""
    jumps, nested = {}, []
    for k, (text, _) in enumerate(lines):
        stripped = text.lstrip(" ")
        level = len(text) - len(stripped)
        while nested and nested[-1] >= level:
            nested.pop()
        if stripped in ("break", "continue") and not nested:
            jumps[k] = stripped
        if stripped.startswith(("while ", "for ", "def ")) and stripped.endswith(":"):
            nested.append(level)
    return jumps


def _top_of_popped(node: Node) -> bool:
    """Whether node is `stack_pop(s)[0]`, a popped record."""
    return primitive_name(node) == "getitem" and _int_constant(node.args[1]) \
        and node.args[1].value == 0 and primitive_name(node.args[0]) == "stack_pop"


def _field_of_popped_record(node: Node) -> bool:
    """Whether node is `stack_pop(s)[0][k]`, a field of a popped record."""
    return primitive_name(node) == "getitem" and _int_constant(node.args[1]) \
        and _top_of_popped(node.args[0])


def _int_constant(node: Node) -> bool:
    return isinstance(node, Constant) and type(node.value) is int


def _taken_apart(pop: Apply, users: dict) -> bool:
    """Whether every use of pop, a `stack_pop`, is `pop[0]` (the top) or `pop[1]` (the
    rest)."""
    return all(isinstance(user, Apply) and primitive_name(user) == "getitem" and index == 1
               and isinstance(user.args[1], Constant) and user.args[1].value in (0, 1)
               for user, index in users.get(pop, ()))


def _only_evaluated(user, index: int) -> bool:
    """Whether `user` only evaluates its input `index`: `depend(x, e)`'s e, kept for what
    computing it may raise, whose value nothing reads (the forward loop of a gradient whose
    value the gradient does not read)."""
    return index == 2 and primitive_name(user) == "depend"


def _passes_stack(user: Apply, index: int) -> bool:
    """Whether `user` takes a stack at input `index` to a stack operation, into or out of a
    tuple, or into a call of a function (whose parameter is checked in its turn)."""
    name = primitive_name(user)
    if name is None:
        return index > 0
    return _only_evaluated(user, index) or name in _STACK_USES and (
        _STACK_USES[name] is None or index in _STACK_USES[name])


def _ancestors(node: Node) -> set:
    """The ids of the nodes `node` depends on, with those of the graphs their calls ran."""
    return computed_before(node.inputs if isinstance(node, Apply) else [], _graphs_run)


def _graphs_run(n: Apply) -> list[Graph]:
    """The graphs a call runs: its function, or both branches of a switch."""
    sc = switch_call(n)
    return ([n.fn.value] if is_graph_constant(n.fn) else []) + \
        ([sc.then, sc.else_] if sc is not None else [])


@dataclass
class Generated:
    """A generated module: its source, the globals it needs, its entry function's name, and
    the user's source location of each line.  `recipes` says how to rebuild the globals
    that are not data (primitives' implementations, modules), so a module saved to disk
    (`myir/saved.py`) needs to pickle only data."""

    source: str
    namespace: dict
    entry: str
    locations: list
    recipes: dict


def _dict_syntax(gen, args: list) -> Expr:
    """`{'W': w, 'b': b}` from make_dict's alternating keys and values."""
    pairs = [f"{k.text}: {v.text}" for k, v in zip(args[::2], args[1::2])]
    return Expr("{" + ", ".join(pairs) + "}", ATOM)


def _record_syntax(gen, args: list) -> Expr:
    """`Layer(w, b)`: a record's class called with its fields."""
    return Expr(f"{args[0].wrap(ATOM)}({', '.join(a.text for a in args[1:])})", ATOM)


def _getattr_syntax(gen, args: list) -> Expr:
    """`p.W` where the field's name is a constant (always, from the frontend)."""
    name = args[1].text
    if name[:1] in "'\"" and name[1:-1].isidentifier():
        return Expr(f"{args[0].wrap(ATOM)}.{name[1:-1]}", ATOM)
    return Expr(f"getattr({args[0].text}, {name})", ATOM)


def _stack_push_syntax(gen, args: list) -> Expr:
    """`(x, s, STACK_CELL)`: a stack's cell (myir/ir/values.py)."""
    return Expr(f"({args[1].text}, {args[0].text}, {gen.constant(STACK_CELL)})", ATOM)


# Containers written as Python syntax that is not an operator template.
_CONTAINER_SYNTAX = {
    "stack_push": _stack_push_syntax,
    "make_dict": _dict_syntax,
    "make_record": _record_syntax,
    "getattr_": _getattr_syntax,
}


def generate(root: Graph) -> Generated:
    emitter = Emitter(root)
    source = emitter.module()
    return Generated(source, emitter.namespace, emitter.graph_name(root),
                     [loc for _, loc in emitter.lines], emitter.recipes)


def compile_module(gen: Generated, filename: str):
    """The entry function of a generated module (see `module_code`)."""
    return entry_function(module_code(gen, filename), gen.namespace, gen.entry, gen.source)


def module_code(gen: Generated, filename: str) -> types.CodeType:
    """The generated module's code, compiled so that tracebacks name the user's files and
    lines.  A code object has one file name, so each top-level function is compiled as part
    of the file its `def` comes from (`filename`, the compiled function's, or the file of a
    function it calls); its lines located in that file keep their numbers, and the others
    (located in another file, such as a gradient rule's, or nowhere) take the location of
    the line before them in the source, or of the first located line after them.  A
    function with no line located in any file names the generated source instead
    (`generated_filename`), with its own line numbers.  No line number names a line that
    the named file does not have."""
    tree = ast.parse(gen.source)
    files = {}
    for top in tree.body:
        span = range(top.lineno - 1, top.end_lineno)
        located = [gen.locations[i] for i in span if gen.locations[i] is not None]
        if not located:
            files[top.name] = generated_filename(gen.entry, gen.source)
            continue
        own = gen.locations[top.lineno - 1] or located[0]
        files[top.name] = own.filename
        mapped = _fill(span, gen.locations, own.filename)
        nodes = [top]
        for node in nodes:     # (`ast.walk`, less its generators and the operators)
            nodes.extend(child_nodes(node))
            if hasattr(node, "lineno"):
                loc = mapped[node.lineno - 1]
                node.lineno = node.end_lineno = loc.line
                node.col_offset = loc.column - 1
                node.end_col_offset = (loc.end_column or loc.column + 1) - 1
    code = compile(tree, filename, "exec")
    consts = [_in_file(c, files[c.co_name]) if isinstance(c, types.CodeType)
              and files.get(c.co_name, filename) != filename else c for c in code.co_consts]
    return code.replace(co_consts=tuple(consts))


def _fill(span: range, locations: list, filename: str) -> dict:
    """Line index -> its location in `filename`, or the nearest one before it (after it, for
    the lines before the first)."""
    mapped, last, waiting = {}, None, []
    for i in span:
        loc = locations[i]
        if loc is not None and loc.filename == filename:
            last = loc
            for j in waiting:
                mapped[j] = loc
            waiting.clear()
        if last is None:
            waiting.append(i)
        else:
            mapped[i] = last
    return mapped


def _in_file(code: types.CodeType, filename: str) -> types.CodeType:
    """`code` and the functions defined in it, named as part of `filename`."""
    consts = tuple(_in_file(c, filename) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def generated_filename(entry: str, source: str) -> str:
    """The name a generated module's code goes by where no user's file is known; tracebacks
    show its lines (`entry_function` gives its source to `linecache`)."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    return f"<myir generated {entry} {digest}>"


def entry_function(code: types.CodeType, namespace: dict, entry: str, source: str):
    """Run a compiled module's code in a copy of its namespace; its entry function."""
    name = generated_filename(entry, source)
    if any(isinstance(c, types.CodeType) and c.co_filename == name for c in code.co_consts):
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    namespace = dict(namespace)
    exec(code, namespace)
    return namespace[entry]


def rebuild(recipe: tuple):
    """A namespace value from its recipe (see `Generated.recipes`)."""
    kind, name = recipe
    return callable_of(name) if kind == "primitive" else importlib.import_module(name)
