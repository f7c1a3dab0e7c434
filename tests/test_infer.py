"""Type and shape inference (passes/infer.py): it tells the truth, it is precise where it
matters, and it reports errors before running, at the user's line.

Truth is checked by running the *typed* graph (the specialised program inference returns)
with a small reference evaluator built on the python backend's primitive implementations:
every value every node takes must be one its type describes (`conforms`).  The subjects are
every function of the test program modules, called with whichever of a pool of arguments
CPython accepts, and random programs from tests/progen.py.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import math
import signal
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings

import myir
from backends.python.impls import callable_of
from myir.errors import MyirSyntaxError, MyirTypeError
from myir.ir.analysis import toposort
from myir.ir.graph import Apply, Constant, Graph
from myir.ir.primitives import Primitive
from passes.abstract import ANY, BOTTOM, AArray, ANone, AScalar, ATuple, AUnion, conforms, join
import passes.infer
import passes.opt
from passes.infer import infer
from tests.programs_check import module_from_source
from tests import programs_constructs, programs_grad, programs_infer as I, programs_lists, \
    programs_numpy, programs_opt

# --------------------------------------------------------------------------------------------
# The reference evaluator


class Mismatch(AssertionError):
    pass


def run_typed(graph: Graph, args: tuple):
    """Evaluate a typed graph node by node; raise Mismatch where a value does not conform to
    its node's type.  Returns the result."""
    def evaluate(g, values, env):
        env = dict(env)
        for p, v in zip(g.parameters, values):
            check(p, v)
            env[p] = v
        for node in toposort(g):
            if isinstance(node, Apply) and node.graph is g:
                fn, *xs = (value(i, env) for i in node.inputs)
                env[node] = fn(*xs)
                check(node, env[node])
        return value(g.output, env)

    def value(node, env):
        if isinstance(node, Constant):
            v = node.value
            if isinstance(v, Graph):
                return lambda *xs: evaluate(v, xs, env)
            return callable_of(v.name) if isinstance(v, Primitive) else v
        return env[node]

    def check(node, v):
        if node.abstract is not None and not conforms(v, node.abstract):
            raise Mismatch(f"{node} : {node.abstract} took the value {v!r} "
                           f"({type(v).__name__})")

    return evaluate(graph, args, {})


def typed_graph(fn, args, **kwargs):
    return myir.compile(fn, backend="python", **kwargs).lower(*args).graph("typed")


# --------------------------------------------------------------------------------------------
# Every test program, with the arguments CPython accepts

POOL = [3, -2, 0, 2.5, -0.5, True, (1, 2, 3), (1.5, -2.0), np.array([1.0, -2.0, 3.0]),
        np.arange(6.0).reshape(2, 3) - 2.5, np.arange(4), np.float32(1.5), np.ones((3, 3)),
        [0.5, -1.5, 2.0]]
MAX_CALLS_PER_FUNCTION = 3


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def recursion_limit(n=10_000):
    """A bounded recursion limit while running a subject: a gradient compiled earlier in the
    session raises it to 10**6, where a subject recursing without end (factorial(2.5))
    would overflow the C stack instead of raising RecursionError."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(n)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _cpython(fn, args):
    """fn(*args) in CPython within a second, or None if it raises or runs longer."""
    def alarm(signum, frame):
        raise _Timeout
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with np.errstate(all="ignore"), recursion_limit(1000):  # CPython's default
            return (fn(*args),)
    except Exception:  # noqa: BLE001 - not a call to test
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _subjects():
    modules = [programs_constructs, programs_numpy, programs_opt, I, programs_lists]
    for module in modules:
        for name, fn in vars(module).items():
            if inspect.isfunction(fn) and fn.__module__ == module.__name__:
                yield pytest.param(fn, id=f"{module.__name__.split('.')[-1]}.{name}")


def _calls(fn):
    n = len(inspect.signature(fn).parameters)
    found = 0
    for args in itertools.product(POOL, repeat=n) if n <= 2 else [(v,) * n for v in POOL]:
        if found == MAX_CALLS_PER_FUNCTION:
            return
        result = _cpython(fn, args)
        if result is not None:
            found += 1
            yield args, result[0]


@pytest.mark.parametrize("fn", list(_subjects()))
def test_types_tell_the_truth(fn):
    """For each call CPython accepts: inference raises no error, and every node of the typed
    program only takes values its type describes; the output's type describes CPython's."""
    check_truth(fn)


def _makes_closures(fn) -> bool:
    return any(inspect.iscode(c) for c in fn.__code__.co_consts)


@pytest.mark.parametrize("fn", [p for p in _subjects() if _makes_closures(p.values[0])])
def test_types_tell_the_truth_when_closures_share_joined_contexts(fn, monkeypatch):
    """The same, with every nested graph's closures sharing one joined context and every
    graph one joined frame per context: the join `CONTEXTS_PER_GRAPH` falls back to in big
    programs, tried on every subject that makes closures (loops, branches, lambdas)."""
    monkeypatch.setattr(passes.infer, "CONTEXTS_PER_GRAPH", 0)
    monkeypatch.setattr(passes.infer, "FRAMES_PER_GRAPH", 1)
    check_truth(fn)


def check_truth(fn):
    for args, expected in _calls(fn):
        try:
            graph = typed_graph(fn, args)
        except MyirSyntaxError:
            return  # outside the subset: not inference's business
        except MyirTypeError as e:
            # myir refuses `x += y` on shared arrays by design; nothing else may be refused
            assert "in place" in e.message, f"{fn.__name__}{args}: {e}"
            continue
        try:
            with recursion_limit():
                run_typed(graph, args)
        except myir.MyirError:
            continue  # refused at run time, as compiled code refuses it
        output = graph.output.abstract if graph.output.abstract is not None else ANY
        assert conforms(expected, output), f"{fn.__name__}{args}: {expected!r} !: {output}"


GRADIENT_SUBJECTS = [fn for name, fn in vars(programs_grad).items()
                     if inspect.isfunction(fn) and fn.__module__ == programs_grad.__name__
                     and len(inspect.signature(fn).parameters) == 1
                     and not {"grad", "value_and_grad"} & set(fn.__code__.co_names)]


@pytest.mark.parametrize("fn", GRADIENT_SUBJECTS, ids=lambda f: f.__name__)
def test_gradient_types_tell_the_truth(fn):
    """The AD primitives' rules (gadd, sum_to_like, reduce_grad, getitem_grad, envs, ...):
    the typed gradient program of each one-argument gradient subject."""
    for x in (0.7, np.array([0.5, -1.5, 2.0]), np.array([[0.5, 1.5], [-2.0, 0.3]])):
        if _cpython(fn, (x,)) is None:
            continue
        try:
            lowered = myir.grad(fn, backend="python").lower(x)
        except myir.MyirError as e:
            # gradients of non-float outputs
            assert any(w in e.message for w in ("grad()", "differentiate")), e
            continue
        try:
            with recursion_limit():
                result = run_typed(lowered.graph("typed"), (x,))
        except myir.MyirError:
            continue  # refused at run time (e.g. the gradient of a tuple-valued function)
        assert conforms(result, lowered.graph("typed").output.abstract or ANY)


def test_every_subject_is_called():
    """The argument pool fits most subjects (guards the test above against testing nothing)."""
    subjects = [p.values[0] for p in _subjects()]
    called = [fn for fn in subjects if next(iter(_calls(fn)), None) is not None]
    assert len(called) >= 0.8 * len(subjects), len(called)


# --------------------------------------------------------------------------------------------
# Random programs


def test_random_programs(tmp_path):
    from tests.progen import programs
    from tests.test_random_programs import OutOfRange, load, run_cpython, unload

    @settings(max_examples=120)
    @given(programs())
    def check(program):
        module = load(program, tmp_path)
        try:
            try:
                kind, value = run_cpython(module.main, program.args, module.__file__)
            except OutOfRange:
                assume(False)
            assume(kind == "value")
            graph = typed_graph(module.main, program.args)
            result = run_typed(graph, program.args)
            assert conforms(value, graph.output.abstract or ANY), program.source
            assert type(result) is type(value)
        finally:
            unload(module)

    check()


# --------------------------------------------------------------------------------------------
# Precision: exact types where the runtime type is fixed


def f64(*shape):
    return AArray(np.dtype(np.float64), shape)


def output_type(fn, *args):
    return infer(myir.compile(fn).lower(*args).graph("optimized"), args).output


def nested_for_loops(depth, directory):
    """A function of `depth` nested `for` loops, each reading every loop's counter, defined
    in a file of `directory`."""
    counters = "abcdefgh"[:depth]
    lines = ["import math", "def f(x, n):", "    r = x"]
    for i, c in enumerate(counters):
        lines.append("    " * (i + 1) + f"for {c} in range(n):")
    lines.append("    " * (depth + 1) +
                 f"r = r * 0.999 + 1e-3 * math.sin(x * ({' + '.join(counters)}))")
    lines.append("    return r")
    return module_from_source(directory / f"nested_for_loops_{depth}.py",
                              "\n".join(lines) + "\n").f


@pytest.fixture
def evaluations(monkeypatch):
    """The number of frame evaluations of each inference run from now on, in order."""
    counts = []
    run = passes.infer.Interpreter.run

    def counting(self):
        run(self)
        counts.append(self.evaluations)
    monkeypatch.setattr(passes.infer.Interpreter, "run", counting)
    return counts


def test_inference_of_nested_loops_gradients_grows_slowly_with_depth(evaluations, tmp_path):
    """Frames of nested graphs are shared by the enclosing frames that give them the same
    values (contexts), so a level of nesting adds evaluations rather than multiplying them
    (it multiplied them by about 4 when each enclosing frame had its own nested frames)."""
    totals = []
    for depth in (3, 4, 5):
        f = nested_for_loops(depth, tmp_path)
        evaluations.clear()
        got = myir.grad(f, backend="python")(0.7, 3)
        h = 1e-6
        assert abs(got - (f(0.7 + h, 3) - f(0.7 - h, 3)) / (2 * h)) < 1e-6
        totals.append(sum(evaluations))
    assert totals[2] < 2 * totals[1] and totals[1] < 2 * totals[0], totals


def test_scalars_are_not_0d_arrays():
    x = np.ones((2, 3))
    got = output_type(I.scalar_vs_array, x)
    assert got == ATuple((AScalar(np.float64), f64(3), f64(1, 3), AScalar(np.float64), f64(3),
                          f64(2, 2), f64(3, 2), f64(2, 3), f64(2, 3), AScalar(np.float64)))


def test_recursion_and_mutual_recursion():
    assert output_type(programs_constructs.factorial, 5) == AScalar(int)
    assert output_type(programs_constructs.is_even, 4) == AScalar(bool)


def test_loop_keeps_the_shape_of_carried_arrays():
    assert output_type(I.loop_keeps_shape, np.ones((4, 2)), 3) == f64(4, 2)
    assert output_type(I.recursion_on_arrays, np.ones((5, 3)), 2) == f64(5, 3)


def test_loop_that_changes_a_shape_gives_an_unknown_dimension():
    assert output_type(I.loop_grows_array, np.ones((2, 3)), 3) == f64(None, 3)


def test_loop_counter_widens_to_its_type():
    assert output_type(I.loop_counts, 4) == ATuple((AScalar(float), AScalar(int)))


def test_reshape_to_a_partly_unknown_shape_is_no_certain_error():
    y, dout = np.zeros((2, 4, 3, 2)), np.arange(48.0).reshape(4, 12)
    got = myir.compile(I.reshape_to_a_partly_unknown_shape)(y, dout)
    np.testing.assert_array_equal(got, I.reshape_to_a_partly_unknown_shape(y, dout))
    assert output_type(I.reshape_to_a_partly_unknown_shape, y, dout) is not BOTTOM


def test_higher_order_function_is_specialised_per_signature():
    typed = infer(myir.compile(I.polymorphic_helper).lower(2, 0.5).graph("optimized"), (2, 0.5))
    assert typed.output == ATuple((AScalar(int), AScalar(float)))


def test_branch_on_a_known_shape_is_resolved():
    assert output_type(I.constant_branch, np.ones(3)) == f64(3)
    assert output_type(I.constant_branch, np.ones(4)) == ATuple((f64(4), f64(4)))


def test_typed_stage_prints_types():
    text = str(typed_graph(I.loop_keeps_shape, (np.ones((4, 2)), 3)))
    assert "f64[4,2]" in text and ": int" in text


def test_every_node_of_the_typed_program_is_typed():
    graph = typed_graph(I.polymorphic_helper, (2, 0.5))
    typed = infer(graph, (2, 0.5))
    from myir.ir.analysis import reachable_graphs
    for g in reachable_graphs(typed.graph):
        for node in toposort(g):
            if node.graph is g:
                assert node in typed.types and node.abstract is not None, node
    assert all(v is not BOTTOM for v in typed.types.values())


def test_join_widens():
    assert join(AScalar(int, 1), AScalar(int, 2)) == AScalar(int)
    assert join(f64(3, 4), f64(5, 4)) == f64(None, 4)
    assert join(BOTTOM, f64(2)) == f64(2)


def test_join_of_different_kinds_is_a_union():
    """Values of different kinds are kept side by side (each kind once, joined with its
    kind), up to MAX_UNION kinds; the union's origin is no part of its value."""
    both = join(AScalar(int), AScalar(float))
    assert isinstance(both, AUnion) and set(both.options) == {AScalar(int), AScalar(float)}
    assert join(both, AScalar(int, 3)) == both
    pair = ATuple((f64(3), f64(3)))
    assert join(join(f64(3), pair), f64(4)) == AUnion((f64(None), pair))
    assert join(AUnion((f64(3), pair), origin="here"), AUnion((pair, f64(3)))) == \
        AUnion((pair, f64(3)))
    many = [AScalar(int), AScalar(float), f64(2), pair, ANone()]
    assert functools.reduce(join, many) is ANY
    assert conforms(np.ones(3), both) is False and conforms(2, both) and conforms(2.5, both)


# --------------------------------------------------------------------------------------------
# Errors before running


ERRORS = [
    (I.matmul_mismatch, (np.ones((3, 4)), np.ones((5, 6))), "(3,4) and (5,6)"),
    (I.broadcast_mismatch, (np.ones(3), np.ones(4)), "could not be broadcast"),
    (I.error_in_callee, (np.ones((3, 4)),), "cannot reshape array of size 12"),
    (I.wrong_argument_count, (1.0,), "takes 2 positional arguments but 1 was given"),
    (I.call_a_number, (2,), "'int' object is not callable"),
    (I.shape_of_a_float, (2.0,), "'float' object has no attribute 'shape'"),
    (I.bitand_on_float, (2.5,), "&"),
    (I.float_range, (2.5,), "'float' object cannot be interpreted as an integer"),
    (I.float_tuple_index, ((1, 2), 1.0), "tuple indices must be integers"),
    (I.sum_axis_out_of_bounds, (np.ones((2, 3)),), "axis 2 is out of bounds"),
    (I.stack_of_comprehension_mismatch, (np.ones(3), np.ones((4, 4))), "(4,3) and (4,4)"),
    (I.stack_of_appended_rows_mismatch, (np.ones(3), np.ones((4, 4))), "(4,3) and (4,4)"),
]


def _marked_line(fn):
    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, text in enumerate(lines) if "# error" in text)


@pytest.mark.parametrize("fn, args, words", ERRORS, ids=[f.__name__ for f, _, _ in ERRORS])
def test_error_before_running(fn, args, words):
    with pytest.raises(MyirTypeError) as info:
        myir.compile(fn, backend="python").lower(*args)  # lower runs nothing
    e = info.value
    assert words in e.message
    target = I.helper_with_bad_reshape if fn is I.error_in_callee else fn
    assert e.location.line == _marked_line(target), str(e)
    assert e.location.filename == I.__file__
    text = str(e)
    assert text.startswith(f"{e.location}: ") and "^" in text and f"hint: {e.hint}" in text


def test_error_in_a_branch_that_may_not_run_is_left_to_run_time():
    f = myir.compile(I.error_only_on_one_branch, backend="python")
    x = np.ones((2, 3))
    assert f(x, False) is not None  # the branch is not taken: no error
    with pytest.raises(ValueError):
        f(x, True)


def test_code_after_a_raise_is_not_certain_to_run():
    f = myir.compile(I.error_after_a_raise, backend="python")
    with pytest.raises(ValueError, match="too big"):
        f(np.ones((200, 3)))


def test_gradient_through_nested_branches_is_typed():
    """The matmul gradient rule's if-chain reads the backpropagated value from the frame two
    levels up, which is known only late in the fixpoint (a regression: it was `never`)."""
    args = (np.ones((2, 3)), np.ones((3, 4)), np.ones((5, 2)))
    lowered = myir.grad(I.two_matmuls, 0, 1, backend="python").lower(*args)
    assert infer(lowered.graph("optimized"), args).output == ATuple((f64(2, 3), f64(3, 4)))


@pytest.mark.usefixtures("optimizer_on")
def test_python_backend_drops_the_checks_types_prove():
    """`total += ...` on a float, unpacking a pair and reading a variable bound on every path
    need no run-time check once inference has proved them; a variable bound on one branch
    keeps its check, which raises CPython's UnboundLocalError."""
    f = myir.compile(I.proven_checks, backend="python")
    assert f(2.5, 4) == I.proven_checks(2.5, 4)
    source = f.lower(2.5, 4).source
    for check in ("_aug_", "_unpack", "_check_bound"):
        assert check not in source, source
    g = myir.compile(I.unbound_on_one_branch, backend="python")
    assert g(1.0, True) == 2.0
    with pytest.raises(UnboundLocalError):
        g(1.0, False)
    assert "_check_bound" in g.lower(1.0, False).source


def two_call_recursion(x, n):
    if n < 2:
        return x * (n + 1)
    return two_call_recursion(x, n - 1) * 0.6 + math.sin(two_call_recursion(x * 1.1, n - 2))


def test_backpropagators_capturing_their_own_kind_share_a_context_early(monkeypatch,
                                                                       evaluations):
    """The backpropagator made at each level of a recursion with two calls captures those
    of the levels below: every round of the fixpoint makes a context one level deeper.
    Past `NESTED_CONTEXTS` of them they share the joined one, which the limit for other
    graphs reached only after 64, in thirty times the evaluations; the gradient is the same.
    (The optimizer replaces such backpropagators by records where it proves it may,
    passes/defunctionalise.py: here it is kept from doing so, as where it cannot.)"""
    monkeypatch.setattr(passes.opt, "PRUNES",
                        [p for p in passes.opt.PRUNES if p.__name__ != "defunctionalise"])
    h = 1e-6
    want = (two_call_recursion(0.6 + h, 5) - two_call_recursion(0.6 - h, 5)) / (2 * h)
    totals = []
    for limit in (passes.infer.NESTED_CONTEXTS, passes.infer.CONTEXTS_PER_GRAPH):
        monkeypatch.setattr(passes.infer, "NESTED_CONTEXTS", limit)
        evaluations.clear()
        got = myir.grad(two_call_recursion, backend="python")(0.6, 5)
        assert got == pytest.approx(want, rel=1e-7)
        totals.append(sum(evaluations))
    assert totals[0] * 10 < totals[1], totals
