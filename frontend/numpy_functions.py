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
