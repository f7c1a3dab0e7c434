"""Shared helpers for the differential tests: run a function uncompiled and compiled, compare.

`jit` is a pytest fixture (session scoped, so hypothesis accepts it) parametrised over the
modes a test runs in:

- `cpython`: the uncompiled function.  It checks the tests' own expectations and needs no
  compiler; select it alone with `-k cpython`.
- `myir-<backend>`: the function compiled with `myir.compile(f, backend=<backend>)`
  (`myir-default`: `myir.compile(f)`).  The backends come from the environment variable
  `MYIR_TEST_BACKENDS` (comma separated; default `python,tvm,saved`: the reference backend,
  the default one, and `saved`, below).
- `myir-saved`: the python backend's program for each call's signature, saved to a disk
  cache by one compiled function and *loaded* by another (`myir/saved.py`): what a second
  process runs.  It fails if a program cannot be saved.

"Same result" means exactly what CPython gives (on the tvm backend, floats within
`TVM_TOLERANCE`, see below): the same type (a Python `float` is not a
`numpy.float64`, a `bool` is not an `int`), the same value (floats compared bit for bit,
NaN equal to NaN, -0.0 distinct from 0.0), arrays of the same dtype, shape and elements, and
for exceptions the same type and message.  The arguments after the call must be the same too
(so a compiled function may not mutate an argument where CPython does not, and vice versa).
"""

from __future__ import annotations

import atexit
import copy
import functools
import importlib.util
import math
import os
import shutil
import tempfile
import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest


DEFAULT_BACKENDS = "python,tvm,saved"


def module_from_source(path, source: str):
    """The module of `source`, written to the file `path` (named by its stem), imported: a
    function the frontend can read the source of, made by a test."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def modes() -> list[str]:
    backends = os.environ.get("MYIR_TEST_BACKENDS", DEFAULT_BACKENDS)
    return ["cpython"] + [f"myir-{b.strip()}" for b in backends.split(",") if b.strip()]


_COMPILED: dict = {}

# The tvm backend computes array regions with LLVM's libm (or TVM's fast math for float32)
# and sums in a different order than numpy's pairwise summation: results may differ from
# numpy's in the last bits, relative to the largest element (cancellation keeps an error
# absolute).  Everything else (types, dtypes, shapes, NaN positions) must still be exact.
TVM_TOLERANCE = {np.dtype(np.float64): 1e-11, np.dtype(np.float32): 2e-5,
                 np.dtype(np.float16): 2e-3}


def make_jit(mode: str, memo: bool = True):
    """A function `jit(f)` that returns `f` compiled in `mode` (memoised per function)."""
    if mode == "cpython":
        return lambda f: f
    import myir

    backend = mode.split("-", 1)[1]

    def fresh(f):
        if backend == "saved":
            return _Saved(f)
        return myir.compile(f) if backend == "default" else myir.compile(f, backend=backend)

    tvm = backend == "tvm" or (backend == "default" and myir.api.DEFAULT_BACKEND == "tvm")

    def jit(f):
        if not memo:
            return fresh(f)
        key = (mode, f)
        if key not in _COMPILED:
            _COMPILED[key] = fresh(f)
        return _COMPILED[key]

    jit.tolerance = TVM_TOLERANCE if tvm else None
    return jit


class _Saved:
    """`f` as a second process runs it: each call's program compiled and saved by one
    compiled function, then loaded from the disk cache and run by a new one.  Anything but
    calling (`lower`, ...) goes to a compiled function of the python backend."""

    def __init__(self, f):
        import myir

        self.f = f
        self.compiled = myir.compile(f, backend="python")

    def __getattr__(self, name):
        return getattr(self.compiled, name)

    def __call__(self, *args, **kwargs):
        import myir

        previous = {v: os.environ.get(v) for v in ("MYIR_CACHE_DIR", "MYIR_PROGRAM_CACHE")}
        os.environ.update(MYIR_CACHE_DIR=_saved_directory(), MYIR_PROGRAM_CACHE="on")
        try:
            try:
                myir.compile(self.f, backend="python")(*copy.deepcopy(args),
                                                       **copy.deepcopy(kwargs))
            except Exception:   # noqa: BLE001 - the loaded program must raise it again
                pass
            loaded = myir.compile(self.f, backend="python")
            try:
                return loaded(*args, **kwargs)
            finally:
                assert all(p.from_disk for p in loaded._by_signature.values()), \
                    f"{self.f.__qualname__}: the program was not saved"
        finally:
            for name, value in previous.items():
                if value is None:
                    del os.environ[name]
                else:
                    os.environ[name] = value


@functools.cache
def _saved_directory() -> str:
    """One disk cache for the session's saved programs, removed when the session ends."""
    directory = tempfile.mkdtemp(prefix="myir-saved-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


@pytest.fixture(scope="session", params=modes())
def jit(request):
    return make_jit(request.param)


@pytest.fixture(scope="session", params=[m for m in modes() if m != "cpython"])
def compiled(request):
    """Like `jit`, for tests that only make sense with the compiler (errors, tracebacks)."""
    return make_jit(request.param)


@pytest.fixture(scope="session", params=[m for m in modes() if m != "cpython"])
def compile_fresh(request):
    """`compile_fresh(f)`: a new `myir.compile` object for `f` at every call (for errors)."""
    return make_jit(request.param, memo=False)


# --------------------------------------------------------------------------------------------
# Running and comparing


@dataclass
class Raised:
    exc: BaseException

    def __repr__(self) -> str:
        return f"raised {type(self.exc).__name__}: {self.exc}"


@dataclass
class Outcome:
    result: Any  # the returned value, or Raised
    args: tuple
    kwargs: dict


def run(f, args, kwargs) -> Outcome:
    args = copy.deepcopy(args)
    kwargs = copy.deepcopy(kwargs)
    try:
        result = f(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - every exception is an outcome to compare
        result = Raised(exc)
    return Outcome(result, args, kwargs)


def _float_same(a, e) -> bool:
    a, e = float(a), float(e)
    if math.isnan(e):
        return math.isnan(a)
    return a == e and math.copysign(1.0, a) == math.copysign(1.0, e)


def _close(a, e, rtol) -> bool:
    if math.isnan(e) or math.isinf(e):
        return _float_same(a, e)
    return abs(a - e) <= rtol * abs(e) or abs(a - e) <= rtol * 1e-3


def assert_same(actual, expected, where: str = "result", tolerance=None) -> None:
    """Assert `actual` is exactly what CPython produced (`expected`); with `tolerance`
    (dtype -> relative tolerance), floats may differ that much."""
    if isinstance(expected, Raised) or isinstance(actual, Raised):
        assert isinstance(actual, Raised) and isinstance(expected, Raised), (
            f"{where}: got {actual!r}, CPython gives {expected!r}"
        )
        assert type(actual.exc) is type(expected.exc), (
            f"{where}: raised {type(actual.exc).__name__}: {actual.exc}, "
            f"CPython raises {type(expected.exc).__name__}: {expected.exc}"
        )
        assert str(actual.exc) == str(expected.exc), (
            f"{where}: message {str(actual.exc)!r}, CPython's is {str(expected.exc)!r}"
        )
        return
    assert type(actual) is type(expected), (
        f"{where}: type {type(actual).__name__} ({actual!r}), "
        f"CPython gives {type(expected).__name__} ({expected!r})"
    )
    if isinstance(expected, tuple):
        assert len(actual) == len(expected), f"{where}: {actual!r} != {expected!r}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{i}]", tolerance)
    elif isinstance(expected, list):
        assert len(actual) == len(expected), f"{where}: {actual!r} != {expected!r}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{i}]", tolerance)
    elif dataclasses.is_dataclass(expected):
        for f in dataclasses.fields(expected):
            assert_same(getattr(actual, f.name), getattr(expected, f.name),
                        f"{where}.{f.name}", tolerance)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{where}: {actual!r} != {expected!r}"
        for k in expected:
            assert_same(actual[k], expected[k], f"{where}[{k!r}]", tolerance)
    elif isinstance(expected, np.ndarray):
        assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
        equal_nan = expected.dtype.kind in "fc"
        rtol = (tolerance or {}).get(expected.dtype)
        if rtol is not None:
            finite = expected[np.isfinite(expected)]
            scale = float(np.max(np.abs(finite))) if finite.size else 0.0
            assert np.array_equal(np.isnan(actual), np.isnan(expected)) and np.allclose(
                actual, expected, rtol=rtol, atol=rtol * scale, equal_nan=True), (
                f"{where}: {actual!r} != {expected!r} (relative tolerance {rtol})")
        else:
            assert np.array_equal(actual, expected, equal_nan=equal_nan), (
                f"{where}: {actual!r} != {expected!r}"
            )
    elif isinstance(expected, (float, np.floating)):
        rtol = (tolerance or {}).get(np.dtype(type(expected)))
        same = _float_same(actual, expected) if rtol is None else _close(actual, expected, rtol)
        assert same, f"{where}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


ANY = object()  # `raises=ANY`: CPython may or may not raise for these inputs


def check(jit, f, *args, raises=None, **kwargs):
    """Call `f` uncompiled and `jit(f)` on copies of the same arguments; assert same outcome.

    `raises`: None (default) — CPython must return normally (guards the test's own inputs);
    an exception type — CPython must raise it; `ANY` — either.  Returns CPython's result.
    """
    expected = run(f, args, kwargs)
    if raises is None:
        assert not isinstance(expected.result, Raised), (
            f"test inputs are wrong: CPython {expected.result!r}"
        )
    elif raises is not ANY:
        assert isinstance(expected.result, Raised) and isinstance(expected.result.exc, raises), (
            f"test expects CPython to raise {raises.__name__}, got {expected.result!r}"
        )
    actual = run(jit(f), args, kwargs)
    assert_same(actual.result, expected.result, tolerance=getattr(jit, "tolerance", None))
    for i, (a, e) in enumerate(zip(actual.args, expected.args)):
        assert_same(a, e, f"argument {i} after the call")
    for k in expected.kwargs:
        assert_same(actual.kwargs[k], expected.kwargs[k], f"argument {k}= after the call")
    return expected.result
