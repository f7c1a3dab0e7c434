"""`python -m bench.tangent PATH/TO/functions.py [--backend B] [--only NAME[,NAME]]` —
Tangent's test functions, compiled and differentiated by myir.

google/tangent's `tests/functions.py` is a catalogue of small differentiable Python
programs (branches, loops, calls, subscripts, numpy calls) that Tangent's own tests
differentiate.  The file is not part of this repository (its licence is not ours); the
harness takes its path at run time: `git clone https://github.com/google/tangent` and pass
`tangent/tests/functions.py`.

Loading.  The file imports `tangent` (for `insert_grad_of`, `trace` and a tape: `Stack`,
`push`, `pop`) and, optionally, tensorflow.  A stand-in `tangent` module is installed while
the file is imported; tensorflow is made absent, as Tangent's tests allow.

Selection: every function the file defines, except
- the helpers the others call, named with a leading underscore (`_inner_fn`);
- those that use TensorFlow or Tangent's own runtime (their code names `tf`, `tangent` or
  `insert_grad_of`): they are tests of Tangent, not programs a user writes;
- those that are not scalar functions of Tangent's inputs: CPython raises on them
  (`listcomp` iterates over a float) or returns a tuple (`fn_multiple_return`,
  `cart2polar`; Tangent's conftest excludes these three too).
The column `tangent` marks those Tangent's own reverse-mode tests differentiate (its
conftest's whitelist matched by parameter names, plus its dedicated tests).

Inputs are Tangent's: scalars a, b, c from its list (-2 ... 2, every combination), n in
1..3, vectors x of lengths 3, 5, 10, square matrices of sizes 1 and 5, and for the
functions with their own test (logistic_regression, rnn, bilinear, dict_saxpy, ...) the
shapes that test uses.  For each function:
- value: `myir.compile(f)(*args)` equals CPython's `f(*args)` (the same type and dtype,
  close in float64), on fresh copies of the arguments; the caller's arguments are unchanged;
- gradient: `myir.grad(f, *names)` with respect to every float parameter (a scalar, an
  array or a container of them), of the parameter's structure, types and shapes, against
  central finite differences in float64, element by element.  Points where the function
  is not differentiable (the two one-sided differences disagree: a branch boundary) or
  not finite are skipped.
Result: pass / refused (a MyirError: the construct, its first line) / wrong value / wrong
gradient / crash (any other exception: the innermost frame of its traceback).
"""

import argparse
import contextlib
import copy
import importlib.util
import itertools
import sys
import traceback
import types
from pathlib import Path

import numpy as np

import myir
from myir import tree

SCALARS = [-2.0, -1.5, -1.0, -0.5, -0.1, 0.1, 0.5, 1.0, 1.5, 2.0]
INTS = [1, 2, 3]
RUNTIME_NAMES = {"tf", "tangent", "insert_grad_of"}
FD_STEP = 1e-6
RTOL_VALUE = 1e-9
RTOL_GRAD = 1e-5

# Tangent's reverse-mode tests: test_grad_{unary,binary,ternary,vector,square_matrix,
# binary_int} take the whitelisted functions whose parameters are named as these.
TANGENT_SIGNATURES = {("a",), ("a", "b"), ("a", "b", "c"), ("x",), ("sqm",), ("a", "n")}
TANGENT_BLACKLIST = {"inlining_contextmanager", "listcomp", "cart2polar",
                     "iterpower_with_nested_def", "fn_multiple_return", "insert_grad_of",
                     "_trace_mul", "_nontrace_mul", "active_subscript",
                     "init_array_grad_maybe_active"}
TANGENT_DEDICATED = {"logistic_regression", "rnn", "bilinear", "inlining_contextmanager",
                     "dict_saxpy", "unpacking_args_saxpy", "nested_dict"}


def _tangent_stub():
    """A stand-in for the `tangent` package: what functions.py uses at import time."""
    stub = types.ModuleType("tangent")

    @contextlib.contextmanager
    def insert_grad_of(_):
        yield None

    stub.insert_grad_of = insert_grad_of
    stub.trace = lambda fn: fn
    stub.Stack = list
    stub.push = lambda stack, value, _op: stack.append(value)
    stub.pop = lambda stack, _op: stack.pop()
    return stub


def load(path):
    """The module of functions.py at `path`, imported with the stand-ins."""
    spec = importlib.util.spec_from_file_location("tangent_functions", path)
    module = importlib.util.module_from_spec(spec)
    saved = {name: sys.modules.get(name) for name in ("tangent", "tensorflow")}
    sys.modules["tangent"] = _tangent_stub()
    sys.modules["tensorflow"] = None          # `import tensorflow` raises ImportError
    try:
        spec.loader.exec_module(module)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return module


def params(fn):
    return fn.__code__.co_varnames[:fn.__code__.co_argcount]


def _vectors(rng):
    return [rng.standard_normal(n) for n in (3, 5, 10)]


def inputs(fn, rng):
    """Tangent's argument tuples for `fn`: its dedicated test's, else by parameter name."""
    name, names = fn.__name__, params(fn)
    if name == "logistic_regression":
        label = np.zeros(5)
        label[1] = 1.0
        return [(rng.random(3), label, rng.standard_normal((3, 5)), rng.standard_normal(5))]
    if name == "rnn":
        return [(rng.standard_normal((3, 2)), rng.standard_normal((2, 3)))]
    if name == "bilinear":
        return [(rng.standard_normal((1, 3)), rng.standard_normal((1, 3)),
                 rng.standard_normal((3, 3)), rng.standard_normal((3, 3)),
                 rng.standard_normal((1, 3)))]
    if name == "nested_dict":
        return [({"i": {"j": 3.0, "k": 4.0}},)]
    by_name = {"a": SCALARS, "b": SCALARS, "c": SCALARS, "n": INTS, "i": [0, 1, 2],
               "x": _vectors(rng),
               "sqm": [rng.standard_normal((1, 1)), rng.standard_normal((5, 5))],
               "val": [dict(a=a, b=b, c=c)
                       for a, b, c in itertools.product(SCALARS[::3], repeat=3)],
               "abc_packed_in_tuple": list(itertools.product(SCALARS[::3], repeat=3))}
    if not all(p in by_name for p in names):
        return None
    return list(itertools.product(*(by_name[p] for p in names)))


def _is_float_tree(value):
    leaves = tree.leaves(value)
    return bool(leaves) and all(
        isinstance(v, float) or (isinstance(v, np.ndarray) and v.dtype.kind == "f")
        for v in leaves)


def _scalar(value):
    return isinstance(value, (int, float, np.number)) or \
        (isinstance(value, np.ndarray) and value.ndim == 0)


def select(module):
    """[(fn, [args...])] for the functions measured (the rule is in the module docstring)."""
    rng = np.random.default_rng(0)
    chosen = []
    for fn in list(vars(module).values()):
        if not isinstance(fn, types.FunctionType) or fn.__module__ != module.__name__ \
                or fn.__name__.startswith("_"):
            continue
        if RUNTIME_NAMES & set(fn.__code__.co_names):
            continue
        points = inputs(fn, rng)
        if not points:
            continue
        try:
            if not all(_scalar(fn(*copy.deepcopy(args))) for args in points[:1]):
                continue
        except Exception:
            continue
        chosen.append((fn, points))
    return chosen


def tested_by_tangent(fn):
    name = fn.__name__
    return name in TANGENT_DEDICATED or \
        (name not in TANGENT_BLACKLIST and params(fn) in TANGENT_SIGNATURES)


class Failure(Exception):
    def __init__(self, category, detail):
        super().__init__(detail)
        self.category, self.detail = category, detail


def _guarded(stage, thunk):
    """thunk(), with a MyirError as `refused` and anything else as `crash`."""
    try:
        return thunk()
    except myir.MyirError as e:
        first = str(e).splitlines()
        raise Failure("refused", f"{stage}: {' | '.join(first[:2])}") from e
    except Failure:
        raise
    except Exception as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        raise Failure("crash", f"{stage}: {type(e).__name__}: {e} ({where})") from e


def _same_tree(a, b):
    la, lb = tree.leaves(a), tree.leaves(b)
    if tree.structure(a) != tree.structure(b) or len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype or not np.array_equal(x, y):
            return False
    return True


def check_value(fn, compiled, args):
    expected = fn(*copy.deepcopy(args))
    given = copy.deepcopy(args)
    got = _guarded("compile", lambda: compiled(*given))
    if not _same_tree(given, args):
        raise Failure("wrong value", f"changed its argument at {_show(args)}")
    e, g = np.asarray(expected), np.asarray(got)
    if type(got) is not type(expected) or g.dtype != e.dtype or g.shape != e.shape or \
            not np.allclose(g, e, rtol=RTOL_VALUE, atol=0.0, equal_nan=True):
        raise Failure("wrong value", f"{got!r} ({type(got).__name__}), CPython {expected!r} "
                                     f"({type(expected).__name__}) at {_show(args)}")
    return expected


def _show(args):
    text = ", ".join(np.array2string(a, precision=3) if isinstance(a, np.ndarray) else repr(a)
                     for a in args)
    return f"({text})" if len(text) < 80 else f"({text[:77]}...)"


def _evaluate(fn, args, position, leaf, index, delta):
    """fn(*args) with element `index` of leaf `leaf` of argument `position` moved by delta."""
    moved = list(copy.deepcopy(args))
    leaves, structure = tree.flatten(moved[position])
    value = np.array(leaves[leaf], dtype=np.float64)
    value[index] += delta
    leaves[leaf] = value if isinstance(leaves[leaf], np.ndarray) else float(value)
    moved[position] = tree.unflatten(structure, leaves)
    return float(fn(*moved))


def finite_difference(fn, args, position, leaf, index):
    """The central difference, or None where fn has a kink or is not finite there."""
    x = float(np.asarray(tree.leaves(args[position])[leaf])[index])
    h = FD_STEP * max(1.0, abs(x))
    f0 = float(fn(*copy.deepcopy(args)))
    up = _evaluate(fn, args, position, leaf, index, h)
    down = _evaluate(fn, args, position, leaf, index, -h)
    if not np.isfinite([f0, up, down]).all():
        return None
    right, left = (up - f0) / h, (f0 - down) / h
    if abs(right - left) > 1e-3 * max(1.0, abs(right), abs(left)) + 1e-13 * abs(f0) / h:
        return None
    return (up - down) / (2 * h), 1e-13 * abs(f0) / h


def check_gradient(fn, graded, args, wrt):
    got = _guarded("grad", lambda: graded(*copy.deepcopy(args)))
    if len(wrt) == 1:
        got = (got,)
    for position, g in zip(wrt, got):
        param = args[position]
        if tree.structure(g) != tree.structure(param):
            raise Failure("wrong gradient", f"d/d{params(fn)[position]} has structure "
                                            f"{tree.structure(g)}, not {tree.structure(param)}")
        for leaf, (gv, pv) in enumerate(zip(tree.leaves(g), tree.leaves(param))):
            if type(gv) is not type(pv) or np.shape(gv) != np.shape(pv) or \
                    np.asarray(gv).dtype != np.asarray(pv).dtype:
                raise Failure("wrong gradient", f"d/d{params(fn)[position]} is {gv!r}: not of "
                                                f"the parameter's type, dtype and shape")
            gv = np.asarray(gv, dtype=np.float64)
            for index in np.ndindex(gv.shape):
                fd = finite_difference(fn, args, position, leaf, index)
                if fd is None:
                    continue
                ref, roundoff = fd
                if not abs(gv[index] - ref) <= RTOL_GRAD * max(1.0, abs(ref)) + roundoff:
                    raise Failure("wrong gradient",
                                  f"d/d{params(fn)[position]}{list(index) if index else ''} = "
                                  f"{gv[index]!r}, finite differences {ref!r} at {_show(args)}")


def measure(fn, points, backend):
    """(category, detail) of one function over its input points."""
    wrt = tuple(i for i, a in enumerate(points[0]) if _is_float_tree(a))
    try:
        compiled = _guarded("compile", lambda: myir.compile(fn, backend=backend))
        graded = _guarded("grad", lambda: myir.grad(fn, *(params(fn)[i] for i in wrt),
                                                     backend=backend))
        for args in points:
            value = check_value(fn, compiled, args)
            if np.isfinite(value):
                check_gradient(fn, graded, args, wrt)
    except Failure as f:
        return f.category, f.detail
    return "pass", ""


CATEGORIES = ("pass", "refused", "wrong value", "wrong gradient", "crash")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.tangent",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("functions", help="path to tangent's tests/functions.py")
    parser.add_argument("--backend", default="python")
    parser.add_argument("--only", help="comma-separated function names")
    args = parser.parse_args(argv)
    np.seterr(all="ignore")     # arccos(2.0) is nan in CPython too: values are compared
    chosen = select(load(args.functions))
    if args.only:
        keep = set(args.only.split(","))
        chosen = [(fn, pts) for fn, pts in chosen if fn.__name__ in keep]
    counts = dict.fromkeys(CATEGORIES, 0)
    width = max(len(fn.__name__) for fn, _ in chosen)
    print(f"{'function':{width}}  tangent  result          detail")
    for fn, points in chosen:
        category, detail = measure(fn, points, args.backend)
        counts[category] += 1
        mark = "yes" if tested_by_tangent(fn) else "-"
        print(f"{fn.__name__:{width}}  {mark:7}  {category:14}  {detail}", flush=True)
    total = sum(counts.values())
    print(f"\n{counts['pass']}/{total} pass (backend {args.backend}); "
          + ", ".join(f"{k}: {v}" for k, v in counts.items() if k != "pass"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
