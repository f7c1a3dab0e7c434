"""The loops that assemble a Jacobian from products with one basis vector at a time, written
in the compiled subset and parsed by passes/forward.py (never run as Python).

`push(v)` is the tangent of `out` for the tangent `v` of `x` (forward mode: one column per
element of x); `pull(e)` is the gradient with respect to x of `out` weighted by `e` (reverse
mode: one row per element of out); `transposed` gives J·v from a rule that gives Jᵀ·e.  The Jacobian has out's shape, then x's, as in JAX, and
out's dtype.  Each product lands in its column or row with `np.where`, which copies values
exactly.
"""

import numpy as np

from myir.ir.primitives import PRIMITIVES as _P

grad_cast = _P["grad_cast"]


def _basis(i, n, like):
    """The i-th of the n unit vectors, shaped and typed like `like`."""
    return grad_cast(np.reshape(np.where(np.arange(n) == i, 1.0, 0.0), np.shape(like)), like)


def jacobian_columns(push, x, out):
    n = np.size(x)
    m = np.size(out)
    jac = np.zeros((m, n), np.asarray(out).dtype)
    for i in range(n):
        column = np.reshape(push(_basis(i, n, x)), (m, 1))
        jac = np.where(np.arange(n) == i, column, jac)
    return np.reshape(jac, np.shape(out) + np.shape(x))


def jacobian_rows(pull, x, out):
    n = np.size(x)
    m = np.size(out)
    jac = np.zeros((m, n), np.asarray(out).dtype)
    for j in range(m):
        row = np.reshape(pull(_basis(j, m, out)), (1, n))
        jac = np.where(np.reshape(np.arange(m) == j, (m, 1)), row, jac)
    return np.reshape(jac, np.shape(out) + np.shape(x))


def transposed(pull_dot, out):
    """J·v from a rule that gives Jᵀ·e: `pull_dot(e)` is <Jᵀ·e, v>, so the tangent's k-th
    element is pull_dot of the k-th unit vector (myir.custom_grad under forward mode)."""
    m = np.size(out)
    t = np.zeros(m, np.asarray(out).dtype)
    for k in range(m):
        t = np.where(np.arange(m) == k, pull_dot(_basis(k, m, out)), t)
    return grad_cast(np.reshape(t, np.shape(out)), out)
