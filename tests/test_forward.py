"""Forward mode (`myir.jvp`), Jacobians (`jacfwd`, `jacrev`), Hessians and gradient rules of
the user's (`myir.custom_grad`): against central finite differences in float64, against the
reverse mode (J·v == v·∇), and against hand formulas.  The backend is the first of
MYIR_TEST_BACKENDS (run a second time with MYIR_TEST_BACKENDS=tvm)."""

import os

import numpy as np
import pytest

import myir
from myir import tree
from tests import programs_forward as pf
from tests.programs_check import DEFAULT_BACKENDS

BACKEND = os.environ.get("MYIR_TEST_BACKENDS", DEFAULT_BACKENDS).split(",")[0].strip()
BACKEND = "python" if BACKEND == "saved" else BACKEND


def fd_jvp(f, xs, vs, eps=1e-6):
    plus = f(*(x + eps * v for x, v in zip(xs, vs)))
    minus = f(*(x - eps * v for x, v in zip(xs, vs)))
    return (np.asarray(plus) - np.asarray(minus)) / (2 * eps)


SCALAR_PROGRAMS = [pf.poly, pf.branches, pf.while_loop, pf.for_loop, pf.recursion,
                   pf.closures, pf.tuples, pf.numpy_and_math, pf.array_of_numbers]
POINTS = [(0.7, 0.3), (-0.4, 1.3), (1.9, -0.6), (0.2, 0.9)]


@pytest.mark.parametrize("fn", SCALAR_PROGRAMS, ids=lambda f: f.__name__)
def test_jvp_of_scalar_programs(fn):
    rng = np.random.default_rng(0)
    grad = myir.grad(fn, 0, 1, backend=BACKEND)
    for x, y in POINTS:
        v = tuple(rng.normal(size=2))
        out, tangent = myir.jvp(fn, (x, y), v, backend=BACKEND)
        assert out == pytest.approx(fn(x, y), rel=1e-12)
        assert tangent == pytest.approx(fd_jvp(fn, (x, y), v), rel=1e-6, abs=1e-8)
        gx, gy = grad(x, y)
        assert tangent == pytest.approx(gx * v[0] + gy * v[1], rel=1e-12, abs=1e-14)


def test_jvp_of_array_program():
    rng = np.random.default_rng(1)
    w, x = rng.normal(size=(3, 4)), rng.normal(size=4)
    vw, vx = rng.normal(size=(3, 4)), rng.normal(size=4)
    out, tangent = myir.jvp(pf.arrays, (w, x), (vw, vx), backend=BACKEND)
    np.testing.assert_allclose(out, pf.arrays(w, x), rtol=1e-12)
    np.testing.assert_allclose(tangent, fd_jvp(pf.arrays, (w, x), (vw, vx)), rtol=1e-6)
    # J·v against the reverse mode: each output element's gradient, dotted with v
    for k in range(3):
        gw, gx = myir.grad(lambda w, x: pf.arrays(w, x)[k], 0, 1, backend=BACKEND)(w, x)
        assert tangent[k] == pytest.approx(np.sum(gw * vw) + np.sum(gx * vx), rel=1e-12)


def test_jvp_inside_compiled_code():
    got = myir.compile(pf.inner_jvp, backend=BACKEND)(0.8, 0.4)
    want = pf.poly(0.8, 0.4) + 2.0 * fd_jvp(pf.poly, (0.8, 0.4), (1.0, 0.0))
    assert got == pytest.approx(want, rel=1e-8)


@pytest.mark.parametrize("fn", [pf.arrays, lambda w, x: np.cumsum(np.sin(w) @ x) / (1.0 + x[0] ** 2)],
                         ids=["arrays", "cumsum"])
def test_jacfwd_equals_jacrev_and_differences(fn):
    rng = np.random.default_rng(2)
    w, x = rng.normal(size=(3, 4)), rng.normal(size=4)
    for wrt in (0, 1):
        fwd = myir.jacfwd(fn, wrt, backend=BACKEND)(w, x)
        rev = myir.jacrev(fn, wrt, backend=BACKEND)(w, x)
        arg = (w, x)[wrt]
        assert fwd.shape == rev.shape == fn(w, x).shape + arg.shape
        np.testing.assert_allclose(fwd, rev, rtol=1e-12, atol=1e-14)
        for index in np.ndindex(arg.shape):
            e = np.zeros_like(arg)
            e[index] = 1.0
            v = (e, np.zeros_like(x)) if wrt == 0 else (np.zeros_like(w), e)
            np.testing.assert_allclose(fwd[(...,) + index], fd_jvp(fn, (w, x), v),
                                       rtol=1e-6, atol=1e-8)


def test_jacfwd_several_parameters():
    rng = np.random.default_rng(3)
    w, x = rng.normal(size=(3, 4)), rng.normal(size=4)
    jw, jx = myir.jacfwd(pf.arrays, 0, 1, backend=BACKEND)(w, x)
    rw, rx = myir.jacrev(pf.arrays, "w", "x", backend=BACKEND)(w, x)
    np.testing.assert_allclose(jw, rw, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(jx, rx, rtol=1e-12, atol=1e-14)


def _matrix(jac, out, x):
    """A Jacobian tree (JAX's: out's structure of x's structure of blocks) as one matrix, a
    row per number of out, a column per number of x."""
    outs, xs, blocks = tree.leaves(out), tree.leaves(x), tree.leaves(jac)
    assert len(blocks) == len(outs) * len(xs)
    for k, o in enumerate(outs):
        for j, xj in enumerate(xs):
            block = blocks[k * len(xs) + j]
            assert block.shape == np.shape(o) + np.shape(xj)
            assert block.dtype == np.asarray(o).dtype
    return np.block([[np.reshape(blocks[k * len(xs) + j], (np.size(o), np.size(xj)))
                      for j, xj in enumerate(xs)] for k, o in enumerate(outs)])


def _fd_matrix(f, x, eps=1e-6):
    """Central differences of f (trees in and out) as one matrix, column by column."""
    leaves, structure = tree.flatten(x)
    flat = np.concatenate([np.ravel(leaf) for leaf in leaves])
    shapes = [np.shape(leaf) for leaf in leaves]

    def at(v):
        parts = np.split(v, np.cumsum([int(np.prod(s)) for s in shapes])[:-1])
        rebuilt = [p.reshape(s) if s else float(p[0]) for p, s in zip(parts, shapes)]
        out = f(tree.unflatten(structure, rebuilt))
        return np.concatenate([np.ravel(np.asarray(leaf, float)) for leaf in tree.leaves(out)])

    return np.stack([(at(flat + eps * e) - at(flat - eps * e)) / (2 * eps)
                     for e in np.eye(flat.size)], axis=1)


def test_jacobians_of_trees_are_jax_trees():
    """The output a tuple of an array, a dict holding a number and a list, and a float32
    array; two parameters: JAX's tree of the output's structure with a (w, x) pair of blocks
    at each leaf, by forward and reverse mode, against differences."""
    rng = np.random.default_rng(8)
    w, x = rng.normal(size=(2, 3)), rng.normal(size=3)
    out = pf.tree_out(w, x)
    fwd = myir.jacfwd(pf.tree_out, 0, 1, backend=BACKEND)(w, x)
    rev = myir.jacrev(pf.tree_out, "w", "x", backend=BACKEND)(w, x)
    assert tree.structure(fwd) == tree.structure(rev) == tree.structure(
        tree.map(lambda o: (w, x), out))
    assert fwd[1]["v"][1][0].shape == (2, 2, 3) and fwd[2][1].dtype == np.float32
    np.testing.assert_allclose(_matrix(fwd, out, (w, x)), _matrix(rev, out, (w, x)),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(_matrix(fwd, out, (w, x)),
                               _fd_matrix(lambda p: pf.tree_out(*p), (w, x), eps=1e-3),
                               rtol=1e-4, atol=1e-6)


def test_jacobians_of_decompositions_by_both_modes():
    """eigh, qr and svd's tuples (a tuple of them): forward mode's tangent rules against
    reverse mode's gradient rules, block by block."""
    x = np.array([0.3, -1.1, 0.8, 0.5])
    out = pf.decompositions(x)
    fwd = myir.jacfwd(pf.decompositions, backend=BACKEND)(x)
    rev = myir.jacrev(pf.decompositions, backend=BACKEND)(x)
    np.testing.assert_allclose(_matrix(fwd, out, x), _matrix(rev, out, x), rtol=1e-10,
                               atol=1e-12)


def test_jacobian_of_a_string_is_located():
    with pytest.raises(myir.MyirError, match="holds 'label'") as e:
        myir.jacfwd(pf.with_string, backend=BACKEND)(np.ones(2))
    assert "programs_forward.py" in str(e.value)


def test_hessian_of_dict_parameters_is_a_dict_of_dicts():
    rng = np.random.default_rng(9)
    p = {"W": rng.normal(size=(2, 3)), "layer": (rng.normal(size=2), 0.7)}
    x = rng.normal(size=3)
    h = myir.hessian(pf.tree_in, backend=BACKEND)(p, x)
    assert list(h) == ["W", "layer"] and list(h["W"]) == ["W", "layer"]
    assert h["W"]["layer"][0].shape == (2, 3, 2) and h["layer"][1]["W"].shape == (2, 3)
    grad = myir.grad(pf.tree_in, backend=BACKEND)
    full = _matrix(h, p, p)
    np.testing.assert_allclose(full, full.T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(full, _fd_matrix(lambda q: grad(q, x), p), rtol=1e-6,
                               atol=1e-8)


def test_hessian_of_logsumexp_matches_formula():
    x = np.random.default_rng(4).normal(size=5)
    h = myir.hessian(pf.logsumexp, backend=BACKEND)(x)
    p = np.exp(x - pf.logsumexp(x))
    np.testing.assert_allclose(h, np.diag(p) - np.outer(p, p), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(myir.compile(pf.inner_hessian, backend=BACKEND)(x), np.sum(h),
                               rtol=1e-10, atol=1e-12)


def test_hessian_of_mlp_matches_differences_of_the_gradient():
    rng = np.random.default_rng(5)
    w, x = rng.normal(size=(3, 4)), rng.normal(size=4)
    h = myir.hessian(pf.mlp, 1, backend=BACKEND)(w, x)
    grad = myir.grad(pf.mlp, 1, backend=BACKEND)
    assert h.shape == (4, 4)
    for i in range(4):
        e = np.zeros(4)
        e[i] = 1e-6
        np.testing.assert_allclose(h[:, i], (grad(w, x + e) - grad(w, x - e)) / 2e-6,
                                   rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(h, h.T, rtol=1e-12)


def test_hessian_blocks_for_several_parameters():
    (hxx, hxy), (hyx, hyy) = myir.hessian(pf.poly, 0, 1, backend=BACKEND)(0.6, 0.8)
    eps = 1e-5
    gx = myir.grad(pf.poly, 0, backend=BACKEND)
    gy = myir.grad(pf.poly, 1, backend=BACKEND)
    assert float(hxx) == pytest.approx((gx(0.6 + eps, 0.8) - gx(0.6 - eps, 0.8)) / (2 * eps), rel=1e-6)
    assert float(hxy) == pytest.approx((gx(0.6, 0.8 + eps) - gx(0.6, 0.8 - eps)) / (2 * eps), rel=1e-6)
    assert float(hyy) == pytest.approx((gy(0.6, 0.8 + eps) - gy(0.6, 0.8 - eps)) / (2 * eps), rel=1e-6)
    assert float(hxy) == pytest.approx(float(hyx), rel=1e-12)


def test_hessian_of_non_scalar_function_is_located():
    with pytest.raises(myir.MyirError, match="scalar") as e:
        myir.hessian(pf.not_scalar, backend=BACKEND)(np.ones(3))
    assert "programs_forward.py" in str(e.value) or "test_forward.py" in str(e.value)


def test_custom_grad_outside_and_inside_compiled_code():
    assert myir.grad(pf.uses_clip, backend=BACKEND)(1.5) == 3.0      # 3 * clip(2, -1, 1)
    assert myir.compile(pf.grad_inside, backend=BACKEND)(1.5) == 3.0
    assert myir.grad(pf.clip_gradient, backend=BACKEND)(2.0) == 1.0
    assert pf.clip_gradient(2.5) == 2.5     # from Python, it is the function


def test_custom_grad_second_order_and_forward_mode():
    x = np.array([0.3, -1.2, 0.8])
    s = 1.0 / (1.0 + np.exp(-x))
    sp = np.log1p(np.exp(x))
    np.testing.assert_allclose(myir.grad(pf.uses_softplus, backend=BACKEND)(x), 2 * sp * s,
                               rtol=1e-12)
    np.testing.assert_allclose(myir.hessian(pf.uses_softplus, backend=BACKEND)(x),
                               np.diag(2 * s * s + 2 * sp * s * (1 - s)), rtol=1e-10, atol=1e-14)
    out, tangent = myir.jvp(pf.softplus, (0.5,), (2.0,), backend=BACKEND)
    assert tangent == pytest.approx(2.0 / (1.0 + np.exp(-0.5)), rel=1e-12)
    s5 = 1.0 / (1.0 + np.exp(-0.5))
    assert myir.grad(myir.grad(pf.softplus), backend=BACKEND)(0.5) == pytest.approx(
        s5 * (1.0 - s5), rel=1e-12)


def test_rule_with_wrong_number_of_sensitivities_is_located():
    with pytest.raises(myir.MyirError, match="returns 1 sensitivity; two_inputs\\(\\) has 2") as e:
        myir.grad(pf.uses_wrong_rule, backend=BACKEND)(1.0)
    assert "programs_forward.py" in str(e.value) and "return a tuple of 2" in str(e.value)


def test_tangent_of_wrong_shape_outside_compiled_code():
    with pytest.raises(myir.MyirError, match="tangent 0 must match primal 0") as e:
        myir.jvp(pf.arrays, (np.ones((3, 4)), np.ones(4)), (np.ones(4), np.ones(4)))
    assert "test_forward.py" in str(e.value)
    with pytest.raises(myir.MyirError, match="float64 array of shape \\(4,\\)"):
        myir.jvp(pf.arrays, (np.ones((3, 4)), np.ones(4)),
                 (np.ones((3, 4)), np.ones(4, np.float32)))


def test_tangent_of_wrong_shape_inside_compiled_code_is_located():
    with pytest.raises(myir.MyirError, match="tangent 0 must match primal 0") as e:
        myir.compile(pf.bad_tangent_inside, backend=BACKEND)(0.5)
    assert "programs_forward.py" in str(e.value)


@pytest.mark.parametrize("make, args", [
    (lambda: myir.hessian(pf.logsumexp, backend=BACKEND), (np.arange(4.0),)),
    (lambda: myir.jacfwd(pf.arrays, 1, backend=BACKEND), (np.ones((3, 4)), np.arange(4.0))),
    (lambda: myir.grad(pf.uses_softplus, backend=BACKEND), (np.arange(3.0),)),
], ids=["hessian", "jacfwd", "custom_grad"])
def test_programs_are_saved_and_loaded(tmp_path, monkeypatch, make, args):
    """The same pipeline as grad's: the second compiled function loads the first's program."""
    from myir import saved

    monkeypatch.setenv("MYIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MYIR_PROGRAM_CACHE", "on")
    first, second = make(), make()
    want = first(*args)
    before = dict(saved.STATS)
    np.testing.assert_array_equal(second(*args), want)
    assert saved.STATS["loaded"] == before["loaded"] + 1


def test_jvp_program_is_saved_and_loaded(tmp_path, monkeypatch):
    from myir import api, saved

    monkeypatch.setenv("MYIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MYIR_PROGRAM_CACHE", "on")
    monkeypatch.setattr(api, "_JVP_FUNCTIONS", {})
    want = myir.jvp(pf.while_loop, (0.7, 0.3), (1.0, 0.5), backend=BACKEND)
    monkeypatch.setattr(api, "_JVP_FUNCTIONS", {})
    before = dict(saved.STATS)
    assert myir.jvp(pf.while_loop, (0.7, 0.3), (1.0, 0.5), backend=BACKEND) == want
    assert saved.STATS["loaded"] == before["loaded"] + 1


@pytest.mark.parametrize("name", sorted(pf.RULE_PROGRAMS))
def test_tangent_rules_agree_with_gradient_rules(name):
    """<w, J·v> from forward mode == <∇<w, f>, v> from reverse mode, and finite differences."""
    fn = pf.RULE_PROGRAMS[name]
    rng = np.random.default_rng(7)
    x, v = rng.normal(size=4), rng.normal(size=4)
    out, tangent = myir.jvp(fn, (x,), (v,), backend=BACKEND)
    np.testing.assert_allclose(out, fn(x), rtol=1e-12)
    w = rng.normal(size=np.shape(out))
    g = myir.grad(lambda x: np.sum(fn(x) * w), backend=BACKEND)(x)
    assert np.sum(w * tangent) == pytest.approx(np.sum(g * v), rel=1e-10, abs=1e-12)
    np.testing.assert_allclose(tangent, fd_jvp(fn, (x,), (v,)), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("x", [0.7, 0.2, -0.5])
def test_reverse_over_forward_and_forward_over_forward(x):
    tangent = myir.compile(pf.tangent_of_loop, backend=BACKEND)
    by_reverse = myir.grad(pf.tangent_of_loop, backend=BACKEND)(x)
    by_forward = myir.compile(pf.second_by_forward, backend=BACKEND)(x)
    assert by_reverse == pytest.approx(by_forward, rel=1e-12)
    assert by_forward == pytest.approx((tangent(x + 1e-6) - tangent(x - 1e-6)) / 2e-6, rel=1e-5)


def test_integer_input_takes_integer_tangent():
    assert myir.compile(pf.tangent_with_int, backend=BACKEND)(0.7) == pytest.approx(3 * 0.7 ** 2)


def test_primals_not_one_per_parameter_are_located():
    with pytest.raises(myir.MyirError, match="poly\\(\\) takes 2 arguments, and 1 primals") as e:
        myir.jvp(pf.poly, (0.5,), (1.0,))
    assert "test_forward.py" in str(e.value)
    with pytest.raises(myir.MyirError, match="poly\\(\\) takes 2 arguments, and the primals "
                                             "are 1") as e:
        myir.compile(pf.too_few_primals, backend=BACKEND)(0.5)
    assert "programs_forward.py" in str(e.value) and "one per parameter (x, y)" in str(e.value)


def test_jvp_through_element_updates():
    x, a = np.array([0.3, -1.2, 0.7]), 1.7
    v = (np.array([0.1, 0.4, -0.3]), -0.6)
    out, tangent = myir.jvp(pf.element_updates, (x, a), v, backend=BACKEND)
    assert out == pytest.approx(pf.element_updates(x, a), rel=1e-12)
    assert tangent == pytest.approx(fd_jvp(pf.element_updates, (x, a), v), rel=1e-7)
    gx, ga = myir.grad(pf.element_updates, 0, 1, backend=BACKEND)(x, a)
    assert tangent == pytest.approx(np.dot(gx, v[0]) + ga * v[1], rel=1e-12)
