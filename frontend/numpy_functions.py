"""numpy functions that are compositions of primitives rather than primitives, written in the
compiled subset.  This module is never run: `np.NAME` resolves to the parsed graph of the
function of that name (frontend/resolve.py), so it is called, passed around, inlined and
differentiated like a user's function.

`np.shape(a)`, `np.ndim(a)` and `np.size(a)` are not the `.shape` / `.ndim` / `.size`
attributes: numpy converts what has no such attribute (a Python scalar, a tuple) with
`np.asarray`, so `np.shape(2.0) == ()` where `(2.0).shape` raises AttributeError.  The
primitives implement the attributes, so the functions go through a value that has them.
That value is `np.zeros_like(a, dtype=np.bool_)`, which numpy builds from its argument the way
`np.asarray` would, rather than `np.asarray(a)` or a view such as `np.expand_dims(a, 0)`:
those are differentiable, so in a differentiated function (the gradient rules themselves use
`np.shape(x)`) the AD would backpropagate zeros through them that the optimizer does not
remove, while `zeros_like` has a zero gradient by definition.  Once inference knows the shape
(the usual case), the optimizer folds the attribute to a constant and the `zeros_like` is
dead code; only an array whose shape depends on data pays for a boolean array of its size.
"""

import numpy as np


def shape(a):
    return _like(a).shape


def ndim(a):
    return _like(a).ndim


def size(a):
    return _like(a).size


def _like(a):
    return np.zeros_like(a, dtype=np.bool_)


# ------------------------------------------ linear algebra, contractions, interpolation
# Written as numpy writes them (numpy/linalg/_linalg.py, numpy/_core/numeric.py), operation
# for operation where that fixes the rounding, so the values are numpy's to the last bit.


def norm(x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm.  Its gradient is the composition's: at x = 0 the 2-norm's is nan
    (sqrt's infinite slope times 0), as in JAX; the 1- and inf-norms' follow abs and max
    (0 at 0, ties share)."""
    x = x * 1.0  # numpy computes in floating point
    nd = np.ndim(x)
    if axis is None:
        if ord is None or (nd == 2 and (ord == "fro" or ord == "f")) or (nd == 1 and ord == 2):
            flat = np.reshape(x, -1)
            r = np.sqrt(np.dot(flat, flat))
            if keepdims:
                return np.reshape(r, (1,) * nd)
            return r
        if nd == 1:
            return _vector_norm(x, ord, 0, keepdims)
        if nd == 2:
            return _matrix_norm(x, ord, 0, 1, keepdims)
        raise ValueError("Improper number of dimensions to norm.")
    if np.ndim(axis) == 0:
        return _vector_norm(x, ord, axis, keepdims)
    if len(axis) == 1:
        (k,) = axis  # unpacked, not indexed: the gradient's code keeps this branch for an int
        return _vector_norm(x, ord, k, keepdims)
    r, c = axis
    return _matrix_norm(x, ord, r % nd, c % nd, keepdims)


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims))
    if ord == np.inf:
        return np.max(np.abs(x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return np.min(np.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return np.sum((x != 0).astype(x.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return np.sum(np.abs(x), axis=axis, keepdims=keepdims)
    if ord == "fro" or ord == "f" or ord == "nuc":
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    r = np.sum(np.abs(x) ** ord, axis=axis, keepdims=keepdims)
    return r ** (1.0 / ord)


def _matrix_norm(x, ord, r, c, keepdims):
    if r == c:
        raise ValueError("Duplicate axes given.")
    if ord == 2 or ord == -2 or ord == "nuc":
        s = np.linalg.svd(_to_last_two(x, r, c), compute_uv=False)
        if ord == 2:
            out = np.max(s, axis=-1)
        elif ord == -2:
            out = np.min(s, axis=-1)
        else:
            out = np.sum(s, axis=-1)
    elif ord == 1 or ord == -1:
        if c > r:
            c = c - 1
        if ord == 1:
            out = np.max(np.sum(np.abs(x), axis=r), axis=c)
        else:
            out = np.min(np.sum(np.abs(x), axis=r), axis=c)
    elif ord == np.inf or ord == -np.inf:
        if r > c:
            r = r - 1
        if ord == np.inf:
            out = np.max(np.sum(np.abs(x), axis=c), axis=r)
        else:
            out = np.min(np.sum(np.abs(x), axis=c), axis=r)
    elif ord is None or ord == "fro" or ord == "f":
        out = np.sqrt(np.sum(x * x, axis=(r, c)))
    else:
        raise ValueError("Invalid norm order for matrices.")
    if keepdims:
        return np.expand_dims(np.expand_dims(out, min(r, c)), max(r, c))
    return out


def _to_last_two(x, r, c):
    """x with axes r and c moved to the end, the others in order (np.moveaxis)."""
    perm = ()
    for k in range(np.ndim(x)):
        if k != r and k != c:
            perm = perm + (k,)
    return np.transpose(x, perm + (r, c))


def matrix_power(a, n):
    """np.linalg.matrix_power: numpy's sequence of products (binary decomposition of n)."""
    if n == 0:
        return np.zeros_like(a) + np.eye(np.shape(a)[-1]).astype(a.dtype)
    if n < 0:
        a = np.linalg.inv(a)
        n = -n
    if n == 1:
        return a
    if n == 2:
        return np.matmul(a, a)
    if n == 3:
        return np.matmul(np.matmul(a, a), a)
    z = a
    while n % 2 == 0:
        z = np.matmul(z, z)
        n = n // 2
    result = z
    n = n // 2
    while n > 0:
        z = np.matmul(z, z)
        if n % 2 == 1:
            result = np.matmul(result, z)
        n = n // 2
    return result


def kron(a, b):
    """np.kron of scalars, vectors and matrices: the products of every pair of elements."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    if np.ndim(a) == 1 and np.ndim(b) == 1:
        return np.reshape(a[:, None] * b[None, :], -1)
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise ValueError("np.kron of arrays of more than 2 dimensions is not supported")
    a2 = np.reshape(a, (1, -1)) if np.ndim(a) == 1 else a
    b2 = np.reshape(b, (1, -1)) if np.ndim(b) == 1 else b
    m, n = np.shape(a2)
    p, q = np.shape(b2)
    return np.reshape(a2[:, None, :, None] * b2[None, :, None, :], (m * p, n * q))


def cross(a, b):
    """np.cross of 3-vectors (or 2-vectors: the z component) along the last axis."""
    na, nb = np.shape(a)[-1], np.shape(b)[-1]
    if na == 2 and nb == 2:
        return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    if na != 3 or nb != 3:
        raise ValueError("incompatible dimensions for cross product\n"
                         "(dimension must be 2 or 3)")
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1)


def interp(x, xp, fp, left=None, right=None):
    """np.interp: numpy's formula on the segment `searchsorted(xp, x, 'right') - 1` (the
    right-hand one at a knot, whose slope is then the gradient with respect to x, as in
    JAX); gradients flow to x, xp and fp."""
    n = np.shape(xp)[0]
    j = np.clip(np.searchsorted(xp, x, "right") - 1, 0, n - 2)
    slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])
    y = slope * (x - xp[j]) + fp[j]
    y = np.where(x == xp[n - 1], fp[n - 1], y)
    y = np.where(x > xp[n - 1], fp[n - 1] if right is None else right, y)
    y = np.where(x < xp[0], fp[0] if left is None else left, y)
    return y[()]
