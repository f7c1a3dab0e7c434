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
from bench.workloads import handwritten, programs

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
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        return float("inf")
    scale = max(float(np.max(np.abs(ref), initial=0.0)), 1e-300)
    err = float(np.max(np.abs(got - ref), initial=0.0)) / scale
    return err if np.isfinite(err) else float("inf")


def _in_float64(args):
    return tuple(a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in args)


def fd_errors(workload, args, grads):
    """Relative errors of <grads, d> against central differences along random d."""
    f = getattr(programs, workload)
    args = _in_float64(args)
    wrt = programs.WRT[workload]
    rng = np.random.default_rng(1)
    errors = []
    for _ in range(FD_DIRECTIONS):
        # per argument: a normal direction scaled to the argument's magnitude
        dirs = {i: rng.standard_normal(np.shape(args[i])) * max(np.sqrt(np.mean(np.square(args[i]))), 1e-3)
                for i in wrt}

        def at(sign):
            moved = [a + sign * FD_STEP * dirs[i] if i in dirs else a for i, a in enumerate(args)]
            return float(f(*moved))

        fd = (at(1.0) - at(-1.0)) / (2 * FD_STEP)
        ad = sum(float(np.sum(np.asarray(g, np.float64) * dirs[i])) for i, g in zip(wrt, grads))
        errors.append(abs(fd - ad) / max(abs(fd), abs(ad), 1e-300))
    return errors


def hessian_by_differences(workload, args):
    """The Hessian of the first differentiated argument, column by column: central
    differences of the hand-written gradient, in float64."""
    args = _in_float64(args)
    i = programs.WRT[workload][0]
    grad = handwritten.GRADS[workload]
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
    tol = RTOL[programs.DTYPE[workload]]
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
    wrt = programs.WRT[workload]
    if not isinstance(out, tuple):  # one position: a single value
        out = (out,)
    shapes_ok = len(out) == len(wrt) and all(
        np.shape(g) == np.shape(args[i]) for i, g in zip(wrt, out))
    if not shapes_ok:
        return Check(False, float("inf"), tol, "expected shapes")
    if reference is not None:
        err = max(_rel_error(g, r) for g, r in zip(out, to_numpy(reference)))
        return Check(err <= tol, err, tol, "hand-written")
    err = max(fd_errors(workload, args, out))
    return Check(err <= tol, err, tol, "finite differences")
