"""Macro expansion: `grad(f, ...)` written inside compiled code becomes the gradient graph.

A `GradMacro` applied to a function known at compile time (a graph constant) is replaced by
the constant `grad_graph(f)`, after `lift` has made f's branches and loops take their free
variables as parameters.  Macros inside `f` are expanded first, so `grad(grad(f))` and
the gradient of a function that itself takes gradients work: the inner gradient is an
ordinary graph by the time the outer J transform sees it.

A transform of a program holding a transform expanded here (`grad(grad(f))`) takes an
optimized copy of it (`passes.opt.optimize`): J's output is several times the size of its
input, most of it gone once optimized (the backpropagators of primitives inlined, tuples
built only to be taken apart), so transforming the raw inner gradient multiplied that
waste at each order (J of the raw second derivative of a 4-iteration `while` loop is 6,800
operations, which took seconds to optimize; J of the optimized one, 1,100).
"""

from __future__ import annotations

from myir.errors import MyirError
from myir.ir.analysis import bump_version, reachable_graphs, toposort, users
from myir.ir.edit import clone_program, replace
from myir.ir.graph import Apply, Constant, Graph, is_graph_constant
from myir.ir.primitives import Primitive
from myir.ir.values import GradMacro, JacobianMacro, JvpMacro, VectorizeMacro
from passes.ad import grad_graph, wrt_positions
from passes.forward import check_jvp_calls, expand_macro
from passes.lift import lift
from passes import opt
from passes.defunctionalise import defunctionalise
from passes.opt import optimize
from passes.vectorize import vectorized_graph


MACROS = (GradMacro, JvpMacro, JacobianMacro, VectorizeMacro)


def _macro_nodes(root: Graph) -> list[Apply]:
    return [node for g in reachable_graphs(root) for node in toposort(g)
            if type(node) is Apply and node.graph is g
            and type(node.inputs[0]) is Constant and isinstance(node.inputs[0].value, MACROS)]


def _holds_a_transform(target: Graph, made: set) -> bool:
    """Whether `target` is a top-level graph whose program holds one of the transforms
    `made`, and no graph with a gradient rule of its own (`myir.custom_grad`, `vectorize`):
    the optimizer inlines those and drops their unused parameters, and the transform would
    then differentiate their bodies rather than apply their rules."""
    if target.parent is not None:
        return False
    program = reachable_graphs(target)
    return not made.isdisjoint(program) \
        and all(getattr(g, "custom_grad", None) is None for g in program)


def _calls_passing_functions(root: Graph, macro: Apply, target: Graph, spec: GradMacro):
    """The calls of the gradient `macro` (`grad(f)(params, x, act=np.sin)`, or f's default
    `act=np.tanh`) passing functions known when compiling, each with the (position,
    function) pairs it passes.  The gradient takes a function argument as it is, while
    f's J calls J of it: each such call gets the gradient of f with those functions in
    place of the parameters."""
    wrt = set(wrt_positions(target, spec.wrt, macro.location))
    result = []
    for call, i in users(root).get(macro, ()):
        if i != 0:
            continue
        fixed = tuple((k, a.value) for k, a in enumerate(call.inputs[1:len(target.parameters)
                                                                      + 1])
                      if k not in wrt and isinstance(a, Constant) and (
                          isinstance(a.value, Primitive)
                          or isinstance(a.value, Graph) and a.value.parent is None))
        if fixed:
            result.append((call, fixed))
    return result


def _with_functions(target: Graph, fixed: tuple) -> Graph:
    """A copy of `target` whose parameters at the positions of `fixed` are the functions
    given there (the parameters stay, unused: the gradient's signature is f's)."""
    copy = clone_program(target)
    for k, fn in fixed:
        replace(copy, copy.parameters[k], Constant(fn))
    return copy


def expand(root: Graph, optimizing: bool = True) -> Graph:
    """`root` with every grad macro expanded (a copy, if there were any).  `optimizing`:
    whether the pipeline optimizes, and so whether the inner transforms are optimized
    before the outer ones transform them (`compile(f, optimize=False)` runs no rewrite)."""
    if not _macro_nodes(root):
        return root
    root = clone_program(root)
    made: set[Graph] = set()    # the graphs of the transforms expanded so far
    optimized: dict[Graph, Graph] = {}
    while True:
        pending = _macro_nodes(root)
        if not pending:
            return root
        ready = [n for n in pending if is_graph_constant(n.inputs[1])
                 and not _macro_nodes(n.inputs[1].value)]
        if not ready:
            node = pending[0]
            raise MyirError("grad() needs a function known when compiling: a function "
                            "defined with def or lambda, or a module-level function",
                            node.location, hint="apply grad to the function by name, not to "
                            "a value computed at run time")
        for node in ready:
            spec = node.fn.value
            target = node.inputs[1].value
            if optimizing and _holds_a_transform(target, made):
                if target not in optimized:     # (its backpropagators stay closures:
                    optimized[target] = optimize(   # passes/defunctionalise.py)
                        target, prunes=[p for p in opt.PRUNES if p is not defunctionalise])
                target = optimized[target]
            lift(target)
            if isinstance(spec, GradMacro):
                for call, fixed in _calls_passing_functions(root, node, target, spec):
                    specialised = grad_graph(_with_functions(target, fixed), spec.wrt,
                                             spec.with_value, node.location)
                    made.add(specialised)
                    call.set_inputs([Constant(specialised)] + list(call.inputs[1:]))
                    bump_version()
                if not users(root).get(node):    # every call passed functions
                    continue
                graph = grad_graph(target, spec.wrt, spec.with_value, node.location)
            elif isinstance(spec, VectorizeMacro):
                graph = vectorized_graph(target, node.location)
            else:
                if isinstance(spec, JvpMacro):
                    check_jvp_calls(node, users(root).get(node, []), target)
                graph = expand_macro(spec, target, node.location)
            made.add(graph)
            replace(root, node, Constant(graph))
