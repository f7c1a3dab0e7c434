"""The loops that assemble a Jacobian from products with one basis vector at a time, written
in the compiled subset and parsed by passes/forward.py (never run as Python).

`push(v)` is the tangent of `out` for the tangent `v` of `x` (forward mode: one column per
number of x); `pull(e)` is the gradient with respect to x of `out` weighted by `e` (reverse
mode: one row per number of out); `transposed` gives J·v from a rule that gives Jᵀ·e.
`x` and `out` are trees (numbers and arrays in tuples, lists, dicts and records): the
Jacobian is built as one matrix over their numbers (`flat_x` and `flat`, their
`tree_ravel`s, made by the caller where inference reports a tree that is not one at the
user's line; `tree_unravel`) and handed
out as JAX does, a tree of out's structure whose leaves are trees of x's structure, each
block of shape `o.shape + xi.shape` and o's dtype (`jacobian_blocks`).  Each product is
written into its column or row of the matrix, in place.
"""

import numpy as np

from myir.ir.primitives import PRIMITIVES as _P

tree_ravel = _P["tree_ravel"]
tree_unravel = _P["tree_unravel"]
jacobian_blocks = _P["jacobian_blocks"]


def _basis(i, n):
    """The i-th of the n unit vectors."""
    return np.where(np.arange(n) == i, 1.0, 0.0)


def jacobian_columns(push, x, out, flat_x, flat):
    n = np.size(flat_x)
    m = np.size(flat)
    jac = np.zeros((m, n), flat.dtype)
    for i in range(n):
        jac[:, i] = tree_ravel(push(tree_unravel(x, _basis(i, n))))
    return jacobian_blocks(out, x, jac)


def jacobian_rows(pull, x, out, flat_x, flat):
    n = np.size(flat_x)
    m = np.size(flat)
    jac = np.zeros((m, n), flat.dtype)
    for j in range(m):
        jac[j, :] = tree_ravel(pull(tree_unravel(out, _basis(j, m))))
    return jacobian_blocks(out, x, jac)


def transposed(pull_dot, out):
    """J·v from a rule that gives Jᵀ·e: `pull_dot(e)` is <Jᵀ·e, v>, so the tangent's k-th
    number is pull_dot of the k-th unit vector (myir.custom_grad under forward mode)."""
    flat = tree_ravel(out)
    m = np.size(flat)
    t = np.zeros(m, flat.dtype)
    for k in range(m):
        t[k] = pull_dot(tree_unravel(out, _basis(k, m)))
    return tree_unravel(out, t)
