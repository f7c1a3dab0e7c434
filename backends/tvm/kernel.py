"""`vectorize_call(f, *xs)` on TVM: the scalar function's graph as one fused kernel.

The typed scalar graph f is translated into a `Program` (`kernel=True`) over the broadcast
shape: each primitive of f becomes an elementwise op whose operands keep their own shapes (a
row vector broadcast over a matrix is read, not copied), a branch `switch(c, then, else)()`
becomes `where(c, then, else)` of the two branches' values, calls are inlined, equal ops are
made once (the n tangent evaluations of a gradient share f's primal computation) and
tangents known to be zero fold away.  `build_module` makes that Program one TIR PrimFunc
with te.compute: one loop nest over the elements, every output computed at each element
(one block per output), transcendental values as blocks of their own computed inside the
nest a vector at a time (so once per element, however many outputs read them), float32 exp
and tanh by TVM's fast versions (as FastMathTransform gives regions).  The schedule fuses the
loops, splits them into vectors of 8 lanes and runs the outer loop on the thread pool (CPU),
or binds one thread per element (CUDA).  The Relax `main` calls that PrimFunc once, so a
kernel takes the path of a region (region.py): unaligned inputs, memory and disk caches, the
VM, pickling for saved programs.

A branch evaluates both sides per element and selects (no divergence on a GPU; numpy's
arithmetic does not raise).  A function that loops (a `while` or recursion: a graph calling
itself) is not translated: its call stays np.vectorize's, with a warning saying why.
"""

from __future__ import annotations

import warnings

import numpy as np

from backends.tvm import load_tvm
from backends.tvm.lowering import LOWERINGS
from backends.tvm.program import Op, Program, Ref, Spec
from backends.tvm.regions import spec_of
from myir.ir.analysis import primitive_name, reachable_graphs, switch_call, toposort, users
from myir.ir.edit import replace
from myir.ir.graph import Apply, Constant, Debug, Graph, Node, Parameter
from myir.ir.primitives import UNBOUND
from passes.abstract import ANone, AObject, AScalar, ATuple, options


class NotLowered(Exception):
    """Why a scalar function cannot be one kernel."""


ZERO = Ref("zero")   # a tangent known to be zero (forward mode's symbolic zero)
# a variable not assigned on this path: nothing reads it (reading one is `check_bound`, which
# kernels do not lower), so a branch that leaves it unassigned gives the other's value
UNSET = Ref("unset")


class _Translator:
    def __init__(self, types: dict, inputs: list[Spec]):
        self.types = types
        self.inputs = inputs
        self.full = tuple(np.broadcast_shapes(*(spec.shape for spec in inputs)))
        self.ops: list[Op] = []
        self.active: list[Graph] = []
        self.made: dict = {}
        self.scopes: list[dict] = []    # `made` where each open loop or branch began

    def shape(self, ref: Ref) -> tuple:
        if ref.kind == "in":
            return self.inputs[ref.index].shape
        if ref.kind == "op":
            return self.ops[ref.index].out.shape
        return ()

    def dtype(self, ref: Ref) -> np.dtype:
        if ref.kind == "in":
            return self.inputs[ref.index].dtype
        if ref.kind == "op":
            return self.ops[ref.index].out.dtype
        return np.asarray(0.0 if ref is ZERO else ref.value).dtype

    def emit(self, prim: str, args: list, node: Node) -> Ref:
        t = self.types.get(node)
        if not isinstance(t, AScalar):
            raise NotLowered(f"`{prim}` gives {t!r}, not a number")
        return self.op(prim, args, np.dtype(t.pytype))

    def op(self, prim: str, args: list, dtype: np.dtype) -> Ref:
        """The op `prim(args)`, or an equal one made before (the n tangent evaluations of a
        gradient share their primal computation), with a tangent that is known zero folded
        away as forward mode's symbolic zeros are."""
        zero = [a is ZERO for a in args]
        if any(zero):
            if prim in ("mul", "neg") or (prim == "truediv" and zero[0]) \
                    or (prim == "where" and zero[1] and zero[2]):
                return ZERO
            if prim in ("add", "sub") and zero[1]:
                return args[0]
            if prim == "add":
                return args[1]
            if prim == "sub":
                return self.op("neg", [args[1]], dtype)
            args = [Ref("const", value=0.0) if z else a for a, z in zip(args, zero)]
        key = (prim, tuple(args), dtype)
        found = self.made.get(key)
        if found is None:
            shape = np.broadcast_shapes(*(self.shape(a) for a in args)) if args else ()
            self.ops.append(Op(prim, tuple(args), Spec(dtype, tuple(shape))))
            found = self.made[key] = Ref("op", len(self.ops) - 1)
        return found

    def graph(self, g: Graph, args: list, outer: dict | None = None):
        """The value of `g` called with `args` (Refs, or tuples of them); `outer` holds the
        values of the enclosing graphs' nodes (a branch reads its function's variables)."""
        if g in self.active:
            raise NotLowered("it recurses (a function calling itself other than as a loop), "
                             "which kernels do not lower")
        if _is_loop(g):
            return self.loop(g, args, outer or {})
        self.active.append(g)
        env = {**(outer or {}), **dict(zip(g.parameters, args))}
        try:
            return self.node(g.output, env)
        finally:
            self.active.pop()

    def node(self, node: Node, env: dict):
        if node in env:
            return env[node]
        if isinstance(node, Constant):
            v = node.value
            if isinstance(v, (bool, int, float, np.number, np.bool_)):
                return Ref("const", value=v)
            if v is UNBOUND:
                return UNSET
            raise NotLowered(f"the constant {v!r}")
        if isinstance(node, Parameter):
            raise NotLowered("it reads a value from outside its parameters")
        sc = switch_call(node)
        if sc is not None:
            cond = self.node(sc.cond, env)
            args = [self.node(a, env) for a in sc.args]
            value = self.choose(cond, lambda: self.graph(sc.then, args, env),
                                lambda: self.graph(sc.else_, args, env), self.types.get(node),
                                _loops_in(sc.then) or _loops_in(sc.else_))
        elif isinstance(node.fn, Constant) and isinstance(node.fn.value, Graph):
            value = self.graph(node.fn.value, [self.node(a, env) for a in node.args], env)
        else:
            name = primitive_name(node)
            if name == "make_tuple":
                value = tuple(self.node(a, env) for a in node.args)
            elif name == "range":      # what a `for` loop over a range walks: start, step
                bounds = [self.node(a, env) for a in node.args]
                value = _Range(bounds[0] if len(bounds) > 1 else Ref("const", value=0),
                               bounds[2] if len(bounds) > 2 else Ref("const", value=1))
            elif name == "iter_keys" and isinstance(self.node(node.args[0], env), _Range):
                value = self.node(node.args[0], env)
            elif name == "getitem" and isinstance(self.node(node.args[0], env), _Range):
                r, k = self.node(node.args[0], env), self.node(node.args[1], env)
                step = self.emit("mul", [k, r.step], node)
                value = self.emit("add", [r.start, step], node)
            elif name == "getitem" and isinstance(node.args[1], Constant):
                value = self.node(node.args[0], env)[node.args[1].value]
            elif name in ("depend", "jvp_check_tangent"):
                value = self.node(node.args[0] if name == "depend" else node.args[1], env)
            elif name in ("truth", "to_bool"):   # the condition of an `if`: x != 0
                value = self.node(node.args[0], env)
                if value is ZERO or self.dtype(value) != np.bool_:
                    value = self.emit("ne", [value, Ref("const", value=0)], node)
            elif name == "grad_zeros":    # a tangent known to be zero
                value = ZERO
            elif name in LOWERINGS and name != "vectorize_call":
                value = self.emit(name, [self.node(a, env) for a in node.args], node)
            elif name == "raise_":
                raise NotLowered("it may raise (an `assert`, a `raise`, or the depth check "
                                 "of a recursion run as loops), which kernels do not lower")
            else:
                raise NotLowered(f"`{name or node.fn}` has no TVM lowering")
        env[node] = value
        return value

    # Loops, and branches that contain loops, are statements of the kernel: `state` ops are
    # its mutable variables, `assign` sets one, `loop` (`while` its operand) and `if`/`else`
    # open a block that `end` closes.  Values made inside a block are not reused after it.

    def statement(self, prim: str, args: tuple = ()) -> Ref:
        self.ops.append(Op(prim, tuple(args), Spec(np.dtype(bool), ())))
        if prim in ("loop", "if"):
            self.scopes.append(dict(self.made))
        elif prim in ("else", "end"):
            self.made = dict(self.scopes[-1]) if prim == "else" else self.scopes.pop()
        return Ref("op", len(self.ops) - 1)

    def state(self, init, dtype: np.dtype) -> Ref:
        """A variable of the kernel, set to `init` (a value known zero: 0)."""
        init = Ref("const", value=0) if init is ZERO else init
        self.ops.append(Op("state", (init,), Spec(np.dtype(dtype), self.full)))
        return Ref("op", len(self.ops) - 1)

    def assign(self, pairs: list) -> None:
        """Set variables to values, all read before any is set (`a, b = b, a`)."""
        values = [Ref("const", value=0) if v is ZERO else
                  self.op("pos", [v], self.dtype(v)) if self.is_state(v) else v
                  for _, v in pairs]
        for (target, _), v in zip(pairs, values):
            if v is not UNSET:
                self.ops.append(Op("assign", (target, v), self.ops[target.index].out))

    def is_state(self, ref: Ref) -> bool:
        return ref.kind == "op" and self.ops[ref.index].prim == "state"

    def states_like(self, t):
        """Variables for a value of type t: a number, or a tuple of them."""
        if isinstance(t, AScalar):
            return self.state(Ref("const", value=0), np.dtype(t.pytype))
        if isinstance(t, ATuple):
            return tuple(self.states_like(item) for item in t.items)
        numbers = [o for o in options(t) if not isinstance(o, ANone)
                   and not (isinstance(o, AObject) and o.value is UNBOUND)]
        if len(numbers) == 1 and isinstance(numbers[0], AScalar):
            # a number, or a variable not assigned (UNSET) or its tangent (None, ZERO)
            return self.states_like(numbers[0])
        raise NotLowered(f"a branch or loop gives {t!r}, not numbers")

    def choose(self, cond, then, other, t, statements: bool):
        """`then()` if cond else `other()`: both computed and selected, or, where a branch
        loops, an `if` statement setting variables."""
        if not statements:
            return self.select(cond, then(), other(), t)
        result = self.states_like(t)
        self.statement("if", (cond,))
        self.assign(list(zip(_flat(result), _flat(then()))))
        self.statement("else")
        self.assign(list(zip(_flat(result), _flat(other()))))
        self.statement("end")
        return result

    def loop(self, h: Graph, args: list, outer: dict):
        """A call of the loop h (a graph that calls itself in tail position, through its
        branches): its `while` statement (`run`), then the branch it left by (an exit: the
        function's code after the loop), on the values kept when it left."""
        exits = self.run(h, args, outer)
        result = self.graph(exits[-1][0], exits[-1][1], outer)
        for (e, kept, taken) in exits[-2::-1]:
            result = self.choose(taken, lambda e=e, kept=kept: self.graph(e, kept, outer),
                                 lambda result=result: result, self.types.get(e.output),
                                 _loops_in(e))
        return result

    def run(self, h: Graph, args: list, outer: dict) -> list:
        """The `while` statement of loop h: its variables are h's parameters; a pass runs
        h's body to the branch it ends in (`walk`): a call of h again sets them to the next
        values, any other branch (an exit) keeps its arguments and stops the loop.  The
        exits, with the variables holding their arguments and (several exits) whether each
        was taken."""
        found: list[Graph] = []
        _exits(h, h, found)
        loop = _Loop(h, [self.variable(a, p) for a, p in zip(args, h.parameters)],
                     [(e, [self.variable(ZERO, p) for p in e.parameters],
                       self.state(Ref("const", value=False), np.dtype(bool))
                       if len(found) > 1 else None) for e in found],
                     self.state(Ref("const", value=True), np.dtype(bool)))
        self.active.append(h)
        self.statement("loop", (loop.running,))
        self.walk(h, loop.states, outer, loop)
        self.statement("end")
        self.active.pop()
        return loop.exits

    def walk(self, g: Graph, args: list, outer: dict, loop: "_Loop") -> None:
        """One pass of `loop`'s body from g (its header, or a branch or block on the way back
        to it), its branches as `if` statements, to the branch that continues or exits."""
        env = {**outer, **dict(zip(g.parameters, args))}
        if g is not loop.header and _is_loop(g, loop.header):
            # a loop in the tail of the body (`for ...: while ...:`): run it, then go on
            # from the branch it left by
            exits = self.run(g, args, env)
            for k, (e, kept, taken) in enumerate(exits[:-1]):
                self.statement("if", (taken,))
                self.branch(e, kept, env, loop)
                self.statement("else")
            self.branch(exits[-1][0], exits[-1][1], env, loop)
            for _ in exits[:-1]:
                self.statement("end")
            return
        out = g.output
        sc = switch_call(out)
        if sc is not None:
            cond = self.node(sc.cond, env)
            branch_args = [self.node(a, env) for a in sc.args]
            self.statement("if", (cond,))
            self.branch(sc.then, branch_args, env, loop)
            self.statement("else")
            self.branch(sc.else_, branch_args, env, loop)
            self.statement("end")
        else:
            self.branch(out.fn.value, [self.node(a, env) for a in out.args], env, loop)

    def branch(self, b: Graph, args: list, env: dict, loop: "_Loop") -> None:
        """Where a pass of `loop` goes on to b(args): the next pass, more of the body, or an
        exit (the next of `_exits`' order)."""
        if b is loop.header:
            self.assign(self.settings(loop.states, args))
        elif _reaches(b, loop.header):
            self.walk(b, args, env, loop)
        else:
            e, kept, taken = loop.exits[loop.taken]
            loop.taken += 1
            flag = [] if taken is None else [(taken, Ref("const", value=True))]
            self.assign(self.settings(kept, args) + flag
                        + [(loop.running, Ref("const", value=False))])

    def variable(self, init, p: Node):
        """A loop's variable for its parameter p: a `state` for a number; the range a `for`
        loop walks is no value of the kernel, and stays what it is (`settings`)."""
        t = self.types.get(p)
        if isinstance(init, _Range) or (init is ZERO and (isinstance(t, ANone) or (
                isinstance(t, AObject) and t.pytype is range))):
            return init     # a range, the tangent of one (None), or the exit's to come
        return self.state(init, self.number_type(p))

    def settings(self, variables: list, values: list) -> list:
        """The (variable, value) pairs that set a loop's variables; a range is kept (the
        exits' variables take it), and must not change."""
        pairs = []
        for i, (var, value) in enumerate(zip(variables, values)):
            if var is ZERO and (value is ZERO or isinstance(value, _Range)):
                variables[i] = value
            elif isinstance(value, _Range) or isinstance(var, _Range) or var is ZERO:
                if var is not value:
                    raise NotLowered("a loop goes over a range that changes")
            else:
                pairs.append((var, value))
        return pairs

    def number_type(self, p: Node) -> np.dtype:
        t = self.types.get(p)
        if not isinstance(t, AScalar):
            raise NotLowered(f"a loop variable is {t!r}, not a number")
        return np.dtype(t.pytype)

    def select(self, cond, then, other, t):
        """where(cond, then, other), item by item for tuples; `t` the result's type."""
        if isinstance(then, tuple):
            items = t.items if isinstance(t, ATuple) else [None] * len(then)
            return tuple(self.select(cond, a, b, i) for a, b, i in zip(then, other, items))
        if then is ZERO and other is ZERO:
            return ZERO
        if then is UNSET or other is UNSET:
            return other if then is UNSET else then
        dtype = np.dtype(t.pytype) if isinstance(t, AScalar) else \
            np.result_type(*(self.dtype(r) for r in (then, other) if r is not ZERO))
        return self.op("where", [cond, then, other], dtype)


def _tail_calls(g: Graph) -> list[Graph]:
    """The graphs g calls in tail position: its branches', or the graph its output calls."""
    sc = switch_call(g.output)
    if sc is not None:
        return [sc.then, sc.else_]
    out = g.output
    if isinstance(out, Apply) and isinstance(out.fn, Constant) and isinstance(out.fn.value,
                                                                             Graph):
        return [out.fn.value]
    return []


def _reaches(g: Graph, h: Graph, avoid: Graph | None = None) -> bool:
    """Whether g leads to a call of h in tail position (not through `avoid`)."""
    seen, stack = set(), [g]
    while stack:
        k = stack.pop()
        for t in _tail_calls(k):
            if t is h:
                return True
            if t not in seen and t is not avoid:
                seen.add(t)
                stack.append(t)
    return False


def _is_loop(g: Graph, within: Graph | None = None) -> bool:
    """A `while` or `for` loop, as the frontend makes them: a graph that calls itself in
    tail position (`within` the body of loop `within`: not through it)."""
    return _reaches(g, g, within)


def _loops_in(g: Graph) -> bool:
    return any(_is_loop(k) for k in reachable_graphs(g))


class _Range:
    """`range(...)` in a kernel: what its items are made of (i-th item: start + i * step)."""

    def __init__(self, start: Ref, step: Ref):
        self.start, self.step = start, step


class _Loop:
    """A loop being translated: its header graph, the variables holding its parameters, its
    exits (graph, the variables keeping its arguments, whether it was taken), the variable
    that keeps it running, and how many exits `walk` has met."""

    def __init__(self, header: Graph, states: list, exits: list, running: Ref):
        self.header, self.states, self.exits, self.running = header, states, exits, running
        self.taken = 0


def _exits(g: Graph, h: Graph, found: list) -> None:
    """The branches of loop h's body (from g) that leave the loop, in `walk`'s order."""
    if g is not h and _is_loop(g, h):
        inner: list[Graph] = []
        _exits(g, g, inner)
        branches = inner
    else:
        sc = switch_call(g.output)
        branches = [sc.then, sc.else_] if sc is not None else [g.output.fn.value]
    for b in branches:
        if b is h:
            continue
        if _reaches(b, h):
            _exits(b, h, found)
        else:
            found.append(b)


def _flat(value) -> list:
    """The Refs of a value (a Ref, or nested tuples of them)."""
    return [r for item in value for r in _flat(item)] if isinstance(value, tuple) else [value]


def kernel_program(node: Apply, types: dict, wanted: list[int] | None = None) -> Program:
    """The Program of one `vectorize_call` node: its inputs are the call's operands, its
    outputs the function's result, or the results `wanted` of a function returning a tuple,
    on the broadcast shape."""
    f = node.args[0].value
    inputs = [spec_of(types.get(a)) for a in node.args[1:]]
    if any(s is None for s in inputs):
        raise NotLowered("an operand's shape is not known when compiling")
    tr = _Translator(types, inputs)
    result = tr.graph(f, [Ref("in", i) for i in range(len(inputs))])
    if isinstance(result, tuple):
        specs = [spec_of(t) for t in types[node].items]
        wanted = range(len(result)) if wanted is None else wanted
        results, specs = [result[k] for k in wanted], [specs[k] for k in wanted]
    else:
        results, specs = [result], [spec_of(types.get(node))]
    outputs = []
    for r, spec in zip(results, specs):
        if r.kind != "op" or tr.ops[r.index].out.shape != spec.shape or r.index in outputs:
            # an input, constant or known zero returned as it is: a copy on the output's shape
            if r is ZERO:
                r = Ref("const", value=0.0)
            tr.ops.append(Op("broadcast_to", (r, Ref("const", value=spec.shape)), spec))
            r = Ref("op", len(tr.ops) - 1)
        outputs.append(r.index)
    return Program(tuple(inputs), tuple(tr.ops), tuple(outputs), kernel=True)


def _items_used(node: Apply, uses: list) -> list[int] | None:
    """The items of a tuple-valued call that are used, when every use takes one item."""
    items = []
    for user, index in uses:
        if not (isinstance(user, Apply) and primitive_name(user) == "getitem" and index == 1
                and isinstance(user.args[1], Constant) and isinstance(user.args[1].value, int)):
            return None
        items.append(user.args[1].value)
    return sorted(set(items))


def compile_kernels(root: Graph, types: dict, target, report) -> list:
    """Replace every `vectorize_call` whose function translates by a call of its kernel (a
    `Region`); the others stay np.vectorize's, with a warning."""
    from backends.tvm.region import Region
    from backends.tvm.regions import _name

    kernels = []
    calls = [n for g in reachable_graphs(root) for n in toposort(g)
             if isinstance(n, Apply) and n.graph is g and primitive_name(n) == "vectorize_call"
             and isinstance(n.args[0], Constant) and isinstance(n.args[0].value, Graph)]
    uses = users(root)
    for node in calls:
        name = node.args[0].value.name
        wanted = _items_used(node, uses.get(node, [])) \
            if isinstance(types.get(node), ATuple) else None
        try:
            program = kernel_program(node, types, wanted)
        except NotLowered as e:
            warnings.warn(f"vectorize({name}) runs as np.vectorize, not as a TVM kernel: {e}",
                          RuntimeWarning, stacklevel=2)
            continue
        report.stage(f"tvm kernel vectorize({name})")
        inputs = list(node.args[1:])
        region = Region(f"vectorized{len(kernels)}_{name}", program, target,
                        [_name(n) for n in inputs],
                        [f"out{k}" for k in range(len(program.outputs))],
                        [False] * len(program.outputs))
        call = Apply([Constant(region), *inputs], node.graph,
                     Debug(f"vectorized_{name}", node.location, id=node.debug.id))
        if wanted is None:
            types[call] = types[node]     # one array, or the tuple of them
            replace(root, node, call)
        else:                             # only the items used: item k is output wanted[k]
            types[call] = ATuple(tuple(types[node].items[k] for k in wanted)) \
                if len(wanted) > 1 else types[node].items[wanted[0]]
            for user, _ in uses.get(node, []):
                k = wanted.index(user.args[1].value)
                new = call if len(wanted) == 1 else Apply(
                    [user.fn, call, Constant(k)], user.graph, user.debug)
                types[new] = types[user]
                replace(root, user, new)
        kernels.append(region)
    return kernels



# ------------------------------------------------------------------------------- TIR

# float32 exp and tanh: TVM's fast versions, vectorized (FastMathTransform's).  Other float32
# transcendental functions are computed in float64, as np.vectorize computes them on Python
# floats: float64 exp, log and tanh have vectorizing lowerings (vmath.py) where TVM's float32
# ones are scalar libm calls.
_FAST = {"exp": lambda t: load_tvm().topi.fast_exp(t),
         "tanh": lambda t: load_tvm().topi.fast_tanh(t)}
_WIDENED = {"exp", "log", "tanh", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "arctan",
            "sinh", "cosh", "arcsin", "arccos", "power", "pow"}


def _expression(prim: str, args: list, dtype: str):
    """The TIR expression of one elementwise op on operands cast as needed."""
    from tvm import tirx

    unary = {"neg": lambda x: -x, "negative": lambda x: -x, "exp": tirx.exp, "log": tirx.log,
             "tanh": tirx.tanh, "sqrt": tirx.sqrt, "sin": tirx.sin, "cos": tirx.cos,
             "tan": tirx.tan, "arctan": tirx.atan, "sinh": tirx.sinh, "cosh": tirx.cosh,
             "arcsin": tirx.asin, "arccos": tirx.acos, "log1p": tirx.log1p,
             "expm1": lambda x: tirx.exp(x) - tirx.const(1.0, str(x.ty)),
             "abs": tirx.abs, "builtin_abs": tirx.abs, "square": lambda x: x * x,
             "floor": tirx.floor, "ceil": tirx.ceil, "not_": lambda x: tirx.Not(x),
             "reciprocal": lambda x: tirx.const(1.0, str(x.ty)) / x,
             "pos": lambda x: x, "astype": lambda x: x, "cast": lambda x: x,
             "to_float": lambda x: x, "sign": lambda x: tirx.Select(
                 tirx.GT(x, tirx.const(0, str(x.ty))), tirx.const(1, str(x.ty)), tirx.Select(
                     tirx.LT(x, tirx.const(0, str(x.ty))), tirx.const(-1, str(x.ty)), x))}
    binary = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y,
              "mul": lambda x, y: x * y, "truediv": lambda x, y: x / y,
              "maximum": tirx.max, "minimum": tirx.min, "power": tirx.power,
              "pow": tirx.power, "lt": tirx.LT, "le": tirx.LE, "gt": tirx.GT, "ge": tirx.GE,
              "eq": tirx.EQ, "ne": tirx.NE,
              "bitand": lambda x, y: tirx.And(x, y) if str(x.ty) == "bool" else x & y,
              "bitor": lambda x, y: tirx.Or(x, y) if str(x.ty) == "bool" else x | y}
    if prim == "where":
        return tirx.Select(args[0], args[1], args[2])
    if prim == "strong_zero":
        return tirx.Select(tirx.EQ(args[0], tirx.const(0, str(args[0].ty))),
                           tirx.const(0, dtype), args[1])
    if prim == "clip":
        return tirx.min(tirx.max(args[0], args[1]), args[2])
    if prim in unary:
        return unary[prim](args[0])
    if prim in binary:
        return binary[prim](*args)
    raise NotLowered(f"`{prim}` inside a vectorized function")


def _kernel_func(program: Program):
    """One PrimFunc `vectorized(inputs..., outputs...)`: a loop nest over the broadcast shape
    computing every output of the element it is at (operands read at their broadcast index).
    Transcendental values on the whole shape are blocks of their own (`shared<k>`), which the
    schedule computes inside that nest a vector at a time: each is computed once per element,
    however many outputs read it (an output's block, like any TIR block, computes what it
    reads inline, and blocks share nothing)."""
    from tvm import te, tirx

    shape = program.ops[program.outputs[0]].out.shape
    holders = [te.placeholder(spec.shape, str(spec.dtype), f"in{i}")
               for i, spec in enumerate(program.inputs)]
    staged: dict[int, object] = {}

    def values_at(idx, count: int, operand: Ref | None = None):
        """The values of the first `count` ops at index idx (or of `operand` after them)."""
        values: list = []

        def read(ref: Ref, dtype):
            if ref.kind == "in":
                spec = program.inputs[ref.index]
                lead = len(idx) - len(spec.shape)
                x = holders[ref.index](*(0 if d == 1 else idx[lead + k]
                                         for k, d in enumerate(spec.shape)))
            elif ref.kind == "op":
                x = values[ref.index]
            else:
                return tirx.const(ref.value, dtype)
            return x if dtype is None or str(x.ty) == dtype else tirx.Cast(dtype, x)

        for k, op in enumerate(program.ops[:count]):
            values.append(staged[k](*idx) if k in staged else _value(program, op, read))
        return values if operand is None else read(operand, "float32")

    for k in _staged(program):
        op = program.ops[k]
        if str(op.out.dtype) == "float32" and op.prim in _FAST:
            # TVM's fast float32 exp and tanh (FastMathTransform's, as regions have them)
            arg = te.compute(shape, _operand(values_at, k, op.args[0]), name=f"arg{k}")
            staged[k] = _FAST[op.prim](arg)
        else:
            staged[k] = te.compute(shape, _stage(values_at, k), name=f"shared{k}")
    outs = te.compute(shape, lambda *idx: [values_at(idx, len(program.ops))[i]
                                           for i in program.outputs], name="vectorized")
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return te.create_prim_func(holders + outs).with_attr("global_symbol", "vectorized")


def _value(program: Program, op: Op, read):
    """The TIR expression of one elementwise op; `read(ref, dtype)` gives an operand (cast
    to dtype, unless None)."""
    from tvm import tirx

    out = str(op.out.dtype)
    if op.prim == "broadcast_to":
        return read(op.args[0], out)
    if op.prim == "where":
        return _expression(op.prim, [read(op.args[0], "bool"), read(op.args[1], out),
                                     read(op.args[2], out)], out)
    if out == "bool" and op.prim not in ("not_", "bitand", "bitor"):
        # a comparison: in the operands' common dtype (a Python number is weak)
        arrays = [a for a in op.args if a.kind in ("in", "op")]
        common = str(np.result_type(*(
            program.inputs[a.index].dtype if a.kind == "in" else
            program.ops[a.index].out.dtype for a in arrays))) if arrays else "float64"
        common = "int8" if common == "bool" else common   # LLVM compares no i1 as floats
        return _expression(op.prim, [read(a, common) for a in op.args], out)
    if op.prim in _WIDENED and out == "float32":
        args = [read(a, "float64") for a in op.args]
        return tirx.Cast(out, _expression(op.prim, args, "float64"))
    return _expression(op.prim, [read(a, out) for a in op.args], out)


_CHUNK = 1024   # elements per task of a kernel with loops (`_statement_func`)


def _statement_func(program: Program, target):
    """The PrimFunc of a kernel with loops (`_Translator.loop`): one loop over the elements,
    on the thread pool (CPU) or one thread per element (CUDA), whose body is the function's
    statements on that element's numbers: a `while` per loop, an `if` per branch that
    loops, the other ops values bound once.  Elements do not share a vector: each runs its
    loop as many times as it needs."""
    from tvm import tirx
    from tvm.script.ir_builder import IRBuilder
    from tvm.script.ir_builder import tirx as T

    from backends.tvm.schedule import PARALLEL_MIN
    from backends.tvm.target import is_gpu

    shape = program.ops[program.outputs[0]].out.shape
    size = int(np.prod(shape, dtype=np.int64))
    gpu = target is not None and is_gpu(target)
    with IRBuilder() as builder:
        with T.prim_func():
            T.func_name("vectorized")
            ins = [T.arg(f"in{i}", T.Buffer(spec.shape, str(spec.dtype)))
                   for i, spec in enumerate(program.inputs)]
            outs = [T.arg(f"out{k}", T.Buffer(shape, str(program.ops[i].out.dtype)))
                    for k, i in enumerate(program.outputs)]
            T.func_attr({"global_symbol": "vectorized", "tir.noalias": True,
                         "tir.is_scheduled": True})
            frames = []

            def enter(frame):
                frames.append(frame)
                return frame.__enter__()

            def variables_here() -> dict:
                return {k: T.alloc_buffer((1,), str(op.out.dtype), scope="local")
                        for k, op in enumerate(program.ops) if op.prim == "state"}

            if gpu:
                threads = min(256, size)
                bx = enter(T.launch_thread("blockIdx.x", -(-size // threads)))
                tx = enter(T.launch_thread("threadIdx.x", threads))
                e = bx * threads + tx
                enter(T.If(e < size))
                enter(T.Then())
                variables = variables_here()
            else:
                # chunks of elements, each allocating the variables once (inside the loop
                # over the elements, each element's allocation is a call to TVM's
                # workspace allocator: 30x slower)
                chunk = min(_CHUNK, size)
                count = -(-size // chunk)
                c = enter((T.parallel if size >= PARALLEL_MIN else T.serial)(0, count))
                variables = variables_here()
                e = c * chunk + enter(T.serial(0, chunk))
                if size % chunk:
                    enter(T.If(e < size))
                    enter(T.Then())
            idx, rest = [], e
            for d in reversed(shape):
                idx.insert(0, tirx.floormod(rest, d))
                rest = tirx.floordiv(rest, d)
            inputs = []
            for buf, spec in zip(ins, program.inputs):
                lead = len(shape) - len(spec.shape)
                at = [0 if d == 1 else idx[lead + k] for k, d in enumerate(spec.shape)]
                inputs.append(T.bind(tirx.BufferLoad(buf, at)))
            values: list = []
            blocks: list = []

            def read(ref: Ref, dtype):
                if ref.kind == "in":
                    x = inputs[ref.index]
                elif ref.kind == "op":
                    x = variables[ref.index][0] if ref.index in variables else values[ref.index]
                else:
                    return tirx.const(ref.value, dtype)
                return x if dtype is None or str(x.ty) == dtype else tirx.Cast(dtype, x)

            for k, op in enumerate(program.ops):
                value = None
                if op.prim == "state":
                    T.buffer_store(variables[k], read(op.args[0], str(op.out.dtype)), [0])
                elif op.prim == "assign":
                    T.buffer_store(variables[op.args[0].index],
                                   read(op.args[1], str(op.out.dtype)), [0])
                elif op.prim == "loop":
                    blocks.append([T.While(read(op.args[0], "bool"))])
                    blocks[-1][0].__enter__()
                elif op.prim == "if":
                    blocks.append([T.If(read(op.args[0], "bool")), T.Then()])
                    for frame in blocks[-1]:
                        frame.__enter__()
                elif op.prim == "else":
                    blocks[-1].pop().__exit__(None, None, None)
                    blocks[-1].append(T.Else())
                    blocks[-1][-1].__enter__()
                elif op.prim == "end":
                    for frame in reversed(blocks.pop()):
                        frame.__exit__(None, None, None)
                else:
                    value = T.bind(_value(program, op, read))
                values.append(value)
            for buf, i in zip(outs, program.outputs):
                T.buffer_store(buf, read(Ref("op", i), str(program.ops[i].out.dtype)), idx)
            for frame in reversed(frames):
                frame.__exit__(None, None, None)
    return builder.get()


def _stage(values_at, k: int):
    return lambda *idx: values_at(idx, k + 1)[k]


def _operand(values_at, k: int, ref: Ref):
    return lambda *idx: values_at(idx, k, ref)


def _schedule(func, program: Program, target):
    """One loop nest over every element: on the CPU the loops fused, split into vectors of
    8 lanes and the outer loop run on the thread pool (when there are enough elements); on a
    GPU one thread per element."""
    from tvm import s_tir

    from backends.tvm.schedule import PARALLEL_MIN, VECTOR
    from backends.tvm.target import is_gpu

    sch = s_tir.Schedule(func)
    # te.compute makes one block per output, all in the one loop nest
    block = sch.get_sblock("vectorized" if len(func.params) <= len(program.inputs) + 1
                           else "vectorized_v0")
    loops = sch.get_loops(block)
    if not loops:
        return sch.mod["main"].with_attr("tir.is_scheduled", True)
    size = int(np.prod([int(sch.get(loop).extent) for loop in loops]))
    last = int(sch.get(loops[-1]).extent)
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    gpu = target is not None and is_gpu(target)
    if gpu:
        bx, tx = sch.split(fused, [None, 256])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        at = tx
    elif last % VECTOR == 0:
        # (vectors within a row: a shared value's 8 elements are then a box of its block)
        at, inner = sch.split(fused, [None, VECTOR])
        sch.vectorize(inner)
    else:
        at = fused
    if not gpu and size >= PARALLEL_MIN:
        sch.parallel(at)
    outputs = {sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))
               if sch.get(b).name_hint.startswith("vectorized")}
    for b in reversed(sch.get_child_blocks(sch.get_sblock("root"))):
        if sch.get(b).name_hint in outputs:   # consumers first: each lands in the nest
            continue
        sch.compute_at(b, at, preserve_unit_loops=False)
        if gpu:     # one value per thread (CUDA kernels allocate no global memory)
            sch.set_scope(b, 0, "local")
        inner = sch.get_loops(b)[1:] if not gpu else []
        if inner:
            sch.vectorize(sch.fuse(*inner) if len(inner) > 1 else inner[0])
    return sch.mod["main"].with_attr("tir.is_scheduled", True)


def _staged(program: Program) -> list[int]:
    """The ops computed as blocks of their own (`shared<k>`): transcendental values on the
    whole shape, each read by several outputs or ops."""
    shape = program.ops[program.outputs[0]].out.shape
    return [k for k, op in enumerate(program.ops)
            if op.prim in _WIDENED and op.out.shape == shape]


def build_module(program: Program, target=None):
    """The Relax module whose `main` calls the kernel once (so a kernel takes the path of a
    region: the pipeline's unaligned inputs, caches, the VM)."""
    from tvm import relax

    func = _statement_func(program, target) \
        if any(op.prim == "loop" for op in program.ops) \
        else _schedule(_kernel_func(program), program, target)
    bb = relax.BlockBuilder()
    params = [relax.Var(f"in{i}", relax.TensorType(spec.shape, str(spec.dtype)))
              for i, spec in enumerate(program.inputs)]
    outs = [program.ops[i].out for i in program.outputs]
    with bb.function("main", params):
        gv = bb.add_func(func, "vectorized")
        sinfo = [relax.TensorType(spec.shape, str(spec.dtype)) for spec in outs]
        call = relax.call_tir(gv, params, sinfo if len(sinfo) > 1 else sinfo[0])
        with bb.dataflow():
            result = bb.emit_output(call)
        bb.emit_func_output(result)
    return bb.get()
