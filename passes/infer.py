"""Type and shape inference: an abstract interpreter over graphs, for one argument signature.

    typed = infer(graph, args)      # args: the root graph's runtime arguments
    typed.graph                     # the program, specialised: one graph per signature
    typed.types[node]               # the abstract value of every node (see passes.abstract)

**Frames.**  A graph is interpreted in a *frame*: its abstract arguments and the frame of its
parent graph (where its free variables are read).  A closure is a graph together with the
frame it was made in, so a closure called far from where it was made still reads the right
values.  One frame is evaluated by one pass over its graph's nodes (in order), applying the
primitives' type rules (`passes.type_rules`) and, for calls of graphs, the output of the
callee's frame.

**Fixpoint.**  A worklist holds the frames to (re-)evaluate.  A call whose callee has not
returned yet gives `BOTTOM`, which `join` ignores, so a recursive function's type is its base
cases' first, then grows; when a frame's output grows, its callers are queued again, and when
its nodes change, the frames nested in it (at any depth: they read its nodes directly).
Termination comes from widening: a recursive
graph (a loop) gets one frame per shape of arguments ("skeleton": types without constant
values or dimension sizes) whose arguments are joined, so a loop counter becomes `int` and a
carried array that changes shape gets `None` dimensions; other graphs get one frame per
argument values (so constants stay known across calls) up to a limit, then one joined frame.

**Errors.**  A rule raises `RuleError` only when every runtime value it describes would fail.
Errors are collected during the fixpoint and reported (as a located `MyirTypeError`) only for
code that certainly runs: the root, then calls with one possible callee made before anything
that may not return.  An error in a branch the arguments may not take is left to run time.

**Specialisation.**  Each graph gets one copy per signature it is called with (the widened
types of its arguments, under one copy of its parent); a closure called with several
signatures gets one copy typed with their join.  The copies' nodes carry their types in
`node.abstract`, so the printed graph shows them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from myir.errors import MyirTypeError
from myir.ir.analysis import primitive_name, recursive_graphs, toposort, users
from myir.ir.graph import Apply, Constant, Graph, Node, Parameter
from myir.ir.primitives import Primitive
from passes.abstract import (ANY, BOTTOM, AArray, AbstractValue, AEnv, AFunction, ANone,  # noqa: F401
                             AObject, AScalar, ASlice, ATuple, Closure, abstract_of, conforms,
                             function, join, truncate, widen)
from passes.type_rules import TYPE_RULES, RuleError, type_name

# A non-recursive graph gets one frame per argument values, up to this many per parent frame;
# then one frame with the join of them all.
FRAMES_PER_GRAPH = 8
# A recursive graph gets one frame per skeleton of its arguments, up to this many.
SKELETONS_PER_GRAPH = 4
# Tuples and envs nested deeper than this are ANY in the values joined across iterations.
MAX_DEPTH = 6
# Frame evaluations before inference gives up (a bug: the lattice is finite).
MAX_EVALUATIONS = 200_000


def skeleton(value):
    """The part of an abstract value that recursion keeps: types and ranks, not constants
    or sizes."""
    if isinstance(value, AScalar):
        return value.pytype
    if isinstance(value, AArray):
        return value.dtype, value.ndim
    if isinstance(value, ATuple):
        return tuple(map(skeleton, value.items))
    if isinstance(value, AFunction):
        return AFunction
    if isinstance(value, AObject):
        return value.pytype
    return type(value)


class Frame:
    """One graph evaluated with abstract arguments, under its parent's frame."""

    def __init__(self, graph: Graph, args: tuple, parent: "Frame | None"):
        self.graph = graph
        self.args = args
        self.parent = parent
        self.types: dict[Node, object] = {}
        self.output = BOTTOM
        self.callers: set[Frame] = set()
        self.children: set[Frame] = set()
        self.calls: dict[Apply, list[Frame]] = {}
        self.errors: dict[Apply, RuleError] = {}
        if parent is not None:
            parent.children.add(self)

    def owner(self, node: Node) -> "Frame | None":
        """The frame (this one or an enclosing one) in which `node` was evaluated."""
        frame = self
        while frame is not None and frame.graph is not node.graph:
            frame = frame.parent
        return frame

    def __repr__(self) -> str:
        return f"<frame {self.graph.name}{self.args}>"


class Family:
    """The frames of one graph under one parent frame."""

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
        self.constants: dict[int, object] = {}
        self.rule_results: dict[tuple, object] = {}
        self.evaluations = 0

    # -- frames

    def frame(self, graph: Graph, args: tuple, parent: Frame | None) -> Frame:
        family = self.families.setdefault((graph, parent), Family())
        if family.joined is not None:
            return self._widen(family.joined, args)
        recursive = graph in self.recursive
        key = tuple(map(skeleton, args)) if recursive else args
        frame = family.frames.get(key)
        if frame is not None:
            return self._widen(frame, args) if recursive else frame
        if len(family.frames) >= (SKELETONS_PER_GRAPH if recursive else FRAMES_PER_GRAPH):
            joined = args
            for other in family.frames.values():
                joined = tuple(map(join, joined, other.args))
            joined = tuple(truncate(a, MAX_DEPTH) for a in joined)
            family.joined = frame = Frame(graph, joined, parent)
        else:
            family.frames[key] = frame = Frame(graph, args, parent)
        self.schedule(frame)
        return frame

    def _widen(self, frame: Frame, args: tuple) -> Frame:
        joined = tuple(truncate(join(old, new), MAX_DEPTH) for old, new in zip(frame.args, args))
        if joined != frame.args:
            frame.args = joined
            self.schedule(frame)
        return frame

    def schedule(self, frame: Frame) -> None:
        if frame not in self.queued:
            self.queued.add(frame)
            self.queue.append(frame)

    def run(self) -> None:
        while self.queue:
            frame = self.queue.popleft()
            self.queued.discard(frame)
            self.evaluations += 1
            if self.evaluations > MAX_EVALUATIONS:
                raise RuntimeError(f"type inference does not converge ({frame})")
            self.evaluate(frame)

    # -- evaluation

    def value(self, frame: Frame, node: Node):
        if isinstance(node, Constant):
            v = node.value
            if isinstance(v, Graph):
                if v.parent is None:
                    return function(Closure(v, None))
                owner = frame
                while owner is not None and owner.graph is not v.parent:
                    owner = owner.parent
                return function(Closure(v, owner)) if owner is not None else ANY
            hit = self.constants.get(id(node))
            if hit is None:
                hit = function(v) if isinstance(v, Primitive) else abstract_of(v)
                self.constants[id(node)] = hit
            return hit
        owner = frame.owner(node)
        return ANY if owner is None else owner.types.get(node, BOTTOM)

    def evaluate(self, frame: Frame) -> None:
        graph = frame.graph
        old = frame.types
        types = frame.types = dict(zip(graph.parameters, frame.args))
        frame.calls = {}
        frame.errors = {}
        for node in toposort(graph):
            if isinstance(node, Apply) and node.graph is graph:
                types[node] = self.apply(frame, node)
        output = truncate(join(frame.output, self.value(frame, graph.output)), MAX_DEPTH)
        if output != frame.output:
            frame.output = output
            for caller in frame.callers:
                self.schedule(caller)
        if types != old:  # nested frames read these nodes as free variables
            stack = list(frame.children)
            while stack:
                nested = stack.pop()
                self.schedule(nested)
                stack.extend(nested.children)

    def apply(self, frame: Frame, node: Apply):
        fn = self.value(frame, node.fn)
        args = tuple(self.value(frame, a) for a in node.args)
        if fn is BOTTOM or BOTTOM in args:
            return BOTTOM
        if fn is ANY:
            return ANY
        if not isinstance(fn, AFunction):
            if isinstance(fn, AObject) and fn.pytype is not str:
                return ANY  # a class (an exception type, a dtype) may be called
            frame.errors[node] = RuleError(f"'{type_name(fn)}' object is not callable",
                                           "only functions can be called; check what this "
                                           "name holds")
            return BOTTOM
        result = BOTTOM
        failures = []
        for option in fn.options:
            try:
                result = join(result, self.call(frame, node, option, args))
            except RuleError as e:
                failures.append(e)
        if len(failures) == len(fn.options):  # an error whichever function it is
            frame.errors[node] = failures[0]
        return result

    def call(self, frame: Frame, node: Apply, option, args: tuple):
        if isinstance(option, Primitive):
            if not option.varargs and len(args) != len(option.params):
                raise RuleError(f"{option.name}() takes {len(option.params)} arguments, "
                                f"got {len(args)}")
            key = (option.name, args)
            result = self.rule_results.get(key)
            if result is None:  # rules are pure: each is applied once per argument values
                try:
                    result = TYPE_RULES[option.name](*args)
                except RuleError as e:
                    result = e
                self.rule_results[key] = result
            if isinstance(result, RuleError):
                raise result
            return result
        graph = option.graph
        if len(args) != len(graph.parameters):
            n = len(graph.parameters)
            raise RuleError(f"{graph.name}() takes {n} positional argument{'s' * (n != 1)} "
                            f"but {len(args)} {'was' if len(args) == 1 else 'were'} given",
                            f"call {graph.name} with {n} argument{'s' * (n != 1)}")
        callee = self.frame(graph, args, option.frame)
        frame.calls.setdefault(node, []).append(callee)
        callee.callers.add(frame)
        return callee.output

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
        are typed too."""
        new = []
        for frame in frames:
            for node in toposort(frame.graph):
                if not (isinstance(node, Apply) and node.graph is frame.graph):
                    continue
                for inp in node.inputs:
                    if isinstance(inp, Constant) and isinstance(inp.value, Graph):
                        fn = self.value(frame, inp)
                        if isinstance(fn, AFunction):
                            (closure,) = fn.options
                            key = (closure.graph, closure.frame)
                            if key not in self.families:
                                args = (ANY,) * len(closure.graph.parameters)
                                new.append(self.frame(closure.graph, args, closure.frame))
        return new

    def first_error(self, root: Frame):
        """The first error of code that certainly runs, in execution order: (node, error)."""
        seen: set[Frame] = set()
        stack = [(root, iter(toposort(root.graph)))]
        seen.add(root)
        while stack:
            frame, nodes = stack[-1]
            for node in nodes:
                if not (isinstance(node, Apply) and node.graph is frame.graph):
                    continue
                if node in frame.errors:
                    return node, frame.errors[node]
                returns = frame.types.get(node) is not BOTTOM
                callees = frame.calls.get(node, ())
                if len(callees) == 1 and callees[0] not in seen:
                    seen.add(callees[0])
                    if not returns:  # what follows the call may not run
                        stack[-1] = (frame, iter(()))
                    stack.append((callees[0], iter(toposort(callees[0].graph))))
                    break
                if not returns:
                    del stack[-1]  # what follows may not run
                    break
            else:
                del stack[-1]
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
    found = interp.first_error(root)
    if found is not None:
        node, err = found
        location = node.location or node.graph.location
        raise MyirTypeError(err.message, location, err.hint)
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

    def owner(self, graph: Graph) -> "Group | None":
        group = self
        while group is not None and group.graph is not graph:
            group = group.parent
        return group


def signature(frame: Frame) -> tuple:
    return tuple(map(widen, frame.args))


class Specialiser:
    def __init__(self, interp: Interpreter, frames: list[Frame]):
        self.interp = interp
        self.by_graph: dict[Graph, list[Frame]] = {}
        for frame in frames:
            self.by_graph.setdefault(frame.graph, []).append(frame)
        self.groups: dict[tuple, Group] = {}
        self.pending: deque[Group] = deque()
        self.types: dict[Node, object] = {}
        self.users = users(frames[0].graph)

    def group(self, graph: Graph, parent: Group | None, frames: list[Frame]) -> Group:
        """The copy of `graph` (nested in `parent`'s copy) for calls that reach `frames`."""
        sigs = {signature(f) for f in frames}
        sig = sigs.pop() if len(sigs) == 1 else MERGED
        key = (graph, id(parent), sig)
        group = self.groups.get(key)
        if group is None:
            parents = set(parent.frames) if parent is not None else {None}
            members = [f for f in self.by_graph.get(graph, ())
                       if f.parent in parents and (sig is MERGED or signature(f) == sig)]
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
        for p in graph.parameters:
            self.typed(group.mapping[p], self.joined(group, p))
        switch_users = self.users
        for node in toposort(graph):
            if isinstance(node, Apply) and node.graph is graph:
                inputs = [self.input(group, node, i, inp, switch_users)
                          for i, inp in enumerate(node.inputs)]
                new = Apply(inputs, group.copy, node.debug.derive("specialised from"))
                group.mapping[node] = new
                self.typed(new, self.joined(group, node))
        group.copy.output = self.input(group, None, None, graph.output, switch_users)
        group.copy.defaults = {k: self.input(group, None, None, v, switch_users)
                               for k, v in graph.defaults.items()}

    def joined(self, group: Group, node: Node):
        result = BOTTOM
        for frame in group.frames:
            result = join(result, frame.types.get(node, BOTTOM))
        return result

    def typed(self, node: Node, value) -> None:
        node.abstract = value
        self.types[node] = value

    def input(self, group: Group, user: Apply | None, index: int | None, node: Node,
              switch_users) -> Node:
        if isinstance(node, Constant):
            if not isinstance(node.value, Graph):
                self.types.setdefault(node, self.interp.value(group.frames[0], node)
                                      if group.frames else abstract_of(node.value))
                return node
            callee = node.value
            parent = group.owner(callee.parent) if callee.parent is not None else None
            frames = self.callee_frames(group, user, index, callee, switch_users)
            if frames is None:  # a closure used as a value: every frame it may have
                parents = set(parent.frames) if parent is not None else {None}
                frames = [f for f in self.by_graph.get(callee, ()) if f.parent in parents]
            copy = Constant(self.group(callee, parent, frames).copy, node.debug)
            self.types[copy] = join_all(self.interp.value(f, node) for f in group.frames)
            return copy
        owner = group.owner(node.graph)
        return owner.mapping.get(node, node) if owner is not None else node

    @staticmethod
    def callee_frames(group: Group, user: Apply | None, index: int | None, callee: Graph,
                      switch_users) -> list[Frame] | None:
        """The frames a graph constant is called with at this use: as the callee of a call,
        or as a branch of `switch(c, then, else)(args)`; None for any other use."""
        call = None
        if index == 0:
            call = user
        elif index in (2, 3) and primitive_name(user) == "switch":
            uses = switch_users.get(user, ())
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
