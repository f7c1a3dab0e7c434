"""Type and shape inference: an abstract interpreter over graphs, for one argument signature.

    typed = infer(graph, args)      # args: the root graph's runtime arguments
    typed.graph                     # the program, specialised: one graph per signature
    typed.types[node]               # the abstract value of every node (see passes.abstract)

**Frames and contexts.**  A graph is interpreted in a *frame*: its abstract arguments and the
*context* its free variables are read from.  A context is the values of a nested graph's free
variables (the nodes of enclosing graphs it reads, its nested graphs' included) as the frame
that made the closure saw them; a top-level graph has none.  A closure is a graph together
with its context, so a closure called far from where it was made reads the right values.
Contexts are interned by their values: two frames of the enclosing graph that give a nested
graph the same values make the same closure, which is then called in the same frames.  (A
frame per enclosing frame, as a chain of parent frames would give, multiplies at each level
of nesting: a loop in a branch in a loop in a helper called with many constants made tens of
thousands of frames.)  One frame is evaluated by one pass over its graph's nodes (in order),
applying the primitives' type rules (`passes.type_rules`) and, for calls of graphs, the
output of the callee's frame.

**Fixpoint.**  A worklist holds the frames to (re-)evaluate.  A call whose callee has not
returned yet gives `BOTTOM`, which `join` ignores, so a recursive function's type is its base
cases' first, then grows; when a frame's output grows, its callers are queued again.  When a
frame's values change, the closures it makes change context, so the frames nested in it are
new ones; a frame that none of its callers calls any more is not evaluated again (until one
does).  Past `CONTEXTS_PER_GRAPH` contexts of one graph, further closures of it share one
context holding the join of their values, whose frames are queued again when it grows.
Termination comes from widening: a recursive
graph (a loop) gets one frame per shape of arguments ("skeleton": types without constant
values or dimension sizes) whose arguments are joined, so a loop counter becomes `int` and a
carried array that changes shape gets `None` dimensions; its scalar arguments lose their
constant values at the first call already (the first iteration's `i = 0` is joined away by
the second).  Other graphs get one frame per argument values (so constants stay known
across calls) up to a limit, then one joined frame.  A frame whose context's maker (at any
depth) is queued waits for it: the maker's evaluation may give it a new context.  Both
save rounds of evaluations for nothing (a small `while` loop's forward is inferred in 8).

**Errors.**  A rule raises `RuleError` only when every runtime value it describes would fail.
Errors are collected during the fixpoint and reported (as a located `MyirTypeError`) only for
code that certainly runs: the root, then calls with one possible callee made before anything
that may not return.  An error in a branch the arguments may not take -- even one certain to
happen if the branch runs, such as `(3,4) @ (5,6)` -- is no error before running: CPython
runs such a program whenever the branch is not taken, and so does the compiled code; when the
branch runs, the operation raises CPython's own exception with CPython's message (the code
generated for it is the operation itself), as the differential tests require.  Not so what
compiled code cannot do where CPython runs on (`type_rules.Unsupported`: a dict key not known
when compiling): that is an error wherever it may run, since what follows would be typed as
if it never ran.

**Values of several types.**  Python lets the branches of an `if` give a variable different
types; their join is an `AUnion` (passes/abstract.py), which the program may return, store
in tuples and pass to functions.  A call of a primitive splits the unions among its
arguments (a call of a union splits the union): it is applied to each combination of their
options (`strict_rule`: a TypeError CPython would raise counts as failing), and the results
are joined.  If one combination fails with a type error and another does not, the branches'
types disagree where that matters: a `UnionError`, reported before running (if the use
certainly runs) at the use, naming both types, with a note pointing at the branches (the
union's `origin`, recorded where the interpreter sees kinds meet).  Two cases stay run-time
errors: an option that is None (a Python program tests `if y is None` in ways inference does
not follow: it is like a variable that may be unbound), and a use in code that may not run.
Where some combinations raise and others return, the call's type is ANY: the optimizer folds
what types make certain, and must not fold away an operation that raises for one branch.

**Cost.**  Inference runs at every compilation, so it avoids repeating work: a rule is
applied once per argument values (`Interpreter.rule_results`), its numpy stand-in runs once
per process (`type_rules._EVALUATED`), a closure's abstract value is made once per frame, and
a frame is evaluated again only when what it reads changed (see Fixpoint).

**Specialisation.**  Each graph gets one copy per signature it is called with (the widened
types of its arguments, under one copy of its parent); a closure called with several
signatures gets one copy typed with their join.  The copies' nodes carry their types in
`node.abstract`, so the printed graph shows them.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
from dataclasses import dataclass

import numpy as np

from myir.errors import MyirTypeError
from myir.ir.analysis import free_variables, primitive_name, recursive_graphs, toposort, users
from myir.ir.graph import Apply, Constant, Graph, Node, Parameter
from myir.ir.primitives import PRIMITIVES, Primitive
from passes.abstract import (ANY, BOTTOM, AArray, AbstractValue, ADict, AEnv, AFunction,  # noqa: F401
                             ANone, AObject, ARecord, AScalar, ASlice, ATuple, AUnion, Closure,
                             abstract_of, conforms, function, join, kind, located, options,
                             parts, truncate, widen)
from passes.type_rules import (TYPE_RULES, RuleError, TypeFailure, Unsupported, strict_rule,
                               truthiness, type_name)

# A non-recursive graph gets one frame per argument values, up to this many per context;
# then one frame with the join of them all.  The join can refuse a program CPython runs: a
# helper called with a list in one place and a float in another gets their union, and an
# operation that works on each fails on the union.  So the bound is well above what a
# program's own functions need: np.quantile's helper, which the optimizer leaves a call,
# takes nine signatures in a program of nine quantile calls (tests/test_numpy_api.py).
FRAMES_PER_GRAPH = 32
# A graph marked `unrolled` (a dict comprehension, a `for` loop adding keys to a dict:
# frontend/parser.py) is recursive but gets one frame per argument values, like a
# non-recursive one, so that its counter stays a constant at each step (its length is a
# constant: `comp_length`), up to this many.
UNROLLED_FRAMES = 10_000
# A recursive graph gets one frame per skeleton of its arguments, up to this many.
SKELETONS_PER_GRAPH = 4
# A nested graph gets one context per values of its free variables, up to this many; then
# one context holding their join (but see `_context_limit`).
CONTEXTS_PER_GRAPH = 64
# ...and this many where the values hold a closure of the graph itself: a backpropagator
# made at each level of a recursion captures those of the levels below, so each round of
# the fixpoint makes a context one level deeper, which no constant is kept for (the
# recursion's frames have none).  Sixty-four of them cost two seconds of inference for the
# gradient of a three-line recursion with two calls.
NESTED_CONTEXTS = 4
# Tuples and envs nested deeper than this are ANY in the values joined across iterations.
MAX_DEPTH = 6
# Frame evaluations before inference gives up (a bug: the lattice is finite).
MAX_EVALUATIONS = 200_000
# A call whose arguments' unions make more combinations of types than this is ANY.
MAX_COMBINATIONS = 16
# Primitives that take a value of any type without looking at it: a union passes through
# them whole rather than being split into its options (a tuple of two unions stays one
# tuple, not four).  And grad_seed, whose rule judges a union as a whole: an output that is
# an int on some paths only is differentiable (`type_rules._union_seed`).
PASS_THROUGH = frozenset({"make_tuple", "switch", "depend", "env_setitem", "raise_", "is_",
                          "is_not", "grad_seed"})
SWITCH = PRIMITIVES["switch"]
VECTORIZE_CALL = PRIMITIVES["vectorize_call"]
# Rule results whose arguments are plain data (`_plain_data`), for every inference in the
# process: a program's rules are applied to the same few types at every compilation, and
# applying them was a fifth of a small program's inference.  Cleared when it holds this many.
SHARED_RULE_RESULTS: dict = {}
SHARED_RULE_RESULTS_MAX = 4096


def skeleton(value):
    """The part of an abstract value that recursion keeps: types and ranks, not constants
    or sizes."""
    if isinstance(value, AScalar):
        return value.pytype
    if isinstance(value, AArray):
        return value.dtype, value.ndim
    if isinstance(value, ATuple):
        return tuple(map(skeleton, value.items))
    if isinstance(value, (ADict, ARecord)):
        return kind(value), tuple(map(skeleton, value.items))
    if isinstance(value, AFunction):
        return AFunction
    if isinstance(value, AObject):
        return value.pytype
    if isinstance(value, AUnion):
        return frozenset(map(skeleton, value.options))
    return type(value)


def _holds_closure_of(graph: Graph, values: list) -> bool:
    """Whether `values` hold a closure of `graph`: as a function, in a container, or in the
    context of a closure they hold, at any depth."""
    stack, seen = list(values), set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, AFunction):
            for option in v.options:
                if isinstance(option, Closure):
                    if option.graph is graph:
                        return True
                    if option.context is not None:
                        stack.extend(option.context.env.values())
        else:
            stack.extend(parts(v))
    return False


def _plain_data(value) -> bool:
    """Whether `value` describes data only: not a function (a closure holds a frame of one
    inference), a gradient env or key (nodes of one program) or a union (its `origin` is a
    line of one program), so that results computed from it hold for every program."""
    t = type(value)
    if t is AScalar or t is AArray or t is ANone or value is ANY:
        return True
    if t is ATuple or t is ADict or t is ARecord:
        return all(map(_plain_data, value.items))
    if t is ASlice:
        return _plain_data(value.start) and _plain_data(value.stop) and _plain_data(value.step)
    if t is AObject:
        v = value.value
        return v is ANY or v is Ellipsis or isinstance(v, (str, type, np.dtype))
    return False


class UnionError(RuleError):
    """A use of a value of several types (an AUnion) that fails for one of them: the
    branches that made it disagree where that matters.  `notes`: (location, text) pairs."""

    def __init__(self, message: str, hint: str, notes: tuple = ()):
        super().__init__(message, hint)
        self.notes = notes


def _kind_phrase(a) -> str:
    """A type as an error message names it: `an array f64[3]`, `a tuple (int, int)`."""
    if isinstance(a, AArray):
        return f"an array {a!r}"
    if isinstance(a, ATuple):
        return f"a tuple {a!r}"
    if isinstance(a, ADict):
        return f"a dict {a!r}"
    if isinstance(a, AFunction):
        return "a function"
    if isinstance(a, ANone):
        return "None"
    return f"{'an' if type_name(a)[0] in 'aeiou' else 'a'} {type_name(a)}"


def _named(err: RuleError, node: Apply) -> str:
    """err's message naming the operand it is about by the program's name for it."""
    if err.about is None:
        return err.message
    i, phrase = err.about
    operand = node.args[i] if i < len(node.args) else None
    name = None if operand is None or isinstance(operand, Constant) else operand.debug.name
    if not (name and name.isidentifier()):
        return err.message
    return err.message.replace(phrase, f"`{name}`", 1)


def union_error(node: Apply, operand: Node, union: AUnion, failing, error: RuleError):
    """The error of `node`, which fails when its `operand`, of the types `union`, is of the
    type `failing`."""
    name = operand.debug.name if not isinstance(operand, Constant) else None
    what = f"`{name}`" if name and name.isidentifier() else "a value used here"
    kinds = " or ".join(map(_kind_phrase, union.options))
    origin = union.origin
    where = ""
    notes = ()
    if origin is not None:
        same = node.location is not None and node.location.filename == origin.filename
        where = f" at {'line ' + str(origin.line) if same else origin}"
        notes = ((origin, f"the branches here give {what} different types: {kinds}"),)
    message = (f"{what} is {kinds}, depending on the branch taken{where}, and this fails "
               f"when it is {_kind_phrase(failing)}: {error.message}")
    hint = (f"give {what} one type on every branch (convert where they differ), or use it "
            "only where each of its types works")
    return UnionError(message, hint, notes)


def _in_order(functions: frozenset) -> list:
    """A function value's options in an order fixed by the program, not by memory: a
    closure's graph (by its id, see `Debug`), then the context it reads (by when that
    context was made), then primitives by name.  Calling them in a set's order, by address, made
    the order frames were made in, and so which of them a graph's frame limit joins (where
    a loop's first iteration is typed apart), change from one process to the next."""
    return sorted(functions, key=lambda f: (1, f.name, 0) if isinstance(f, Primitive) else
                  (0, f.graph.debug.id, f.context.serial if f.context is not None else -1))


_serials = itertools.count()


class Context:
    """The values a nested graph reads from the graphs enclosing it, as a frame making a
    closure of it saw them (interned: one object per graph and values; past
    `CONTEXTS_PER_GRAPH`, the one joined context of the graph, whose `env` grows).
    `made_in`: the frames that made it, in order."""

    def __init__(self, graph: Graph, env: dict):
        self.serial = next(_serials)
        self.graph = graph
        self.env = env
        self.made_in: dict[Frame, None] = {}
        self.families: list[Family] = []   # of the graph's frames in this context

    def __repr__(self) -> str:
        return f"<context of {self.graph.name}: {len(self.env)} values>"


class Frame:
    """One graph evaluated with abstract arguments, in a context (None: a top-level graph)."""

    def __init__(self, graph: Graph, args: tuple, context: Context | None):
        self.serial = next(_serials)
        self.graph = graph
        self.args = args
        self.context = context
        self.types: dict[Node, object] = {}
        self.output = BOTTOM
        # in the order they came (dicts as ordered sets): frames are hashed by identity, and
        # a set's order, by address, made the order of re-evaluation, and so where a loop's
        # first iteration was typed apart, change from one run to the next
        self.callers: dict[Frame, None] = {}
        self.calls: dict[Apply, list[Frame]] = {}
        self.callees: set[Frame] = set()  # those of `calls`
        self.errors: dict[Apply, RuleError] = {}
        self.stale = False   # skipped while no caller called it: evaluate when one does

    def read(self, node: Node):
        """The value of `node`, a node of this frame's graph or one it reads from an
        enclosing graph."""
        if node.graph is self.graph:
            return self.types.get(node, BOTTOM)
        return ANY if self.context is None else self.context.env[node]

    def __repr__(self) -> str:
        return f"<frame {self.graph.name}{self.args}>"


def _splits(fn) -> bool:
    """Whether a call of `fn` splits its arguments' unions into their options: a primitive
    looks at its arguments (unless it passes them through); a graph is called with the
    union itself, and its nodes split it where they use it."""
    return isinstance(fn, AFunction) and any(
        isinstance(o, Primitive) and o.name not in PASS_THROUGH for o in fn.options)


class Family:
    """The frames of one graph in one context."""

    def __init__(self):
        self.frames: dict = {}
        self.joined: Frame | None = None


class Interpreter:
    """The worklist fixpoint over the frames of one program (see the module docstring)."""

    def __init__(self, root: Graph):
        self.recursive = recursive_graphs(root)
        self.families: dict[tuple, Family] = {}
        self.queue: deque[Frame] = deque()
        self.queued: set[Frame] = set()
        self.constants: dict[Constant, object] = {}  # of constants other than graphs
        self.closures: dict[tuple, object] = {}
        self.contexts: dict[tuple, Context] = {}       # (graph, ids of interned values)
        self.context_counts: dict[Graph, int] = {}
        self.joined_contexts: dict[Graph, Context] = {}
        self.rule_results: dict[tuple, object] = {}
        self.interned: dict = {}
        self.interned_by_id: dict[int, tuple] = {}
        self.applies: dict[Graph, list[Apply]] = {}
        self.free: dict[Graph, list[Node]] = {}
        self.evaluations = 0

    # -- frames

    def frame(self, graph: Graph, args: tuple, context: Context | None) -> Frame:
        family = self.families.get((graph, context))
        if family is None:
            family = self.families[graph, context] = Family()
            if context is not None:
                context.families.append(family)
        if family.joined is not None:
            return self._widen(family.joined, args)
        unrolled = getattr(graph, "unrolled", False)
        recursive = graph in self.recursive and not unrolled
        if recursive:  # the recursive call would join the constants away: drop them now
            args = tuple(map(widen, args))
        key = tuple(map(skeleton, args)) if recursive else args
        frame = family.frames.get(key)
        if frame is not None:
            return self._widen(frame, args) if recursive else frame
        limit = UNROLLED_FRAMES if unrolled else \
            SKELETONS_PER_GRAPH if recursive else FRAMES_PER_GRAPH
        if len(family.frames) >= limit:
            joined = args
            for other in family.frames.values():
                joined = tuple(map(join, joined, other.args))
            joined = tuple(located(truncate(a, MAX_DEPTH), graph.location) for a in joined)
            family.joined = frame = Frame(graph, joined, context)
        else:
            family.frames[key] = frame = Frame(graph, args, context)
        self.schedule(frame)
        return frame

    def _widen(self, frame: Frame, args: tuple) -> Frame:
        joined = tuple(truncate(join(old, new), MAX_DEPTH) for old, new in zip(frame.args, args))
        if joined != frame.args:
            frame.args = tuple(located(a, frame.graph.location) for a in joined)
            self.schedule(frame)
        return frame

    def context(self, graph: Graph, frame: Frame) -> Context:
        """The context of a closure of `graph`, a nested graph, made in `frame`."""
        free = self.free_variables(graph)
        values = [frame.read(node) for node in free]
        key = (graph, tuple(id(self.intern(v)) for v in values))
        context = self.contexts.get(key)
        if context is None:
            context = self.joined_contexts.get(graph)
            if context is not None:
                self._join_context(context, values)
            elif self.context_counts.get(graph, 0) < self._context_limit(graph, values):
                self.context_counts[graph] = self.context_counts.get(graph, 0) + 1
                context = Context(graph, dict(zip(free, values)))
            else:
                context = self.joined_contexts[graph] = Context(graph, dict(zip(free, values)))
                for other in self.contexts.values():
                    if other.graph is graph:
                        self._join_context(context, [other.env[n] for n in free])
            self.contexts[key] = context
        context.made_in[frame] = None
        return context

    def _context_limit(self, graph: Graph, values: list) -> int:
        """A graph nested in an `unrolled` one reads its counter, which must stay a constant
        (a dict comprehension's step reads the key at that index): as many contexts as the
        unrolled graph has frames.  Values holding a closure of the graph itself nest
        without end: `NESTED_CONTEXTS`."""
        enclosing = graph.parent
        while enclosing is not None:
            if getattr(enclosing, "unrolled", False):
                return UNROLLED_FRAMES
            enclosing = enclosing.parent
        return NESTED_CONTEXTS if _holds_closure_of(graph, values) else CONTEXTS_PER_GRAPH

    def _join_context(self, context: Context, values: list) -> None:
        """Widen a joined context to hold `values` too; its frames read them."""
        env = {n: truncate(join(old, new), MAX_DEPTH)
               for (n, old), new in zip(context.env.items(), values)}
        if env != context.env:
            context.env = env
            for family in context.families:
                for frame in [*family.frames.values(), family.joined]:
                    if frame is not None:
                        self.schedule(frame)

    def _maker_queued(self, frame: Frame) -> bool:
        """Whether the frame that first made `frame`'s context, or that frame's, and so on,
        is queued."""
        context, seen = frame.context, set()
        while context is not None and context not in seen:
            seen.add(context)
            maker = next(iter(context.made_in))
            if maker in self.queued:
                return True
            context = maker.context
        return False

    def _called(self, frame: Frame) -> bool:
        """Whether a caller's last evaluation called `frame` (or it has no caller: the root,
        or a closure typed because it escapes)."""
        return not frame.callers or any(frame in c.callees for c in frame.callers)

    def schedule(self, frame: Frame) -> None:
        if frame not in self.queued:
            self.queued.add(frame)
            self.queue.append(frame)

    def run(self) -> None:
        while self.queue:
            frame = self.queue.popleft()
            if self._maker_queued(frame):
                self.queue.append(frame)   # after the maker: it may change what this reads
                continue
            self.queued.discard(frame)
            if not self._called(frame):
                frame.stale = True         # left behind by a new context, or a callee's
                continue                   # new arguments
            self.evaluations += 1
            if self.evaluations > MAX_EVALUATIONS:
                raise RuntimeError(f"type inference does not converge ({frame})")
            self.evaluate(frame)

    # -- evaluation

    def value(self, frame: Frame, node: Node):
        if isinstance(node, Constant):
            v = node.value
            if isinstance(v, Graph):
                key = (v, None if v.parent is None else self.context(v, frame))
                hit = self.closures.get(key)
                if hit is None:  # one value per closure: no allocation per use
                    hit = self.closures[key] = function(Closure(*key))
                return hit
            hit = self.constants.get(node)
            if hit is None:
                hit = function(v) if isinstance(v, Primitive) else abstract_of(v)
                self.constants[node] = hit
            return hit
        return frame.read(node)

    def evaluate(self, frame: Frame) -> None:
        graph = frame.graph
        types = frame.types = dict(zip(graph.parameters, frame.args))
        frame.calls = {}
        frame.callees = set()
        frame.errors = {}
        for node in self.applies_of(graph):
            types[node] = self.apply(frame, node)
        output = join(frame.output, self.value(frame, graph.output))
        if output is not frame.output:  # (it is, once the output stops growing)
            output = truncate(output, MAX_DEPTH)
            if output != frame.output:
                frame.output = located(output, graph.location)
                for caller in frame.callers:
                    self.schedule(caller)

    def applies_of(self, graph: Graph) -> list[Apply]:
        """The calls `graph` makes, in evaluation order (computed once per graph)."""
        applies = self.applies.get(graph)
        if applies is None:
            applies = self.applies[graph] = [n for n in toposort(graph)
                                             if isinstance(n, Apply) and n.graph is graph]
        return applies

    def free_variables(self, graph: Graph) -> list[Node]:
        """`free_variables(graph)`, looked up once per graph (the analysis' own cache checks
        the stamps of the graphs it read at every call)."""
        free = self.free.get(graph)
        if free is None:
            free = self.free[graph] = free_variables(graph)
        return free

    def apply(self, frame: Frame, node: Apply):
        values = []
        local, graph = frame.types, frame.graph
        constants = self.constants
        for inp in node.inputs:
            if inp.graph is graph:  # most inputs are nodes of the frame's graph
                v = local.get(inp, BOTTOM)
            else:  # or constants, whose value is made once
                v = constants.get(inp)
                if v is None:
                    v = self.value(frame, inp)
            if v is BOTTOM:
                return BOTTOM
            values.append(v)
        fn = values[0]
        if fn is ANY:
            return ANY
        args = tuple(values[1:])
        if type(fn) is AUnion or (AUnion in map(type, args) and _splits(fn)):
            result = self.apply_union(frame, node, fn, args)
        else:
            result, error = self.apply_one(frame, node, fn, args)
            if error is not None:
                frame.errors[node] = error
        if type(result) is AUnion and result.origin is None:
            result = located(result, node.location)  # kinds met here (an `if`)
        elif type(result) is ATuple and isinstance(fn, AFunction) and (
                len(fn.options) > 1 or SWITCH in fn.options):
            result = located(result, node.location)  # the branches' variables
        return result

    def apply_one(self, frame: Frame, node: Apply, fn, args: tuple, strict: bool = False):
        """Call `fn`, a function or one option of a union, with `args`: (result, error)."""
        if not isinstance(fn, AFunction):
            if isinstance(fn, AObject) and fn.pytype is not str:
                return ANY, None  # a class (an exception type, a dtype) may be called
            return BOTTOM, RuleError(f"'{type_name(fn)}' object is not callable",
                                     "only functions can be called; check what this name "
                                     "holds")
        result = BOTTOM
        failures = []
        for option in _in_order(fn.options):
            try:
                result = join(result, self.call(frame, node, option, args, strict))
            except RuleError as e:
                failures.append(e)
        # an error whichever function it is
        return result, failures[0] if len(failures) == len(fn.options) else None

    def apply_union(self, frame: Frame, node: Apply, fn, args: tuple):
        """A call where the function or an argument a primitive looks at is of several types:
        the call of each combination of their options, joined.  If one of them fails with a
        type error and another does not, the types matter here: a `UnionError`.

        If some combinations raise when they run and others return, the result is ANY, not
        the join of those that return: the optimizer folds what types make certain, and
        `y + 1` for `y` of `int=1 | None` folded to 2 would no longer raise CPython's
        TypeError when `y` is None."""
        combinations = []
        for f in options(fn):
            spread = _splits(f)
            choices = [options(a) if spread else (a,) for a in args]
            combinations += [(f, c) for c in itertools.product(*choices)]
            if len(combinations) > MAX_COMBINATIONS:
                return ANY
        result = BOTTOM
        failures = []
        raises = 0
        for f, c in combinations:
            r, error = self.apply_one(frame, node, f, c, strict=True)
            if error is not None:
                failures.append((f, c, error))
            result = join(result, r)
            raises += error is not None or (r is BOTTOM and _splits(f))
        if len(failures) < len(combinations):
            for f, c, error in failures:
                operands = [(node.fn, fn, f)] + list(zip(node.args, args, c))
                chosen = [o for o in operands if type(o[1]) is AUnion]
                if not any(isinstance(o[2], ANone) for o in chosen):
                    frame.errors[node] = union_error(node, *chosen[0], error)
                    break
        elif not any(isinstance(e, TypeFailure) for _, _, e in failures):
            frame.errors[node] = failures[0][2]  # fails whatever the types: as for one type
        return result if raises in (0, len(combinations)) else ANY

    def call(self, frame: Frame, node: Apply, option, args: tuple, strict: bool = False):
        if option is VECTORIZE_CALL:
            return self.vectorize_call(frame, node, args)
        if isinstance(option, Primitive):
            return self.rule(option, args, strict)
        graph = option.graph
        left = [graph.defaults.get(p.debug.name) for p in graph.parameters[len(args):]]
        if left and all(isinstance(d, Constant) for d in left):
            # a closure called as a value: Python fills the parameters left out with their
            # defaults (a computed one is UNBOUND here: the frontend's `nested_function`)
            args = (*args, *(abstract_of(d.value) for d in left))
        if len(args) != len(graph.parameters):
            n = len(graph.parameters)
            raise RuleError(f"{graph.name}() takes {n} positional argument{'s' * (n != 1)} "
                            f"but {len(args)} {'was' if len(args) == 1 else 'were'} given",
                            f"call {graph.name} with {n} argument{'s' * (n != 1)}")
        callee = self.frame(graph, args, option.context)
        frame.calls.setdefault(node, []).append(callee)
        frame.callees.add(callee)
        callee.callers[frame] = None
        if callee.stale:
            callee.stale = False
            self.schedule(callee)
        return callee.output

    def vectorize_call(self, frame: Frame, node: Apply, args: tuple):
        """`vectorize_call(f, *xs)`: f called on the element types of xs, its result as
        arrays of their broadcast shape (passes/vectorize.py).  The call of f is recorded
        like any call, so f is typed and specialised for those elements."""
        from passes.vectorize import element_types, result_type

        if not args or not isinstance(args[0], AFunction):
            raise RuleError("vectorize() takes a function", "write `vectorize(f)(x, y)`")
        elements, shape = element_types(args[1:])
        result, error = self.apply_one(frame, node, args[0], elements)
        if error is not None:
            raise error
        names = {getattr(o, "graph", o).name if hasattr(o, "graph") else str(o)
                 for o in args[0].options}
        return result_type(result, shape, " or ".join(sorted(names)))

    def rule(self, primitive: Primitive, args: tuple, strict: bool):
        """The result of `primitive`'s rule for `args`, or its RuleError raised.  Rules are
        pure: each is applied once per argument values, once per process where the values
        are plain data (`SHARED_RULE_RESULTS`), else once per inference."""
        key = (primitive, tuple(map(self.intern, args)), strict)
        result = SHARED_RULE_RESULTS.get(key)
        if result is None:
            result = self.rule_results.get(key)
        if result is None:
            try:
                if not primitive.varargs and len(args) != len(primitive.params):
                    raise RuleError(f"{primitive.name}() takes {len(primitive.params)} "
                                    f"arguments, got {len(args)}")
                result = strict_rule(primitive.name, args) if strict \
                    else TYPE_RULES[primitive.name](*args)
            except RuleError as e:
                result = self.rule_results[key] = e  # a raised exception keeps its traceback
            else:
                if all(map(_plain_data, args)):
                    if len(SHARED_RULE_RESULTS) >= SHARED_RULE_RESULTS_MAX:
                        SHARED_RULE_RESULTS.clear()
                    SHARED_RULE_RESULTS[key] = result
                else:
                    self.rule_results[key] = result
        if isinstance(result, RuleError):
            raise result
        return result

    def intern(self, value):
        """The first value seen equal to `value`, found once per object: the keys of
        `rule_results` then compare by identity.  Equal values are often distinct objects
        (each evaluation of a loop builds its state anew), and comparing them compares
        all of them: a loop's gradient reads each of the N items of a state of N values
        with `getitem`, which cost time in N squared."""
        hit = self.interned_by_id.get(id(value))
        if hit is None:  # the entry keeps `value` alive: its id stays its own
            hit = self.interned_by_id[id(value)] = (value, self.interned.setdefault(value, value))
        return hit[1]

    # -- after the fixpoint

    def reachable(self, root: Frame) -> list[Frame]:
        """Frames the last evaluations still call, from `root`, in discovery order."""
        seen = {root: None}
        stack = [root]
        while stack:
            frame = stack.pop()
            for callees in frame.calls.values():
                for callee in callees:
                    if callee not in seen:
                        seen[callee] = None
                        stack.append(callee)
        return list(seen)

    def type_uncalled_closures(self, frames: list[Frame]) -> list[Frame]:
        """Closures that are made but never called here (returned, or passed to a function
        that inference cannot see into) get a frame with unknown arguments, so their nodes
        are typed too.  Not a branch of a `switch` that never takes it (its condition is
        known, or never computed): it never runs, and typing it would run on into what it
        calls (a loop's body past its last step would go round again without end)."""
        new = []
        for frame in frames:
            for node in self.applies_of(frame.graph):
                untaken = ()
                if primitive_name(node) == "switch":
                    cond = frame.types.get(node.args[0], BOTTOM)
                    taken = truthiness(cond)
                    untaken = node.args[1:] if cond is BOTTOM else () if taken is None \
                        else (node.args[2 if taken else 1],)
                for inp in node.inputs:
                    if untaken and any(inp is u for u in untaken):
                        continue
                    if isinstance(inp, Constant) and isinstance(inp.value, Graph):
                        fn = self.value(frame, inp)
                        if isinstance(fn, AFunction):
                            (closure,) = fn.options
                            key = (closure.graph, closure.context)
                            if key not in self.families:
                                args = (ANY,) * len(closure.graph.parameters)
                                new.append(self.frame(closure.graph, args, closure.context))
        return new

    def first_error(self, root: Frame):
        """The first error of code that certainly runs, in execution order: (node, error)."""
        seen: set[Frame] = set()
        stack = [(root, iter(self.applies_of(root.graph)))]
        seen.add(root)
        while stack:
            frame, nodes = stack[-1]
            for node in nodes:
                if node in frame.errors:
                    return node, frame.errors[node]
                returns = frame.types.get(node) is not BOTTOM
                callees = frame.calls.get(node, ())
                if len(callees) == 1 and callees[0] not in seen:
                    seen.add(callees[0])
                    if not returns:  # what follows the call may not run
                        stack[-1] = (frame, iter(()))
                    stack.append((callees[0], iter(self.applies_of(callees[0].graph))))
                    break
                if not returns:
                    del stack[-1]  # what follows may not run
                    break
            else:
                del stack[-1]
        return None

    def first_unsupported(self, frames: list[Frame]):
        """The first `Unsupported` error of code that may run (see its docstring) in
        `frames`, those the program calls (not closures typed with unknown arguments only
        because they escape): (node, error)."""
        for frame in frames:
            for node in self.applies_of(frame.graph):
                if isinstance(frame.errors.get(node), Unsupported):
                    return node, frame.errors[node]
        return None


@dataclass
class Typed:
    """The result of inference: the specialised program, every node's abstract value, and
    the root's output."""

    graph: Graph
    types: dict
    output: object

    def __repr__(self) -> str:
        return f"<Typed {self.graph.name} -> {self.output!r}>"


def infer(graph: Graph, args: tuple) -> Typed:
    """Infer the types of `graph` called with the runtime values `args`, and specialise it.
    Raises a located `MyirTypeError` for an error certain to happen when it runs."""
    interp = Interpreter(graph)
    root = interp.frame(graph, tuple(abstract_of(a, keep_values=False) for a in args), None)
    interp.run()
    frames = interp.reachable(root)
    while True:
        extra = interp.type_uncalled_closures(frames)
        if not extra:
            break
        interp.run()
        frames = interp.reachable(root)
        for frame in extra:
            frames += [f for f in interp.reachable(frame) if f not in frames]
    found = interp.first_error(root) or interp.first_unsupported(interp.reachable(root))
    if found is not None:
        node, err = found
        location = node.location or node.graph.location
        raise MyirTypeError(_named(err, node), location, err.hint, getattr(err, "notes", ()))
    return Specialiser(interp, frames).run(root)


# ---------------------------------------------------------------------------- specialisation

MERGED = "merged"


class Group:
    """The frames one copy of a graph stands for: those of `graph` under the frames of the
    parent's copy, with one signature (or all of them: MERGED)."""

    def __init__(self, graph: Graph, parent: "Group | None", frames: list[Frame]):
        self.graph = graph
        self.parent = parent
        self.frames = frames
        parent_graph = parent.copy if parent is not None else None
        self.copy = Graph(graph.name, parent_graph, graph.location)
        self.copy.debug = graph.debug.derive("specialised from")
        self.mapping: dict[Node, Node] = {}
        for p in graph.parameters:
            q = Parameter(self.copy, p.debug.derive("specialised from"))
            self.copy.parameters.append(q)
            self.mapping[p] = q

    def joined_types(self) -> dict:
        """Each node's type, joined over the group's frames."""
        if len(self.frames) == 1:
            return self.frames[0].types
        result = {}
        for frame in self.frames:
            for node, t in frame.types.items():
                result[node] = join(result.get(node, BOTTOM), t)
        return result

    def owner(self, graph: Graph) -> "Group | None":
        group = self
        while group is not None and group.graph is not graph:
            group = group.parent
        return group


class Specialiser:
    def __init__(self, interp: Interpreter, frames: list[Frame]):
        self.interp = interp
        self.by_graph: dict[Graph, list[Frame]] = {}
        for frame in frames:
            self.by_graph.setdefault(frame.graph, []).append(frame)
        self.groups: dict[tuple, Group] = {}
        self.pending: deque[Group] = deque()
        self.types: dict[Node, object] = {}
        self.root = frames[0].graph
        self.signatures: dict[Frame, int] = {}
        self.signature_ids: dict[tuple, int] = {}
        self.origins: dict[tuple, set] = {}

    @functools.cached_property
    def users(self) -> dict:
        """The program's `users`, found when a switch's are first asked for (a program
        with no `if` never asks, and finding them was a tenth of the inference of a
        gradient of 800 helper functions)."""
        return users(self.root)

    def within(self, frame: Frame, parent: Group | None) -> bool:
        """Whether `frame`, of a graph nested in `parent`'s, may run in `parent`'s copy: its
        context was made (at any depth of nesting) in one of `parent`'s frames."""
        if parent is None:
            return True
        key = (frame.context, parent.graph)
        origins = self.origins.get(key)
        if origins is None:
            origins = self.origins[key] = set()
            stack, seen = [frame.context], set()
            while stack:
                context = stack.pop()
                if context is None or context in seen:
                    continue
                seen.add(context)
                for maker in context.made_in:
                    if maker.graph is parent.graph:
                        origins.add(maker)
                    else:
                        stack.append(maker.context)
        return not origins.isdisjoint(parent.frames)

    def signature(self, frame: Frame) -> int:
        """The frame's arguments, widened, as a number: equal signatures have equal numbers
        (so the groups' keys are hashed without hashing abstract values again)."""
        sig = self.signatures.get(frame)
        if sig is None:
            widened = tuple(map(widen, frame.args))
            sig = self.signatures[frame] = self.signature_ids.setdefault(
                widened, len(self.signature_ids))
        return sig

    def group(self, graph: Graph, parent: Group | None, frames: list[Frame]) -> Group:
        """The copy of `graph` (nested in `parent`'s copy) for calls that reach `frames`."""
        sigs = {self.signature(f) for f in frames}
        sig = sigs.pop() if len(sigs) == 1 else MERGED
        key = (graph, id(parent), sig)
        group = self.groups.get(key)
        if group is None:
            members = [f for f in self.by_graph.get(graph, ())
                       if (sig is MERGED or self.signature(f) == sig) and self.within(f, parent)]
            group = self.groups[key] = Group(graph, parent, members)
            self.pending.append(group)
        return group

    def run(self, root: Frame) -> Typed:
        top = self.group(root.graph, None, [root])
        while self.pending:
            self.fill(self.pending.popleft())
        return Typed(top.copy, self.types, root.output)

    def fill(self, group: Group) -> None:
        graph = group.graph
        mapping = group.mapping
        types = group.joined_types()
        for p in graph.parameters:
            self.typed(mapping[p], types.get(p, BOTTOM))
        for node in self.interp.applies_of(graph):
            inputs = [mapping[inp] if inp.graph is graph  # an input computed in this graph
                      else self.input(group, node, i, inp)
                      for i, inp in enumerate(node.inputs)]
            new = Apply(inputs, group.copy, node.debug.derive("specialised from"))
            mapping[node] = new
            self.typed(new, types.get(node, BOTTOM))
        group.copy.output = self.input(group, None, None, graph.output)
        group.copy.defaults = {k: self.input(group, None, None, v)
                               for k, v in graph.defaults.items()}

    def typed(self, node: Node, value) -> None:
        node.abstract = value
        self.types[node] = value

    def input(self, group: Group, user: Apply | None, index: int | None, node: Node) -> Node:
        if isinstance(node, Constant):
            if not isinstance(node.value, Graph):
                if node not in self.types:
                    self.types[node] = self.interp.value(group.frames[0], node) \
                        if group.frames else abstract_of(node.value)
                return node
            callee = node.value
            parent = group.owner(callee.parent) if callee.parent is not None else None
            frames = self.callee_frames(group, user, index, callee)
            if frames is None:  # a closure used as a value: every frame it may have
                frames = [f for f in self.by_graph.get(callee, ()) if self.within(f, parent)]
            copy = Constant(self.group(callee, parent, frames).copy, node.debug)
            self.types[copy] = join_all(self.interp.value(f, node) for f in group.frames)
            return copy
        owner = group.owner(node.graph)
        return owner.mapping.get(node, node) if owner is not None else node

    def callee_frames(self, group: Group, user: Apply | None, index: int | None,
                      callee: Graph) -> list[Frame] | None:
        """The frames a graph constant is called with at this use: as the callee of a call,
        or as a branch of `switch(c, then, else)(args)`; None for any other use."""
        call = None
        if index == 0:
            call = user
        elif index in (2, 3) and primitive_name(user) == "switch":
            uses = self.users.get(user, ())
            if len(uses) == 1 and uses[0][1] == 0:
                call = uses[0][0]
        if call is None:
            return None
        return [f for frame in group.frames for f in frame.calls.get(call, ())
                if f.graph is callee]


def join_all(values):
    result = BOTTOM
    for v in values:
        result = join(result, v)
    return result
