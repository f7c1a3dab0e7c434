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

from myir.ir.primitives import PRIMITIVES

# The parts of an array cut like the arrays a concatenation was made of (the adjoint of
# np.concatenate): np.split's parts, whose gradient is the concatenation of theirs.
_split_like = PRIMITIVES["concat_grad"]
_slice = PRIMITIVES["make_slice"]     # slice(start, stop, step)


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


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """numpy's steps: the spacing times the mean of neighbouring values, summed along the
    axis (slices along it: numpy's sum of the same array)."""
    y = np.asarray(y)
    k = axis % np.ndim(y)
    if x is None:
        d = dx
    elif np.ndim(x) == 1:
        d = np.reshape(diff(x), (1,) * k + (-1,) + (1,) * (np.ndim(y) - k - 1))
    else:
        d = diff(x, axis=axis)
    at = (_slice(None, None, None),) * k
    ends = y[at + (_slice(1, None, None),)] + y[at + (_slice(None, -1, None),)]
    return np.sum(d * ends / 2.0, axis=axis)


def gradient(f, spacing=1.0, axis=None, edge_order=1):
    """np.gradient with one uniform spacing (compiled code has no *varargs): central
    differences inside, one-sided ones of numpy's edge order at the ends, along each axis (a
    tuple of them for several axes, as numpy)."""
    if np.ndim(spacing) != 0:
        raise NotImplementedError("np.gradient in compiled code takes one uniform spacing "
                                  "(a number), not coordinates")
    if edge_order != 1 and edge_order != 2:
        raise ValueError("'edge_order' greater than 2 not supported")
    x = np.asarray(f)
    if not _is_float(x.dtype):
        x = x.astype(np.float64)
    if np.ndim(x) == 1 or np.ndim(axis) == 0 and axis is not None:
        return _gradient_along(x, spacing, 0 if axis is None else axis, edge_order)
    axes = tuple(range(np.ndim(x))) if axis is None else _axes(axis, np.ndim(x))
    parts = ()
    for k in axes:
        parts = parts + (_gradient_along(x, spacing, k, edge_order),)
    return parts


def _gradient_along(x, dx, k, edge_order):
    """Along axis k, swapped first (the differences are elementwise: the same values)."""
    v = np.swapaxes(x, k, 0)
    if np.shape(v)[0] < edge_order + 1:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at "
                         "least (edge_order + 1) elements are required.")
    inner = (v[2:] - v[:-2]) / (2.0 * dx)
    if edge_order == 1:
        first = (v[1:2] - v[:1]) / dx
        last = (v[-1:] - v[-2:-1]) / dx
    else:
        first = -1.5 / dx * v[:1] + 2.0 / dx * v[1:2] + -0.5 / dx * v[2:3]
        last = 0.5 / dx * v[-3:-2] + -2.0 / dx * v[-2:-1] + 1.5 / dx * v[-1:]
    return np.swapaxes(np.concatenate((first, inner, last)).astype(x.dtype), 0, k)


def fix(x):
    return np.where(np.asarray(x) >= 0, np.floor(x), np.ceil(x))[()]


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    y = np.power(base, linspace(start, stop, num, endpoint, axis=axis))
    return y if dtype is None else y.astype(dtype)


def array_equal(a1, a2, equal_nan=False):
    x, y = np.asarray(a1), np.asarray(a2)
    if np.shape(x) != np.shape(y):
        return False
    same = x == y
    if equal_nan:
        same = same | (np.isnan(x) & np.isnan(y))
    return bool(np.all(same))


def digitize(x, bins, right=False):
    """numpy's steps: a search of the bins, increasing or decreasing."""
    side = "left" if right else "right"
    if np.all(bins[1:] >= bins[:-1]):
        return np.searchsorted(bins, x, side=side)
    if np.all(bins[1:] <= bins[:-1]):
        return len(bins) - np.searchsorted(bins[::-1], x, side=side)
    raise ValueError("bins must be monotonically increasing or decreasing")


def correlate(a, v, mode="valid"):
    """The convolution with v reversed (numpy's correlation of real vectors)."""
    return np.convolve(a, v[::-1], mode)


def isin(element, test_elements, assume_unique=False, invert=False):
    x = np.asarray(element)
    found = np.any(np.expand_dims(x, -1) == np.reshape(test_elements, (-1,)), axis=-1)
    return np.logical_not(found) if invert else found


def triu_indices(n, k=0, m=None):
    """The (row, column) indices of the upper triangle, row by row as numpy lists them."""
    return _triangle_indices(n, k, n if m is None else m, True)


def tril_indices(n, k=0, m=None):
    return _triangle_indices(n, k, n if m is None else m, False)


def _triangle_indices(n, k, m, upper):
    rows = ()
    cols = ()
    for i in range(n):
        for j in range(m):
            if (j - i >= k) if upper else (j - i <= k):
                rows = rows + (i,)
                cols = cols + (j,)
    return np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)


def item(a):
    """The one element as a Python number of the array's kind."""
    x = np.asarray(a)
    if np.size(x) != 1:
        raise ValueError("can only convert an array of size 1 to a Python scalar")
    one = np.reshape(x, ())
    if x.dtype == np.bool_:
        return bool(one)
    if _is_float(x.dtype):
        return float(one)
    return int(one)


def eigvalsh(a, UPLO="L"):
    return np.linalg.eigh(a, UPLO)[0]


def multi_dot(arrays):
    """np.linalg.multi_dot of two or three arrays, in numpy's order (for three, the pair
    whose product costs fewer multiplications first); a vector first is a row, a vector last
    a column, and their axes are dropped from the result, as numpy does."""
    n = len(arrays)
    if n < 2:
        raise ValueError("Expecting at least two arrays.")
    if n == 2:
        return np.dot(arrays[0], arrays[1])
    if n > 3:
        raise NotImplementedError("np.linalg.multi_dot in compiled code takes two or three "
                                  "arrays: write np.linalg.multi_dot([a, b, c]) @ d")
    first, last = np.ndim(arrays[0]), np.ndim(arrays[2])
    A = atleast_2d(arrays[0])
    B = arrays[1]
    C = arrays[2]
    if last == 1:
        C = np.transpose(atleast_2d(C))
    a0, a1b0 = np.shape(A)
    b1c0, c1 = np.shape(C)
    if a0 * b1c0 * (a1b0 + c1) < a1b0 * c1 * (a0 + b1c0):
        result = np.dot(np.dot(A, B), C)
    else:
        result = np.dot(A, np.dot(B, C))
    if first == 1 and last == 1:
        return result[0, 0]
    if first == 1 or last == 1:
        return np.ravel(result)
    return result


def kron(a, b):
    """np.kron: every product of an element of a and one of b, as numpy computes it (the
    operand of fewer dimensions given leading ones, the two interleaved)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.multiply(a, b)
    nd = max(np.ndim(a), np.ndim(b))
    sa = (1,) * (nd - np.ndim(a)) + np.shape(a)
    sb = (1,) * (nd - np.ndim(b)) + np.shape(b)
    spread_a, spread_b, shape = (), (), ()
    for k in range(nd):
        spread_a = spread_a + (sa[k], 1)
        spread_b = spread_b + (1, sb[k])
        shape = shape + (sa[k] * sb[k],)
    return np.reshape(np.multiply(np.reshape(a, spread_a), np.reshape(b, spread_b)), shape)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """np.cross of 2- and 3-vectors along an axis (two 2-vectors give the z component alone,
    a 0-d array for one pair).  A 2-vector's third component is zero (its second times
    False), so one formula serves every case: numpy's formulas for 2-vectors are it with
    the zero terms left out, the same values but for the sign of a zero (and a nan where a
    zero term meets an inf).  Few branches, each on shapes alone, and the components
    gathered by `take` (one primitive, where indexing along a computed axis builds its
    index tuple in the graph): a gradient differentiates every branch and every tuple
    (shapes are known only after), and each costs compile time."""
    if axis is not None:
        axisa, axisb, axisc = axis, axis, axis
    na, nb = np.shape(a)[axisa], np.shape(b)[axisb]
    if (na, nb) not in ((2, 2), (2, 3), (3, 2), (3, 3)):
        raise ValueError("incompatible dimensions for cross product\n"
                         "(dimension must be 2 or 3)")
    a0, a1, a2 = _take(a, 0, axisa), _take(a, 1, axisa), _take(a, na - 1, axisa) * (na == 3)
    b0, b1, b2 = _take(b, 0, axisb), _take(b, 1, axisb), _take(b, nb - 1, axisb) * (nb == 3)
    z = a0 * b1 - a1 * b0
    if (na, nb) == (2, 2):
        return np.asarray(z)
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, z), axis=axisc)


def interp(x, xp, fp, left=None, right=None, period=None):
    """np.interp: numpy's formula on the segment `searchsorted(xp, x, 'right') - 1` (the
    right-hand one at a knot, whose slope is then the gradient with respect to x, as in
    JAX); gradients flow to x, xp and fp.  With a period, numpy's reduction first: x and xp
    modulo the period, xp sorted, and its ends repeated one period away on either side."""
    if period is not None:
        if period == 0:
            raise ValueError("period must be a non-zero value")
        period = abs(period)
        x = np.asarray(x) % period
        xp = np.asarray(xp) % period
        order = _argsort(xp)
        xp = _take(xp, order)
        fp = _take(fp, order)
        xp = np.concatenate((xp[-1:] - period, xp, xp[0:1] + period))
        fp = np.concatenate((fp[-1:], fp, fp[0:1]))
        left, right = None, None
    n = np.shape(xp)[0]
    j = np.clip(np.searchsorted(xp, x, "right") - 1, 0, n - 2)
    slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])
    y = slope * (x - xp[j]) + fp[j]
    y = np.where(x == xp[n - 1], fp[n - 1], y)
    y = np.where(x > xp[n - 1], fp[n - 1] if right is None else right, y)
    y = np.where(x < xp[0], fp[0] if left is None else left, y)
    return y[()]


# ------------------------------------------------------------------ scans, sorting, gathers
# numpy's keywords on the primitives: `dtype` casts before the scan (numpy accumulates in
# that type) and after it (numpy accumulates small integers in int64; wrapped to the type,
# the sums are the same), every sorting kind sorts to the same values, take's modes map the
# indices.

_cumsum = PRIMITIVES["cumsum"]
_cumprod = PRIMITIVES["cumprod"]
_sort = PRIMITIVES["sort"]
_argsort = PRIMITIVES["argsort"]
_take = PRIMITIVES["take"]
_eye = PRIMITIVES["eye"]


def cumsum(a, axis=None, dtype=None):
    if dtype is None:
        return _cumsum(a, axis)
    return _cumsum(np.asarray(a).astype(dtype), axis).astype(dtype)


def cumprod(a, axis=None, dtype=None):
    if dtype is None:
        return _cumprod(a, axis)
    return _cumprod(np.asarray(a).astype(dtype), axis).astype(dtype)


def _sortable(a, kind, order):
    """a, once numpy's sorting keywords are checked."""
    if order is not None:
        raise ValueError("Cannot specify order when the array has no fields.")
    if kind is not None and kind not in ("quicksort", "mergesort", "heapsort", "stable"):
        raise ValueError("sort kind must be one of 'quick', 'heap', or 'stable' (got '" + kind +
                         "')")
    return a


def sort(a, axis=-1, kind=None, order=None):
    return _sort(_sortable(a, kind, order), axis)


def argsort(a, axis=-1, kind=None, order=None):
    return _argsort(_sortable(a, kind, order), axis, kind == "mergesort" or kind == "stable")


def take(a, indices, axis=None, mode="raise"):
    if mode == "raise":
        return _take(a, indices, axis)
    n = np.size(a) if axis is None else np.shape(a)[axis]
    if mode == "wrap":
        return _take(a, np.asarray(indices) % n, axis)
    if mode == "clip":
        return _take(a, np.clip(np.asarray(indices), 0, n - 1), axis)
    raise ValueError("Use one of 'clip', 'raise', or 'wrap' for clip mode")


# ------------------------------------------------------------------ reductions
# Each follows numpy's own implementation step by step (numpy/_core/_methods.py and
# function_base.py), so the results agree to the last bit.


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=True):
    """numpy's _var: the mean subtracted, squares summed over the count less ddof; with
    `where`, of the elements kept (counted per reduced row)."""
    x = _float_array(a, dtype)
    if where is not True:
        kept = np.broadcast_to(where, np.shape(x))
        count = np.sum(kept, axis=axis, keepdims=True)
        mean = np.divide(np.sum(np.where(kept, x, 0), axis=axis, keepdims=True), count)
        d = np.where(kept, x - mean.astype(x.dtype), 0)
        dof = np.maximum(np.sum(kept, axis=axis, keepdims=keepdims) - ddof, 0)
        return np.divide(np.sum(d * d, axis=axis, keepdims=keepdims), dof).astype(x.dtype)[()]
    mean = np.sum(x, axis=axis, keepdims=True)
    count = np.size(x) // np.size(mean)
    d = x - mean / count
    return np.sum(d * d, axis=axis, keepdims=keepdims) / max(count - ddof, 0)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=True):
    return np.sqrt(var(a, axis, dtype, None, ddof, keepdims, where))


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keepdims)
        scale = np.size(a) / np.size(avg) + np.zeros_like(avg)
    else:
        x = np.asarray(a)
        w = np.asarray(weights)
        if np.ndim(w) == 1 and np.ndim(x) > 1:
            w = np.swapaxes(np.reshape(w, (1,) * (np.ndim(x) - 1) + np.shape(w)), -1, axis)
        scale = np.sum(w + np.zeros_like(x), axis=axis, keepdims=keepdims)
        avg = np.sum(x * w, axis=axis, keepdims=keepdims) / scale
    if returned:
        return avg, scale
    return avg


def ptp(a, axis=None, keepdims=False):
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


def any(a, axis=None, keepdims=False):
    return np.sum(np.asarray(a) != 0, axis=axis, keepdims=keepdims) > 0


def all(a, axis=None, keepdims=False):
    return np.sum(np.asarray(a) == 0, axis=axis, keepdims=keepdims) == 0


def count_nonzero(a, axis=None, keepdims=False):
    return np.sum(np.asarray(a) != 0, axis=axis, keepdims=keepdims)


# ------------------------------------------------------------------ elementwise


def sinc(x):
    y = np.pi * np.where(x == 0, 1.0e-20, x)
    return np.sin(y) / y


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    a = np.asarray(x)
    if not _is_float(a.dtype):
        return x
    big = _largest(a.dtype)
    hi = big if posinf is None else posinf
    lo = -big if neginf is None else neginf
    y = np.where(np.isnan(a), nan, np.where(a == np.inf, hi, np.where(a == -np.inf, lo, a)))
    return y.astype(a.dtype)


def _largest(dtype):
    if dtype == np.float32:
        return 3.4028234663852886e38
    if dtype == np.float16:
        return 65504.0
    return 1.7976931348623157e308


# ------------------------------------------------------------------ products


def outer(a, b):
    return np.multiply(np.reshape(a, (-1, 1)), np.reshape(b, (1, -1)))


def inner(a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.multiply(a, b)
    if np.ndim(b) == 1:
        return np.dot(a, b)
    return np.dot(a, np.swapaxes(b, -1, -2))


def vdot(a, b):
    return np.dot(np.reshape(a, (-1,)), np.reshape(b, (-1,)))


# ------------------------------------------------------------------ shapes and layout


def ravel(a):
    return np.reshape(a, (-1,))


def atleast_1d(a):
    x = np.asarray(a)
    if np.ndim(x) == 0:
        return np.reshape(x, (1,))
    return x


def atleast_2d(a):
    x = np.asarray(a)
    if np.ndim(x) == 0:
        return np.reshape(x, (1, 1))
    if np.ndim(x) == 1:
        return np.reshape(x, (1,) + np.shape(x))
    return x


def atleast_3d(a):
    x = np.asarray(a)
    if np.ndim(x) == 0:
        return np.reshape(x, (1, 1, 1))
    if np.ndim(x) == 1:
        return np.reshape(x, (1,) + np.shape(x) + (1,))
    if np.ndim(x) == 2:
        return np.reshape(x, np.shape(x) + (1,))
    return x


def moveaxis(a, source, destination):
    n = np.ndim(a)
    src = _axes(source, n)
    dst = _axes(destination, n)
    order = ()
    for i in range(n):
        if not _contains(src, i):
            order = order + (i,)
    for k in _argsort_ints(dst):
        order = order[:dst[k]] + (src[k],) + order[dst[k]:]
    return np.transpose(a, order)


def _contains(t, v):
    found = False
    for item in t:
        found = found or item == v
    return found


def _argsort_ints(t):
    """The positions of the ints of t in increasing order of their values."""
    order = ()
    for v in range(max(t + (-1,)) + 1):
        for k in range(len(t)):
            if t[k] == v:
                order = order + (k,)
    return order


def _axes(axis, n):
    """An int or a tuple of ints as a tuple of axes in 0..n-1."""
    if np.ndim(axis) == 0:
        axis = (axis,)
    result = ()
    for a in axis:
        result = result + (a % n,)
    return result


def hstack(tup):
    if np.ndim(tup[0]) == 1:
        return np.concatenate(tup, axis=0)
    return np.concatenate(tup, axis=1)


# The stacks below make each part with a comprehension, whose list inference knows the
# length of (one item per part), so the result's shape is known.

def column_stack(tup):
    """1-d arrays as columns, 2-d ones as they are, side by side."""
    return np.concatenate([np.reshape(a, (-1, 1)) if np.ndim(a) < 2 else a for a in tup],
                          axis=1)


def dstack(tup):
    return np.concatenate([atleast_3d(a) for a in tup], axis=2)


def vstack(tup):
    """Each array made 2-d first (a vector is a row), as numpy: a matrix and a vector
    stack."""
    return np.concatenate([atleast_2d(a) for a in tup], axis=0)


def split(ary, indices_or_sections, axis=0):
    n = np.shape(ary)[axis]
    if np.ndim(indices_or_sections) == 0 and n % indices_or_sections:
        raise ValueError("array split does not result in an equal division")
    return array_split(ary, indices_or_sections, axis)


def array_split(ary, indices_or_sections, axis=0):
    """numpy's parts: n sections of sizes differing by at most one (the larger first), or
    the parts between the indices given; a list of arrays, as numpy returns."""
    n = np.shape(ary)[axis]
    if np.ndim(indices_or_sections) == 0:
        each, extras = n // indices_or_sections, n % indices_or_sections
        bounds = (0,)
        for k in range(indices_or_sections):
            bounds = bounds + (bounds[k] + each + (k < extras),)
    else:
        bounds = (0,) + _as_tuple(indices_or_sections) + (n,)
    shape = np.shape(ary)
    blocks = ()
    for k in range(len(bounds) - 1):
        size = max(min(bounds[k + 1], n) - min(bounds[k], n), 0)
        blocks = blocks + (np.zeros(shape[:axis % len(shape)] + (size,)
                                    + shape[axis % len(shape) + 1:], dtype=np.bool_),)
    return list(_split_like(blocks, axis, ary))


def hsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, 1 if np.ndim(ary) > 1 else 0)


def vsplit(ary, indices_or_sections):
    if np.ndim(ary) < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, 0)


def flip(m, axis=None):
    if axis is None:
        return np.reshape(np.reshape(m, (-1,))[::-1], np.shape(m))
    for a in _axes(axis, np.ndim(m)):
        m = np.swapaxes(np.swapaxes(m, 0, a)[::-1], 0, a)
    return m


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


def roll(a, shift, axis=None):
    if axis is None:
        return np.reshape(roll(np.reshape(a, (-1,)), shift, 0), np.shape(a))
    axes = _axes(axis, np.ndim(a))
    shifts = (shift,) * len(axes) if np.ndim(shift) == 0 else shift
    for k in range(len(axes)):
        x = np.swapaxes(a, 0, axes[k])
        n = np.shape(x)[0]
        s = shifts[k] % n if n else 0
        a = np.swapaxes(np.concatenate((x[n - s:], x[:n - s]), axis=0), 0, axes[k])
    return a


def repeat(a, repeats, axis=None):
    if axis is None:
        return _repeat_first(np.reshape(a, (-1,)), repeats)
    return np.swapaxes(_repeat_first(np.swapaxes(a, 0, axis), repeats), 0, axis)


def _repeat_first(x, repeats):
    """Each row `repeats` times; with one count per row (a list or tuple of ints), rows
    gathered by their index repeated as many times."""
    shape = np.shape(x)
    if np.ndim(repeats) == 1 and len(repeats) != 1:
        if len(repeats) != shape[0]:
            raise ValueError(f"operands could not be broadcast together with shape "
                             f"({shape[0]},) ({len(repeats)},)")
        index = ()
        for i in range(shape[0]):
            index = index + (i,) * repeats[i]
        return x[np.array(index, dtype=np.int64)]
    if np.ndim(repeats) == 1:
        repeats = repeats[0]
    x = np.broadcast_to(np.expand_dims(x, 1), (shape[0], repeats) + shape[1:])
    return np.reshape(x, (shape[0] * repeats,) + shape[1:])


def tile(A, reps):
    reps = (reps,) if np.ndim(reps) == 0 else _as_tuple(reps)
    x = np.asarray(A)
    n = max(len(reps), np.ndim(x))
    shape = (1,) * (n - np.ndim(x)) + np.shape(x)
    reps = (1,) * (n - len(reps)) + reps
    spread = ()
    tiled = ()
    result = ()
    for k in range(n):
        spread = spread + (1, shape[k])
        tiled = tiled + (reps[k], shape[k])
        result = result + (reps[k] * shape[k],)
    return np.reshape(np.broadcast_to(np.reshape(x, spread), tiled), result)


def pad(array, pad_width, mode="constant", constant_values=0):
    """numpy's modes 'constant', and 'edge', 'wrap', 'reflect', 'symmetric': the latter a
    gather along each axis by the index each padded position copies."""
    if mode not in ("constant", "edge", "wrap", "reflect", "symmetric"):
        raise NotImplementedError("np.pad in compiled code supports the modes 'constant', "
                                  "'edge', 'wrap', 'reflect' and 'symmetric'")
    x = np.asarray(array)
    n = np.ndim(x)
    widths = _pairs(pad_width, n)
    values = _pairs(constant_values, n)
    for k in range(n):
        before, after = widths[k]
        shape = np.shape(x)
        if mode != "constant":
            x = _take(x, _padded_index(shape[k], before, after, mode), k)
            continue
        side = shape[:k] + (before,) + shape[k + 1:]
        end = shape[:k] + (after,) + shape[k + 1:]
        x = np.concatenate((np.full(side, values[k][0], dtype=x.dtype), x,
                            np.full(end, values[k][1], dtype=x.dtype)), axis=k)
    return x


def _padded_index(length, before, after, mode):
    """The index along an axis of `length` that each of its padded positions copies."""
    i = np.arange(-before, length + after)
    if mode == "edge":
        return np.clip(i, 0, length - 1)
    if mode == "wrap":
        return i % length
    if mode == "reflect":       # mirrored about the end elements: a period of 2 (length - 1)
        if length == 1:
            return i * 0
        period = 2 * (length - 1)
        r = i % period
        return np.where(r < length, r, period - r)
    period = 2 * length         # symmetric: mirrored with the end elements repeated
    r = i % period
    return np.where(r < length, r, period - 1 - r)


def _pairs(v, n):
    """numpy's (before, after) per axis from an int, a pair, or a pair per axis."""
    if np.ndim(v) == 0:
        return ((v, v),) * n
    if np.ndim(v) == 1:
        if len(v) == 1:
            return ((v[0], v[0]),) * n
        return ((v[0], v[1]),) * n
    if len(v) == 1:
        return ((v[0][0], v[0][1]),) * n
    return _as_tuple(v)


def _as_tuple(v):
    result = ()
    for item in v:
        result = result + (item,)
    return result


def diagonal(a, offset=0, axis1=0, axis2=1):
    x = moveaxis(a, (axis1, axis2), (-2, -1))
    rows = np.shape(x)[-2]
    cols = np.shape(x)[-1]
    n = max(min(rows + min(offset, 0), cols - max(offset, 0)), 0)
    i = np.arange(n) - min(offset, 0)
    return x[..., i, i + offset]


def trace(a, offset=0, axis1=0, axis2=1, dtype=None):
    d = diagonal(a, offset, axis1, axis2)
    return np.sum(d if dtype is None else d.astype(dtype), axis=-1)


def diag(v, k=0):
    if np.ndim(v) == 2:
        return diagonal(v, k)
    x = np.asarray(v)
    n = np.shape(x)[0] + abs(k)
    full = np.concatenate((x, np.zeros(abs(k), dtype=x.dtype)))
    i = np.reshape(np.arange(n), (-1, 1))
    j = np.reshape(np.arange(n), (1, -1))
    along = np.reshape(full, (-1, 1)) if k >= 0 else np.reshape(full, (1, -1))
    return np.where(j - i == k, along, np.zeros(1, dtype=x.dtype))


def triu(m, k=0):
    return np.where(_lower_mask(m, k - 1), np.zeros(1, dtype=np.asarray(m).dtype), m)


def tril(m, k=0):
    return np.where(_lower_mask(m, k), m, np.zeros(1, dtype=np.asarray(m).dtype))


def _lower_mask(m, k):
    """Where column - row <= k over m's last two axes."""
    return _offsets(np.shape(m)[-2], np.shape(m)[-1]) <= k


def _offsets(rows, cols):
    """column - row over a grid of rows x cols."""
    return np.reshape(np.arange(cols), (1, -1)) - np.reshape(np.arange(rows), (-1, 1))


def tri(N, M=None, k=0, dtype=None):
    return (_offsets(N, N if M is None else M) <= k).astype(
        np.float64 if dtype is None else dtype)


def eye(N, M=None, k=0, dtype=None, order="C"):
    """The square identity is the primitive; other shapes and diagonals are ones where
    column - row is k."""
    if M is None and k == 0:
        return _eye(N, dtype)
    return (_offsets(N, N if M is None else M) == k).astype(
        np.float64 if dtype is None else dtype)


def rot90(m, k=1, axes=(0, 1)):
    """numpy's steps: k quarter turns from the first axis towards the second, as flips of
    the axes and a swap of the two."""
    turns = k % 4
    if turns == 0:
        return np.copy(m)
    if turns == 2:
        return flip(flip(m, axes[0]), axes[1])
    if turns == 1:
        return np.swapaxes(flip(m, axes[1]), axes[0], axes[1])
    return flip(np.swapaxes(m, axes[0], axes[1]), axes[1])


# ------------------------------------------------------------------ creation


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    div = num - 1 if endpoint else num
    delta = stop - start
    step = delta / div if div > 0 else np.nan
    y = np.arange(0, num) * 1.0
    if div > 0 and step != 0:
        y = y * step + start
    elif div > 0:
        y = y / div * delta + start
    else:
        y = y * delta + start
    if endpoint and num > 1:
        y = np.concatenate((y[:-1], np.asarray(stop, dtype=y.dtype)[None]))
    if dtype is not None:
        y = y.astype(dtype)
    if retstep:
        return y, step
    return y


def identity(n, dtype=None):
    return _eye(n, np.float64 if dtype is None else dtype)


def full_like(a, fill_value, dtype=None):
    like = np.zeros_like(a, dtype=dtype)
    return np.full(np.shape(like), fill_value, dtype=like.dtype)


# ------------------------------------------------------------------ helpers


def _float_array(a, dtype):
    """numpy's var/std operand: a float array (ints computed in float64)."""
    x = np.asarray(a)
    if dtype is not None:
        return x.astype(dtype)
    if _is_float(x.dtype):
        return x
    return x.astype(np.float64)


def _is_float(dtype):
    return dtype == np.float64 or dtype == np.float32 or dtype == np.float16


# ------------------------------------------------------------------ more of numpy's API


def diff(a, n=1, axis=-1):
    x = np.swapaxes(np.asarray(a), 0, axis)
    for _ in range(n):
        x = x[1:] - x[:-1]
    return np.swapaxes(x, 0, axis)


def append(arr, values, axis=None):
    if axis is None:
        return np.concatenate((np.reshape(arr, (-1,)), np.reshape(values, (-1,))))
    return np.concatenate((arr, values), axis=axis)


def median(a, axis=None, keepdims=False):
    """The middle of the sorted values (the mean of the two middle ones for an even count);
    nan where a value is nan, as numpy.  Along an axis: the axis moved last, each row sorted
    by its argsort."""
    x = np.asarray(a)
    if axis is None:
        x = np.reshape(x, (-1,))
        rows = x[_argsort(x)]
    else:
        x = np.moveaxis(x, axis, -1)
        order = _argsort(x, -1)
        rows = np.sum(np.where(np.expand_dims(order, -1) == np.arange(np.shape(x)[-1]),
                               np.expand_dims(x, -2), 0.0), axis=-1)
    n = np.shape(rows)[-1]
    middle = rows[..., (n - 1) // 2:n // 2 + 1]
    m = np.mean(middle, axis=-1)
    m = np.where(np.isnan(rows[..., -1]), np.nan, m)[()]   # [()]: a 0-d result is a scalar
    if keepdims:
        if axis is None:
            return np.reshape(m, (1,) * np.ndim(a))
        return np.expand_dims(m, axis)
    return m


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    x = np.asarray(a)
    y = np.asarray(b)
    close = np.abs(x - y) <= atol + rtol * np.abs(y)
    close = np.where(np.isfinite(y), close, x == y)
    if equal_nan:
        close = np.where(np.isnan(x), np.isnan(y), close)
    return close


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(np.all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))


def logical_and(x1, x2):
    return (np.asarray(x1) != 0) & (np.asarray(x2) != 0)


def logical_or(x1, x2):
    return (np.asarray(x1) != 0) | (np.asarray(x2) != 0)


def logical_xor(x1, x2):
    return (np.asarray(x1) != 0) ^ (np.asarray(x2) != 0)


def logical_not(x):
    return np.asarray(x) == 0


def deg2rad(x):
    return np.multiply(x, np.pi / 180.0)


def rad2deg(x):
    if np.asarray(x).dtype == np.float32:   # numpy's float32 loop divides in float32
        return np.multiply(x, np.float32(180.0) / np.float32(np.pi))
    return np.multiply(x, 180.0 / np.pi)


def empty_like(a, dtype=None):
    return np.zeros_like(a, dtype=dtype)


def less(x1, x2):
    return np.asarray(x1) < x2


def less_equal(x1, x2):
    return np.asarray(x1) <= x2


def greater(x1, x2):
    return np.asarray(x1) > x2


def greater_equal(x1, x2):
    return np.asarray(x1) >= x2


def equal(x1, x2):
    return np.asarray(x1) == x2


def not_equal(x1, x2):
    return np.asarray(x1) != x2


def round(a, decimals=0):
    """numpy's steps: rint, after scaling by 10 ** decimals (a Python float, as numpy's C
    code has it) for other decimals; integers are returned as they are for decimals >= 0."""
    if not _is_float(np.asarray(a).dtype) and decimals >= 0:
        return a
    if decimals == 0:
        return np.rint(a)
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        return np.rint(np.multiply(a, scale)) / scale
    return np.rint(np.true_divide(a, scale)) * scale


around = round


def fmod(x1, x2):
    """C's fmod: the remainder with x1's sign, where numpy's remainder takes x2's.  For
    operands of one sign the two are the same (and exact), so: |x1|'s remainder by |x2|,
    negated where x1 has its sign bit (-0.0 too)."""
    m = np.remainder(abs(x1), abs(x2))   # abs, not np.abs: a Python float stays weak
    return np.where(np.signbit(x1), -m, m)[()]


# ------------------------------------------------ copies, signs, NaN-aware maxima and sums
# Compiled code never writes into an array another name sees, so a copy is np.array's.


def signbit(x):
    """Whether the sign bit is set, -0.0 included: arctan2(x, -1) is -pi for -0.0 and pi for
    +0.0, and has x's sign elsewhere."""
    return np.arctan2(x, -1.0) < 0


def copysign(x1, x2):
    return np.where(signbit(x2), -np.abs(x1), np.abs(x1))[()]


def copy(a):
    return np.array(a)


def positive(x):
    return +np.asarray(x)


def fabs(x):
    """Always a float: the int loops of np.abs are not np.fabs's."""
    return np.abs(np.asarray(x) * 1.0)


def float_power(x1, x2):
    """In float64 at least, whatever the operands' dtypes."""
    return np.power(np.asarray(x1, dtype=np.float64), np.asarray(x2, dtype=np.float64))


def fmax(x1, x2):
    """np.maximum, except that a NaN loses to a number; [()] makes a 0-d result numpy's
    scalar, as the ufunc returns it."""
    return np.where(np.isnan(x2), x1, np.where(np.isnan(x1), x2, np.maximum(x1, x2)))[()]


def fmin(x1, x2):
    return np.where(np.isnan(x2), x1, np.where(np.isnan(x1), x2, np.minimum(x1, x2)))[()]


def nansum(a, axis=None, keepdims=False):
    x = np.asarray(a)
    return np.sum(np.where(np.isnan(x), 0, x), axis=axis, keepdims=keepdims)


def nanmax(a, axis=None, keepdims=False):
    return _nan_extremum(np.max, -np.inf, a, axis, keepdims)


def nanmin(a, axis=None, keepdims=False):
    return _nan_extremum(np.min, np.inf, a, axis, keepdims)


def _nan_extremum(extremum, identity, a, axis, keepdims):
    """The extremum of the numbers, NaNs read as the reduction's identity; nan where there
    are none (numpy warns there)."""
    x = np.asarray(a)
    if not _is_float(x.dtype):
        return extremum(x, axis, keepdims)
    nan = np.isnan(x)
    r = extremum(np.where(nan, identity, x), axis, keepdims)
    return np.where(np.sum(np.logical_not(nan), axis=axis, keepdims=keepdims) == 0,
                    np.nan, r).astype(x.dtype)[()]


def nanmean(a, axis=None, keepdims=False):
    """numpy's steps: the sum of the numbers over their count, in the sum's dtype (nan where
    there are none)."""
    x = np.asarray(a)
    if not _is_float(x.dtype):
        return np.mean(x, axis=axis, keepdims=keepdims)
    total = nansum(x, axis=axis, keepdims=keepdims)
    count = np.sum(np.logical_not(np.isnan(x)), axis=axis, keepdims=keepdims)
    return np.divide(total, count).astype(x.dtype)[()]


def heaviside(x1, x2):
    """0 below 0, x2 at 0, 1 above, NaN for NaN; a float (the 0.0 and 1.0 make an int x1 and
    x2 float64, as numpy's float-only loops do)."""
    at_zero = np.where(x1 == 0, x2, x1)
    return np.where(x1 < 0, 0.0, np.where(x1 > 0, 1.0, at_zero))[()]


# ------------------------------------------------ numpy's reduction keywords and ufunc methods
# np.sum / np.mean / np.prod are primitives of (x, axis, keepdims); a call that passes numpy's
# other keywords (dtype, where, initial) is the composition below instead (frontend/parser.py
# routes it).  `dtype` casts the operand, as numpy accumulates in that type; `where` leaves
# the masked-out elements as the reduction's identity, so the sums agree with numpy's to
# rounding (numpy's masked loop adds in an order of its own).

# The primitives are called with keywords: three positional arguments are numpy's signature.
_sum = PRIMITIVES["sum"]
_mean = PRIMITIVES["mean"]
_prod = PRIMITIVES["prod"]
_max = PRIMITIVES["max"]
_min = PRIMITIVES["min"]
_argmax = PRIMITIVES["argmax"]
_argmin = PRIMITIVES["argmin"]
_clip = PRIMITIVES["clip"]


def _reduced_operand(a, dtype, where, identity):
    x = np.asarray(a)
    if dtype is not None:
        x = x.astype(dtype)
    if where is not True:
        x = np.where(where, x, np.full_like(x, identity))
    return x


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    x = _with_initial(_reduced_operand(a, dtype, where, 0), axis, initial)
    r = _sum(x, axis=axis, keepdims=keepdims)
    if initial is not None and axis is None:
        return r + np.asarray(initial, dtype=x.dtype)
    return r


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    x = _with_initial(_reduced_operand(a, dtype, where, 1), axis, initial)
    r = _prod(x, axis=axis, keepdims=keepdims)
    if initial is not None and axis is None:
        return r * np.asarray(initial, dtype=x.dtype)
    return r


def _with_initial(x, axis, initial):
    """x with `initial` first along an int axis: numpy's reduction starts from it there (and
    adds it to the whole array's reduction, along axis None)."""
    if initial is None or axis is None:
        return x
    shape = np.shape(x)
    k = axis % len(shape)
    first = np.full(shape[:k] + (1,) + shape[k + 1:], initial, dtype=x.dtype)
    return np.concatenate((first, x), axis=k)


def max_keywords(a, axis=None, out=None, keepdims=False, initial=None, where=True):
    """np.max with numpy's `initial` and `where`: the masked-out elements read as `initial`,
    which joins the reduction (numpy needs it with a mask: max has no identity)."""
    return _extremum_keywords(_max, np.maximum, "maximum", a, axis, keepdims, initial, where)


def min_keywords(a, axis=None, out=None, keepdims=False, initial=None, where=True):
    return _extremum_keywords(_min, np.minimum, "minimum", a, axis, keepdims, initial, where)


def _extremum_keywords(reduce, pair, name, a, axis, keepdims, initial, where):
    x = np.asarray(a)
    if where is not True:
        if initial is None:
            raise ValueError(f"reduction operation '{name}' does not have an identity, so to "
                             "use a where mask one has to specify 'initial'")
        x = np.where(where, x, np.full_like(x, initial))
    r = reduce(x, axis, keepdims)
    if initial is None:
        return r
    return pair(r, np.asarray(initial, dtype=x.dtype))[()]


def argmax_keywords(a, axis=None, out=None, keepdims=False):
    """np.argmax with `keepdims`: the reduced axis kept with length 1 (every axis, for the
    whole array's)."""
    return _kept_index(_argmax(a, axis=axis), a, axis, keepdims)


def argmin_keywords(a, axis=None, out=None, keepdims=False):
    return _kept_index(_argmin(a, axis=axis), a, axis, keepdims)


def _kept_index(i, a, axis, keepdims):
    if not keepdims:
        return i
    if axis is None:
        return np.reshape(i, (1,) * np.ndim(a))
    return np.expand_dims(i, axis)


def clip_keywords(a, a_min=None, a_max=None, out=None, min=None, max=None):
    """np.clip with numpy's keywords for the bounds: a_min and a_max, or min and max."""
    return _clip(a, min if a_min is None else a_min, max if a_max is None else a_max)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=True):
    """numpy's steps with `where`: the sum of the elements kept over their count."""
    if where is True:
        return _mean(_reduced_operand(a, dtype, True, 0), axis=axis, keepdims=keepdims)
    x = _reduced_operand(a, dtype, where, 0)
    if not _is_float(x.dtype):
        x = x.astype(np.float64)
    count = _sum(np.broadcast_to(where, np.shape(x)), axis=axis, keepdims=keepdims)
    return np.divide(_sum(x, axis=axis, keepdims=keepdims), count).astype(x.dtype)[()]


# `np.UFUNC.reduce` / `np.UFUNC.accumulate` (resolve.UFUNC_METHODS): the reductions and
# scans of the ufunc, whose axis defaults to 0 rather than None.

def add_reduce(array, axis=0, dtype=None, out=None, keepdims=False, initial=None, where=True):
    return sum(array, axis, dtype, None, keepdims, initial, where)


def multiply_reduce(array, axis=0, dtype=None, out=None, keepdims=False, initial=None,
                    where=True):
    return prod(array, axis, dtype, None, keepdims, initial, where)


def maximum_reduce(array, axis=0, dtype=None, out=None, keepdims=False):
    return np.max(_reduced_operand(array, dtype, True, 0), axis=axis, keepdims=keepdims)


def minimum_reduce(array, axis=0, dtype=None, out=None, keepdims=False):
    return np.min(_reduced_operand(array, dtype, True, 0), axis=axis, keepdims=keepdims)


def add_accumulate(array, axis=0, dtype=None):
    return cumsum(array, axis, dtype)


def multiply_accumulate(array, axis=0, dtype=None):
    return cumprod(array, axis, dtype)


def ufunc_reduce(ufunc, array, axis=0, dtype=None, out=None, keepdims=False):
    """numpy's reduction by a binary ufunc without a reduction of its own (np.logaddexp,
    np.subtract, ...): the fold ((a[0] op a[1]) op a[2]) ... along the axis, numpy's order."""
    x = np.asarray(array)
    if dtype is not None:
        x = x.astype(dtype)
    rows = np.reshape(x, (-1,)) if axis is None else np.moveaxis(x, axis, 0)
    r = rows[0]
    for i in range(1, np.shape(rows)[0]):
        r = ufunc(r, rows[i])
    if keepdims:
        if axis is None:
            return np.reshape(r, (1,) * np.ndim(x))
        return np.expand_dims(r, axis)
    return r


def ufunc_accumulate(ufunc, array, axis=0, dtype=None, out=None):
    """numpy's scan by a binary ufunc: each prefix's fold along the axis, numpy's order."""
    x = np.asarray(array)
    if dtype is not None:
        x = x.astype(dtype)
    rows = np.moveaxis(x, axis, 0)
    r = rows[0]
    prefixes = (r,)
    for i in range(1, np.shape(rows)[0]):
        r = ufunc(r, rows[i])
        prefixes = prefixes + (r,)
    return np.moveaxis(np.stack(prefixes), 0, axis)


def ufunc_outer(ufunc, A, B):
    """ufunc(A[i, ..., None, ...], B[j, ...]) for every pair: A's shape then B's."""
    a = np.asarray(A)
    return ufunc(np.reshape(a, np.shape(a) + (1,) * np.ndim(B)), B)


# ------------------------------------------------ quantiles, covariance, NaN-aware spread


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False):
    """numpy's methods 'linear' (the default), 'lower', 'higher', 'nearest' and 'midpoint'
    (numpy/lib/_function_base_impl.py, _quantile and _lerp): the values sorted along the
    axis, the two around the virtual index (n - 1) * q, and numpy's interpolation between
    them, so the values are numpy's to the last bit; nan where the values hold a nan; q a
    number or a vector.  Gradients flow through the sort to the values used (of tied values,
    the one the sort puts there gets it)."""
    return _quantile(a, _quantiles(q, 1), axis, keepdims, method, False)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False):
    return _quantile(a, _quantiles(q, 100), axis, keepdims, method, False)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False):
    """np.quantile of the numbers, NaNs left out (numpy's _nanquantile_1d drops them from
    each row): nan where a row has none."""
    return _quantile(a, _quantiles(q, 1), axis, keepdims, method, True)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False):
    return _quantile(a, _quantiles(q, 100), axis, keepdims, method, True)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The mean of the two middle numbers of each row (one for an odd count), NaNs left out,
    as numpy's median of the row's numbers."""
    return _quantile(a, 0.5, axis, keepdims, "median", True)


def _quantiles(q, whole):
    """q as fractions of 1 (`whole` is 100 for percentiles), checked as numpy checks them."""
    if whole == 1:
        fractions = q
    else:
        fractions = np.true_divide(q, whole)
    if np.any(np.asarray(fractions) < 0) or np.any(np.asarray(fractions) > 1):
        if whole == 1:
            raise ValueError("Quantiles must be in the range [0, 1]")
        raise ValueError("Percentiles must be in the range [0, 100]")
    return fractions


def _quantile(a, q, axis, keepdims, method, skip_nan):
    """Sorted along the axis itself (no axis moved: smaller graphs), so NaNs come last; row
    r's values are its first c[r] (its numbers where NaNs are skipped, all of them
    otherwise) and the positions around (c[r] - 1) * q are gathered row by row.  A q of one
    dimension is a leading axis of the positions, as numpy has it."""
    if method not in ("linear", "lower", "higher", "nearest", "midpoint", "median"):
        raise NotImplementedError("np.quantile, np.percentile and their nan forms in compiled "
                                  "code support the methods 'linear', 'lower', 'higher', "
                                  "'nearest' and 'midpoint'")
    x = np.asarray(a)
    if axis is None:
        x = np.reshape(x, (-1,))
        k = 0
    else:
        k = axis % np.ndim(x)
    rows = _sort(x, k)
    if skip_nan and _is_float(x.dtype):
        kept = np.logical_not(np.isnan(x))
    else:
        kept = np.full(np.shape(x), True)
    c = np.sum(kept, axis=k, keepdims=True)
    qs = np.asarray(q, dtype=np.float64)
    if np.ndim(q) == 1:
        qs = np.reshape(qs, (-1,) + (1,) * np.ndim(x))
        c = np.expand_dims(c, 0)
        rows = np.broadcast_to(rows, np.shape(qs)[:1] + np.shape(rows))
        k = k + 1
    virtual = (c - 1) * qs
    last = np.maximum(c - 1, 0)
    if method == "median":
        lo = np.take_along_axis(rows, np.maximum((c - 1) // 2, 0), k)
        r = (lo + np.take_along_axis(rows, np.minimum(c // 2, last), k)) / 2
    elif method == "lower" or method == "higher" or method == "nearest":
        if method == "lower":
            index = np.floor(virtual)
        elif method == "higher":
            index = np.ceil(virtual)
        else:
            index = np.round(virtual)
        r = np.take_along_axis(rows, np.clip(index.astype(np.int64), 0, last), k)
    else:
        if method == "midpoint":
            virtual = 0.5 * (np.floor(virtual) + np.ceil(virtual))
        below = np.floor(virtual)
        if method == "midpoint":
            gamma = np.where(virtual % 1 == 0, 0.0, 0.5)
        else:
            gamma = virtual - below
        i = np.clip(below.astype(np.int64), 0, last)
        lo = np.take_along_axis(rows, i, k)
        hi = np.take_along_axis(rows, np.minimum(i + 1, last), k)
        d = hi - lo
        if np.ndim(q) == 0 and _is_float(x.dtype):
            # numpy's gamma for one q is a Python float: weak, float32 values stay float32
            r = np.where(gamma >= 0.5, hi - d * (1 - gamma).astype(x.dtype),
                         lo + d * gamma.astype(x.dtype))
        else:
            r = np.where(gamma >= 0.5, hi - d * (1 - gamma), lo + d * gamma)
    if _is_float(x.dtype):   # nan where a row has no numbers, or holds a nan not skipped
        r = np.where((c == 0) | np.isnan(np.take_along_axis(rows, last, k)), np.nan,
                     r).astype(r.dtype)
    r = np.squeeze(r, axis=k)
    if keepdims:
        if axis is None:
            return np.reshape(r, np.shape(q) + (1,) * np.ndim(a))
        return np.expand_dims(r, np.ndim(q) + axis % np.ndim(a))
    return r[()]


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None):
    """numpy's steps (numpy/lib/_function_base_impl.py): rows as variables, the mean
    subtracted, X @ X.T times 1 / (N - ddof), squeezed; float64 at least."""
    if fweights is not None or aweights is not None:
        raise NotImplementedError("np.cov in compiled code takes no fweights or aweights")
    X = atleast_2d(np.asarray(m, dtype=np.float64 if dtype is None else dtype))
    if not rowvar and np.shape(X)[0] != 1:
        X = np.transpose(X)
    if y is not None:
        Y = atleast_2d(np.asarray(y, dtype=X.dtype))
        if not rowvar and np.shape(Y)[0] != 1:
            Y = np.transpose(Y)
        X = np.concatenate((X, Y), axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    fact = max(np.shape(X)[1] - ddof, 0)
    X = X - np.expand_dims(np.mean(X, axis=1), 1)
    c = np.dot(X, np.transpose(X)) * np.true_divide(1, fact)
    return np.squeeze(c)


def corrcoef(x, y=None, rowvar=True, dtype=None):
    c = cov(x, y, rowvar, dtype=dtype)
    if np.ndim(c) == 0:
        return (c / c)[()]
    i = np.arange(np.shape(c)[0])
    stddev = np.sqrt(c[i, i])
    c = c / np.expand_dims(stddev, 1)
    c = c / np.expand_dims(stddev, 0)
    return np.clip(c, -1, 1)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """numpy's steps (numpy/lib/_nanfunctions_impl.py): the NaNs as zeros, the mean of the
    numbers, their squared deviations summed over their count less ddof; nan where that
    is not positive."""
    x = np.asarray(a)
    if not _is_float(x.dtype):
        return var(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
    nan = np.isnan(x)
    arr = np.where(nan, np.zeros_like(x), x)
    if dtype is not None:
        arr = arr.astype(dtype)
    cnt = np.sum(np.logical_not(nan), axis=axis, keepdims=True)
    avg = np.divide(np.sum(arr, axis=axis, keepdims=True), cnt).astype(arr.dtype)
    dev = np.where(nan, np.zeros_like(arr), arr - avg)
    v = np.sum(dev * dev, axis=axis, keepdims=keepdims)
    dof = np.sum(np.logical_not(nan), axis=axis, keepdims=keepdims) - ddof
    v = np.divide(v, dof).astype(arr.dtype)
    return np.where(dof <= 0, np.nan, v).astype(arr.dtype)[()]


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    return np.sqrt(nanvar(a, axis, dtype, None, ddof, keepdims))


# ------------------------------------------------ grids, pseudo-inverse, least squares


def meshgrid(x1, x2=None, x3=None, copy=True, sparse=False, indexing="xy"):
    """One to three coordinate vectors (compiled code has no *args), numpy's grids as a
    tuple; sparse grids are the vectors reshaped."""
    if indexing != "xy" and indexing != "ij":
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    xs = (x1,) if x2 is None else ((x1, x2) if x3 is None else (x1, x2, x3))
    nd = len(xs)
    shape = ()
    vectors = ()
    for k in range(nd):
        v = np.reshape(xs[k], (-1,))
        shape = shape + np.shape(v)
        vectors = vectors + (v,)
    if indexing == "xy" and nd > 1:
        shape = (shape[1], shape[0]) + shape[2:]
    grids = ()
    for k in range(nd):
        axis = k
        if indexing == "xy" and nd > 1 and k < 2:
            axis = 1 - k
        spread = (1,) * axis + (-1,) + (1,) * (nd - axis - 1)
        g = np.reshape(vectors[k], spread)
        grids = grids + ((g if sparse else np.broadcast_to(g, shape)),)
    return grids


def pinv(a, rcond=None, hermitian=False):
    """numpy's steps (numpy/linalg/_linalg.py): the SVD, the reciprocals of the singular
    values above rcond times the largest (the others 0), V diag(1/s) U^T.  The gradient is
    the SVD's: distinct singular values, a rank that does not change nearby."""
    if rcond is None:
        rcond = 1e-15
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    s = _reciprocal_above(s, rcond * np.max(s, axis=-1, keepdims=True))
    return np.matmul(np.swapaxes(vt, -1, -2), np.multiply(s[..., None], np.swapaxes(u, -1, -2)))


def _reciprocal_above(s, cutoff):
    """1 / s where s > cutoff, 0 elsewhere (the inverse of the singular values that count);
    the inner where keeps the discarded ones' gradient finite."""
    large = s > cutoff
    return np.where(large, np.divide(1, np.where(large, s, 1)), np.zeros_like(s))


def matrix_rank(A, tol=None, hermitian=False, rtol=None):
    x = np.asarray(A)
    if np.ndim(x) < 2:
        return int(not np.all(x == 0))
    S = np.linalg.svd(x, compute_uv=False)
    if tol is None:
        if rtol is None:
            rtol = max(np.shape(x)[-2:]) * _eps(S.dtype)
        tol = np.max(S, axis=-1, keepdims=True) * rtol
    else:
        tol = np.expand_dims(np.asarray(tol), -1)
    return np.sum(S > tol, axis=-1)


def _eps(dtype):
    if dtype == np.float32:
        return 1.1920929e-07
    return 2.220446049250313e-16


def lstsq(a, b, rcond=None):
    """numpy's four results, by the SVD rather than LAPACK's gelsd (so equal to rounding):
    the minimum-norm solution, the squared residuals (empty unless a has full column rank
    and more rows than columns), the rank and the singular values."""
    m, n = np.shape(a)[-2], np.shape(a)[-1]
    if rcond is None:
        rcond = _eps(np.asarray(a).dtype) * max(m, n)
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    rank = np.sum(s > rcond * np.max(s))
    s_inv = _reciprocal_above(s, rcond * np.max(s))
    vector = np.ndim(b) == 1
    bb = np.reshape(b, (-1, 1)) if vector else b
    x = np.matmul(np.transpose(vt), s_inv[:, None] * np.matmul(np.transpose(u), bb))
    if rank == n and m > n:
        r = bb - np.matmul(a, x)
        residuals = np.sum(r * r, axis=0)
    else:
        residuals = np.zeros((0,), dtype=x.dtype)
    if vector:
        x = np.reshape(x, (-1,))
    return x, residuals, np.int32(rank), s
