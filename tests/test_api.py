"""The public API: `myir.compile` and its decorator forms, calls (arguments bound like
CPython), `.lower(...)`, thread safety, constant-stack loops and tracebacks."""

import builtins
import functools
import inspect
import math
import threading
import traceback

import numpy as np
import pytest

import myir
from myir import compile
from myir.ir import Graph


# --------------------------------------------------------------------------------------------
# Subjects (module level so that inspect.getsource finds them)


@compile
def deco_plain(x):
    """Doubles and adds one."""
    return x * 2 + 1


@compile(backend="python")
def deco_backend(x, y=10):
    return x * 2 + y


def affine(x, y):
    return 3 * x + y


def defaults(a, b=2, c=3):
    return a * 100 + b * 10 + c


def tuple_default(x, shift=(1, 2)):
    return x + shift[0] * shift[1]


def dividing(a, b):
    q = a + 1
    r = q / b
    return r


def dividing_in_loop(n, d):
    total = 0.0
    i = 0
    while i < n:
        total = total + i / (d - i)
        i = i + 1
    return total


def while_count(n):
    i = 0
    s = 0
    while i < n:
        s = s + i % 4
        i = i + 1
    return s


def for_count(n):
    s = 0
    for i in range(n):
        s = s + 1
    return s


def poly_a(x, y):
    z = x * x - y
    if z > y:
        return z - x
    return z + 2 * y


def poly_b(x, y):
    def g(t):
        return t * y + x
    return g(x) - g(y)


def poly_c(x, y):
    acc = x
    k = 0
    while k < 3:
        acc = acc * y + x
        k = k + 1
    return acc


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if text in line:
            return first + k
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def same(got, want):
    assert type(got) is type(want), (got, want)
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want)
    else:
        assert got == want


# --------------------------------------------------------------------------------------------
# compile forms


def test_decorator_plain():
    assert isinstance(deco_plain, myir.CompiledFunction)
    assert deco_plain.backend == "tvm"     # the default: TVM on the CPU
    same(deco_plain(3), 7)
    same(deco_plain(1.5), 4.0)
    assert deco_plain.__name__ == "deco_plain"
    assert deco_plain.__doc__ == "Doubles and adds one."


def test_decorator_with_backend():
    assert isinstance(deco_backend, myir.CompiledFunction)
    assert deco_backend.backend == "python"
    same(deco_backend(2), 14)
    same(deco_backend(2, 1), 5)
    same(deco_backend(x=2.0, y=0.5), 4.5)


def test_compile_call_form():
    f = compile(affine)
    assert isinstance(f, myir.CompiledFunction)
    assert f.__wrapped__ is affine
    same(f(2, 1), 7)
    same(f(0.5, 1), 2.5)
    g = compile(affine, backend="python")
    same(g(1, 1), 4)
    assert compile(backend="python")(affine)(1, 2) == 5


def test_unknown_backend_lists_backends():
    with pytest.raises(myir.MyirError) as info:
        compile(affine, backend="no-such-backend")
    text = str(info.value)
    assert "no-such-backend" in text
    assert "python" in text and "tvm" in text
    with pytest.raises(myir.MyirError, match="no-such-backend"):
        compile(backend="no-such-backend")(affine)


class Scaler:
    def scale(self, x):
        return 2.0 * x


@pytest.mark.parametrize("value, what, hint", [
    (len, "the built-in function len", "lambda x: len(x)"),
    (np.sin, "the numpy function np.sin", "lambda x: np.sin(x)"),
    (np.sum, "the numpy function np.sum", "lambda x: np.sum(x)"),
    (math.sqrt, "the math function math.sqrt", "lambda x: math.sqrt(x)"),
    (functools.partial(affine, y=1.0), "a functools.partial", "lambda x: affine(x, 2.0)"),
    (Scaler().scale, "the bound method Scaler.scale", "a function of the values"),
    (Scaler, "the class Scaler", "compile a function"),
    ((1.0).__add__, "the built-in method float.__add__", "lambda x, y: x + y"),
    (42, "a value of type int", "`def` or `lambda`"),
    (np.ones(3), "a value of type ndarray", "`def` or `lambda`"),
    (np.float32, "the class float32", "compile a function"),
], ids=["builtin", "ufunc", "numpy", "math", "partial", "method", "class", "method-wrapper",
        "int", "array", "numpy-type"])
@pytest.mark.parametrize("api", [myir.compile, myir.grad, myir.value_and_grad],
                         ids=lambda f: f.__name__)
def test_compile_needs_a_python_function(api, value, what, hint):
    """Refused when compile()/grad() is called, saying what it takes and what to write."""
    with pytest.raises(myir.MyirError) as info:
        api(value)
    assert info.value.message == (f"{api.__name__}() takes a Python function or lambda "
                                  f"defined in source, not {what}")
    assert hint in info.value.hint
    with pytest.raises(myir.MyirError, match="takes a Python function"):
        compile(backend="python")(value)


# --------------------------------------------------------------------------------------------
# calls: keyword arguments and defaults, bound like CPython


CALLS = [
    ((1,), {}),
    ((1, 5), {}),
    ((1, 5, 7), {}),
    ((1,), {"c": 9}),
    ((1,), {"b": 4, "c": 9}),
    ((), {"a": 2}),
    ((), {"c": 1, "a": 2, "b": 3}),
    ((1.5,), {"b": 0.5}),
]


@pytest.mark.parametrize("warm", [False, True], ids=["first-call", "warm"])
@pytest.mark.parametrize("args, kwargs", CALLS)
def test_keywords_and_defaults_like_cpython(args, kwargs, warm):
    f = compile(defaults)
    if warm:
        f(0)
    same(f(*args, **kwargs), defaults(*args, **kwargs))


def test_tuple_default():
    f = compile(tuple_default)
    same(f(1), tuple_default(1))
    same(f(1, (3, 4)), tuple_default(1, (3, 4)))
    same(f(1, shift=(0, 4)), tuple_default(1, shift=(0, 4)))


BAD_CALLS = [
    ((), {}),
    ((1, 2, 3, 4), {}),
    ((1,), {"d": 1}),
    ((1,), {"a": 2}),
]


def cpython_error(args, kwargs):
    with pytest.raises(TypeError) as info:
        defaults(*args, **kwargs)
    return str(info.value)


@pytest.mark.parametrize("warm", [False, True], ids=["first-call", "warm"])
@pytest.mark.parametrize("args, kwargs", BAD_CALLS)
def test_wrong_arguments_raise_cpythons_type_error(args, kwargs, warm):
    f = compile(defaults)
    if warm:
        f(0)
    with pytest.raises(TypeError) as info:
        f(*args, **kwargs)
    assert "defaults()" in str(info.value)
    assert not isinstance(info.value, myir.MyirError)
    assert str(info.value) == cpython_error(args, kwargs)


def test_wrong_number_of_arguments_decorated():
    with pytest.raises(TypeError):
        deco_plain()
    with pytest.raises(TypeError):
        deco_plain(1, 2)
    same(deco_plain(1), 3)
    with pytest.raises(TypeError):
        deco_plain(1, 2)


# --------------------------------------------------------------------------------------------
# lower


def test_lower_stages_and_source():
    f = compile(dividing)
    lowered = f.lower(1.0, 2.0)
    graph = lowered.graph("parsed")
    assert isinstance(graph, Graph)
    assert graph.name == "dividing"
    assert [p.debug.name for p in graph.parameters] == ["a", "b"]
    assert isinstance(lowered.source, str)
    assert "def dividing(" in lowered.source
    assert isinstance(lowered.graph(), Graph)    # the last stage there is
    # the source is real Python
    builtins.compile(lowered.source, "<generated>", "exec")


def test_lower_unknown_stage():
    lowered = compile(dividing).lower(1.0, 2.0)
    with pytest.raises(myir.MyirError) as info:
        lowered.graph("no-such-stage")
    assert "no-such-stage" in str(info.value)
    assert "parsed" in str(info.value)           # lists the stages there are


def test_lower_does_not_run_and_accepts_keywords():
    f = compile(dividing)
    lowered = f.lower(1, b=0)                     # running it would divide by zero
    assert "def dividing(" in lowered.source
    assert f.lower(1, 0) is lowered               # cached per signature
    with pytest.raises(TypeError):
        f.lower()


# --------------------------------------------------------------------------------------------
# threads


ARGS_BY_TYPE = [
    (3, 4),
    (2.5, -1.0),
    (True, False),
    (1 + 2j, 0.5j),
    (np.float32(1.5), np.float32(2.0)),
    (np.int64(7), np.int64(3)),
    (np.arange(4.0), np.full(4, 2.0)),
    (np.arange(6, dtype=np.int32).reshape(2, 3), np.int32(2)),
]


def outcome(fn, args):
    """("ok", value) or ("error", exception type, message)."""
    try:
        return ("ok", fn(*args))
    except Exception as e:
        return ("error", type(e), str(e))


def assert_same_outcome(got, want):
    assert got[0] == want[0], (got, want)
    if want[0] == "ok":
        same(got[1], want[1])
    else:
        assert got[1:] == want[1:]


@pytest.mark.parametrize("fn", [poly_a, poly_b, poly_c], ids=lambda f: f.__name__)
def test_concurrent_first_calls(fn):
    """8 threads make the first calls of a fresh compiled function at once, each with
    different argument types (some raise in CPython: then the same error)."""
    assert len(ARGS_BY_TYPE) == 8
    expected = [outcome(fn, args) for args in ARGS_BY_TYPE]
    assert sum(e[0] == "ok" for e in expected) >= 5
    for round_ in range(3):
        f = compile(fn)                  # fresh: every thread's call is a first call
        barrier = threading.Barrier(len(ARGS_BY_TYPE))
        results: list = [None] * len(ARGS_BY_TYPE)

        def worker(k):
            barrier.wait()
            results[k] = outcome(f, ARGS_BY_TYPE[k])

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(ARGS_BY_TYPE))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        for got, want in zip(results, expected):
            assert_same_outcome(got, want)


# --------------------------------------------------------------------------------------------
# loops run in constant stack


def test_while_loop_of_a_million_iterations():
    assert compile(while_count)(1_000_000) == while_count(1_000_000)


def test_for_loop_of_a_million_iterations():
    assert compile(for_count)(1_000_000) == 1_000_000


# --------------------------------------------------------------------------------------------
# tracebacks point at the user's source


@pytest.mark.parametrize("fn, args, text", [
    (dividing, (1, 0), "r = q / b"),
    (dividing_in_loop, (5, 3), "total = total + i / (d - i)"),
], ids=["straight", "in-loop"])
def test_traceback_points_at_dividing_line(fn, args, text):
    with pytest.raises(ZeroDivisionError):
        fn(*args)                                # CPython agrees there is an error
    with pytest.raises(ZeroDivisionError) as info:
        compile(fn)(*args)
    frames = traceback.extract_tb(info.value.__traceback__)
    ours = [f for f in frames if f.filename == __file__ and f.name == fn.__name__]
    assert ours, [(f.filename, f.lineno, f.name) for f in frames]
    assert ours[-1].lineno == line_of(fn, text)
    assert frames[-1].filename == __file__       # the innermost frame is the user's line
    assert frames[-1].lineno == line_of(fn, text)


# --------------------------------------------------------------------------------------------
# Memory: a process compiling many programs (the random-program tests compile thousands)


_FORGOTTEN = """
def main(x, n):
    scale = lambda t: t * 2.0
    pair = (scale, x)
    for i in range(n):
        x = pair[0](x) ** 0.5
    return x
"""


def test_a_compiled_function_and_its_compilation_are_not_kept(tmp_path):
    """Once a compiled function and the Python function it compiled are dropped, nothing of
    their compilation stays alive: not the function (the parse cache holds functions
    weakly), nor inference's frames (which closures' values hold, and so a cache of values
    of the compilation must not outlive it).  Else each program compiled leaves its
    graphs behind, and every full collection of the garbage collector scans more."""
    import gc
    import importlib.util
    import weakref

    from passes.infer import Frame

    path = tmp_path / "forgotten.py"
    path.write_text(_FORGOTTEN)
    spec = importlib.util.spec_from_file_location("forgotten", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert myir.compile(module.main)(0.7, 3) == module.main(0.7, 3)
    assert myir.grad(module.main, backend="python")(0.7, 3) > 0
    kept = weakref.ref(module.main)
    del module, spec
    gc.collect()
    assert kept() is None
    frames = [o for o in gc.get_objects() if type(o) is Frame
              and o.graph.location is not None and o.graph.location.filename == str(path)]
    assert not frames
