"""Linear self-recursion as two loops over a stack, before differentiation.

A function that calls itself at most once on its way to a result, not in tail position,

    def f(a):
        if p(a):
            return b(a)
        y = f(k(a))
        return h(a, y)

runs as a *descent* loop that pushes, per call, the values the code after the call reads
(its *record*), until a call returns without recursing, and then an *ascent* loop that pops
the records and runs the code after the call on each, innermost call first:

    def f(a):
        r, stack = descend(a, EMPTY_STACK)      # while not p(a): push record; a = k(a)
        return ascend(r, stack)                 # r = b(a) at the bottom; then for each
                                                # record, last first: r = h(record, r)

Both are loops in the IR's own form (graphs calling themselves in tail position, through
the graphs of an iteration), so everything downstream treats them as loops: the backends
emit a `while` loop for each, and the J transform (passes/ad.py) gives each a forward loop
pushing residuals and a backward loop popping them.  The gradient of such a recursion then
makes no backpropagator closure per call, and neither the forward pass nor the gradient
recurses in Python.  The stacks are ordinary values (`stack_push`, `stack_pop`, with
gradient rules), so grad of grad differentiates these loops again like any other.  (Where
the code after the call branches, or calls come from several places, the ascent's
iterations take different paths, and its gradient records each iteration's adjoint as a
closure, as for any loop whose body branches: passes/ad.py.)

What a record holds: the values the code after the call reads that the code before it
computed (the nodes of the calling graph before the call, the values of enclosing graphs
of the recursion, its parameters), except the parameters every recursive call passes on
unchanged (`x` in `f(x, n - 1)`): those are the same at every depth, and the ascent loop
takes them as parameters of its own.  Where f calls itself in several places (one per
branch), each place has a stack of its own records (one type per stack), and a stack of
tags says which place made each level: the ascent pops a tag and runs the code after that
call.  Where one place has records of nothing, the descent counts its depth instead of
pushing, and the ascent counts down: an integer, with no gradient.

The shape recognised (`_plan`): f's graphs reached from f by tail calls (the branches of
its `if`s, the code after them; a *region*, as for loops) hold f's calls, none in tail
position and at most one per path (no graph of the region holding a call leads to another
such graph); no other graph of f's scope uses f; the region has no cycle (no call is in a
loop of f); f is not reached again through another function (mutual recursion); and no
graph of the region is used other than by a tail call.  The code of the calling graph that
runs before the call in source order and does not depend on its result stays in the
descent (so exceptions raise in the order CPython raises them); the rest, with every graph
it uses, is copied into the ascent.

**Mutual recursion** (`_merge`): top-level functions that call one another in a cycle,
each with the same number of parameters, become one self-recursion taking a tag first,

    def a_b(tag, x, n):                 # a(x, n) is a_b(0, x, n), b(x, n) is a_b(1, x, n)
        if tag == 0: <a's body, its calls of a and b as calls of a_b>
        else: <b's body, likewise>

and each of them a call of it.  Where that self-recursion has the shape above (one call
per path), it runs as loops like any other; where not, the functions are left as they
were.  (Their parameters are shared by position: a and b called with values of different
types at the same position give the merged function their union.)

Not transformed: recursion with two calls on a path (a tree walk), whose gradient keeps
records on stacks instead of a backpropagator closure per call (passes/defunctionalise.py),
a call inside a loop, and tail recursion (a loop already).

This runs on every compile, forward included (`myir/pipeline.py`): compile(f) and grad(f)
agree on what they accept, and the loops are no slower than the calls they replace.  A
consequence: a recursion deeper than CPython's recursion limit, which CPython refuses with
`RecursionError`, returns its value, up to `MAX_DEPTH` nested calls; past that (a recursion
that never ends) the descent raises `RecursionError` at the recursive call, as CPython
does past its limit.
"""

from __future__ import annotations

from typing import NamedTuple

from myir.ir.analysis import bump_version, free_variables, graph_uses, is_nested_in, \
    primitive_name, reachable_graphs, recursive_graphs, scope, strongly_connected_components, \
    switch_call, tail_calls, toposort
from myir.ir.edit import Cloner, clone_program
from myir.ir.graph import Apply, Constant, Graph, Node, is_graph_constant
from myir.ir.primitives import PRIMITIVES as P
from myir.ir.values import EMPTY_STACK

# How deep the descent goes before it raises RecursionError, as CPython does past its
# recursion limit: a recursion that never ends fails, rather than loop for ever or fill
# memory with records.  Far past CPython's default limit (1,000), since a loop is not
# bounded by Python's stack.
MAX_DEPTH = 10_000_000


class Site(NamedTuple):
    """A place where f calls itself."""

    call: Apply             # the call
    copied: list[Graph]     # graphs of f's scope, outside the calling graph, that the
    #                         code after the call uses: copied into the ascent
    residuals: list[Node]   # what the code after the call reads from the descent


class Plan(NamedTuple):
    """How a linear self-recursion `f` becomes loops."""

    region: list[Graph]     # f and the graphs it reaches by tail calls, f first
    sites: list[Site]       # its calls of itself, each in a graph of the region
    invariant: list[int]    # positions of f's parameters every call passes on unchanged


def recursion_as_loops(root: Graph) -> Graph:
    """`root`, or a copy of its program in which every linear self-recursion, and every
    mutual recursion that merges into one, runs as a descent and an ascent loop (see the
    top)."""
    mutual = _mutual_groups(root)
    if not mutual and not any(_plan(g) for g in recursive_graphs(root)):
        return root
    copy = clone_program(root)
    if mutual and not _merge(copy) and not any(_plan(g) for g in recursive_graphs(copy)):
        return root     # (no group merged into a recursion of the shape recognised)
    root = copy
    # innermost first: a recursion nested in another is copied into the other's loops
    # once it is loops itself
    recursive = recursive_graphs(root)
    for g in reversed(reachable_graphs(root)):
        plan = _plan(g) if g in recursive else None
        if plan is not None:
            _as_loops(g, plan)
    return root


def _mutual_groups(root: Graph) -> list[list[Graph]]:
    """The sets of top-level graphs reachable from `root` that call one another in a cycle
    and may be merged into one graph: the same number of parameters, no defaults, and used
    in each other's scopes only as the callees of calls with every argument."""
    recursive = recursive_graphs(root)
    tops = [g for g in reachable_graphs(root) if g.parent is None and g in recursive]
    if len(tops) < 2:
        return []
    order = {g: k for k, g in enumerate(tops)}
    calls = {g: sorted((h for h in _referenced(scope(g)) if h in order), key=order.__getitem__)
             for g in tops}     # (in the program's order: the groups' order is the same in
    #                             every process, and so the merged graphs' names and ids)
    groups = []
    for component in strongly_connected_components(calls):
        if len(component) < 2:
            continue
        group = sorted(component, key=order.__getitem__)
        n = len(group[0].parameters)
        if any(len(h.parameters) != n or h.defaults or h.unrolled
               or getattr(h, "custom_grad", None) is not None for h in group):
            continue
        members = set(group)
        inside = [x for h in group for x in scope(h)]
        if any(is_graph_constant(x.output) and x.output.value in members for x in inside) \
                or any(is_graph_constant(i) and i.value in members and (k != 0 or len(a.args) != n)
                       for x in inside for a in _applies(x) for k, i in enumerate(a.inputs)):
            continue
        groups.append(group)
    return groups


def _merge(root: Graph) -> int:
    """Make each group of `_mutual_groups` that merges into a linear self-recursion
    (`_plan`) that one graph, called by each member with its tag (see the top); leave the
    others as they are.  Returns how many were merged."""
    done = 0
    for group in _mutual_groups(root):
        merged = Graph("_".join(g.name for g in group), None, group[0].location)
        tag = merged.add_parameter("tag")
        params = [merged.add_parameter(p.debug.name, p.location) for p in group[0].parameters]
        bodies = []
        for k, g in enumerate(group):   # g's body, reading the merged graph's parameters
            body = Graph(g.name, merged, g.location)
            cloner = Cloner(dict(zip(g.parameters, params)), "merged from")
            cloner.graph(g, into=body)
            body.output = cloner.node(g.output)
            bodies.append(body)
        tags = {g: k for k, g in enumerate(group)}
        for x in [x for body in bodies for x in scope(body)]:
            for call in _applies(x):
                if is_graph_constant(call.fn) and call.fn.value in tags:
                    call.set_inputs([Constant(merged), Constant(tags[call.fn.value]), *call.args])
        dispatch = bodies[-1]   # if tag == 0: body 0, elif tag == 1: body 1, ..., else: last
        for k in reversed(range(len(group) - 1)):
            choice = Graph(f"{merged.name}_{k}", merged, merged.location) if k else merged
            test = choice.apply(P["eq"], tag, k)
            choice.output = choice.apply(choice.apply(P["switch"], test, Constant(bodies[k]),
                                                      Constant(dispatch)))
            dispatch = choice
        if _plan(merged) is None:
            continue            # (the members are left calling each other)
        for k, g in enumerate(group):
            g.output = g.apply(Constant(merged), k, *g.parameters, location=g.location)
        done += 1
    bump_version()
    return done


def _applies(g: Graph) -> list[Apply]:
    return [n for n in toposort(g) if isinstance(n, Apply) and n.graph is g]


def _referenced(graphs) -> set[Graph]:
    """The graphs that graph constants in `graphs` refer to."""
    return {i.value for g in graphs for n in _applies(g) for i in n.inputs
            if is_graph_constant(i)} | {g.output.value for g in graphs
                                        if is_graph_constant(g.output)}


def _region(f: Graph) -> list[Graph] | None:
    """f and the graphs of its scope it reaches by tail calls, f first, if that is a region
    without cycles whose graphs nothing else uses; None otherwise (or if f tail-calls
    itself: a loop)."""
    region, i = [f], 0
    edges: dict[Graph, list[Graph]] = {}
    while i < len(region):
        targets = tail_calls(region[i])
        inside = [t for t in targets if is_nested_in(t, f)]
        if f in inside or (inside and len(inside) != len(targets)):
            return None
        edges[region[i]] = inside
        region.extend(t for t in inside if t not in region)
        i += 1
    if f.unrolled or getattr(f, "custom_grad", None) is not None \
            or any(g.unrolled or g.defaults for g in region[1:]):
        return None
    state: dict[Graph, int] = {}    # 1: on the path walked, 2: done

    def cyclic(g: Graph) -> bool:
        state[g] = 1
        for t in edges[g]:
            if state.get(t) == 1 or (t not in state and cyclic(t)):
                return True
        state[g] = 2
        return False
    if cyclic(f):
        return None
    tails = {g.output for g in region}
    switches = {g.output.fn for g in region if switch_call(g.output) is not None}
    uses = graph_uses(f)
    for g in region[1:]:
        for user, index in uses.get(g, ()):
            if not ((index == 0 and user in tails) or (index in (2, 3) and user in switches)):
                return None
    return region


def _plan(f: Graph) -> Plan | None:
    """The plan for f if f is a linear self-recursion of the shape recognised (see the
    top), else None."""
    region = _region(f)
    if region is None:
        return None
    inside = scope(f)
    uses = [(n, i) for g in inside for n in _applies(g) for i, x in enumerate(n.inputs)
            if is_graph_constant(x) and x.value is f]
    uses += [(g, -1) for g in inside if is_graph_constant(g.output) and g.output.value is f]
    if not uses or any(i != 0 for _, i in uses):
        return None
    calls = [n for n, _ in uses]
    callers = [c.graph for c in calls]
    if len(set(callers)) != len(calls) or any(
            h not in region or h.output is c or len(c.args) != len(f.parameters)
            for c, h in zip(calls, callers)):
        return None
    # every path makes one call at most: no calling graph leads to another
    if any(not set(callers).isdisjoint(_reached(h, region)) for h in callers):
        return None
    # f reached again through another function: mutual recursion
    others = [g for g in _referenced(inside) if not is_nested_in(g, f)]
    if any(f in reachable_graphs(g) for g in others):
        return None
    sites = [_site(f, c) for c in calls]
    if None in sites:
        return None
    invariant = [k for k, p in enumerate(f.parameters) if all(c.args[k] is p for c in calls)]
    return Plan(region, sites, invariant)


def _reached(h: Graph, region: list[Graph]) -> set[Graph]:
    """The graphs of `region` that h leads to by tail calls, h not included."""
    found: set[Graph] = set()
    pending = [t for t in tail_calls(h) if t in region]
    while pending:
        g = pending.pop()
        if g not in found:
            found.add(g)
            pending.extend(t for t in tail_calls(g) if t in region)
    return found


def _site(f: Graph, call: Apply) -> Site | None:
    """What the ascent needs of the call `call`: the code after it, the graphs that code
    uses, and what it reads of the descent; None if code before the call reads code after
    it."""
    h = call.graph
    # the calling graph's nodes after the call: those depending on its result, and those
    # after it in source order; the others run before it, in the descent
    order = _applies(h)
    depends = {call}
    for n in order:
        if any(i in depends or (is_graph_constant(i) and i.value.parent is not None
                                and not depends.isdisjoint(free_variables(i.value)))
               for i in n.inputs):
            depends.add(n)
    after = [n for n in order if n is not call and (n in depends or n.debug.id > call.debug.id)]
    later = set(after)
    for n in order:
        if n not in later and n is not call:
            reads = list(n.inputs)
            reads += [v for i in n.inputs if is_graph_constant(i) and i.value.parent is not None
                      for v in free_variables(i.value)]
            if not later.isdisjoint(reads) or call in reads:
                return None
    # the graphs of f's scope that code uses, and those of them not nested in h (copied
    # with h's scope), outermost
    used: list[Graph] = []
    pending = list(_referenced_by(after, h.output))
    while pending:
        g = pending.pop()
        if g is f or g is h or g in used or not is_nested_in(g, f):
            continue
        used.append(g)
        pending.extend(_referenced(scope(g)))
    copied = [g for g in used if not is_nested_in(g, h)
              and not any(a in used for a in _ancestors_within(g, f))]
    # what that code reads of the descent
    mine = set(after) | {call}
    graphs = {g for u in used for g in scope(u)}
    readers = [n for g in graphs for n in _applies(g)] + after
    reads = [x for n in readers for x in n.inputs] + [g.output for g in graphs] + [h.output]
    residuals = list(dict.fromkeys(
        x for x in reads if x.graph is not None and x not in mine
        and x.graph not in graphs and is_nested_in(x.graph, f)))
    return Site(call, copied, residuals)


def _referenced_by(nodes: list[Node], output: Node) -> set[Graph]:
    found = {i.value for n in nodes for i in n.inputs if is_graph_constant(i)}
    if is_graph_constant(output):
        found.add(output.value)
    return found


def _ancestors_within(g: Graph, f: Graph) -> list[Graph]:
    result, a = [], g.parent
    while a is not None and a is not f:
        result.append(a)
        a = a.parent
    return result


def _exits(region: list[Graph], closing, calling: set) -> None:
    """Give each graph of `region` whose output leaves the region (returns a value rather
    than tail-calling a graph of the region, and does not raise) the output
    `closing(graph, value)`; but the graphs `calling`, which recurse."""
    members = set(region)
    for g in region:
        out = g.output
        if g in calling or primitive_name(out) == "raise_" \
                or any(t in members for t in tail_calls(g)):
            continue
        g.output = closing(g, out)


def _as_loops(f: Graph, plan: Plan) -> None:
    """Replace f's body by its descent and ascent loops (see the top).  Their state: each
    call's records on a stack of their own; with calls in several places, a stack of tags
    saying which made each level; with one place and nothing to push, the depth."""
    invariant = [f.parameters[k] for k in plan.invariant]
    pushed = [[x for x in site.residuals if x not in invariant] for site in plan.sites]
    tagged = len(plan.sites) > 1
    counting = not tagged and not pushed[0]

    # the descent: f's region copied, each call replaced by pushing its record and going on
    descend = Graph(f"{f.name}_descend", f, f.location)
    params = [descend.add_parameter(p.debug.name, p.location) for p in f.parameters]
    depth = descend.add_parameter("depth")
    tags = [descend.add_parameter("tags")] if tagged else []
    stacks = [descend.add_parameter("stack") if fields else None for fields in pushed]
    state = [depth] if counting else tags + [s for s in stacks if s is not None]
    down = Cloner(dict(zip(f.parameters, params)))
    down.graph(f, into=descend)
    descend.output = down.node(f.output)
    _exits([down.mapping[g] for g in plan.region],
           lambda g, out: g.apply(P["make_tuple"], out, *state),
           {down.mapping[site.call.graph] for site in plan.sites})
    for k, (site, fields) in enumerate(zip(plan.sites, pushed)):
        call, hd = site.call, down.mapping[site.call.graph]
        carried = [hd.apply(P["add"], depth, 1, name="depth")]
        carried += [hd.apply(P["stack_push"], t, k) for t in tags]
        for j, stack in enumerate(stacks):
            if stack is not None and j == k:
                record = [down.node(x) for x in fields]
                item = record[0] if len(record) == 1 else hd.apply(P["make_tuple"], *record)
                stack = hd.apply(P["stack_push"], stack, item)
            if stack is not None:
                carried.append(stack)
        deeper = Graph(f"{hd.name}_deeper", hd, call.location)
        deeper.output = deeper.apply(Constant(descend), *(down.node(a) for a in call.args),
                                     *carried, location=call.location)
        too_deep = Graph(f"{hd.name}_too_deep", hd, call.location)
        too_deep.output = too_deep.apply(P["raise_"], too_deep.apply(
            P["make_exception"], RecursionError,
            f"maximum recursion depth exceeded: {f.name}() nested more than "
            f"{MAX_DEPTH:,} calls", location=call.location), location=call.location)
        hd.output = hd.apply(hd.apply(P["switch"], hd.apply(P["gt"], carried[0], MAX_DEPTH),
                                      Constant(too_deep), Constant(deeper)))

    # the ascent: pop a level, run the code after its call on it, go on
    ascend = Graph(f"{f.name}_ascend", f, f.location)
    r = ascend.add_parameter("r")
    now = [ascend.add_parameter(p.debug.name) for p in state]
    kept = [ascend.add_parameter(p.debug.name, p.location) for p in invariant]
    done = Graph(f"{f.name}_ascend_exit", ascend, f.location)
    done.output = r
    step = Graph(f"{f.name}_ascend_step", ascend, f.location)
    if counting:
        empty = ascend.apply(P["eq"], now[0], 0)
        step.output = _resume(step, r, plan.sites[0], [], [], [step.apply(P["sub"], now[0], 1)],
                              ascend, invariant, kept)
    else:
        empty = ascend.apply(P["stack_empty"], now[0])
        rest = now
        if tagged:
            popped = step.apply(P["stack_pop"], now[0])
            tag = step.apply(P["getitem"], popped, 0, name="tag")
            rest = [step.apply(P["getitem"], popped, 1, name="tags"), *now[1:]]
        stack_of = {}
        for k, fields in enumerate(pushed):
            if fields:
                stack_of[k] = len(stack_of) + (1 if tagged else 0)

        def resume(g: Graph, k: int) -> Node:
            """In g, the code after call k, with its record popped."""
            values, popped_state = [], list(rest)
            if k in stack_of:
                popped = g.apply(P["stack_pop"], popped_state[stack_of[k]])
                top = g.apply(P["getitem"], popped, 0, name="record")
                values = [top] if len(pushed[k]) == 1 else \
                    [g.apply(P["getitem"], top, i) for i in range(len(pushed[k]))]
                popped_state[stack_of[k]] = g.apply(P["getitem"], popped, 1, name="stack")
            return _resume(g, r, plan.sites[k], pushed[k], values, popped_state, ascend,
                           invariant, kept)
        g = step
        for k in range(len(plan.sites) - 1):   # which call made this level: its tag
            here = Graph(f"{f.name}_ascend_{k}", step, f.location)
            here.output = resume(here, k)
            there = Graph(f"{f.name}_ascend_not_{k}", step, f.location)
            g.output = g.apply(g.apply(P["switch"], g.apply(P["eq"], tag, k), Constant(here),
                                       Constant(there)))
            g = there
        g.output = resume(g, len(plan.sites) - 1)
    ascend.output = ascend.apply(ascend.apply(P["switch"], empty, Constant(done),
                                              Constant(step)))

    res = f.apply(Constant(descend), *f.parameters, 0,
                  *([] if counting else [EMPTY_STACK] * len(state)), location=f.location)
    f.output = f.apply(Constant(ascend), *(f.apply(P["getitem"], res, i)
                                           for i in range(1 + len(state))),
                       *invariant, location=f.location)
    bump_version()


def _resume(g: Graph, r: Node, site: Site, pushed: list[Node], values: list[Node],
            state: list[Node], ascend: Graph, invariant: list[Node], kept: list[Node]) -> Node:
    """In g (nested in the ascent), the call of the code after `site`'s call, copied into a
    graph that takes the call's value, the record's `values` (of the nodes `pushed`) and
    the ascent's `state` once popped, and that goes on with the ascent where it returns."""
    call, h = site.call, site.call.graph
    after = Graph(f"{h.name}_after_call", ascend, call.location)
    y = after.add_parameter(call.debug.name or "y", call.location)
    fields = [after.add_parameter(x.debug.name, x.location) for x in pushed]
    going_on = [after.add_parameter(p.debug.name) for p in state]
    up = Cloner({call: y, **dict(zip(pushed, fields)), **dict(zip(invariant, kept))})
    up.scopes([h, *site.copied], into=after)
    after.output = up.node(h.output)
    for c in site.copied:
        up.mapping[c].parent = after
    copies = {up.mapping[c] for c in scope(h) if c is not h} \
        | {up.mapping[c] for root in site.copied for c in scope(root)}
    continued, i = [after], 0
    while i < len(continued):
        continued.extend(t for t in tail_calls(continued[i])
                         if t in copies and t not in continued)
        i += 1
    _exits(continued, lambda c, out: c.apply(Constant(ascend), out, *going_on, *kept), set())
    return g.apply(Constant(after), r, *values, *state)
