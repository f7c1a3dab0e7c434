"""Programs for tests/test_forward.py: forward mode, Jacobians and Hessians through the
subset's control flow, closures, arrays and tuples, and functions with gradient rules of
the user's (`myir.custom_grad`)."""

import math

import numpy as np

import myir


def poly(x, y):
    return np.sin(x) * y + x ** 3 / (1.0 + y * y)


def branches(x, y):
    if x > y:
        z = np.exp(x - y) * y
    elif x > 0.0:
        z = x * y + math.tanh(y)
    else:
        z = -x * x
    return z


def while_loop(x, y):
    s = x
    n = 0
    while n < 6:
        s = s * np.cos(s) + y
        n += 1
    return s


def for_loop(x, y):
    acc = 0.0
    for i in range(5):
        if acc > 1.0:
            acc = acc * 0.5 + x
        else:
            acc = acc + x * y * i
    return acc


def power(x, n):
    if n == 0:
        return 1.0
    return x * power(x, n - 1)


def recursion(x, y):
    return power(x, 4) + y * power(y, 2)


def closures(x, y):
    def scale(v):
        return v * y + x

    twice = lambda v: scale(scale(v))
    return twice(np.sin(x))


def tuples(x, y):
    pair = (x * y, x + y)
    a, b = pair
    return a * b + pair[0]


def numpy_and_math(x, y):
    """numpy's arithmetic functions, divmod and the math module's functions."""
    q, r = divmod(x, y)
    return (np.divide(x, y) + np.multiply(x, y) + np.add(x, y) - np.subtract(y, x) + r
            + math.erf(x) + math.log2(x * x + 1.0) + math.degrees(y) + math.asinh(x))


def element_updates(x, a):
    """Element and slice updates of a local array, in a loop and with `+=`."""
    y = np.zeros(3)
    for i in range(3):
        y[i] = x[i] * a
    z = y.copy()
    z[1:] += x[:2] ** 2
    return np.sum(z * z)


def array_of_numbers(x, y):
    """np.array of a tuple of computed numbers, then of an array."""
    v = np.array((x * y, x + 1.0, np.sin(y)))
    return np.sum(np.array(v * 2.0) * v)


def arrays(w, x):
    return np.tanh(w @ x) * np.sum(x ** 2)


def logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def mlp(w, x):
    h = np.tanh(w @ x)
    return np.sum(h * h)


def inner_jvp(x, y):
    """jvp as a macro inside compiled code."""
    out, tangent = myir.jvp(poly, (x, y), (1.0, 0.0))
    return out + 2.0 * tangent


def tangent_of_loop(x):
    return myir.jvp(branches, (x, 0.4), (1.0, 0.0))[1] * myir.jvp(while_loop, (x, 0.4), (1.0, 0.0))[0]


def second_by_forward(x):
    """Forward over forward."""
    return myir.jvp(tangent_of_loop, (x,), (1.0,))[1]


def tangent_with_int(x):
    """An integer input takes an integer tangent."""
    return myir.jvp(power, (x, 3), (1.0, 0))[1]


def inner_hessian(x):
    """hessian as a macro inside compiled code."""
    return np.sum(myir.hessian(logsumexp)(x))


def inner_jacfwd(w, x):
    return myir.jacfwd(arrays, 1)(w, x)


def tree_out(w, x):
    """A tuple holding an array, a dict of a number and a list, and a float32 array."""
    h = np.tanh(w @ x)
    return (h, {"s": np.sum(x * x), "v": [x[0] * w[0, 0], 2.0 * h]}, np.float32(0.5) * x.astype(np.float32))


def with_string(x):
    return (2.0 * x, "label")


def tree_in(p, x):
    """A scalar of a dict of parameters (a weight matrix and a (bias, scale) tuple)."""
    b, c = p["layer"]
    return c * np.sum(np.tanh(p["W"] @ x + b) ** 2)


@myir.custom_grad
def clip_gradient(x):
    return x


@clip_gradient.defgrad
def _clip_rule(x, out, dout):
    return (np.clip(dout, -1.0, 1.0),)


@myir.custom_grad
def softplus(x):
    return np.log1p(np.exp(x))


@softplus.defgrad
def _softplus_rule(x, out, dout):
    return (dout / (1.0 + np.exp(-x)),)


def uses_clip(x):
    return clip_gradient(3.0 * x) * 2.0


def uses_softplus(x):
    return np.sum(softplus(x) ** 2)


def grad_inside(x):
    return myir.grad(uses_clip)(x)


@myir.custom_grad
def two_inputs(x, y):
    return x * y


@two_inputs.defgrad
def _wrong_rule(x, y, out, dout):
    return (dout * y,)


def uses_wrong_rule(x):
    return two_inputs(x, 2.0)


def bad_tangent_inside(x):
    return myir.jvp(poly, (x, 1.0), (np.ones(3), 0.0))


def not_scalar(x):
    return x * 2.0


# One function per tangent rule of passes/jvp_rules.py and kind of passes/forward.py, of an
# array x (4 elements; a 2x2 matrix where `mat` is used), for test_tangent_rules.

def mat(x):
    return np.reshape(x, (2, 2))


def spd(x):
    a = mat(x)
    return a @ a.T + 3.0 * np.eye(2)


def tall(x):
    return np.reshape(np.concatenate((x, x[:2] * x[2:] + 1.0)), (3, 2))


def eigh_parts(x):
    """Eigenvalues, and products of eigenvectors' entries (which do not depend on their
    signs, which LAPACK chooses)."""
    w, v = np.linalg.eigh(spd(x))
    return w[:, None] * v * v


def qr_parts(x):
    q, r = np.linalg.qr(tall(x))
    return np.concatenate((np.ravel(q), np.ravel(r)))


def svd_parts(x):
    """A tall matrix's, a wide one's and a square one's (full_matrices) singular values and
    rank-one terms."""
    u, s, vh = np.linalg.svd(tall(x), full_matrices=False)
    u2, s2, vh2 = np.linalg.svd(tall(x).T, full_matrices=False)
    u3, s3, vh3 = np.linalg.svd(spd(x))
    return np.concatenate((np.ravel(u[:, 1:] * vh[1:, :]), np.ravel(u2[:, :1] * vh2[:1, :]),
                           np.ravel(s3[0] * u3[:, :1] * vh3[:1, :]), s * s2,
                           np.linalg.svd(spd(x), compute_uv=False)))


def decompositions(x):
    return (np.linalg.eigh(spd(x)), np.linalg.qr(tall(x)),
            np.linalg.svd(tall(x).T, full_matrices=False))


RULE_PROGRAMS = {
    "truediv": lambda x: x / (2.0 + x[::-1] ** 2),
    "pow": lambda x: np.abs(x) ** (1.5 + 0.1 * x[::-1]),
    "mod": lambda x: np.mod(3.0 * x, 1.7),
    "maximum": lambda x: np.maximum(x, x[::-1]) + np.minimum(x, 0.3),
    "arctan2": lambda x: np.arctan2(x, x[::-1] + 2.0),
    "hypot": lambda x: np.hypot(x, x[::-1]),
    "logaddexp": lambda x: np.logaddexp(x, x[::-1]) + np.logaddexp2(x, 2.0 * x),
    "clip": lambda x: np.clip(x, -0.5, 0.5),
    "prod": lambda x: np.prod(mat(x), axis=0),
    "max": lambda x: np.max(mat(x), axis=1) + np.min(x),
    "cumprod": lambda x: np.cumprod(x),
    "sort": lambda x: np.sort(x * x[::-1]),
    "elementwise": lambda x: np.exp(np.sin(x)) * np.tanh(x) + np.sqrt(x * x + 1.0),
    "linear": lambda x: np.transpose(mat(x)) @ np.cumsum(x)[:2] + np.mean(x),
    "matmul": lambda x: mat(x) @ mat(x) + np.dot(x, x),
    "einsum": lambda x: np.einsum("ij,jk->ik", mat(x), mat(x)),
    "where": lambda x: np.where(x > 0.0, x * x, -x),
    "solve": lambda x: np.linalg.solve(spd(x), x[:2]),
    "inv": lambda x: np.linalg.inv(spd(x)),
    "det": lambda x: np.linalg.det(spd(x)) + np.linalg.slogdet(spd(x))[1],
    "cholesky": lambda x: np.linalg.cholesky(spd(x)),
    "eigh": eigh_parts,
    "qr": qr_parts,
    "svd": svd_parts,
    "builtin_max": lambda x: max(x[0], x[1] * 2.0, 0.1) + min(x[2], x[3]),
    "math": lambda x: math.sin(x[0]) * math.exp(x[1]) + math.atan2(x[2], 1.5) + math.hypot(x[3], 2.0),
}


def too_few_primals(x):
    return myir.jvp(poly, (x,), (1.0,))
