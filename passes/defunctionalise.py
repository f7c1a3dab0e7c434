"""Defunctionalised backpropagators: the gradient of a recursion that is not a loop with
records on stacks and one dispatching adjoint, rather than a closure per call.

The J transform (passes/ad.py) gives each call of a recursive function its
backpropagator, a closure of what its adjoint reads, the backpropagators of its own
recursive calls among them.  A linear recursion reaches J as loops
(passes/linear_recursion.py); one with two calls or more on a path (`fib(n - 1) +
fib(n - 2)`, a walk over a tree) keeps the closures: once optimized, each J graph of the
recursion returns `(value, @bprop)`, `bprop` one of a few graphs nested in it (one per
branch), and the chain of backpropagators is the tape.

This pass replaces those closures by data.  For the set P of J graphs it recognises (see
below), each J graph g of P takes a *state* as its last parameters, a stack of tags and
one stack of records per closure graph whose records hold anything, and returns
`(value, *state)` in place of `(value, bprop)`.  Its calls of P graphs pass the state on,
one after the other; where g made a closure of graph c, it pushes c's tag and c's
*record* instead: c's free variables but the backpropagators of g's calls, one tuple.
One top-level graph, the *dispatch* `D(*state, d)`, pops a tag and runs the body of that
tag's closure on the record it pops (`tag_dispatch`), where each call of a callee's
backpropagator is a call of D on the state: the records of g's calls lie above g's own,
in the order g made them, so D, called for them in the reverse order, pops each call's
records as the call's own body pops those of its callees.  D returns `(*state,
sensitivities)`.  A call of a P graph from outside P (the gradient's entry) starts from
empty stacks and gets the closure `lambda d: D(*state, d)[-1]`: one closure per gradient.

A closure that only rebuilds what its one call's backpropagator returns (the J of the
function, of an `if`'s branch, passing the sensitivities of the code after the `if` on)
is a *forwarder* (`_forwarders`): its graph pushes nothing and passes its call's state
on.  Where the rebuilt tuple is that result, nothing else changes; where it is another
(the branch takes its parameters in another order), each graph below it, whose only
caller it is, applies the rebuilding to its own body's result.  Each call then pushes
one tag, and the records of its closure if they hold anything.

Records hold residuals (numbers, arrays), each stack records of one shape, so types stay
as precise as the closures' were; inference no longer follows a closure per calling
context (which took it 2.4 s for the gradient of a Fibonacci-like recursion, 5 ms
now).  Once types are known, the optimizer drops the fields no adjoint reads
(`drop_unread_residuals`: `sum_to_like(d, x)` of a float x reads nothing of x), a stack
whose records hold nothing read at all, and the sensitivities D returns that only its
own calls read to compute the same sensitivities (an integer parameter's:
`drop_unused_parameters`).  This runs in the untyped optimizer (`PRUNES` in
passes/opt.py), once its sweeps have inlined the gradient rules and reduced J's
forwarding closures, so that inference sees no closure.

What is proved before anything changes (`_members`, `_order`), for every g of P:

* g's output is `make_tuple(value, @c)`, c nested in g, taking one parameter and used
  nowhere else; or a call of P graphs (a tail call: a branch, the code after an `if`);
* g is not the program's entry nor a recursion inference unrolls (`Graph.unrolled`), and
  is used only as a callee: called, or a branch of a `switch` whose every use is a call
  and whose other branch is in P too;
* each call X in g of P graphs is used only as `X[0]` (its value, anywhere) and by one
  `X[1]`, its backpropagator, which is used once, as the function of a call with one
  argument in c's own body on the path to c's output, so that c, run once, calls it
  exactly once.  A tail call is g's only call of P graphs, and its `X[1]` is not read;
* the calls of g have an order that g's data dependencies allow and whose reverse the
  calls of their backpropagators in c allow (those are the order of the stacks);

and no graph that P's graphs call, directly or not, calls a graph of P without being in P
(`_left_on_a_cycle`): a recursion is rewritten whole, or waits as it is.

A set P without a recursive graph is left alone (its closures are not per call); a graph
that fails is left as it is, and a call of it from a graph of P is a call like any
other, whose backpropagator is a field of the record.

First-order gradients only.  The stacks are values with gradient rules and D a recursion
like any other, so the gradient of a program so rewritten is correct; but it carries
stacks of sensitivities through the J of the dispatch, and ran twice as long as the
gradient of the closures (the second derivative of fib(12): 10 ms against 5 ms), whose
records, at the outer level, were no faster either.  So a gradient that is to be
differentiated again keeps its closures (passes/expand.py optimizes it without this
pass), and the pass declines a program whose J graphs are J graphs of J graphs.
"""

from __future__ import annotations

from myir.ir.analysis import OUTPUT, bump_version, free_variables, graph_uses, \
    primitive_name, reachable_graphs, recursive_graphs, tail_targets, toposort, users
from myir.ir.edit import Cloner, redirect
from myir.ir.graph import Apply, Constant, Graph, Node, is_graph_constant
from myir.ir.primitives import PRIMITIVES as P
from myir.ir.values import EMPTY_STACK, Env


def tag_dispatch(step: Graph, parent: Graph, kinds: int) -> list[Graph]:
    """Fill the body `step`, whose first parameter is a stack of tags, for records in
    `kinds` kinds: pop the tag and go on to that kind's step (a graph nested in `parent`
    taking step's parameters, the tags popped, whose output the caller fills); returns
    those steps.  One kind needs no tag: `step` is its step."""
    if kinds == 1:
        return [step]
    steps = []
    for k in range(kinds):
        s = Graph(f"{step.name}_{k}", parent, step.location)
        for p in step.parameters:
            s.add_parameter(p.debug.name)
        steps.append(s)
    popped = step.apply(P["stack_pop"], step.parameters[0])
    tag = step.apply(P["getitem"], popped, 0, name="tag")
    args = [step.apply(P["getitem"], popped, 1), *step.parameters[1:]]
    chosen: Graph = steps[-1]
    for k in reversed(range(kinds - 1)):    # `if tag == k` for each kind but the last
        choice = Graph(f"{step.name}_kind", step, step.location)
        params = [choice.add_parameter(p.debug.name) for p in step.parameters]
        branch = choice.apply(P["switch"], choice.apply(P["eq"], tag, k), Constant(steps[k]),
                              Constant(chosen))
        choice.output = choice.apply(branch, *params)
        chosen = choice
    step.output = step.apply(Constant(chosen), *args)
    return steps


def _item(node: Node, k: int) -> bool:
    return primitive_name(node) == "getitem" and type(node.args[1]) is Constant \
        and type(node.args[1].value) is int and node.args[1].value == k


class _Member:
    """A J graph of P: what it returns (`kind`: "closure", a closure of graph `closure`;
    "forward", a closure that only calls its one call's backpropagator; "tail", a call), its
    calls of P graphs in the order the state goes through them, and for each its
    backpropagator (`call[1]`) and the call of that in the closure."""

    def __init__(self, closure: Graph | None):
        self.kind = "tail" if closure is None else "closure"
        self.closure = closure
        self.calls: list[Apply] = []
        self.bprops: dict[Apply, Node] = {}
        self.bprop_calls: dict[Apply, Apply] = {}
        self.rebuild: list | None = None    # see `_rebuild`, `_forwarders`
        self.identity = False
        self.post: list[_Member] = []


def _closure_of(g: Graph, uses: dict, guses: dict):
    """c where g returns `make_tuple(value, @c)` and c is as required; "tail" where g's
    output is a call; else None."""
    out = g.output
    if tail_targets(out):
        return "tail"
    if primitive_name(out) != "make_tuple" or len(out.args) != 2 \
            or not is_graph_constant(out.args[1]):
        return None
    c = out.args[1].value
    if c.parent is not g or len(c.parameters) != 1 or guses.get(c) != [(out, 2)] \
            or uses.get(out) != [(g, OUTPUT)]:
        return None
    return c


def _evaluated(g: Graph) -> set:
    """The nodes of g on a path to its output through g's own nodes: evaluated whenever g
    runs (a node read only by a nested graph may be evaluated there, or not)."""
    seen, stack = set(), [g.output]
    while stack:
        n = stack.pop()
        if n in seen or type(n) is not Apply or n.graph is not g:
            continue
        seen.add(n)
        stack.extend(n.inputs)
    return seen


def _depends(node: Node, on: set, g: Graph) -> set:
    """The nodes of `on` that `node`, of g, depends on through g's nodes and the values of
    g that the closures it uses capture."""
    found, seen, stack = set(), set(), list(node.inputs)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in on:
            found.add(n)
        if type(n) is Apply and n.graph is g:
            stack.extend(n.inputs)
        elif is_graph_constant(n) and n.value.parent is not None:
            stack.extend(fv for fv in free_variables(n.value) if fv.graph is g)
    return found


def _member(g: Graph, kind, members: set, uses: dict, guses: dict) -> _Member | None:
    """g's `_Member` where g meets the conditions (the top) with `members` as P."""
    for user, i in guses.get(g, ()):
        if i == 0 or i in (2, 3) and primitive_name(user) == "switch" \
                and is_graph_constant(user.inputs[5 - i]) \
                and user.inputs[5 - i].value in members \
                and uses.get(user) and all(j == 0 for _, j in uses[user]):
            continue
        return None
    m = _Member(None if kind == "tail" else kind)
    calls = []
    for node in toposort(g):
        callees = tail_targets(node)
        if node.graph is not g or not callees:
            continue
        inside = [h in members for h in callees]
        if all(inside):
            calls.append(node)
        elif any(inside):
            return None
    if kind == "tail":
        if calls != [g.output] or any(not (u is g and i == OUTPUT or _item(u, 0))
                                      for u, i in uses.get(g.output, ())):
            return None
        m.calls = calls
        return m
    c = kind
    evaluated = _evaluated(c)
    for call in calls:
        bprops = [u for u, i in uses.get(call, ()) if i == 1 and _item(u, 1)]
        if len(bprops) != 1 or any(not (i == 1 and (_item(u, 0) or _item(u, 1)))
                                   for u, i in uses.get(call, ())):
            return None
        called = uses.get(bprops[0], [])
        if len(called) != 1 or called[0][1] != 0:
            return None
        bc = called[0][0]
        if bc.graph is not c or bc not in evaluated or len(bc.args) != 1:
            return None
        m.bprops[call] = bprops[0]
        m.bprop_calls[call] = bc
    m.calls = _order(calls, m.bprop_calls, g, c)
    return m if m.calls is not None else None


def _order(calls: list[Apply], bprop_calls: dict, g: Graph, c: Graph) -> list[Apply] | None:
    """The calls in an order g's dependencies allow and whose reverse the dependencies of
    their backpropagators' calls in c allow, nearest to g's own order; None if none."""
    if len(calls) < 2:
        return calls
    after: dict[Apply, set] = {x: _depends(x, set(calls) - {x}, g) for x in calls}
    by_bprop = {bc: x for x, bc in bprop_calls.items()}
    for x, bc in bprop_calls.items():   # a bprop reading another's result runs later:
        for other in _depends(bc, set(by_bprop) - {bc}, c):    # its call, earlier
            after[by_bprop[other]].add(x)
    order, placed = [], set()
    while len(order) < len(calls):
        ready = [x for x in calls if x not in placed and after[x] <= placed]
        if not ready:
            return None
        order.append(ready[0])
        placed.add(ready[0])
    return order


def _members(root: Graph) -> dict[Graph, _Member]:
    """P (see the top): the J graphs that meet the conditions, with each other as P,
    reached from a recursive one; empty where none is recursive."""
    recursive = recursive_graphs(root)
    if not recursive:
        return {}
    uses, guses = users(root), graph_uses(root)
    kinds = {}
    for g in reachable_graphs(root):
        # (root's callers are not ours; inference follows an unrolled recursion, a
        # dict's updates with keys it knows, step by step, which a dispatch would hide)
        if g.output is not None and g is not root and not g.unrolled:
            kind = _closure_of(g, uses, guses)
            if kind is not None:
                kinds[g] = kind
    members = set(kinds)
    while members:     # (in the program's order: tags and stacks are numbered so)
        found = {g: _member(g, kind, members, uses, guses) for g, kind in kinds.items()
                 if g in members}
        # those a recursive one reaches through calls of the others
        reached, stack = set(), [g for g, m in found.items() if m is not None and g in recursive]
        while stack:
            g = stack.pop()
            if g in reached or found[g] is None:
                continue
            reached.add(g)
            stack.extend(h for x in found[g].calls for h in tail_targets(x))
        if reached == members:
            if any(_transforms(g) > 1 for g in members) or _left_on_a_cycle(found):
                return {}   # (a gradient of a gradient: see the top)
            _forwarders(found, uses, guses)
            return found
        members = reached
    return {}


def _left_on_a_cycle(found: dict) -> bool:
    """Whether a graph that P's graphs call, directly or not, calls a graph of P while not
    in P itself (the code after an `if` that failed a condition): its calls would start
    stacks of their own as calls from outside do, and a later optimization that finds it
    and the graphs it reaches a P of their own would thread a second state through graphs
    that already have one.  The whole recursion waits, as it is, until every graph of it
    qualifies.  (A loop calling the recursion from outside is not called by it.)"""
    def callees(g: Graph):
        return {t for node in toposort(g) if node.graph is g for t in tail_targets(node)}

    seen: set[Graph] = set()
    stack = [t for g in found for t in callees(g) if t not in found]
    while stack:
        g = stack.pop()
        if g in seen:
            continue
        seen.add(g)
        called = callees(g)
        if called & found.keys():
            return True
        stack.extend(called - seen - found.keys())
    return False


def _transforms(g: Graph) -> int:
    """How many J transforms made g (the "grad of" steps of its debug's origins)."""
    n, debug = 0, g.debug
    while debug is not None:
        n += debug.relation == "grad of"
        debug = debug.origin
    return n


def _empty_env(node: Node) -> bool:
    return type(node) is Constant and type(node.value) is Env and not node.value.items


def _sites(h: Graph, uses: dict, guses: dict) -> list[Apply]:
    """The calls that run h (its uses are calls, or branches of switches only called)."""
    return [c for user, i in guses.get(h, ()) for c in
            ([user] if i == 0 else [c for c, _ in uses.get(user, ())])]


def _rebuild(m: _Member) -> list | None:
    """Where m's closure only returns a tuple made of items of what its one call's
    backpropagator returns (called with the closure's own parameter) and of constants:
    per item, the position it takes from that result (an int), or the constant."""
    c = m.closure
    if m.kind != "closure" or len(m.calls) != 1 or primitive_name(c.output) != "make_tuple":
        return None
    bc = m.bprop_calls[m.calls[0]]
    if bc.args[0] is not c.parameters[0]:
        return None
    items = []
    for x in c.output.args:
        if type(x) is Constant and not is_graph_constant(x):
            items.append(x)
        elif x.graph is c and primitive_name(x) == "getitem" and x.args[0] is bc \
                and type(x.args[1]) is Constant and type(x.args[1].value) is int:
            items.append(x.args[1].value)
        else:
            return None
    return items


def _forwarders(members: dict[Graph, _Member], uses: dict, guses: dict) -> None:
    """Mark the closures that only rebuild what their one call's backpropagator returns
    (`_rebuild`: the J of a function, of an `if`'s branch, passing its sensitivities on
    from the J of the code after the `if`) as forwarders: their graphs push nothing and
    return their call's state.  Either the rebuilt tuple is that result (an empty env and
    the items in place, of a result of that length with an empty env first: `identity`),
    or each graph that call may run is run by that call alone, and the bodies of the
    graphs below it apply the rebuilding to their result (`post`, through tail calls and
    other forwarders)."""
    length: dict[Graph, int] = {}
    for g, m in members.items():
        out = m.closure.output if m.closure is not None else None
        if out is not None and primitive_name(out) == "make_tuple" and out.args \
                and _empty_env(out.args[0]):
            length[g] = len(out.args)
    changed = True
    while changed:      # a tail call returns its callees' (through chains of tail calls)
        changed = False
        for g, m in members.items():
            if m.kind == "tail" and g not in length:
                found = {length.get(h) for h in tail_targets(m.calls[0])}
                if len(found) == 1 and None not in found:
                    length[g] = found.pop()
                    changed = True
    sites = {g: _sites(g, uses, guses) for g in members}
    for g, m in members.items():
        items = _rebuild(m)
        if items is None:
            continue
        m.rebuild = items
        callees = tail_targets(m.calls[0])
        m.identity = g in length and items == [items[0], *range(1, len(items))] \
            and _empty_env(items[0]) and all(length.get(h) == len(items) for h in callees)
        if m.identity or all(sites[h] == m.calls for h in callees):
            m.kind = "forward"

    def post(h: Graph, seen: frozenset = frozenset()) -> list:
        """The forwarders whose rebuilding h's result goes through, first to last."""
        if len(sites[h]) != 1 or sites[h][0].graph not in members or h in seen:
            return []
        g = sites[h][0].graph
        m = members[g]
        if m.kind == "tail" or m.kind == "forward" and m.identity:
            return post(g, seen | {h})
        return [m, *post(g, seen | {h})] if m.kind == "forward" else []

    for g, m in members.items():
        m.post = post(g)
    for g, m in members.items():    # a result passed on whole passes its rebuilding on
        if m.post and (m.kind == "tail" or m.kind == "forward" and m.identity) \
                and any(sites[h] != m.calls for h in tail_targets(m.calls[0])):
            for m in members.values():     # (or nothing is rebuilt below)
                m.post = []
                if m.kind == "forward" and not m.identity:
                    m.kind = "closure"
            return


def defunctionalise(root: Graph, types: dict | None = None) -> bool:
    """Rewrite the backpropagators of the recursive J graphs of root's program as records
    and a dispatch (see the top), before types are known; whether anything changed."""
    if types is not None:
        return False
    members = _members(root)
    closures = [m.closure for m in members.values() if m.kind == "closure"]
    if not closures:
        return False
    bprops = {b for m in members.values() for b in m.bprops.values()}
    fields = {c: [fv for fv in free_variables(c) if fv not in bprops] for c in closures}
    tagged = len(closures) > 1
    state = (["tags"] if tagged else []) + [f"stack_{c.name}" for c in closures if fields[c]]
    layout = _Layout(closures, fields, tagged)
    dispatch = Graph("bprop_dispatch", None, next(iter(members)).location)
    for name in [*state, "dout"]:
        dispatch.add_parameter(name)
    # the calls from outside P first: the closures' bodies, copied below, may hold some
    uses = users(root)
    for g in reachable_graphs(root):
        if g not in members:
            for node in toposort(g):
                callees = tail_targets(node)
                if node.graph is g and callees and callees[0] in members:
                    _call_from_outside(node, uses.get(node, ()), dispatch, len(state))
    for g, m in members.items():
        _thread(g, m, state, layout)
    steps = tag_dispatch(dispatch, dispatch, len(closures))
    for m in members.values():
        if m.kind == "closure":
            _body(m, steps[layout.tag[m.closure]], dispatch, layout)
    bump_version()
    return True


class _Layout:
    """Where each closure's records go: its tag, and the position in the state of its
    stack (None where it has no fields: the tag alone says it)."""

    def __init__(self, closures: list[Graph], fields: dict, tagged: bool):
        self.fields = fields
        self.tagged = tagged
        self.tag = {c: k for k, c in enumerate(closures)}
        first = 1 if tagged else 0
        self.stack = {c: first + k for k, c in enumerate(c for c in closures if fields[c])}


def _call_from_outside(call: Apply, used: list, dispatch: Graph, n: int) -> None:
    """A call of P graphs from elsewhere: it starts from empty stacks, and what it returns
    becomes `(value, lambda d: D(*state, d)[n])`."""
    g = call.graph
    call.set_inputs([*call.inputs, *[Constant(EMPTY_STACK)] * n])
    bprop = Graph("bprop_of_recursion", g, call.location)
    d = bprop.add_parameter("dout")
    result = bprop.apply(dispatch, *(bprop.apply(P["getitem"], call, 1 + k) for k in range(n)),
                         d)
    bprop.output = bprop.apply(P["getitem"], result, n)
    redirect(used, g.apply(P["make_tuple"], g.apply(P["getitem"], call, 0), Constant(bprop)))


def _thread(g: Graph, m: _Member, state: list[str], layout: _Layout) -> None:
    """g takes the state, passes it through its calls of P graphs in order, and returns
    it with the record of its closure pushed where it made the closure."""
    st = [g.add_parameter(name) for name in state]
    for call in m.calls:
        call.set_inputs([*call.inputs, *st])
        if call is not g.output:
            st = [g.apply(P["getitem"], call, 1 + k) for k in range(len(state))]
    if m.kind == "tail":
        return
    out, c = g.output, m.closure
    if m.kind == "closure":
        st = list(st)
        if layout.tagged:
            st[0] = g.apply(P["stack_push"], st[0], layout.tag[c])
        if layout.fields[c]:
            k = layout.stack[c]
            st[k] = g.apply(P["stack_push"], st[k], g.apply(P["make_tuple"], *layout.fields[c]))
    out.set_inputs([out.fn, out.args[0], *st])


def _body(m: _Member, step: Graph, dispatch: Graph, layout: _Layout) -> None:
    """Fill the step of m's closure c: pop c's record, run a copy of c's body on it, each
    call of a callee's backpropagator a call of the dispatch, in the reverse of the calls'
    order; return `(*state, c's result)`."""
    c = m.closure
    *st, d = step.parameters
    mapping: dict = {c.parameters[0]: d}
    fields = layout.fields[c]
    if fields:
        k = layout.stack[c]
        popped = step.apply(P["stack_pop"], st[k])
        record = step.apply(P["getitem"], popped, 0, name="record")
        st[k] = step.apply(P["getitem"], popped, 1)
        mapping.update((fv, step.apply(P["getitem"], record, j)) for j, fv in enumerate(fields))
    mapping.update((b, Constant(None)) for b in m.bprops.values())  # (calls replaced below)
    cloner = Cloner(mapping)
    cloner.graph(c, into=step)
    out = cloner.node(c.output)
    for forwarder in m.post:    # the rebuilding of the forwarders above
        out = step.apply(P["make_tuple"], *(
            x if isinstance(x, Constant) else step.apply(P["getitem"], out, x)
            for x in forwarder.rebuild))
    n = len(st)
    for call in reversed(m.calls):
        copy = cloner.mapping[m.bprop_calls[call]]
        result = step.apply(dispatch, *st, copy.args[0])
        copy.set_inputs([Constant(P["getitem"]), result, Constant(n)])
        st = [step.apply(P["getitem"], result, k) for k in range(n)]
    step.output = step.apply(P["make_tuple"], *st, out)
