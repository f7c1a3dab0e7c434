"""Lambda lifting of control-flow graphs, before differentiation.

The frontend makes `if` branches and loop bodies graphs that read the enclosing function's
variables as free variables.  Differentiated as closures, every branch taken and every loop
iteration would return its gradients in an env (a dictionary built and read at run time).
Passing those variables as explicit parameters instead makes J return their gradients in
the backpropagator's tuple, which the optimizer then reduces to plain arithmetic.

Lifted: graphs only ever called by name (the code after an `if`, which both branches call;
a local function called directly): their callers pass the free variables; the two branches
of `switch(c, then, else)(...)` when used nowhere else (the call passes the free variables
of both); and loop graphs (called once from outside, then only by themselves: the outside
call passes the free variables, the self calls pass them on).  Closures used as values
(lambdas passed around or returned) keep their free variables.

For recursion this is what lets the optimizer see through J's backpropagators: with every
graph of `if n < 2: return x; return g(f(x, n - 1), f(x, n - 2))` closed, J of each returns
its sensitivities as a plain tuple, the branch's and the function's backpropagators only
forward to the callee's (`closure_eta`, `tuple_rebuilt` in passes/opt.py), and each call
of the recursion makes one backpropagator (passes/ad.py).
"""

from __future__ import annotations

from myir.ir.analysis import bump_version, free_variables, graph_uses, is_nested_in, \
    reachable_graphs, scope, switch_call, toposort
from myir.ir.graph import Apply, Graph, Node


def _liftable(g: Graph) -> list[Node]:
    """The free variables of g that nodes of g's scope read.  The others are captured by
    closures g calls that are not nested in it (`def step(t): return t * x` called in a
    loop): those closures keep reading them, so a parameter would not replace them, and
    lifting them again and again would never end."""
    read = {id(i) for h in scope(g) for node in toposort(h)
            if isinstance(node, Apply) and node.graph is h for i in node.inputs}
    read |= {id(h.output) for h in scope(g)}
    return [fv for fv in free_variables(g) if id(fv) in read]


def _add_parameters(g: Graph, fvs: list[Node]) -> list[Node]:
    """New parameters of g standing for `fvs`, which g's scope now reads instead."""
    params = [g.add_parameter(fv.debug.name, fv.location) for fv in fvs]
    mapping = dict(zip(fvs, params))
    for h in scope(g):
        for node in toposort(h):
            if isinstance(node, Apply) and node.graph is h:
                node.set_inputs([mapping.get(i, i) for i in node.inputs])
        h.output = mapping.get(h.output, h.output)
    bump_version()
    return params


def lift(root: Graph) -> None:
    """Lift the branches and loops of every graph reachable from `root`, in place."""
    _lift_all_called(root)
    done: set[Graph] = set()
    progress = True
    while progress:
        progress = False
        uses = graph_uses(root)
        for g in reachable_graphs(root):
            if g in done:
                continue
            # a loop first: its self calls then pass on the values its branches receive
            progress = g.parent is not None and _lift_loop(g, uses.get(g, []))
            for node in toposort(g):
                sc = switch_call(node) if node.graph is g else None
                if sc is not None:
                    progress |= _lift_branches(node, sc, uses)
            if progress:
                break  # analyses are stale: start over
            done.add(g)


def _lift_branches(call: Apply, sc, uses) -> bool:
    branches = [sc.then, sc.else_]
    if branches[0] is branches[1] or any(len(uses.get(b, ())) != 1 for b in branches) \
            or any(b.parameters for b in branches) or call.args:
        return False
    fvs = list(dict.fromkeys(fv for b in branches for fv in _liftable(b)))
    if not fvs:
        return False
    for b in branches:
        _add_parameters(b, fvs)
    call.set_inputs(call.inputs + fvs)
    bump_version()
    return True


def _lift_all_called(root: Graph) -> None:
    """Lift the graphs only ever called by name, from outside themselves: the code after
    an `if` (both branches call it), a local function called directly.  First, so that
    the branches calling them read their variables as free variables and take them as
    parameters once each (a branch that already took x would otherwise take it again for
    the call).  Lifting a graph adds operands to its calls, the same nodes: one `uses`
    serves every round, and rounds go on while a lift makes a caller read more."""
    uses = graph_uses(root)
    graphs = [g for g in reachable_graphs(root) if g.parent is not None]
    lifted = True
    while lifted:
        lifted = [g for g in reversed(graphs) if _lift_called(g, uses.get(g, []))]


def _lift_called(g: Graph, uses) -> bool:
    """Lift g, if only ever called by name from outside itself: its callers pass the free
    variables, which they can read (they are nested where g is)."""
    if not uses or any(i != 0 for _, i in uses) or g.defaults \
            or getattr(g, "custom_grad", None) is not None \
            or any(is_nested_in(a.graph, g) or not is_nested_in(a.graph, g.parent)
                   for a, _ in uses):
        return False
    fvs = _liftable(g)
    if not fvs:
        return False
    _add_parameters(g, fvs)
    for a, _ in uses:
        a.set_inputs(a.inputs + fvs)
    bump_version()
    return True


def _lift_loop(g: Graph, uses) -> bool:
    if not uses or any(i != 0 for _, i in uses):
        return False
    inner = [a for a, _ in uses if is_nested_in(a.graph, g)]
    outer = [a for a, _ in uses if not is_nested_in(a.graph, g)]
    if not inner or len(outer) != 1 or any(a.graph.output is not a for a in inner):
        return False
    fvs = _liftable(g)
    if not fvs:
        return False
    params = _add_parameters(g, fvs)
    for a in inner:
        a.set_inputs(a.inputs + params)
    outer[0].set_inputs(outer[0].inputs + fvs)
    bump_version()
    return True

