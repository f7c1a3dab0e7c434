"""Programs that grow: the generated families of `bench.compile_scaling` compile to what
CPython computes (forward) and to finite differences (gradient), and a chain of calls as
deep as the program (500 helper functions) compiles on every backend, forward and
gradient, without running out of Python stack.  Timing is the benchmark's business; here
only the benchmark's time limit is checked.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import myir
from bench import compile_scaling, scaling_programs
from frontend.fingerprint import fingerprints
from myir.errors import MyirSyntaxError
from tests import programs_check
from tests.test_grad_primitives import assert_grads_close, numerical_grad

MODES = [m for m in programs_check.modes() if m != "cpython"]


def _module(tmp_path, family: str, n: int):
    return compile_scaling.load_module(compile_scaling.write_module(family, n, tmp_path), np)


def _assert_close(got, want, jit):
    tolerance = (jit.tolerance or {}).get(np.asarray(want).dtype, 0.0)
    np.testing.assert_allclose(got, want, rtol=max(tolerance, 1e-15))


def _check(f, args, wrt, mode):
    """f compiled in `mode` computes CPython's value, and its gradient finite differences'."""
    jit = programs_check.make_jit(mode, memo=False)
    _assert_close(jit(f)(*args), f(*args), jit)
    got = jit(myir.grad(f, *wrt))(*args)
    assert_grads_close(got, tuple(numerical_grad(f, args, i) for i in wrt))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("family", scaling_programs.FAMILIES)
def test_generated_family_matches_cpython(tmp_path, family, mode):
    f = _module(tmp_path, family, compile_scaling.QUICK_SIZES[0]).f
    _check(f, scaling_programs.INPUTS[family](), scaling_programs.WRT[family], mode)


@pytest.mark.parametrize("mode", MODES)
def test_chain_of_500_calls(tmp_path, monkeypatch, mode):
    """Parsing, AD, codegen and loading a saved program walk the chain without recursion,
    its 500 functions kept as functions (the optimizer off)."""
    monkeypatch.setenv("MYIR_OPTIMIZE", "0")
    f = _module(tmp_path, "D", 500).f
    _check(f, (0.3, 0.7), (0, 1), mode)


@pytest.mark.parametrize("mode", MODES)
def test_chain_of_500_calls_inlined(tmp_path, mode):
    """The optimizer inlines the whole chain into one function."""
    f = _module(tmp_path, "D", 500).f
    jit = programs_check.make_jit(mode, memo=False)
    _assert_close(jit(f)(0.3, 0.7), f(0.3, 0.7), jit)


@pytest.mark.parametrize("mode", MODES)
def test_gradient_of_a_chain_of_500_calls_inlined(tmp_path, mode):
    f = _module(tmp_path, "D", 500).f
    jit = programs_check.make_jit(mode, memo=False)
    got = jit(myir.grad(f, 0, 1))(0.3, 0.7)
    assert_grads_close(got, tuple(numerical_grad(f, (0.3, 0.7), i) for i in (0, 1)))


def test_error_at_the_end_of_a_deep_chain_names_its_line(tmp_path):
    path = compile_scaling.write_module("D", 300, tmp_path)
    text = path.read_text().replace("v = u * y", "v = {u, y}")
    path.write_text(text)
    f = compile_scaling.load_module(path, np).f
    line = text.splitlines().index("    v = {u, y}") + 1
    with pytest.raises(MyirSyntaxError, match="set literals") as info:
        myir.compile(f, backend="python")(0.3, 0.7)
    assert f":{line}:" in str(info.value)


def test_mutually_recursive_functions_have_one_fingerprint_whichever_is_reached_first(tmp_path):
    path = tmp_path / "mutual.py"
    path.write_text("def even(n):\n    return True if n == 0 else odd(n - 1)\n\n\n"
                    "def odd(n):\n    return False if n == 0 else even(n - 1)\n")
    module = compile_scaling.load_module(path, np)
    from_even, from_odd = fingerprints(module.even), fingerprints(module.odd)
    assert from_even == from_odd
    assert from_even[module.even] != from_even[module.odd]
    assert myir.compile(module.even, backend="python")(7) is False


def test_a_compile_past_the_limit_is_killed_and_reported(tmp_path):
    cell = compile_scaling.run_cell("A", 25, "myir-python", "forward", tmp_path, limit=0.05)
    assert cell["status"] == "timeout" and cell["reason"] == "> 0.05 s"


def test_k_is_the_slope_of_log_time_over_log_n():
    points = [(200, 10.0), (400, 40.0), (800, 160.0), (100, 1.0)]
    assert compile_scaling.slope(points, 200) == pytest.approx(2.0)
    assert compile_scaling.slope(points[:1], 200) is None


def test_the_quick_run_has_its_own_sizes_and_one_backend(tmp_path, monkeypatch):
    """`--quick` measures every family at the quick sizes on the python backend (jax left
    out here): each compile of the smoke run finishes and the table has a k per line."""
    calls = []

    def fake_cell(family, n, system, mode, directory, limit):
        calls.append((family, n, system, mode))
        return {"family": family, "n": n, "system": system, "mode": mode, "status": "ok",
                "ms": float(n)}

    monkeypatch.setattr(compile_scaling, "run_cell", fake_cell)
    assert compile_scaling.main(["--quick", "--no-jax", "--out", str(tmp_path)]) == 0
    assert {c[2] for c in calls} == {"myir-python"}
    assert {c[1] for c in calls} == set(compile_scaling.QUICK_SIZES)
    assert {c[0] for c in calls} == set(scaling_programs.FAMILIES)
    table = (tmp_path / "compile_scaling.md").read_text()
    assert table.count("| 1.00 |") == 2 * len(scaling_programs.FAMILIES)
    assert os.path.exists(tmp_path / "compile_scaling.json")
