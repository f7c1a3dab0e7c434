"""Differential testing on random programs: compiled result == CPython result.

`tests/progen.py` draws small modules in myir's subset (see its docstring for what they
contain and why they always terminate).  Each one is written to a file and imported, so that
`inspect.getsource` works for the compiler; then `main(*args)` runs in CPython and compiled by
myir (default backend, and the python backend explicitly), and the results must be equal:
same value and same type (bool, int and float differ; NaN equals NaN; a tuple elementwise),
or, where CPython raises, the same exception type.  Every program whose `main` returns a
float is differentiated with respect to its float parameters, and each derivative must agree
with central finite differences wherever the program is smooth at its arguments
(`smooth_derivative`).  Random float functions of parameters of mixed float types
(`grad_programs`) are differentiated, and each gradient must have its parameter's type,
dtype and shape, and agree with finite differences.

The CPython run is traced: a program whose locals leave a bounded range (ints beyond 2**53,
floats beyond 1e15 or infinite) is rejected, so results never depend on big-integer or
overflow behaviour, and a program that runs too many lines is a generator bug.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
import signal
import sys
import traceback
from collections import Counter

import pytest
from hypothesis import assume, given, settings

from .programs_check import make_jit, modes
from .progen import FEATURES, NAME_POOLS, Program, features, grad_programs, programs

# At least 200 programs per test in the `ci` profile (derandomized: the same programs every
# run, a regression suite); as many as a bigger profile asks for (`thorough` explores).
N_PROGRAMS = max(200, settings.default.max_examples)
# The generator's own test runs programs in CPython only, cheaply: enough to see every construct.
N_GENERATED = max(1000, settings.default.max_examples)

MAX_LINES = 200_000  # lines one program may run in CPython (the generator bounds loops)
INT_BOUND = 2**53
FLOAT_BOUND = 1e15
COMPILED_TIMEOUT_S = 20


class OutOfRange(Exception):
    """A value left the range the differential test compares in; the program is rejected."""


class Runaway(Exception):
    """A generated program ran too long: a bug in the generator, not in the compiler."""


_module_ids = itertools.count()


@pytest.fixture(scope="module")
def program_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("progen")


def load(program: Program, directory):
    """Write the program to a file and import it; returns the module."""
    name = f"progen_{next(_module_ids)}"
    path = directory / f"{name}.py"
    path.write_text(program.source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def unload(module):
    sys.modules.pop(module.__name__, None)


def _check_value(value):
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if abs(value) > INT_BOUND:
            raise OutOfRange(f"int {value}")
    elif isinstance(value, float):
        if abs(value) > FLOAT_BOUND:  # includes inf; NaN compares False and passes
            raise OutOfRange(f"float {value}")
    elif isinstance(value, (tuple, list)):
        for item in value:
            _check_value(item)
    elif isinstance(value, dict):
        for item in value.values():
            _check_value(item)


def run_cpython(fn, args, filename):
    """Run fn(*args) traced; returns ("value", v) or ("raise", exc).

    Raises OutOfRange (reject the program) or Runaway (generator bug)."""
    lines = 0

    def local_trace(frame, event, arg):
        nonlocal lines
        if event == "line":
            lines += 1
            if lines > MAX_LINES:
                raise Runaway(f"more than {MAX_LINES} lines run")
            for value in frame.f_locals.values():
                _check_value(value)
        elif event == "return" and arg is not None:
            _check_value(arg)
        return local_trace

    def global_trace(frame, event, arg):
        return local_trace if frame.f_code.co_filename == filename else None

    previous = sys.gettrace()
    sys.settrace(global_trace)
    try:
        outcome = ("value", fn(*args))
    except (OutOfRange, Runaway):
        raise
    except Exception as exc:
        outcome = ("raise", exc)
    finally:
        sys.settrace(previous)
    return outcome


def cpython_in_range(module, program):
    """run_cpython of the program's main; a program whose values leave the range is
    rejected (hypothesis draws another)."""
    try:
        return run_cpython(module.main, program.args, module.__file__)
    except OutOfRange:
        assume(False)


def same(a, b) -> bool:
    """Equal values of the same type; NaN equals NaN; tuples elementwise."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def show(outcome) -> str:
    kind, value = outcome
    if kind == "value":
        return f"{value!r} ({type(value).__name__})"
    return f"raises {type(value).__name__}: {value}"


# ---------------------------------------------------------------------------------------------
# The generator itself


def test_generated_programs_run_in_cpython(program_dir):
    """Every program parses, imports, terminates and (almost always) returns without raising;
    together they cover every construct in FEATURES."""
    seen = Counter()
    stats = Counter()

    @settings(max_examples=N_GENERATED)
    @given(programs())
    def check(program):
        module = load(program, program_dir)
        try:
            try:
                kind, value = run_cpython(module.main, program.args, module.__file__)
            except OutOfRange:
                stats["out of range"] += 1
                return
            if kind == "raise" and _raised_in_unused(value):
                stats["raises in an unused computation"] += 1
            elif kind == "raise":
                stats[f"raises {type(value).__name__}"] += 1
                # Only a math function on an overflowed float may raise (math.sin(inf)).
                assert isinstance(value, ValueError), (
                    f"{program!r} raised:\n"
                    + "".join(traceback.format_exception(value)))
            else:
                stats["ok"] += 1
            seen.update(features(program.source))
        finally:
            unload(module)

    check()
    total = sum(stats.values())
    assert stats["ok"] + stats["raises in an unused computation"] >= 0.9 * total, stats
    assert stats["ok"] >= 0.7 * total, stats
    missing = FEATURES - seen.keys()
    assert not missing, f"constructs never generated in {total} programs: {sorted(missing)}"


def _raised_in_unused(exc) -> bool:
    """Whether exc comes from a line assigning a value that is never read (progen's
    `unused = ...`)."""
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    return (frame.line or "").startswith(tuple(NAME_POOLS["unused"]))


# ---------------------------------------------------------------------------------------------
# Differential test


def _compiler():
    myir = pytest.importorskip("myir")
    if not hasattr(myir, "compile"):
        pytest.skip("myir.compile does not exist yet")
    return myir


class _Timeout(Exception):
    pass


def _run_compiled(cf, args):
    """("value", cf(*args)) or ("raise", exc); a compile and run that take more than
    COMPILED_TIMEOUT_S seconds of this process's CPU time raise _Timeout (a miscompiled loop
    that never ends).  CPU time, not wall time: on a machine shared with other jobs, a
    compile that takes half a second of CPU can take twenty of wall time."""
    def too_long(signum, frame):
        raise _Timeout(f"compiled code ran longer than {COMPILED_TIMEOUT_S} s of CPU time")

    use_timer = hasattr(signal, "SIGPROF")
    if use_timer:
        previous = signal.signal(signal.SIGPROF, too_long)
        signal.setitimer(signal.ITIMER_PROF, COMPILED_TIMEOUT_S)
    try:
        return ("value", cf(*args))
    except _Timeout:
        raise
    except Exception as exc:
        return ("raise", exc)
    finally:
        if use_timer:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)


_COMPILER_DIRS = tuple(f"{os.sep}{d}{os.sep}" for d in ("myir", "frontend", "passes", "backends"))
_failure_classes: dict = {}


def failure_class(expected, got, program_file) -> type:
    """The exception class a mismatch is reported with: one class per kind of failure (wrong
    value, wrong type, or the compiled call raising type T at compiler line L / in the
    generated code).  Hypothesis keeps failures apart by exception class and raising line,
    and shrinks each separately; raising the compiler's exception itself would not do, since
    a traceback into the program's file names a different file for every program."""
    if got[0] == "value":
        kind = "WrongType" if type(got[1]) is not type(expected[1]) else "WrongValue"
        key = (kind,)
    else:
        exc = got[1]
        frames = traceback.extract_tb(exc.__traceback__)
        ours = [f for f in frames if any(d in f.filename for d in _COMPILER_DIRS)
                and f"{os.sep}tests{os.sep}" not in f.filename]
        if frames and frames[-1].filename == program_file:
            where = "InGeneratedCode"  # compiled with the program's file name
        elif ours:
            where = f"At{os.path.basename(ours[-1].filename)}:{ours[-1].lineno}"
        else:
            where = ""
        key = ("Raised", type(exc).__name__, where)
    if key not in _failure_classes:
        name = "Compiled" + "".join(part.replace(".", "_").replace(":", "_line") for part in key)
        _failure_classes[key] = type(name, (AssertionError,), {})
    return _failure_classes[key]


@pytest.mark.parametrize("backend", [None, "python"], ids=["default", "python"])
def test_compiled_matches_cpython(backend, program_dir):
    myir = _compiler()
    kwargs = {} if backend is None else {"backend": backend}

    @settings(max_examples=N_PROGRAMS)
    @given(programs())
    def check(program):
        module = load(program, program_dir)
        try:
            expected = cpython_in_range(module, program)
            cf = myir.compile(module.main, **kwargs)
            got = _run_compiled(cf, program.args)
            report = (f"{program.call}\n{program.source}\n"
                      f"CPython:  {show(expected)}\ncompiled: {show(got)}")
            if got[0] == "raise":
                report += "\n" + "".join(traceback.format_exception(got[1]))
            if expected[0] == "raise":
                ok = got[0] == "raise" and type(got[1]) is type(expected[1])
            else:
                ok = got[0] == "value" and same(expected[1], got[1])
            if not ok:
                raise failure_class(expected, got, module.__file__)(report) from None
        finally:
            unload(module)

    check()


def test_gradient_raises_what_the_forward_raises(program_dir):
    """Where CPython's `main(*args)` raises, `myir.grad(main)(*args)` raises the same
    exception type (the forward runs, unused computations included, before the gradient),
    for programs whose first parameter is a float."""
    myir = _compiler()

    @settings(max_examples=N_PROGRAMS // 2)
    @given(programs())
    def check(program):
        if not (program.args and type(program.args[0]) is float):
            return
        module = load(program, program_dir)
        try:
            expected = cpython_in_range(module, program)
            if expected[0] != "raise":
                return
            got = _run_compiled(myir.grad(module.main, backend="python"), program.args)
            if got[0] == "raise" and "needs a function returning a float" in str(got[1]):
                return  # main returns an int or a bool: no gradient, refused when compiled
            if not (got[0] == "raise" and type(got[1]) is type(expected[1])):
                raise AssertionError(mismatch(program, ("CPython", expected), ("grad", got)))
        finally:
            unload(module)

    check()


def test_fastmath_compiles_and_runs_what_the_exact_pipeline_does(program_dir):
    """`fastmath=True` on random programs.  It may change float results, and through them
    which branch a comparison takes, so results are not compared; but whatever the exact
    pipeline compiles and runs, fastmath must too: it may only turn an arithmetic error
    (a float division by a value that became 0, say) into a value or back, never fail in
    the compiler or raise anything else."""
    myir = _compiler()

    @settings(max_examples=N_PROGRAMS // 2)
    @given(programs())
    def check(program):
        module = load(program, program_dir)
        try:
            cpython_in_range(module, program)
            exact = _run_compiled(myir.compile(module.main, backend="python"), program.args)
            fast = _run_compiled(myir.compile(module.main, backend="python", fastmath=True),
                                 program.args)
            a, b = _kind(exact), _kind(fast)
            if a != b and not {a, b} <= {"value", "arithmetic"}:
                raise AssertionError(mismatch(program, ("exact", exact), ("fastmath", fast)))
        finally:
            unload(module)

    check()


@pytest.mark.parametrize("mode", [m for m in modes() if m != "cpython"])
def test_gradients_match_finite_differences(mode, program_dir):
    """Every program whose `main` returns a float, differentiated with respect to all its
    float parameters (`myir.grad`, compiled in `mode`: each backend, and the saved program a
    second process loads): each derivative at the drawn arguments agrees with central
    differences of CPython's `main` in float64, wherever `smooth_derivative` finds the
    program smooth there.  The gradient must not raise where CPython's `main` returns."""
    myir = _compiler()
    jit = make_jit(mode, memo=False)
    stats = Counter()
    # The first backend explores; the others run a third as many programs, enough to
    # exercise their own paths (TVM regions, loading a saved program) at a third of the cost.
    n_programs = N_PROGRAMS if mode == modes()[1] else N_PROGRAMS // 3

    @settings(max_examples=n_programs)
    @given(programs())
    def check(program):
        wrt = [i for i, a in enumerate(program.args) if type(a) is float]
        if not wrt:
            return
        module = load(program, program_dir)
        try:
            expected = cpython_in_range(module, program)
            if expected[0] != "value" or type(expected[1]) is not float \
                    or not math.isfinite(expected[1]):
                return
            got = _run_compiled(jit(myir.grad(module.main, *wrt)), program.args)
            if got[0] == "raise":
                raise AssertionError(mismatch(program, ("CPython", expected), ("grad", got)))
            derivatives = got[1] if len(wrt) > 1 else (got[1],)
            for i, derivative in zip(wrt, derivatives):
                reference = smooth_derivative(module, program.args, i)
                if reference is None:
                    stats["not smooth"] += 1
                    continue
                want, tolerance, constant = reference
                if constant and math.isnan(derivative):
                    # `abs(y - y) ** 0.5`: an infinite slope times a zero sensitivity is nan
                    # (grad_rules.py's convention, JAX's too), though main is constant
                    stats["nan where main is constant"] += 1
                    continue
                stats["compared"] += 1
                if not abs(derivative - want) <= tolerance:
                    raise AssertionError(
                        f"{program.call}, derivative with respect to parameter {i}\n"
                        f"{program.source}\nfinite differences: {want!r} (within "
                        f"{tolerance:.2g})\ngrad:               {derivative!r}")
        finally:
            unload(module)

    check()
    # the criterion must leave something to compare (most programs are smooth somewhere)
    assert stats["compared"] >= n_programs // 30, stats


FD_STEPS = (1e-5, 1e-6)   # relative to max(1, |x|)
FD_AGREE = 1e-6           # how well the two steps agree, relative to max(1, |derivative|)
FD_TOLERANCE = 1e-5       # how close the gradient must be, likewise


def smooth_derivative(module, args, i):
    """(central difference of `main` with respect to `args[i]`, its tolerance, whether main
    gave the same value at every point), or None
    where the program may not be smooth at `args`.  Finite differences mean nothing at a
    kink (abs, min, max, a branch on the parameter), a jump (floor division, `%`, a branch)
    or where rounding swamps them; the program is taken as smooth only when:

    * the run at x + h and at x - h, for both steps h, executes the very bytecode
      instructions the run at x does (every branch, ternary and short-circuit the same way);
    * the central differences at both steps agree (no jump nor kink near x, no rounding
      noise: it grows as h shrinks);
    * the one-sided differences at the small step agree (no kink at x itself: `abs(x)` at
      0 has the same central differences, 0, at every step).

    Then the central difference at the small step is within a tenth of the tolerance of
    the derivative, and the gradient must be within the tolerance."""
    x = args[i]
    scale = max(1.0, abs(x))
    base = _traced_at(module, args, i, x)
    if base is None:
        return None
    values = {}
    for step in FD_STEPS:
        for sign in (1, -1):
            run = _traced_at(module, args, i, x + sign * step * scale)
            if run is None or run[0] != base[0]:
                return None
            values[step, sign] = run[1]
    big, small = (s * scale for s in FD_STEPS)
    coarse = (values[FD_STEPS[0], 1] - values[FD_STEPS[0], -1]) / (2 * big)
    fine = (values[FD_STEPS[1], 1] - values[FD_STEPS[1], -1]) / (2 * small)
    right = (values[FD_STEPS[1], 1] - base[1]) / small
    left = (base[1] - values[FD_STEPS[1], -1]) / small
    size = max(1.0, abs(coarse), abs(fine))
    if not (abs(coarse - fine) <= FD_AGREE * size and abs(right - left) <= 1e-2 * size):
        return None
    constant = all(v == base[1] for v in values.values())
    if constant and _absorbed(module, args, i, base):
        return None
    return fine, FD_TOLERANCE * size, constant


FD_PROBES = (1e-3, 1e-1, 1.0)   # relative to max(1, |x|)


def _absorbed(module, args, i, base) -> bool:
    """Whether main, giving the same value at x and at x ± the steps, may yet depend on x:
    `big - x + ... - big` with `big` near 1e14 returns the same float for every x within
    big's rounding unit, and finite differences see 0 where the derivative is -1.  Along one
    path of bytecode, a smooth function constant near x is constant: a different value at a
    larger step along the same path is rounding, or a kink that `max`, `abs` or `//` hide
    from the bytecode; either way a constant seen at the small steps is not trusted."""
    x = args[i]
    scale = max(1.0, abs(x))
    for step in FD_PROBES:
        for sign in (1, -1):
            run = _traced_at(module, args, i, x + sign * step * scale)
            if run is not None and run[0] == base[0] and run[1] != base[1]:
                return True
    return False


def _traced_at(module, args, i, value):
    """(a fingerprint of the bytecode instructions `main` runs in the program's file, the
    float it returns) with `args[i]` set to value; None if it raises or returns no finite
    float."""
    args = args[:i] + (value,) + args[i + 1:]
    filename = module.__file__
    path = [0, 0]   # hash, instructions run

    def local_trace(frame, event, arg):
        if event == "opcode":
            path[0] = hash((path[0], id(frame.f_code), frame.f_lasti))
            path[1] += 1
            if path[1] > 20 * MAX_LINES:
                raise Runaway("too many instructions")
        return local_trace

    def global_trace(frame, event, arg):
        if frame.f_code.co_filename != filename:
            return None
        frame.f_trace_opcodes = True
        return local_trace

    previous = sys.gettrace()
    sys.settrace(global_trace)
    try:
        result = module.main(*args)
    except Exception:   # noqa: BLE001 - no derivative where main raises
        return None
    finally:
        sys.settrace(previous)
    if type(result) is not float or not math.isfinite(result):
        return None
    return path[0], result


def mismatch(program, want, got) -> str:
    """The report of a program whose outcomes (label, outcome) differ: the call, the source,
    both outcomes and the traceback of `got`'s exception."""
    report = (f"{program.call}\n{program.source}\n"
              f"{want[0] + ':':10}{show(want[1])}\n{got[0] + ':':10}{show(got[1])}")
    if got[1][0] == "raise":
        report += "\n" + "".join(traceback.format_exception(got[1][1]))
    return report


def _kind(outcome):
    """"value", "arithmetic" (an ArithmeticError or a math domain error, which fastmath
    assumes away) or the exception's type."""
    if outcome[0] == "value":
        return "value"
    exc = outcome[1]
    arithmetic = isinstance(exc, ArithmeticError) or (
        type(exc) is ValueError and str(exc) == "math domain error")
    return "arithmetic" if arithmetic else type(exc)


def _same_type_as(gradient, param) -> bool:
    """A gradient has its parameter's type: Python float, numpy scalar type, or an array of
    the parameter's dtype and shape."""
    import numpy as np

    if type(gradient) is not type(param):
        return False
    if isinstance(param, (np.ndarray, np.generic)):
        return gradient.dtype == param.dtype and np.shape(gradient) == np.shape(param)
    return True


@pytest.mark.parametrize("backend", [None, "python"], ids=["default", "python"])
def test_gradients_have_their_parameters_types(backend, program_dir):
    """Random float functions of parameters of mixed float types (float32 meeting float64,
    Python floats, numpy scalars, 0-d arrays): every gradient, outside compiled code and
    inside (`grad` as a macro), has its parameter's type, dtype and shape, and its value
    agrees with central differences of the function in float64."""
    import numpy as np

    myir = _compiler()
    kwargs = {} if backend is None else {"backend": backend}

    @settings(max_examples=N_PROGRAMS // 6, deadline=None)
    @given(grad_programs())
    def check(program):
        module = load(Program(program.source, "main", program.args), program_dir)
        try:
            n = len(program.args)
            outside = myir.grad(module.main, *range(n), **kwargs)(*program.args)
            inside = myir.compile(module.outer, **kwargs)(*program.args)
            wide = [np.asarray(a, np.float64) for a in program.args]
            narrow = any(np.result_type(a) == np.float32 for a in program.args)
            for i, param in enumerate(program.args):
                for got in (outside[i] if n > 1 else outside, inside[i] if n > 1 else inside):
                    assert _same_type_as(got, param), (program, i, type(got), got)
                    want = _central_difference(module.main, wide, i)
                    np.testing.assert_allclose(np.asarray(got, np.float64), want,
                                               rtol=2e-3 if narrow else 1e-6,
                                               atol=2e-3 if narrow else 1e-6,
                                               err_msg=repr(program))
        finally:
            unload(module)

    check()


def _central_difference(f, args, i, eps=1e-6):
    import numpy as np

    x = args[i]
    grad = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[k] += eps
        down[k] -= eps
        plus = f(*args[:i], up, *args[i + 1:])
        minus = f(*args[:i], down, *args[i + 1:])
        grad[k] = (plus - minus) / (2 * eps)
    return grad
