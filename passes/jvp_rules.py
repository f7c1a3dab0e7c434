"""Tangent rules of the primitives that are neither linear nor elementwise functions of one
operand, written in the compiled subset (see passes/forward.py for the other kinds).

This module is never run: the frontend parses each `jvp_<primitive>(inputs..., out,
tangents...)` into a graph returning the tangent of the output.  The rules are graphs of
primitives, so forward mode can be applied again to them, and reverse mode over them
(a Hessian is forward mode over a gradient; the gradient's rules use these primitives).
Conventions at kinks are those of passes/grad_rules.py, so that J·v here equals the
gradient there: ties of maximum/minimum share half, max/min reductions share equally; and
its strong zero: a tangent that is exactly 0 contributes exactly 0 through a slope that is
inf or nan (`strong_zero`, applied to what multiplies that slope).
"""

import numpy as np

from myir.ir.primitives import PRIMITIVES as _P
from passes.grad_rules import _mT, _off_diagonal_reciprocal, clipped

reduce_grad = _P["reduce_grad"]
zeros = _P["grad_zeros"]
tensordot_grad = _P["tensordot_grad"]
argsort = _P["argsort"]      # the primitives, as in passes/grad_rules.py
cumsum = _P["cumsum"]
ieee_truediv = _P["ieee_truediv"]
ieee_pow = _P["ieee_pow"]
strong_zero = _P["strong_zero"]
stack_pop = _P["stack_pop"]
stack_empty = _P["stack_empty"]


# ------------------------------------------------------------------ arithmetic

def jvp_truediv(x, y, out, dx, dy):
    # dx / y - dy * x / y**2 divided by y once, where x / y divided: it cannot raise where
    # the forward ran (y * y underflows to 0 for |y| < 1e-162)
    t = _quotient_tangent(out, dx, dy)
    return strong_zero(t, t / y)


def jvp_ieee_truediv(x, y, out, dx, dy):
    t = _quotient_tangent(out, dx, dy)
    return strong_zero(t, ieee_truediv(t, y))


def _quotient_tangent(out, dx, dy):
    """What the slope 1 / y of x / y multiplies: dx - dy * out (out inf where an array was
    divided by 0)."""
    return dx - strong_zero(dy, dy * out)


def jvp_pow(x, y, out, dx, dy):
    return strong_zero(dx, dx * y * ieee_pow(x, y - (y != 0))) \
        + dy * out * np.log(np.where(x > 0, x, 1.0))


jvp_np_divide = jvp_ieee_truediv      # numpy divides by 0 as IEEE does (inf)
jvp_power = jvp_pow
jvp_ieee_pow = jvp_pow
jvp_math_pow = jvp_pow


def jvp_mod(x, y, out, dx, dy):
    return dx - dy * ((x - out) / y)


jvp_np_remainder = jvp_mod


def jvp_builtin_divmod(x, y, out, dx, dy):
    """The quotient is piecewise constant: the remainder's tangent only."""
    return (zeros(out[0]), jvp_mod(x, y, out[1], dx, dy))


def jvp_stack_pop(s, out, ds):
    # a stack's tangent is a stack of its items' tangents, and EMPTY_STACK is its zero
    # (passes/grad_rules.py): a zero tangent pops a zero item
    if stack_empty(ds):
        return (zeros(out[0]), ds)
    return stack_pop(ds)


def _share(first, tie, d):
    return np.where(first, d, np.where(tie, d * 0.5, zeros(d)))


def jvp_maximum(x, y, out, dx, dy):
    return _share(x > y, x == y, dx) + _share(y > x, x == y, dy)


def jvp_minimum(x, y, out, dx, dy):
    return _share(x < y, x == y, dx) + _share(y < x, x == y, dy)


def jvp_arctan2(x, y, out, dx, dy):
    d = x * x + y * y
    return strong_zero(dx, ieee_truediv(dx * y, d)) - strong_zero(dy, ieee_truediv(dy * x, d))


jvp_math_atan2 = jvp_arctan2


def jvp_hypot(x, y, out, dx, dy):
    return strong_zero(dx, ieee_truediv(dx * x, out)) + strong_zero(dy, ieee_truediv(dy * y, out))


jvp_math_hypot = jvp_hypot


def jvp_logaddexp(x, y, out, dx, dy):
    return dx * np.exp(x - out) + dy * np.exp(y - out)


def jvp_logaddexp2(x, y, out, dx, dy):
    return dx * np.exp2(x - out) + dy * np.exp2(y - out)


def jvp_clip(x, lo, hi, out, dx, dlo, dhi):
    return np.where(clipped(x, lo, hi), zeros(dx), dx)


# ------------------------------------------------------------------ reductions, scans, sorting

def jvp_prod(x, axis, keepdims, out, dx, daxis, dkeepdims):
    return np.sum(dx * reduce_grad(out, x, axis, keepdims) / x, axis=axis, keepdims=keepdims)


def _extremum(x, axis, keepdims, out, dx):
    hit = np.where(x == reduce_grad(out, x, axis, keepdims), zeros(x) + 1.0, zeros(x))
    return np.sum(dx * hit, axis=axis, keepdims=keepdims) / np.sum(hit, axis=axis,
                                                                    keepdims=keepdims)


def jvp_max(x, axis, keepdims, out, dx, daxis, dkeepdims):
    return _extremum(x, axis, keepdims, out, dx)


def jvp_min(x, axis, keepdims, out, dx, daxis, dkeepdims):
    return _extremum(x, axis, keepdims, out, dx)


def jvp_cumprod(x, axis, out, dx, daxis):
    """For x without zeros, as the gradient rule."""
    return out * cumsum(dx / x, axis)


def jvp_sort(x, axis, out, dx, daxis):
    if axis is None:
        return np.take_along_axis(np.reshape(dx, -1),
                                  argsort(np.reshape(x, -1), -1, True), -1)
    return np.take_along_axis(dx, argsort(x, axis, True), axis)


def jvp_tensordot_grad(a, b, axes, dout, out, da, db, daxes, ddout):
    """The gradients (ga, gb) of <dout, tensordot(a, b, axes)>: ga is linear in b and dout
    (not a function of a), gb in a and dout."""
    ga, gb = tensordot_grad(a, b, axes, ddout)
    return (ga + tensordot_grad(a, db, axes, dout)[0], gb + tensordot_grad(da, b, axes, dout)[1])


# ------------------------------------------------------------------ linear algebra

def jvp_linalg_solve(a, b, out, da, db):
    return np.linalg.solve(a, db - np.matmul(da, out))


def jvp_linalg_inv(a, out, da):
    return -np.matmul(out, np.matmul(da, out))


def jvp_linalg_det(a, out, da):
    return out * np.sum(_mT(np.linalg.inv(a)) * da, axis=(-2, -1))


def jvp_linalg_slogdet(a, out, da):
    return (zeros(out[0]), np.sum(_mT(np.linalg.inv(a)) * da, axis=(-2, -1)))


def jvp_linalg_cholesky(a, out, da):
    """L Phi(L^-1 S L^-T), Phi the lower triangle with half the diagonal, S the symmetric
    part of dA (cholesky reads one triangle; its gradient rule is symmetric likewise)."""
    i = np.arange(np.shape(a)[-1])
    half_lower = np.where(i[:, None] > i[None, :], 1.0, np.where(i[:, None] == i[None, :], 0.5, 0.0))
    s = 0.5 * (da + _mT(da))
    inner = np.linalg.solve(out, _mT(np.linalg.solve(out, s)))
    return np.matmul(out, inner * half_lower)


def jvp_linalg_eigh(a, UPLO, out, da, dUPLO):
    """dw = diag(Vᵀ S V), dV = V (F ∘ Vᵀ S V) with F_ij = 1 / (w_j - w_i) off the diagonal,
    S the symmetric part of dA (the gradient rule is symmetric likewise)."""
    w, v = out
    s = 0.5 * (da + _mT(da))
    inner = np.matmul(_mT(v), np.matmul(s, v))
    f = _off_diagonal_reciprocal(np.expand_dims(w, -2) - np.expand_dims(w, -1))
    return (np.sum(v * np.matmul(s, v), axis=-2), np.matmul(v, f * inner))


def jvp_linalg_qr(a, mode, out, da, dmode):
    """mode='reduced' with at least as many rows as columns, as the gradient rule: with
    C = Qᵀ dA R⁻¹ and Ω = L - Lᵀ (L the strictly lower triangle of C), dR = (C - Ω) R and
    dQ = dA R⁻¹ - Q (C - Ω)."""
    if mode != "reduced" or np.shape(a)[-2] < np.shape(a)[-1]:
        raise ValueError("the tangent of numpy.linalg.qr needs mode='reduced' and a matrix "
                         "with at least as many rows as columns")
    q, r = out
    da_rinv = _mT(np.linalg.solve(_mT(r), _mT(da)))
    c = np.matmul(_mT(q), da_rinv)
    i = np.arange(np.shape(r)[-1])
    lower = np.where(i[:, None] > i[None, :], c, 0.0)
    upper = c - (lower - _mT(lower))
    return (da_rinv - np.matmul(q, upper), np.matmul(upper, r))


def jvp_linalg_svd(a, full_matrices, compute_uv, out, da, dfull_matrices, dcompute_uv):
    """Distinct nonzero singular values; full_matrices=False unless a is square, as the
    gradient rule.  With dS = Uᵀ dA V: ds = diag(dS), dU = U (F ∘ (dS s + (dS s)ᵀ)),
    dV = V (F ∘ (s dS + (s dS)ᵀ)), F_ij = 1 / (s_j² - s_i²) off the diagonal, plus the
    parts of dA outside U's (or V's) span for a tall (or wide) matrix."""
    if not compute_uv:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return np.sum(u * np.matmul(da, _mT(vh)), axis=-2)
    m, n = np.shape(a)[-2], np.shape(a)[-1]
    if full_matrices and m != n:
        raise ValueError("the tangent of numpy.linalg.svd of a non-square matrix needs "
                         "full_matrices=False")
    u, s, vh = out
    v = _mT(vh)
    row = np.expand_dims(s, -2)
    ds_full = np.matmul(_mT(u), np.matmul(da, v))
    f = _off_diagonal_reciprocal(row * row - np.expand_dims(s * s, -1))
    dss = ds_full * row
    sds = np.expand_dims(s, -1) * ds_full
    du = np.matmul(u, f * (dss + _mT(dss)))
    dv = np.matmul(v, f * (sds + _mT(sds)))
    if m > np.shape(s)[-1]:
        dav = np.matmul(da, v)
        du = du + (dav - np.matmul(u, np.matmul(_mT(u), dav))) / row
    if n > np.shape(s)[-1]:
        dahu = np.matmul(_mT(da), u)
        dv = dv + (dahu - np.matmul(v, np.matmul(vh, dahu))) / row
    return (du, np.sum(u * np.matmul(da, v), axis=-2), _mT(dv))
