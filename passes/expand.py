"""Macro expansion: `grad(f, ...)` written inside compiled code becomes the gradient graph.

A `GradMacro` applied to a function known at compile time (a graph constant) is replaced by
the constant `grad_graph(f)`, after `lift` has made f's branches and loops take their free
variables as parameters.  Macros inside `f` are expanded first, so `grad(grad(f))` and
the gradient of a function that itself takes gradients work: the inner gradient is an
ordinary graph by the time the outer J transform sees it.
"""

from __future__ import annotations

from myir.errors import MyirError
from myir.ir.analysis import reachable_graphs, toposort, users
from myir.ir.edit import clone_program, replace
from myir.ir.graph import Apply, Constant, Graph, is_graph_constant
from myir.ir.values import GradMacro, JacobianMacro, JvpMacro, VectorizeMacro
from passes.ad import grad_graph
from passes.forward import check_jvp_calls, expand_macro
from passes.lift import lift
from passes.vectorize import vectorized_graph


MACROS = (GradMacro, JvpMacro, JacobianMacro, VectorizeMacro)


def _macro_nodes(root: Graph) -> list[Apply]:
    return [node for g in reachable_graphs(root) for node in toposort(g)
            if isinstance(node, Apply) and node.graph is g
            and isinstance(node.fn, Constant) and isinstance(node.fn.value, MACROS)]


def expand(root: Graph) -> Graph:
    """`root` with every grad macro expanded (a copy, if there were any)."""
    if not _macro_nodes(root):
        return root
    root = clone_program(root)
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
            lift(target)
            if isinstance(spec, GradMacro):
                graph = grad_graph(target, spec.wrt, spec.with_value, node.location)
            elif isinstance(spec, VectorizeMacro):
                graph = vectorized_graph(target, node.location)
            else:
                if isinstance(spec, JvpMacro):
                    check_jvp_calls(node, users(root).get(node, []), target)
                graph = expand_macro(spec, target, node.location)
            replace(root, node, Constant(graph))
