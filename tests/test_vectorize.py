"""`myir.vectorize`: values and dtypes against np.vectorize, inside and outside compiled code,
with branches, loops, closures and broadcasting; one TVM kernel per vectorized call; the
mixed-mode gradient (forward mode inside the broadcast) against central finite differences
in float64; errors located.  The backend is the first of MYIR_TEST_BACKENDS (run a second time
with MYIR_TEST_BACKENDS=tvm)."""

import os
import re
import warnings

import numpy as np
import pytest

import myir
from tests import programs_vectorize as pv
from tests.programs_check import DEFAULT_BACKENDS

BACKEND = os.environ.get("MYIR_TEST_BACKENDS", DEFAULT_BACKENDS).split(",")[0].strip()
BACKEND = "python" if BACKEND == "saved" else BACKEND


def hmlstm_inputs(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    c, f, i, g = (rng.standard_normal((n, n)).astype(dtype) for _ in range(4))
    z1 = (rng.uniform(size=n) < 0.3).astype(dtype)
    z2 = (rng.uniform(size=n) < 0.5).astype(dtype)
    return c, f, i, g, z1, z2


@pytest.mark.parametrize("shapes", [((5,), (5,)), ((4, 1), (3,)), ((2, 3, 4), (4,)),
                                    ((), (6,)), ((3, 4), ())], ids=str)
def test_values_and_broadcasting_match_np_vectorize(shapes):
    rng = np.random.default_rng(1)
    x, y = (rng.normal(size=s) if s else float(rng.normal()) for s in shapes)
    got = myir.vectorize(pv.piecewise, backend=BACKEND)(x, y)
    want = np.vectorize(pv.piecewise)(x, y)
    assert isinstance(got, np.ndarray) and got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_dtypes_match_np_vectorize(dtype):
    # np.vectorize's output dtype is that of the result on the first element, a numpy scalar
    # of the input's dtype: float32 stays float32, ints times a float become float64
    # (piecewise of ints returns an int or a float: refused, see the test below)
    fn = pv.with_closure if dtype == "int64" else pv.piecewise
    x = np.arange(-3, 5).astype(dtype)
    y = np.arange(8).astype(dtype)[::-1].copy()
    got = myir.vectorize(fn, backend=BACKEND)(x, y)
    want = np.vectorize(fn)(x, y)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-12)


def test_hmlstm_cell_matches_np_vectorize_and_np_where():
    args = hmlstm_inputs(16, np.float32)
    got = myir.vectorize(pv.cell, backend=BACKEND)(*args)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.vectorize(pv.cell)(*args), rtol=2e-6, atol=1e-6)
    from bench.workloads.programs import hmlstm
    assert float(myir.compile(pv.hmlstm_vec, backend=BACKEND)(*args)) == \
        pytest.approx(float(hmlstm(*args)), rel=1e-5)


def test_closures_loops_and_tuples():
    x, y = np.linspace(0.5, 3.0, 7), np.linspace(-1.0, 1.0, 7)
    np.testing.assert_allclose(myir.vectorize(pv.with_closure, backend=BACKEND)(x, y),
                               np.vectorize(pv.with_closure)(x, y), rtol=1e-12)
    np.testing.assert_allclose(myir.vectorize(pv.newton, backend=BACKEND)(x),
                               np.sqrt(x), rtol=1e-12)
    s, p = myir.vectorize(pv.pair, backend=BACKEND)(x, y[:, None])
    ws, wp = np.vectorize(pv.pair)(x, y[:, None])
    np.testing.assert_allclose(s, ws, rtol=1e-12)
    np.testing.assert_allclose(p, wp, rtol=1e-12)


def test_inside_compiled_code_and_decorated():
    x, y = np.linspace(-2.0, 2.0, 9), np.linspace(1.0, -1.0, 9)
    np.testing.assert_allclose(myir.compile(pv.vectorize_inside, backend=BACKEND)(x, y),
                               np.vectorize(pv.piecewise)(x, y) + 1.0, rtol=1e-12)
    want = np.sum(np.vectorize(pv.decorated.__wrapped__)(x, y) * 2.0)
    assert myir.compile(pv.calls_decorated, backend=BACKEND)(x, y) == pytest.approx(want)
    np.testing.assert_allclose(pv.decorated(x, y),
                               np.vectorize(pv.decorated.__wrapped__)(x, y), rtol=1e-12)


def fd_grad(f, args, k, index, eps=1e-6):
    plus = [np.array(a, copy=True) for a in args]
    minus = [np.array(a, copy=True) for a in args]
    plus[k][index] += eps
    minus[k][index] -= eps
    return (float(f(*plus)) - float(f(*minus))) / (2 * eps)


def check_gradients(program, args, wrt):
    grads = myir.grad(program, *wrt, backend=BACKEND)(*args)
    grads = grads if isinstance(grads, tuple) else (grads,)
    rng = np.random.default_rng(3)
    for k, g in zip(wrt, grads):
        assert g.shape == np.shape(args[k]) and g.dtype == np.asarray(args[k]).dtype
        for _ in range(4):
            index = tuple(int(rng.integers(d)) for d in np.shape(args[k]))
            assert g[index] == pytest.approx(fd_grad(program, args, k, index),
                                             rel=1e-6, abs=1e-8)


def test_mixed_mode_gradient_of_hmlstm_cell():
    args = hmlstm_inputs(8, np.float64)
    check_gradients(pv.hmlstm_vec, args, (0, 1, 2, 3))
    # against the reverse mode of the np.where cell: the same derivative
    from bench.workloads.programs import hmlstm
    for a, b in zip(myir.grad(pv.hmlstm_vec, 0, 1, 2, 3, backend=BACKEND)(*args),
                    myir.grad(hmlstm, 0, 1, 2, 3, backend=BACKEND)(*args)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_mixed_mode_gradient_with_broadcasting_closures_and_loops():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(4, 3)), rng.normal(size=3)
    check_gradients(pv.loss, (x, y), (0, 1))    # y's gradient: summed over the rows
    check_gradients(pv.loss_of_closure, (x, y), (0, 1))
    check_gradients(pv.loss_of_loop, (rng.uniform(0.5, 4.0, size=5),), (0,))


def test_closure_capturing_a_value_of_the_enclosing_function():
    # the captured value is one more operand of the broadcast: its gradient is a partial too
    x = np.linspace(-1.0, 1.0, 8)
    assert myir.compile(pv.captures, backend=BACKEND)(x, 2.5) == pytest.approx(pv.captures(x, 2.5))
    gx, ga = myir.grad(pv.captures, 0, 1, backend=BACKEND)(x, 2.5)
    np.testing.assert_allclose(gx, np.where(x > 0.0, 2.5, -2.0 * x), rtol=1e-12)
    assert ga == pytest.approx(np.sum(x[x > 0.0]), rel=1e-12)


def test_tvm_builds_one_kernel_per_vectorized_call():
    args = hmlstm_inputs(64, np.float32)
    for fn in (myir.compile(pv.hmlstm_vec, backend="tvm"),
               myir.grad(pv.hmlstm_vec, 0, 1, 2, 3, backend="tvm")):
        lowered = fn.lower(*args)
        kernels = [r for r in lowered.regions if r.name.startswith("vectorized")]
        assert len(kernels) == 1 and kernels[0].program.kernel
        # the kernels of its generated code (LLVM IR): the one loop nest
        assert re.findall(r"define dllexport .*@__tvm_ffi_(\w+)\(",
                          kernels[0].source) == ["vectorized"]
    # the gradient is that one kernel: value and partials by forward mode, no reverse pass
    assert "partials_cell" in kernels[0].name
    got = myir.grad(pv.hmlstm_vec, 0, 1, 2, 3, backend="tvm")(*args)
    want = myir.grad(pv.hmlstm_vec, 0, 1, 2, 3, backend="python")(*args)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_loops_are_one_tvm_kernel_with_their_mixed_mode_gradient():
    """`while` and `for` loops (on data, left by `break`, in a branch, one after another,
    nested) are statements of the kernel: its values are np.vectorize's, its gradient the
    python backend's, with no fallback."""
    a, b = np.linspace(0.5, 3.0, 6), np.array([-0.5, 0.7, 1.5])[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(myir.vectorize(pv.loops, backend="tvm")(a, b),
                                   np.vectorize(pv.loops)(a, b), rtol=1e-14)
        grad = myir.grad(pv.loss_of_loops, 0, 1, backend="tvm")
        ga, gb = grad(a, b)
        for got, want in zip((ga, gb), myir.grad(pv.loss_of_loops, 0, 1,
                                                 backend="python")(a, b)):
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    # along one direction, against central differences of np.vectorize's values
    va, vb = np.cos(np.arange(6.0)), np.sin(np.arange(3.0))[:, None]
    loss = lambda a, b: np.sum(np.vectorize(pv.loops)(a, b) ** 2)
    assert np.sum(ga * va) + np.sum(gb * vb) == pytest.approx(
        (loss(a + 1e-6 * va, b + 1e-6 * vb) - loss(a - 1e-6 * va, b - 1e-6 * vb)) / 2e-6,
        rel=1e-6)
    kernels = [r for r in grad.lower(a, b).regions if r.program.kernel]
    # value; partials: each loop once, forward and backward (no pass of the `for` is typed
    # apart, which would copy its inner `while`)
    assert [str(k.program).count("loop(") for k in kernels] == [4, 8]
    assert all(k.program.ops[0].prim != "vectorize_call" for k in kernels)


@pytest.mark.parametrize("f, why", [(pv.power, "the depth check of a recursion"),
                                    (pv.fib, "recurses")])
def test_recursion_runs_as_np_vectorize_on_tvm_with_a_warning(f, why):
    """A linear recursion runs as loops (passes/linear_recursion.py) whose descent checks
    its depth, which may raise; a recursion with two calls recurses."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = myir.vectorize(f, backend="tvm")(np.array([2.0, 3.0]), 3)
    np.testing.assert_allclose(got, [f(2.0, 3), f(3.0, 3)], rtol=1e-12)
    assert any("runs as np.vectorize" in str(w.message) and why in str(w.message)
               for w in caught)


def test_not_scalar_function_is_a_located_error():
    with pytest.raises(myir.MyirError, match="returns an array") as e:
        myir.compile(pv.not_scalar, backend=BACKEND)(np.ones(4))
    assert "programs_vectorize.py" in str(e.value)
    assert "vectorize broadcasts a function of numbers" in str(e.value)


def test_result_type_depending_on_values_is_a_located_error():
    with pytest.raises(myir.MyirError, match="same type of number") as e:
        myir.compile(pv.mixed_types, backend=BACKEND)(np.ones(4))
    assert "programs_vectorize.py" in str(e.value)
    with pytest.raises(myir.MyirError, match="returns float64 or int64"):
        myir.vectorize(pv.piecewise, backend=BACKEND)(np.arange(3), np.arange(3))


def test_tuple_argument_is_a_located_error():
    with pytest.raises(myir.MyirError, match="broadcast over numbers and arrays"):
        myir.vectorize(pv.piecewise, backend=BACKEND)((1.0, 2.0), np.ones(2))


def test_forward_mode_and_hessians_through_vectorize():
    """The tangent of a vectorized call is the broadcast of f's tangent; a Hessian is
    forward mode over the mixed-mode gradient (through a loop here): d²√a/da²."""
    rng = np.random.default_rng(4)
    x, y, vx, vy = rng.normal(size=(4, 3)), rng.normal(size=3), rng.normal(size=(4, 3)), \
        rng.normal(size=3)
    out, tangent = myir.jvp(pv.loss_of_closure, (x, y), (vx, vy), backend=BACKEND)
    gx, gy = myir.grad(pv.loss_of_closure, 0, 1, backend=BACKEND)(x, y)
    assert tangent == pytest.approx(np.sum(gx * vx) + np.sum(gy * vy), rel=1e-12)
    a = rng.uniform(0.5, 3.0, size=4)
    np.testing.assert_allclose(myir.hessian(pv.loss_of_loop, backend=BACKEND)(a),
                               np.diag(-0.25 * a ** -1.5), rtol=1e-8, atol=1e-12)
