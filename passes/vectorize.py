"""`myir.vectorize`: a scalar function broadcast over arrays, and its mixed-mode gradient.

`vectorize(f)` stands for the graph `V_f(*xs) = vectorize_call(f, *xs)`: one primitive
that keeps the scalar graph f whole, so a backend can run it as it sees fit (the python
backend as `np.vectorize(f)`, TVM as one kernel whose loop body is f: backends/tvm/kernel.py).

Its type is f's, inferred on the element types of the operands (a float32 array's elements
are `np.float32`, a Python float's is `np.float64`: what np.vectorize hands f first, whose
result sets the output dtype), on the broadcast shape.  np.vectorize takes the output dtype
from the first element's result; myir needs it when compiling, so a function whose result
type depends on the values (an `int` on one branch, a `float` on the other) is refused.

The gradient is mixed mode (Revels et al. 2018): the Jacobian of a broadcast is diagonal, so
every partial derivative it needs is one forward-mode evaluation per element with one tangent
per input.  `V_f` carries a gradient rule (as `myir.custom_grad` does) whose backpropagator
computes `vectorize_call(P_f, *xs)`, where `P_f(*xs) = (f(xs), df/dx_1, ..., df/dx_n)` is
built from forward mode of f (passes/forward.py: the n tangent evaluations share f's primal
computation once the optimizer has merged them), and returns `sum_to_like(dout * df/dx_i, x_i)`:
no reverse pass over f, and f's branches and loops are simply followed per element.
"""

from __future__ import annotations

import numpy as np

from myir.ir.graph import Constant, Graph
from myir.ir.primitives import PRIMITIVES as P
from passes.abstract import BOTTOM, AArray, AScalar, ATuple
from passes.type_rules import RuleError, broadcast, type_name

_PY_NUMBERS = (bool, int, float)


def vectorized_graph(f: Graph, location) -> Graph:
    """`V_f(*xs) = vectorize_call(f, *xs)`, with its mixed-mode gradient rule.  A closure's
    captured values are passed as more operands (numbers broadcast like any other), so the
    kernel reads nothing from outside and their gradients are partials like the others'."""
    body, captured = _top_level(f, location)
    v = Graph(f"vectorized_{f.name}", None, location)
    xs = [v.add_parameter(p.debug.name, p.location) for p in body.parameters]
    v.output = v.apply(P["vectorize_call"], Constant(body), *xs, location=location)
    v.custom_grad = _gradient_rule(body, location)
    v.vectorized = True     # forward mode goes through vectorize_call (passes/forward.py)
    if not captured:
        return v
    w = Graph(f"vectorized_{f.name}", f.parent, location)
    args = [w.add_parameter(p.debug.name, p.location) for p in f.parameters]
    w.output = w.apply(Constant(v), *args, *captured, location=location)
    return w


def _top_level(f: Graph, location) -> tuple[Graph, list]:
    """f as a graph of no enclosing graph, taking the values it captures as parameters after
    its own, and those values."""
    from myir.errors import MyirError
    from myir.ir.analysis import free_variables
    from myir.ir.edit import clone
    from passes.lift import _add_parameters

    if f.parent is None:
        return f, []
    body = clone(f)
    captured = free_variables(body)
    _add_parameters(body, captured)
    body.parent = None
    if free_variables(body):
        raise MyirError(f"vectorize({f.name}): {f.name} calls a closure that captures "
                        "variables of the enclosing function", location,
                        hint=f"pass those values to {f.name} as arguments")
    return body, captured


def _partials_graph(f: Graph, location) -> Graph:
    """`P_f(*xs) = (f(*xs), df/dx_1, ..., df/dx_n)` by forward mode: F(f) called once per
    input with that input's tangent 1 and the others' 0."""
    from passes.forward import ForwardTransform

    fj = ForwardTransform().transform(f)
    g = Graph(f"partials_{f.name}", f.parent, location)
    xs = [g.add_parameter(p.debug.name, p.location) for p in f.parameters]
    zeros = [g.apply(P["grad_zeros"], x) for x in xs]
    outs = []
    for i, x in enumerate(xs):
        ts = [g.apply(P["add"], zeros[j], Constant(1.0)) if j == i else zeros[j]
              for j in range(len(xs))]
        r = g.apply(Constant(fj), *xs, *ts, location=location)
        if i == 0:
            outs.append(g.apply(P["getitem"], r, Constant(0)))
        outs.append(g.apply(P["getitem"], r, Constant(1)))
    g.output = g.apply(P["make_tuple"], *outs)
    return g


def _gradient_rule(f: Graph, location) -> Graph:
    """`rule(*xs, out, dout)`: each input's gradient, `dout` times its partials summed back to
    the input's shape (an operand broadcast over rows gets the rows' sum)."""
    partials = _partials_graph(f, location)
    r = Graph(f"bprop_vectorized_{f.name}", f.parent, location)
    xs = [r.add_parameter(p.debug.name, p.location) for p in f.parameters]
    r.add_parameter("out")
    dout = r.add_parameter("dout")
    parts = r.apply(P["vectorize_call"], Constant(partials), *xs, location=location)
    r.output = r.apply(P["make_tuple"], *(
        r.apply(P["sum_to_like"], r.apply(P["mul"], dout, r.apply(P["getitem"], parts,
                                                                  Constant(i + 1))), x)
        for i, x in enumerate(xs)))
    return r


def vectorized_may_raise(node, type_of) -> bool:
    """Whether `vectorize_call(f, *xs)` can raise: whether an operation of f can, on the
    types f was specialised for (the broadcast itself was checked when compiling).  So an
    unused vectorized value of arithmetic on numpy scalars is dropped, as numpy's would be
    (the forward of a gradient whose value is not returned)."""
    from myir.ir.analysis import primitive_name, reachable_graphs, switch_call, toposort
    from myir.ir.graph import Apply, is_graph_constant
    from passes.raising import may_raise

    f = node.args[0]
    if not is_graph_constant(f) or any(None in getattr(type_of(x), "shape", ())
                                       for x in node.args[1:]):
        return True
    for g in reachable_graphs(f.value):
        for n in toposort(g):
            if not isinstance(n, Apply) or n.graph is not g:
                continue
            name = primitive_name(n)
            if name is None:
                if not (is_graph_constant(n.fn) or switch_call(n) is not None):
                    return True     # a function value: unknown
            elif name == "vectorize_call":
                if vectorized_may_raise(n, type_of):
                    return True
            elif name not in ("switch", "make_tuple") and \
                    may_raise(name, [type_of(a) for a in n.args], type_of(n)):
                return True
    return False


# ------------------------------------------------------------------------------- types


def element_types(args: tuple) -> tuple[tuple, tuple]:
    """The types np.vectorize hands the scalar function first (numpy scalars of the operands'
    dtypes), and the broadcast shape."""
    elements, shapes = [], []
    for k, a in enumerate(args):
        if isinstance(a, AArray):
            elements.append(AScalar(a.dtype.type))
            shapes.append(a.shape)
        elif isinstance(a, AScalar) and (a.pytype in _PY_NUMBERS
                                         or issubclass(a.pytype, (np.number, np.bool_))):
            elements.append(AScalar(np.asarray(a.pytype(0)).dtype.type))
            shapes.append(())
        else:
            raise RuleError(f"vectorize: argument {k + 1} is {type_name(a)}; a vectorized "
                            "function is broadcast over numbers and arrays",
                            "pass numbers or arrays (a tuple of arrays: pass its items as "
                            "separate arguments)")
    return tuple(elements), broadcast(*shapes)


def result_type(result, shape: tuple, name: str):
    """The arrays np.vectorize returns for the scalar function's result type."""
    if result is BOTTOM:
        return BOTTOM
    if isinstance(result, ATuple):
        return ATuple(tuple(result_type(r, shape, name) for r in result.items))
    if isinstance(result, AScalar) and (result.pytype in _PY_NUMBERS
                                        or issubclass(result.pytype, (np.number, np.bool_))):
        return AArray(np.dtype(result.pytype), shape)
    if isinstance(result, AArray):
        raise RuleError(f"vectorize: {name}() returns an array ({result!r}) for scalar "
                        "arguments; vectorize broadcasts a function of numbers that returns "
                        "a number",
                        f"make {name} compute one element from numbers (index and reduce "
                        "arrays outside it), or call it on the arrays directly without "
                        "vectorize")
    raise RuleError(f"vectorize: {name}() returns {type_name(result)}, which depends on the "
                    "values or is not a number; np.vectorize would take the type of the first "
                    "element's result, so myir asks for one type",
                    f"make every return of {name} the same type of number, e.g. `float(...)`")
