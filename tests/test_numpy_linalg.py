"""numpy's linear algebra, contractions, scans, sorting and gathers in compiled code.

Each subject below is a one-line function of the kind models and scientific code are made of.
For hypothesis-drawn shapes (stacks of matrices where numpy takes them) and values
(well-conditioned matrices: Q diag(1..2) Q^T for symmetric ones, random + n*I otherwise), the
compiled value is numpy's (to the last bit on the python backend, where the composition
performs numpy's own operations), the gradient matches central finite differences of the
uncompiled subject in float64, float32 inputs give float32 results and gradients, and
solve, inv and det have second derivatives.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import myir
from myir import grad
from tests.test_grad_primitives import (BACKEND, assert_grads_close, gradient,
                                        numerical_grad)

# numpy's bits: the python backend runs numpy's operations (TVM sums in its own order)
EXACT = BACKEND in ("python", "saved")


_COMPILED: dict = {}


def compiled(f):
    """f compiled for the tested backend, once per test session."""
    if f not in _COMPILED:
        _COMPILED[f] = myir.compile(f, backend=BACKEND)
    return _COMPILED[f]


# --------------------------------------------------------------------------------- values


def general(rng, shape):
    """A well-conditioned square matrix (or stack): random plus n times the identity."""
    n = shape[-1]
    return rng.standard_normal(shape) + n * np.eye(n)


def spd(rng, shape):
    """A symmetric positive definite matrix (or stack) Q diag(1..2) Q^T: distinct
    eigenvalues, at least 1/n apart."""
    n = shape[-1]
    q, _ = np.linalg.qr(rng.standard_normal(shape))
    d = np.linspace(1.0, 2.0, n) + 0.1 * rng.random(shape[:-1])
    return np.matmul(q * d[..., None, :], np.swapaxes(q, -1, -2))


def tall(rng, shape):
    """A matrix with at least as many rows as columns and distinct singular values."""
    m, n = shape[-2:]
    q, _ = np.linalg.qr(rng.standard_normal(shape[:-2] + (m, m)))
    v, _ = np.linalg.qr(rng.standard_normal(shape[:-2] + (n, n)))
    s = np.linspace(1.0, 2.0, n)
    return np.matmul(q[..., :, :n] * s, np.swapaxes(v, -1, -2))


def sym(x):
    return 0.5 * (x + np.swapaxes(x, -1, -2))


# Subjects: a scalar function of float arrays, and how to draw its arguments from
# (rng, batch shape, n).

def solve_vec(a, b):
    return np.sum(np.linalg.solve(a, b) * np.arange(1.0, 1.0 + np.shape(b)[-1]))


def solve_mat(a, b):
    return np.sum(np.linalg.solve(a, b) ** 2)


def inv(a):
    return np.sum(np.linalg.inv(a) * np.cos(a))


def det(a):
    return np.sum(np.linalg.det(a))


def slogdet(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return np.sum(sign * logabsdet)


def cholesky(a):
    return np.sum(np.linalg.cholesky(sym(a)) * np.arange(np.shape(a)[-1] * 1.0))


def eigh(a):
    w, v = np.linalg.eigh(sym(a))
    return np.sum(w * w) + np.sum(v[..., 0] ** 2 * v[..., 0, :] ** 2)


def eigh_values(a):
    return np.sum(np.linalg.eigh(sym(a))[0] * np.arange(np.shape(a)[-1] * 1.0))


def qr(a):
    q, r = np.linalg.qr(a)
    return np.sum(q * np.sin(a)) + np.sum(r * r * np.arange(np.shape(a)[-1] * 1.0))


def svd(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return np.sum(s * s * s) + np.sum((u[..., 0] * u[..., :1, 0]) ** 2) + \
        np.sum(vh[..., 0, :] * vh[..., :1, 0] * np.arange(np.shape(a)[-1] * 1.0))


def singular_values(a):
    return np.sum(np.linalg.svd(a, compute_uv=False) * np.arange(1.0, np.shape(a)[-1] + 1.0))


def lstsq(a, b):
    """numpy's four results (the solution and residuals equal numpy's, LAPACK's gelsd, to
    rounding; the rank, and matrix_rank's, an int without a gradient) and the pseudo-inverse."""
    x, residuals, rank, s = np.linalg.lstsq(a, b)
    return np.sum(x * x) + np.sum(residuals) * rank + np.sum(s ** 3) * np.linalg.matrix_rank(a) \
        + np.sum(np.linalg.pinv(a) * np.arange(1.0, 1.0 + np.shape(a)[-2]))


def norms(a):
    return (np.linalg.norm(a) + np.linalg.norm(a, 1) + np.linalg.norm(a, np.inf)
            + np.linalg.norm(a, "fro") + np.linalg.norm(a, "nuc") + np.linalg.norm(a, 2)
            + np.linalg.norm(a, -2))


def norms_axis(a):
    return (np.sum(np.linalg.norm(a, axis=-1)) + np.sum(np.linalg.norm(a, 3, axis=0))
            + np.sum(np.linalg.norm(a, 1, axis=-1, keepdims=True))
            + np.sum(np.linalg.norm(a, axis=(-2, -1), keepdims=True)))


def matrix_power(a):
    return np.sum(np.linalg.matrix_power(a / np.shape(a)[-1], 5)) + \
        np.sum(np.linalg.matrix_power(a, -2)) + np.sum(np.linalg.matrix_power(a, 0))


def einsum_matmul(a, b):
    return np.sum(np.einsum("...ij,...jk->...ik", a, b) ** 2)


def eigvalsh(a):
    return np.sum(np.linalg.eigvalsh(a) * np.linspace(1.0, 2.0, np.shape(a)[-1]) ** 2) + \
        np.sum(np.linalg.eigvalsh(a, UPLO="U")[..., -1])


def einsum_trace_diag(a, b):
    return np.sum(np.einsum("...ii", a)) + np.sum(np.einsum("...ii->...i", a) * b[..., 0])


def einsum_implicit(a, b):
    return np.sum(np.einsum("...ij,...kj", a, b) ** 2) * np.sum(np.einsum("...ij,...ij", a, a))


def tensordot(a, b):
    return (np.sum(np.tensordot(a, b, 0) ** 2) + np.sum(np.tensordot(a, b, ((-1,), (-2,))) ** 3)
            + np.sum(np.tensordot(a, b, ((-1, -2), (-1, -2))) ** 2))


def kron(a, b):
    return (np.sum(np.kron(a, b) ** 2) + np.sum(np.kron(a[0], b[:, 0]) ** 3)
            + np.sum(np.kron(a[0], b) * np.kron(2.0, b[0])[0])
            + np.sum(np.sin(np.kron(np.stack((a, b)), b[0])) * np.kron(a[:, 0], np.stack((b, a)))))


def cross(a, b):
    return np.sum(np.cross(a[..., :3], b[..., :3]) ** 2)


def convolve(a, b):
    x, v = np.reshape(a, -1), np.reshape(b, -1)[:3]
    return (np.sum(np.convolve(x, v) ** 2) + np.sum(np.convolve(x, v, "same") * x)
            + np.sum(np.convolve(v, x, "valid")))


def scans(a):
    return (np.sum(np.cumsum(a, axis=-1) ** 2) + np.sum(np.cumsum(a) * np.sin(np.reshape(a, -1)))
            + np.sum(np.cumprod(a, axis=0) * a))


def sort(a):
    return np.sum(np.sort(a) * np.cos(a)) + np.sum(np.sort(a, axis=None) ** 3) + \
        np.sum(np.sort(a, axis=0)[0])


def gathers(a):
    return (np.sum(np.take(a, (0, 1, 1), axis=-1) ** 2) + np.sum(np.take(a, (1, 3)) ** 3)
            + np.sum(np.take_along_axis(a, np.argsort(a, axis=-1), axis=-1) * np.sin(a)))


def interp(x, fp):
    xp = np.cumsum(np.abs(fp) + 0.5)
    return np.sum(np.interp(x * np.sum(xp), xp, fp ** 2)) + np.interp(0.7, xp, fp)


def searchsorted(x, b):
    return np.sum(np.searchsorted(np.sort(np.reshape(x, -1)), b)) + \
        np.searchsorted(np.sort(np.reshape(x, -1)), 0.5, side="right")


SQUARE = [(solve_vec, general, "vec"), (solve_mat, general, "mat"), (inv, general, None),
          (det, general, None), (slogdet, general, None), (cholesky, spd, None),
          (eigh, spd, None), (eigh_values, spd, None), (eigvalsh, spd, None), (qr, tall, None), (svd, tall, None),
          (singular_values, tall, None), (lstsq, tall, "rows"),
          (norms, general, None),
          (norms_axis, general, None), (matrix_power, general, None),
          (einsum_matmul, general, "mat"), (einsum_trace_diag, general, "mat"),
          (einsum_implicit, general, "mat"), (tensordot, general, "mat"),
          (kron, general, "mat"), (cross, general, "mat"), (convolve, general, "mat"),
          (scans, general, None), (sort, general, None), (gathers, general, None)]

# norms of a 2-d matrix only (a stack has no axis=None matrix norm)
UNBATCHED = {norms, kron, convolve, lstsq}
# equal to numpy's to rounding: another algorithm than numpy's (eigvalsh: eigh's
# eigenvalues; numpy's eigvalsh has LAPACK compute them without the eigenvectors)
ROUNDED = {lstsq, eigvalsh}
# the matrix is n x n, n >= 3 (cross products, gathers at index 3 of 4 elements)
BIG = {cross, gathers}


def draw_args(subject, make, second, batch, n, seed):
    batch = () if subject in UNBATCHED else batch
    n = n + 1 if subject in BIG else n
    rng = np.random.default_rng(seed)
    shape = batch + ((n + 1, n) if make is tall else (n, n))
    a = make(rng, shape)
    if second == "vec":
        return a, rng.standard_normal(shape[-1:])
    if second == "rows":
        return a, rng.standard_normal(shape[-2:-1])
    if second == "mat":
        return a, rng.standard_normal(batch + (n, n))
    return (a,)


def check_value(f, args):
    got, want = compiled(f)(*args), f(*args)
    assert type(got) is type(want)
    if EXACT and f not in ROUNDED:
        assert got == want or np.isnan(got) and np.isnan(want), (got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("subject, make, second", SQUARE, ids=lambda v: getattr(v, "__name__", v))
@settings(max_examples=6)
@given(batch=st.sampled_from([(), (2,)]), n=st.sampled_from([2, 3]),
       seed=st.integers(0, 2**32 - 1))
def test_value_and_gradient(subject, make, second, batch, n, seed):
    args = draw_args(subject, make, second, batch, n, seed)
    check_value(subject, args)
    wrt = tuple(range(len(args)))
    got = gradient(subject, *wrt)(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = tuple(numerical_grad(subject, args, i) for i in wrt)
    if subject in (cholesky, eigh, eigh_values, eigvalsh):
        # functions of a's symmetric part: compare the gradients' symmetric parts
        got, want = tuple(map(sym, got)), tuple(map(sym, want))
    assert_grads_close(got, want, rtol=1e-5, atol=1e-6)


@settings(max_examples=10)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(3, 6))
def test_interp_and_searchsorted(seed, n):
    rng = np.random.default_rng(seed)
    x, fp = rng.random(n), rng.standard_normal(n)
    check_value(interp, (x, fp))
    check_value(searchsorted, (x, np.linspace(0, 1, n)))
    got = gradient(interp, 0, 1)(x, fp)
    assert_grads_close(got, (numerical_grad(interp, (x, fp), 0), numerical_grad(interp, (x, fp), 1)))


# ----------------------------------------------------------------------- float32, errors


@pytest.mark.parametrize("subject, make, second",
                         [(inv, general, None), (solve_mat, general, "mat"),
                          (einsum_matmul, general, "mat"), (scans, general, None),
                          (eigh, spd, None)], ids=lambda v: getattr(v, "__name__", v))
def test_float32_stays_float32(subject, make, second):
    args = tuple(a.astype(np.float32) for a in draw_args(subject, make, second, (2,), 3, 0))
    value = compiled(subject)(*args)
    assert value.dtype == np.float32
    if EXACT:
        assert value == subject(*args)
    grads = gradient(subject, *range(len(args)))(*args)
    for g in (grads if isinstance(grads, tuple) else (grads,)):
        assert g.dtype == np.float32 and g.shape == args[0].shape


# --------------------------------------------------------------------- second derivatives


def inv_grad_dot(a, w):
    return np.sum(grad(inv)(a) * w)


def det_grad_dot(a, w):
    return np.sum(grad(det)(a) * w)


def solve_grad_dot(a, b, w):
    da, db = grad(solve_mat, 0, 1)(a, b)
    return np.sum(da * w) + np.sum(db * w)


def contraction_grads_dot(a, b, w):
    """einsum's and tensordot's gradients, differentiated again (they are contractions)."""
    da, db = grad(_contractions, 0, 1)(a, b)
    return np.sum(np.sin(da) * w) + np.sum(db * db * w)


def _contractions(a, b):
    return (np.sum(np.sin(np.einsum("ij,jk,kl->il", a, b, a))) + np.einsum("ii", a) ** 3
            + np.sum(np.tensordot(a, b, ((-1,), (-2,))) ** 3))


@pytest.mark.parametrize("subject", [inv_grad_dot, det_grad_dot, solve_grad_dot,
                                     contraction_grads_dot], ids=lambda f: f.__name__)
def test_second_derivatives(subject):
    rng = np.random.default_rng(0)
    a, w = general(rng, (3, 3)), rng.standard_normal((3, 3))
    two = (solve_grad_dot, contraction_grads_dot)
    args = (a, rng.standard_normal((3, 3)), w) if subject in two else (a, w)
    wrt = (0, 1) if subject in two else (0,)
    got = gradient(subject, *wrt)(*args)
    want = tuple(numerical_grad(subject, args, i, eps=1e-5) for i in wrt)
    assert_grads_close(got if isinstance(got, tuple) else (got,), want, rtol=1e-4, atol=1e-5)


def eig(a):
    return np.linalg.eig(a)


def test_unsupported_linalg_function_is_named():
    with pytest.raises(myir.MyirError, match=r"numpy\.linalg\.eig is not supported") as info:
        myir.compile(eig, backend=BACKEND)(np.eye(2))
    assert "np.linalg.eigh" in info.value.hint


def singular_inv(a):
    return np.linalg.inv(a)


def test_singular_matrix_raises_numpys_error():
    with pytest.raises(np.linalg.LinAlgError):
        compiled(singular_inv)(np.zeros((2, 2)))
