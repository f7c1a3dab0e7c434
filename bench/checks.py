"""Correctness checks that gate timing: a result that fails its check is WRONG, not timed.

- forward: against the CPython/numpy value of the same function.
- hessian: against the hand-derived Hessian (bench/hessians.py), and that against central
  differences of the hand-written gradient.
- gradient: against the hand-written gradient; where there is none (and for the
  hand-written gradients themselves), against central finite differences of the workload
  in float64 along a few random directions d: (f(x + h d) - f(x - h d)) / 2h == <grad, d>.
  (Directional differences check every component of the gradient at once, with a handful
  of function evaluations instead of one pair per input element.)
Errors are relative: max |got - ref| / max |ref| per output; the tolerance is 1e-4 for
float32 workloads and 1e-6 for float64 ones.
"""

from dataclasses import dataclass

import numpy as np

from bench.systems import to_numpy
from myir import tree
from bench import workloads

RTOL = {"float32": 1e-4, "float64": 1e-6}
FD_DIRECTIONS = 3
FD_STEP = 1e-6


@dataclass
class Check:
    ok: bool
    error: float
    tol: float
    reference: str

    def describe(self):
        return f"relative error {self.error:.1e} vs {self.reference} (tolerance {self.tol:.0e})"


def _rel_error(got, ref):
    if tree.kind(ref) is not tree.LEAF:   # a dict of parameters' gradient: leaf by leaf
        if tree.structure(got) != tree.structure(ref):
            return float("inf")
        return max(map(_rel_error, tree.leaves(got), tree.leaves(ref)))
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        return float("inf")
    scale = max(float(np.max(np.abs(ref), initial=0.0)), 1e-300)
    err = float(np.max(np.abs(got - ref), initial=0.0)) / scale
    return err if np.isfinite(err) else float("inf")


def _in_float64(args):
    return tuple(tree.map(lambda a: a.astype(np.float64) if isinstance(a, np.ndarray) else a, x)
                 for x in args)


def _same_shapes(g, a) -> bool:
    """g has a's structure (a dict of parameters' gradient is such a dict) and shapes."""
    return tree.structure(g) == tree.structure(a) and all(
        np.shape(x) == np.shape(y) for x, y in zip(tree.leaves(g), tree.leaves(a)))


def _in_order_of(g, a):
    """A dict gradient g in the key order of its parameter a (JAX sorts a dict's keys)."""
    if isinstance(g, dict) and isinstance(a, dict) and set(g) == set(a):
        return {k: _in_order_of(g[k], a[k]) for k in a}
    return g


def fd_errors(workload, args, grads):
    """Relative errors of <grads, d> against central differences along random d."""
    f = workloads.function(workload)
    args = _in_float64(args)
    wrt = workloads.WRT[workload]
    rng = np.random.default_rng(1)
    errors = []
    for _ in range(FD_DIRECTIONS):
        # per argument: a normal direction scaled to the argument's magnitude
        dirs = {i: tree.map(lambda a: rng.standard_normal(np.shape(a))
                            * max(np.sqrt(np.mean(np.square(a))), 1e-3), args[i]) for i in wrt}

        def at(sign):
            moved = [tree.map(lambda x, d: x + sign * FD_STEP * d, a, dirs[i]) if i in dirs
                     else a for i, a in enumerate(args)]
            return float(f(*moved))

        fd = (at(1.0) - at(-1.0)) / (2 * FD_STEP)
        ad = sum(float(np.sum(np.asarray(g, np.float64) * d)) for i, grad in zip(wrt, grads)
                 for g, d in zip(tree.leaves(grad), tree.leaves(dirs[i])))
        errors.append(abs(fd - ad) / max(abs(fd), abs(ad), 1e-300))
    return errors


def hessian_by_differences(workload, args):
    """The Hessian of the first differentiated argument, column by column: central
    differences of the hand-written gradient, in float64."""
    args = _in_float64(args)
    i = workloads.WRT[workload][0]
    grad = workloads.GRADS[workload]
    step = 1e-5
    columns = []
    for k in range(np.size(args[i])):
        e = np.zeros(np.size(args[i]))
        e[k] = step
        e = e.reshape(np.shape(args[i]))
        at = [[a + sign * e if j == i else a for j, a in enumerate(args)] for sign in (1, -1)]
        columns.append((np.asarray(grad(*at[0])[0]) - np.asarray(grad(*at[1])[0])) / (2 * step))
    return np.stack(columns, axis=-1).reshape(np.shape(args[i]) * 2)


def check(workload, mode, args, out, reference):
    """`reference`: the CPython forward value (forward), the hand-written gradient tuple,
    or None (gradient checked by finite differences)."""
    tol = RTOL[workloads.DTYPE[workload]]
    out = to_numpy(out)
    if mode == "forward":
        err = _rel_error(out, reference)
        return Check(err <= tol, err, tol, "cpython")
    if mode == "hessian":
        if reference is not None:   # against the hand-derived Hessian (bench/hessians.py)
            err = _rel_error(out, reference)
            return Check(err <= tol, err, tol, "hand-derived Hessian")
        err = _rel_error(out, hessian_by_differences(workload, args))
        return Check(err <= tol, err, tol, "differences of the hand-written gradient")
    wrt = workloads.WRT[workload]
    if not isinstance(out, tuple):  # one position: a single value
        out = (out,)
    out = tuple(_in_order_of(g, args[i]) for i, g in zip(wrt, out))
    shapes_ok = len(out) == len(wrt) and all(
        np.shape(g) == np.shape(args[i]) and _same_shapes(g, args[i]) for i, g in zip(wrt, out))
    if not shapes_ok:
        return Check(False, float("inf"), tol, "expected shapes")
    if reference is not None:
        err = max(_rel_error(g, r) for g, r in zip(out, to_numpy(reference)))
        return Check(err <= tol, err, tol, "hand-written")
    err = max(fd_errors(workload, args, out))
    return Check(err <= tol, err, tol, "finite differences")
