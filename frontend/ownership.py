"""Ownership of local values: when an update in place (`y[i] = v`, `y += v` on an array)
may become a functional update.

CPython changes the object `y` holds, and every other reference to that object sees the
change: another variable (`z = y`), a view (`z = y[1:]`, `y.T`, `y.reshape(...)`,
`np.asarray(y)`), a tuple holding it, a closure that captured it, a value a user function
returned from it, the caller's argument.  Compiled code is functional: the frontend makes
`y = setitem(y, index, v)` (and `y = y + v`), a new value bound to the name `y` again, which
no other reference sees.  The two agree exactly when no other reference to the object is
read after the update.  This module proves that, on the parsed graph of one function, or
says what the object is shared with.

**Origins.**  The value `y` holds before the update is traced back through the parser's
control flow (a loop-carried variable to its initial value and to its value at the end of
an iteration, a variable assigned in branches to each branch's value, the tuples the parser
packs variables in to pass them along).  Every value it may come from must be *fresh*: made
by an operation that returns a new object (arithmetic, numpy functions that return new
arrays such as np.zeros/ones/empty/full/array/arange/concatenate, `x.copy()`, an earlier
update).  A function's argument is not (the caller's data is never changed), nor is a view,
a constant, or a function's result.

**Aliases.**  From each origin the object is followed forward through every use.  Reading it
(an operand of arithmetic, of a reduction, of a numpy function returning a new array, an
index `y[i]` consumed in an expression) makes no reference.  What does: a view of it or a
tuple holding it bound to a variable, another variable bound to it, a user function's result
(it may return the object or a view), a closure capturing it, a value it is assigned into
(`m[i] = y`: a list holds it; an array would copy it, but the parser cannot tell which).
Each such alias may be read only *before* the update: a use the update depends on (its
value, its index, the condition of an `if` around it, an earlier iteration's values).
The variable itself is followed up to the update (past a loop or `if` that contains it, it
is the updated object); an alias is followed on (made in the other branch of an `if`, it may
be carried round a loop to the update's next run).  Returning the variable itself is no
alias: nothing runs after a `return`.  A variable bound to an element `v = y[i]` and read
after the update is a number (a copy) or, where y has more dimensions than the index, a
view: the parser makes inference tell (`not_a_view`); so is `min(y)` / `max(y)`, an item.

**Elements of lists and dicts.**  Where y surely is a list or dict, an element `y[i]` is an
object of its own, not a view: `y[i] = v` and `y.append(v)` replace or add elements and
leave the old ones as they were, so what holds an element (a variable, a tuple passed to a
function) is no alias of y.  `y[i] op= v` is different: CPython applies `op=` to the element
itself, which changes it in place where it is a list or an array.  There the elements must
be seen through y alone (`check_items`, as for `y[i][j] = v`); where that cannot be proven,
inference refuses a mutable element (`not_a_view` on it: a number gets the plain operator).

The analysis is conservative: where it cannot prove that no alias is read after the update,
the update is an error naming the variable and what it is shared with (for `y += v`, the
old `aug_<op>` that refuses arrays at run time).  Containers (lists, dicts) are updated
through the same primitive and the same analysis: an update of a local name is
`setitem(name, index, value)` whatever the name holds.
"""

from __future__ import annotations

from frontend import builtin_functions, numpy_functions
from myir.ir.analysis import computed_before, is_nested_in, primitive_name
from myir.ir.graph import Apply, Constant, Graph, Node, Parameter, is_graph_constant
from myir.ir.primitives import FRESH, VIEWS
from myir.ir.values import GradMacro

# Primitives that build a new container holding their operands (not FRESH: the container
# holds them): a value an update may start from, like a literal `[a, b]` or `{"k": v}`, a
# dict comprehension's step or an earlier `d[k] = v`.
NEW_CONTAINERS = frozenset({"make_tuple", "make_list", "make_dict", "make_record",
                            "dict_cons", "dict_setitem"})

# Primitives that store an operand (by position, 1-based as in `_use`) in the container they
# make or update: the stored object is seen through the container from then on.
STORES = {"make_list": None, "make_record": None,     # None: every operand but the class
          "make_dict": "values", "list_append": (2,), "dict_setitem": (3,),
          "dict_cons": (2,), "record_replace": (3,)}

# List updates (`xs.append(v)`, `xs.extend(ys)`, `xs.pop(i)`): CPython changes the list
# itself, so the object goes on in their result (list_pop's second item), and the parser
# checks them as it checks `y[i] = v`.
LIST_UPDATES = frozenset({"list_append", "list_extend", "list_pop"})
# The updates of `xs.insert(i, v)` (list_unpop), `xs.sort()` and `xs.reverse()`
# (list_permute): checked the same way, but their primitives also make new lists elsewhere
# (`sorted(xs)`, a gradient), so the object does not go on through them.
LIST_METHOD_UPDATES = LIST_UPDATES | {"list_unpop", "list_permute"}

# Primitives whose result is their first operand itself (checked, or typed more precisely).
PASSED_ON = frozenset({"check_bound", "depend", "unpack", "list_of_length"})

# Primitives making a list or dict (whose elements are objects of their own).
_CONTAINER_MAKERS = frozenset({"make_list", "make_tuple", "make_dict", "dict_cons",
                               "dict_setitem", "list_append", "list_extend", "list_unpop",
                               "list_permute", "seq_repeat", "to_list", "to_tuple"})

# A dict's live views: a variable bound to one sees later updates of the dict.
DICT_VIEWS = frozenset({"dict_keys", "dict_values", "dict_items"})

# Functions of frontend/numpy_functions.py whose numpy counterpart may return a view of its
# first operand; the others return a new array (or a number).
NUMPY_VIEWS = frozenset("ravel atleast_1d atleast_2d atleast_3d moveaxis diagonal diag flip "
                        "fliplr flipud split".split())


class Shared(Exception):
    """The update is not provably alone: `what` the object is shared with, and `argument`
    the parameter's name when it is the caller's data; `items`: what is shared is an
    element the update of `y[i][j] = v` changes (`Update.check_items`)."""

    def __init__(self, what: str, argument: str | None = None, items: bool = False):
        super().__init__(what)
        self.what = what
        self.argument = argument
        self.items = items


def _line(node: Node) -> str:
    loc = node.location
    return f" (line {loc.line})" if loc is not None else ""


class Flow:
    """The uses, callers and outputs of every node of one function's graphs (the function,
    its branches and loops, the closures nested in it)."""

    def __init__(self, root: Graph, functions: set, names_of: dict, nodes: list):
        """`nodes`: the values the function computes that its output may not use (an
        assignment never read, a loop whose results go unused), followed too."""
        self.functions = functions          # the graphs of `def`s and lambdas
        self.names_of = names_of            # id(node) -> [(name, line)] bound by assignments
        self.uses: dict[int, list[tuple[Apply, int]]] = {}
        self.outputs: dict[int, list[Graph]] = {}
        self.callers: dict[int, list[Apply]] = {}
        graphs, seen, done = [root], {id(root)}, set()
        starts = list(nodes)
        while graphs:
            g = graphs.pop()
            self.outputs.setdefault(id(g.output), []).append(g)
            stack, starts = [g.output] + starts, []
            while stack:
                n = stack.pop()
                if not isinstance(n, Apply) or id(n) in done:
                    continue
                done.add(id(n))
                for k, inp in enumerate(n.inputs):
                    self.uses.setdefault(id(inp), []).append((n, k))
                    stack.append(inp)
                    if is_graph_constant(inp) and inp.value.parent is not None \
                            and id(inp.value) not in seen:
                        seen.add(id(inp.value))
                        graphs.append(inp.value)
                for callee in self.callees(n):
                    self.callers.setdefault(id(callee), []).append(n)

    def callees(self, call: Apply) -> list[Graph]:
        """The nested graphs `call` runs: its function, or both branches of a switch."""
        fn = call.fn
        if is_graph_constant(fn) and fn.value.parent is not None:
            return [fn.value]
        if isinstance(fn, Apply) and primitive_name(fn) == "switch":
            return [a.value for a in fn.args[1:] if is_graph_constant(a)]
        return []

    def control(self, g: Graph) -> bool:
        """Whether g is the parser's control flow (a branch, loop or join), not a function."""
        return g.parent is not None and g not in self.functions

    def loop(self, g: Graph) -> bool:
        """Whether g is a loop: control flow that calls itself from within."""
        return any(is_nested_in(call.graph, g) for call in self.callers.get(id(g), ()))

    def owner(self, g: Graph) -> Graph:
        while self.control(g):
            g = g.parent
        return g


class Update:
    """The check of one update: `node` replaces `old`, the value the variable `name` held."""

    def __init__(self, flow: Flow, node: Apply, old: Node, name: str, nested: bool = False):
        self.flow, self.node, self.old, self.name = flow, node, old, name
        self.nested = nested          # `y[i][j] = v`: CPython changes the element y[i]
        # `y[i] op= v`: the element `y[i]` it reads, which CPython changes in place where it
        # is a list or an array (a number gets the plain operator)
        value = node.args[2] if primitive_name(node) in ("setitem", "dict_setitem") else None
        self.in_place = value.args[0] if (primitive_name(value) or "").startswith("inplace_") \
            and primitive_name(value.args[0]) == "getitem" \
            and value.args[0].args[0] is node.args[0] else None
        # the object is surely a list or dict (`check`): an element `y[i]` taken from it is
        # an object of its own, which `y[i] = v` or `y.append(v)` leaves as it was
        self.replaces = False
        # the object is a list: a slice of it is a new list, not a view
        self.list = primitive_name(node) in LIST_METHOD_UPDATES
        self.enclosing = set()        # ids of the graphs the update runs in
        g = node.graph
        while g is not None:
            self.enclosing.add(id(g))
            g = g.parent
        self.before = self._before()
        # id -> variables bound to an element `y[i]` of the object and read after the update:
        # a number is no alias, a row of a 2-D array is; inference tells (`not_a_view`)
        self.elements: dict[int, Apply] = {}

    def check(self) -> None:
        """Raise Shared unless the update is provably alone."""
        seen: set = set()
        origins = list(self._origins(self.old, (), seen))
        if not origins:
            raise Shared("a value whose origin cannot be traced")
        try:
            self.replaces = not self.nested and all(self._lists_or_dicts(self.old, set()))
        except Shared:      # `x.copy()` of an argument: an array, a list?
            pass
        for origin in origins:
            self._forward(origin, (), None, set())

    # -- the elements `y[i][j] = v` changes

    def check_items(self) -> None:
        """For `y[i][j] = v` (after `check`): CPython changes the element `y[i]` itself, so
        every element y may hold must be seen through y alone.  An array's rows are views of
        the array (the update of y writes them back); a list's or dict's elements are
        objects of their own: each must be made where it is stored (a literal, a new array,
        a comprehension's item), stored once, and used nowhere else -- not bound to another
        name, not one object repeated (`[row] * n`), not the caller's (`list(xs)` copies
        the list, not its elements).  And no element of y read from it before the update
        may be used after it (`r = y[0]`; CPython's r sees the change)."""
        for item in self._items_of(self.old, set()):
            self._private(item)
        if self.elements:
            element = next(iter(self.elements.values()))
            names = self.flow.names_of.get(id(element))
            what = f"`{names[0][0]}`" if names else "a value"
            raise Shared(f"{what}, an element of `{self.name}` read{_line(element)} before "
                         "the update and used after it", items=True)

    def may_hold_objects(self) -> bool:
        """Whether the object may be a list or dict (whose elements are objects of their
        own), not an array (whose rows are views of it).  Not known where it comes from
        the caller (`x.copy()` of an argument): no check of its elements is made there."""
        try:
            return self._container(self.old)
        except Shared:
            return False

    def _items_of(self, n: Node, seen: set):
        """The values the elements of the list or dict n may be (none for an array)."""
        try:
            origins = list(self._origins(n, (), set()))
        except Shared as e:
            raise Shared(e.what, e.argument, items=True) from None
        for origin in origins:
            if id(origin) in seen:
                continue
            seen.add(id(origin))
            prim = primitive_name(origin)
            args = origin.args if isinstance(origin, Apply) else []
            if prim in ("make_list", "make_tuple"):
                yield from args
            elif prim == "make_dict":
                yield from args[1::2]
            elif prim == "dict_cons":       # a dict comprehension's step: {k: v, **rest}
                yield args[1]
                yield from self._items_of(args[2], seen)
            elif prim in ("list_append", "setitem", "list_unpop", "dict_setitem"):
                if prim != "setitem" or self._container(args[0]):  # an array copies v in
                    yield args[-1]
                    yield from self._items_of(args[0], seen)
            elif prim == "list_extend":
                yield from self._items_of(args[0], seen)
                yield from self._copied(args[1], seen)
            elif prim in ("to_list", "to_tuple", "copy", "list_permute"):
                # copies of a list (a dict, an array: `.copy()`) holding its elements
                yield from self._copied(args[0], seen)
            elif prim == "getitem" and primitive_name(args[0]) == "list_pop":
                yield from self._items_of(args[0].args[0], seen)    # what `xs.pop()` left
            elif prim == "seq_repeat" or prim == "mul" and self._maybe_sequence(args):
                raise Shared(f"the other copies of it in `xs * n`{_line(origin)}", items=True)
            elif prim == "add" and self._maybe_sequence(args):     # `xs + ys`
                yield from self._copied(args[0], seen)
                yield from self._copied(args[1], seen)

    def _copied(self, source: Node, seen: set):
        """The elements of `source`, a container a copy of y's was made from: they are y's
        too, so `source` itself must not be read after the update either."""
        try:
            for origin in self._origins(source, (), set()):
                names = self.flow.names_of.get(id(origin))
                what = f"`{names[0][0]}` (line {names[0][1]}), which it was copied from" \
                    if names else "the container it was copied from"
                self._forward(origin, (), (what, origin), set())
        except Shared as e:
            raise Shared(e.what, e.argument, items=True) from None
        yield from self._items_of(source, seen)

    def _maybe_sequence(self, operands, untraced: bool = True, seen: set | None = None) -> bool:
        """Whether an operand of `+` or `*` (arithmetic, or a concatenation or repetition
        of lists, which hold the operands' elements) may be a list or tuple: made as one,
        or (`untraced`) of an origin the analysis cannot trace (an argument may be a list).
        `seen`: the origins a caller is already following (`width += ...` round a loop is
        an `add` whose operand comes from that `add`)."""
        for n in operands:
            if isinstance(n, Constant):
                if isinstance(n.value, tuple):
                    return True
                continue
            try:
                if self._container(n, seen):
                    return True
            except Shared:
                if untraced:
                    return True
        return False

    def _container(self, n: Node, seen: set | None = None) -> bool:
        """Whether n, what `setitem` updates, may be a list or dict rather than an array."""
        return any(self._lists_or_dicts(n, set() if seen is None else seen))

    def _lists_or_dicts(self, n: Node, seen: set):
        """For each value n may have been made as (through `setitem` and `copy`, round a
        loop): whether it is a list or dict (a tuple), not an array."""
        for origin in self._origins(n, (), set()):
            if id(origin) in seen:
                continue
            seen.add(id(origin))
            prim = primitive_name(origin)
            if prim in ("setitem", "copy"):
                yield from self._lists_or_dicts(origin.args[0], seen)
            elif prim in ("add", "mul"):    # `xs + ys`, `xs * n` of lists made here
                yield self._maybe_sequence(origin.args, untraced=False, seen=seen)
            else:
                yield prim in _CONTAINER_MAKERS or prim == "getitem"

    def _private(self, item: Node) -> None:
        """Raise Shared unless `item`, stored as an element, is a new object stored once
        and used nowhere else (or a constant that is no array: a number, a string)."""
        if isinstance(item, Constant):
            if type(item.value).__module__ == "numpy" or isinstance(item.value, Graph):
                raise Shared(f"a constant of the program{_line(item)}", items=True)
            return
        uses = self.flow.uses.get(id(item), ())
        fresh = isinstance(item, Apply) and (
            primitive_name(item) in FRESH or primitive_name(item) in NEW_CONTAINERS
            or numpy_function(item.fn.value if is_graph_constant(item.fn) else None)
            not in (None, *NUMPY_VIEWS))
        if not fresh or len(uses) != 1 or uses[0][0].graph is not item.graph:
            names = self.flow.names_of.get(id(item))
            what = f"`{names[0][0]}`" if names else "the value stored"
            raise Shared(f"{what}{_line(item)}, which may be held elsewhere too", items=True)

    # -- what ran before the update

    def _before(self) -> set:
        """The ids of the nodes every run of the update comes after: its inputs' ancestors,
        and those of the calls that run the graphs it is in (not a loop's own next
        iteration), with the nodes of the branches and loops they completed."""
        flow = self.flow
        stack = list(self.node.inputs)
        g, graphs_seen = self.node.graph, set()
        while flow.control(g) and id(g) not in graphs_seen:
            graphs_seen.add(id(g))
            outer = None
            for call in flow.callers.get(id(g), ()):
                if not is_nested_in(call.graph, g):
                    stack.extend(call.inputs)
                    outer = call.graph
            if outer is None:
                break
            g = outer
        return computed_before(stack, lambda n: [
            callee for callee in flow.callees(n) if id(callee) not in self.enclosing])

    # -- origins

    def _origins(self, n: Node, path: tuple, seen: set):
        key = (id(n), path)
        if key in seen:
            return
        seen.add(key)
        flow = self.flow
        if isinstance(n, Parameter):
            if not flow.control(n.graph):
                raise Shared(f"the argument `{n.debug.name}`", argument=n.debug.name)
            k = n.graph.parameters.index(n)
            for call in flow.callers.get(id(n.graph), ()):
                yield from self._origins(call.args[k], path, seen)
            return
        if isinstance(n, Constant):
            raise Shared("a constant of the program, which compiled code never changes")
        prim = primitive_name(n)
        callees = flow.callees(n)
        name = numpy_function(n.fn.value) if isinstance(n, Apply) \
            and is_graph_constant(n.fn) else None
        if name is not None and name not in NUMPY_VIEWS and not path:
            yield n
        elif callees:
            for callee in callees:
                yield from self._origins(callee.output, path, seen)
        elif prim == "make_tuple" and path:
            yield from self._origins(n.args[path[0]], path[1:], seen)
        elif prim == "getitem" and isinstance(n.args[1], Constant) \
                and type(n.args[1].value) is int and self._packed(n.args[0]):
            yield from self._origins(n.args[0], (n.args[1].value,) + path, seen)
        elif prim in PASSED_ON:
            yield from self._origins(n.args[0], path, seen)
        elif prim == "getitem" and primitive_name(n.args[0]) == "list_pop" and not path \
                and isinstance(n.args[1], Constant) and n.args[1].value == 1:
            yield n     # the list an earlier `xs.pop()` updated, like list_append's
        elif (prim in FRESH or prim in NEW_CONTAINERS or self._list_slice(n)) and not path:
            yield n
        else:
            raise Shared(f"the value it was made from{_line(n)}: "
                         f"`{prim or 'a function call'}` may return a view or a shared value")

    def _list_slice(self, n: Node) -> bool:
        """Whether n is a slice `xs[a:b]` of the updated object, a list: a new list."""
        return self.list and primitive_name(n) == "getitem" \
            and primitive_name(n.args[1]) == "make_slice"

    def _packed(self, n: Node) -> bool:
        """Whether n is a tuple the parser packs variables in (a branch's or a loop's
        result), or one of the tuples inside it, rather than a user's tuple."""
        while primitive_name(n) in ("getitem", "check_bound"):
            n = n.args[0]
        return bool(self.flow.callees(n)) if isinstance(n, Apply) else False

    # -- aliases

    def _alias_of(self, n: Node, path: tuple, alias):
        """The alias n is, if it is bound to another variable: (what it is, n)."""
        for name, line in self.flow.names_of.get(id(n), ()):
            if alias is None and (path or name != self.name):
                what = "the tuple" if path else "the variable"
                return f"{what} `{name}` (line {line})", n
        return alias

    def _forward(self, n: Node, path: tuple, alias: str | None, seen: set):
        key = (id(n), path, alias)
        if key in seen:
            return
        seen.add(key)
        flow = self.flow
        alias = self._alias_of(n, path, alias)
        for user, k in flow.uses.get(id(n), ()):
            self._use(n, user, k, path, alias, seen)
        for g in flow.outputs.get(id(n), ()):
            if not flow.control(g):
                if alias is not None:
                    self._after(alias, f"returned by `{g.name}`")
                continue
            for call in flow.callers.get(id(g), ()):
                # past an `if` or loop that runs the update: the variable itself is the
                # updated object there; an alias made on the way (in the other branch) may
                # be carried round a loop to the update's next run, so it goes on -- marked
                # as coming from a run of the `if` without the update
                if alias is not None and self._exclusive(g, alias):
                    self._forward(call, path, alias[:2] + (True,), seen)
                elif alias is not None or not any(id(c) in self.enclosing
                                                  for c in flow.callees(call)):
                    self._forward(call, path, alias, seen)

    def _use(self, n: Node, user: Apply, k: int, path: tuple, alias, seen: set):
        flow = self.flow
        if user is self.node and not path:
            return      # the update itself, or its index or value (computed before it)
        if k == 0:
            return      # n is called: a function, not the object
        if flow.owner(user.graph) is not flow.owner(n.graph):
            closure = flow.owner(user.graph)
            raise Shared(f"the closure `{closure.name}`{_line(closure)}, which captured it")
        prim = primitive_name(user)
        if prim is None:
            callee = user.fn.value if is_graph_constant(user.fn) else None
            if callee is not None and flow.control(callee):
                if alias is not None and flow.loop(callee) and is_nested_in(user.graph, callee):
                    alias = alias[:2]   # the next iteration, which may run the update
                elif alias is not None and self._exclusive(user.graph, alias):
                    alias = alias[:2] + (True,)   # from a branch without the update
                self._forward(callee.parameters[k - 1], path, alias, seen)
                return
            name = numpy_function(callee)
            if name is not None and name not in NUMPY_VIEWS or _gradient(user.fn):
                return self._read(user, alias)
            what = f"np.{name}()" if name else f"`{callee.name}()`" if callee else "a call"
            self._forward(user, (), alias or (f"the result of {what}{_line(user)}",
                                              user if _extremum(callee) else None), seen)
            return
        if prim == "getitem" and k == 1 and path:
            index = user.args[1]
            if isinstance(index, Constant) and type(index.value) is int:
                if index.value == path[0]:
                    self._forward(user, path[1:], alias, seen)
            else:
                self._forward(user, (), alias or (f"an element of a tuple{_line(user)}", None),
                              seen)
            return
        if prim == "make_tuple" or prim == "list_pop" and k == 1:
            # list_pop(xs, i) gives (the item, xs without it): the list goes on as item 1
            self._forward(user, (k - 1 if prim == "make_tuple" else 1,) + path, alias, seen)
            return
        if prim in PASSED_ON and k == 1 \
                or prim in LIST_UPDATES and k == 1 or prim in ("setitem", "dict_setitem") \
                and k == 1:
            self._forward(user, path, alias, seen)
            return
        if prim == "getitem" and k == 1 and not path and alias is None and self.replaces \
                and _element(user):
            # an element of the list or dict: `y[i] = v` replaces it, leaving it as it was;
            # `y[i] op= v` changes it in place if it is mutable, so where it is read after
            # the update `check_items` must prove it is no other element's object
            if self.in_place is not None:
                self._forward(user, (), (f"an element of `{self.name}`{_line(user)}", user),
                              seen)
            return
        if prim in VIEWS and k == 1 and not (not path and self._list_slice(user)):
            self._forward(user, (), alias, seen)
            return
        if prim in DICT_VIEWS and flow.names_of.get(id(user)):
            # `ks = d.keys()`: CPython's view sees the update (a loop's own `d.items()` is
            # refused by the parser, `list(d.keys())` is a copy)
            self._forward(user, (), alias, seen)
            return
        if _stored(prim, k, user):
            self._forward(user, (), alias or (
                f"the container it was stored in{_line(user)}", None), seen)
            return
        if prim == "setitem" and k == 3:   # stored: a list or dict holds it (an array would
            if alias is None and _element(n):   # copy it, which the parser cannot tell)
                self.elements[id(n)] = n    # `y[0], y[1] = y[1], y[0]`: fine for numbers
                return
            self._forward(user, (), alias or (
                f"the value it was stored in{_line(user)}", None), seen)
            return
        self._read(user, alias)

    def _read(self, user: Apply, alias):
        if alias is None or alias[2:] or self._exclusive(user.graph, alias):
            return
        if id(user) not in self.before:
            self._after(alias, f"read{_line(user)} after the update")
        elif self._again(user, alias):
            self._after(alias, f"read{_line(user)} in the loop, whose next iteration comes "
                               "after the update")

    def _exclusive(self, g: Graph, alias) -> bool:
        """Whether code in g never runs after the update: g is in one branch of an `if` and
        the update in the other, and each loop around that `if` which runs the update made
        the alias in its body (one made before the loop would be read in an iteration after
        the one that ran the update).  Not a loop's exit, which runs after its body."""
        flow = self.flow
        while flow.control(g) and id(g) not in self.enclosing:
            for call in flow.callers.get(id(g), ()):
                if any(id(c) in self.enclosing for c in flow.callees(call)):
                    return not flow.loop(call.graph) \
                        and not self._loops_around(call.graph, alias[1])
            g = g.parent
        return False

    def _loops_around(self, g: Graph, made) -> bool:
        """Whether a loop that runs the update and contains g did not make `made` (an alias
        made before it: a later iteration may read it after the update)."""
        while g is not None and self.flow.control(g):
            if id(g) in self.enclosing and self.flow.loop(g) and not (
                    isinstance(made, Apply) and is_nested_in(made.graph, g)):
                return True
            g = g.parent
        return False

    def _again(self, user: Apply, alias) -> bool:
        """Whether `user`, which runs before the update, runs again after it: in the next
        iteration of a loop the update is in, reading an alias made before the loop (one
        made in the loop's body is made again, from the updated value)."""
        return self._loops_around(user.graph, alias[1])

    def _after(self, alias: tuple, how: str):
        """The alias is seen after the update: an error, unless it may be a number or it
        comes from a run of an `if` without the update (marked by a third item)."""
        if alias[2:]:
            return
        what, node = alias
        if _element(node):
            self.elements[id(node)] = node
            return
        raise Shared(f"{what}, {how}")


def _stored(prim: str | None, k: int, user: Apply) -> bool:
    """Whether operand k of `user` is stored in the container it makes or updates."""
    if prim not in STORES:
        return False
    where = STORES[prim]
    if where is None:
        return prim != "make_record" or k > 1
    if where == "values":
        return k % 2 == 0          # make_dict(k0, v0, k1, v1, ...)
    return k in where


def _element(node: Node | None) -> bool:
    """Whether node is `y[index]` with an index written without slices: a number, unless
    y has more dimensions than the index; or `min(xs)` / `max(xs)`, an item of xs."""
    if isinstance(node, Apply) and is_graph_constant(node.fn) and _extremum(node.fn.value):
        return True
    if primitive_name(node) != "getitem":
        return False
    index = node.args[1]
    parts = index.args if primitive_name(index) == "make_tuple" else [index]
    return not any(primitive_name(p) == "make_slice" or isinstance(p, Constant)
                   and (p.value is None or p.value is Ellipsis) for p in parts)


def _extremum(g: Graph | None) -> bool:
    """Whether g is the graph of `min(xs)` / `max(xs)` (frontend/builtin_functions.py): its
    result is an item of xs, which is no alias where it is a number, like `y[i]`."""
    loc = g.location if g is not None else None
    return loc is not None and loc.filename == builtin_functions.__file__


def _gradient(fn: Node) -> bool:
    """Whether fn is `grad(f)` or `value_and_grad(f)`: its result is new values (the
    gradients, and f's value, a float), never its arguments or views of them."""
    return isinstance(fn, Apply) and isinstance(fn.fn, Constant) \
        and isinstance(fn.fn.value, GradMacro)


def numpy_function(g: Graph | None) -> str | None:
    """The name of the numpy function g is the graph of (frontend/numpy_functions.py)."""
    loc = g.location if g is not None else None
    if loc is not None and loc.filename == numpy_functions.__file__:
        return g.name
    return None
