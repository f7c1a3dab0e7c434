"""Programs tests/test_distributed.py runs under `mpiexec` (`python -m tests.mpi_programs
NAME`): each rank writes what it found as JSON, `{"rank": r, ...}`, to
`$MYIR_TEST_OUT/rank-<r>.json`, for the test to compare (the ranks' standard outputs
interleave)."""

import dataclasses
import hashlib
import json
import os
import sys
import weakref

import numpy as np

import myir
from myir import distributed as dist
from myir.demo import init_params, loss, spirals


def report(**values) -> None:
    path = os.path.join(os.environ["MYIR_TEST_OUT"], f"rank-{dist.rank()}.json")
    with open(path, "w") as f:
        json.dump({"rank": dist.rank(), "size": dist.size(), **values}, f)


def digest(value) -> str:
    from myir import tree

    return hashlib.sha256(b"".join(np.asarray(leaf).tobytes() for leaf in tree.leaves(value))
                          ).hexdigest()


def batch(rows: int, hidden: int = 16):
    rng = np.random.default_rng(0)
    x, labels = spirals(rows, 1.0, 0.04, rng)
    return init_params(hidden, rng), x[:rows * 2 - 1], np.eye(2)[labels][:rows * 2 - 1]


def data_parallel_gradient() -> None:
    """The gradient of the demo's mean loss, over shards of uneven size, weighted by rows;
    and over the whole batch in this process alone."""
    params, x, onehot = batch(100)
    g = myir.grad(loss)
    xs, ys = dist.shard(x, onehot)
    parallel = dist.allreduce(g(params, xs, ys), op="mean", weight=len(xs))
    full = g(params, x, onehot)
    error = max(float(np.max(np.abs(a - b)) / np.max(np.abs(b))) for a, b in zip(parallel, full))
    report(rows=len(xs), error=error, digest=digest(parallel))


@dataclasses.dataclass
class Layer:
    weights: np.ndarray
    scale: float


def mine(r: int):
    """A nested tree with this rank's values: tuples, lists, dicts, a dataclass, float32 and
    float64 arrays, Python and numpy scalars, ints."""
    k = r + 1
    return ({"W": np.arange(6.0).reshape(2, 3) * k, "b": [np.float32(0.5) * k, 2.0 * k]},
            Layer(np.linspace(0, 1, 5, dtype=np.float32) * k, 0.25 * k), 3 * k)


def reductions() -> None:
    """sum and mean of a nested tree; broadcast of rank 1's; a Python-side expectation."""
    r, w = dist.rank(), dist.size()
    from myir import tree

    total = dist.allreduce(mine(r))
    expected = tree.map(lambda *xs: sum(xs), *[mine(i) for i in range(w)])
    mean = dist.allreduce(mine(r)[:2], op="mean")
    weighted = dist.allreduce(mine(r)[:2], op="mean", weight=r + 1)
    ranks_weights = [i + 1 for i in range(w)]
    exact = dict(
        sum=all(np.array_equal(a, b) and type(a) is type(b) and np.asarray(a).dtype == np.asarray(b).dtype
                for a, b in zip(tree.leaves(total), tree.leaves(expected))),
        mean=all(np.allclose(a, sum(np.asarray(m, np.float64) for m in ms) / w, rtol=1e-6)
                 for a, *ms in zip(tree.leaves(mean), *[tree.leaves(mine(i)[:2]) for i in range(w)])),
        weighted=all(np.allclose(a, sum(wi * np.asarray(m, np.float64)
                                         for wi, m in zip(ranks_weights, ms)) / sum(ranks_weights),
                                 rtol=1e-6)
                     for a, *ms in zip(tree.leaves(weighted),
                                       *[tree.leaves(mine(i)[:2]) for i in range(w)])),
        kinds=type(total[1]) is Layer and type(total[0]["b"]) is list and type(total[2]) is int,
        broadcast=digest(dist.broadcast(mine(r), root=w - 1)) == digest(mine(w - 1)),
        # a rank with no rows (its mean loss's gradient: nan) weighs nothing
        empty=dist.allreduce(np.full(2, np.nan if r else 3.0), op="mean",
                             weight=0 if r else 5).tolist() == [3.0, 3.0])
    # a result still held is never written over by later calls of the same layout (their
    # buffers are fresh), and a dropped result's buffers are the next call's
    held = dist.allreduce(mine(r))
    for other in range(3):
        dist.allreduce(mine(r + 5 + other))
    exact["held"] = digest(held) == digest(total)
    address = dist.allreduce(mine(r))[0]["W"].base.ctypes.data
    exact["reused"] = dist.allreduce(mine(r + 1))[0]["W"].base.ctypes.data == address
    # the same, sent in pieces of 3 float64 values (leaves cut across pieces): the same bits
    dist.PIECE_BYTES, default = 24, dist.PIECE_BYTES
    exact["pieces"] = [digest(dist.allreduce(mine(r))), digest(dist.allreduce(mine(r)[:2], op="mean")),
                       digest(dist.allreduce(mine(r)[:2], op="mean", weight=r + 1)),
                       digest(dist.broadcast(mine(r), root=w - 1))] == \
        [digest(total), digest(mean), digest(weighted), digest(mine(w - 1))]
    # a sum's larger leaves reduced from where they are, in pieces too (the last one
    # shorter), one of them not contiguous (a transpose): the same bits
    dist.DIRECT_BYTES, direct_default = 40, dist.DIRECT_BYTES
    transposed = np.arange(14.0).reshape(2, 7).T
    exact["direct"] = digest(dist.allreduce(mine(r))) == digest(total) and np.array_equal(
        dist.allreduce({"T": transposed * (r + 1)})["T"], transposed * sum(range(1, w + 1)))
    dist.PIECE_BYTES, dist.DIRECT_BYTES = default, direct_default
    report(**exact, digests=[digest(total), digest(mean), digest(weighted)])


def mismatched() -> None:
    """Trees that differ between ranks, four ways: each must raise on every rank."""
    r = dist.rank()
    cases = {"shape": (np.zeros(3), np.zeros(2 + r)),
             "dtype": {"a": np.zeros(2, np.float64 if r == 0 else np.float32)},
             "structure": {"a": 1.0, ("b" if r == 0 else "c"): 2.0},
             "not a number": [1.0, 2.0 if r == 0 else "two"]}
    dist.allreduce((np.zeros(3), np.zeros(2)))     # rank 0's tree of "shape" sent before:
    errors = {}                                     # its layout and digest are kept
    for name, value in cases.items():
        for call in (dist.allreduce, dist.broadcast):
            try:
                call(value)
            except myir.MyirError as e:
                errors[f"{name} {call.__name__}"] = str(e)
    weights = []     # weights that make no mean: raised on every rank
    for weight in (0, -1.0 if r else 1.0):
        try:
            dist.allreduce(np.ones(2), op="mean", weight=weight)
        except myir.MyirError as e:
            weights.append(str(e).splitlines()[0])
    after = dist.allreduce(np.ones(2))     # and the ranks still work together
    report(errors=errors, weights=weights, after=after.tolist())


def failing_step(x, fail):
    if fail:
        raise ValueError("rank 1 fails at step 3")
    return x * 2.0


def raising() -> None:
    """Rank 1's compiled step raises at its third step; rank 0 goes on to its next
    allreduce."""
    step = myir.compile(failing_step)
    for i in range(100):
        dist.allreduce(step(np.ones(3), i == 3 and dist.rank() == 1))
    report(finished=True)


def exiting() -> None:
    """Rank 1 calls sys.exit(3) at its third step; rank 0 goes on to its next allreduce."""
    for i in range(100):
        if i == 3 and dist.rank() == 1:
            sys.exit(3)
        dist.allreduce(np.ones(3))
    report(finished=True)


def compile_once() -> None:
    """One rank compiles and saves; the other loads what it saved."""
    from myir import saved

    params, x, onehot = batch(32)
    g = dist.compile_once(myir.grad(loss), params, x, onehot)
    result = g(params, x, onehot)
    report(saved=saved.STATS["saved"], loaded=saved.STATS["loaded"], digest=digest(result))


def single() -> None:
    """Without mpiexec: one process, and every function works; and what they refuse."""
    params, x, onehot = batch(8)
    same = digest(dist.allreduce(params, op="mean", weight=7)) == digest(params) \
        and digest(dist.broadcast(params)) == digest(params) \
        and dist.shard(x).shape == x.shape
    errors = {}
    for name, call in {"op": lambda: dist.allreduce(params, op="max"),
                       "rows": lambda: dist.shard(x, onehot[:3]),
                       "leaf": lambda: dist.allreduce({"a": np.ones(2), "b": "text"}),
                       "integer mean": lambda: dist.allreduce((1, 2), op="mean"),
                       "weight": lambda: dist.allreduce(params, op="mean", weight=0)}.items():
        try:
            call()
        except myir.MyirError as e:
            errors[name] = str(e).splitlines()[0]
    # a layout is kept per structure, shapes and dtypes: the same structure with other
    # shapes or dtypes gets its own, and no tree's leaves stay alive with the kept one
    leaf = np.arange(6.0).reshape(2, 3)
    kept = weakref.ref(leaf)
    trees = [{"a": leaf, "b": [1]}, {"a": np.arange(4.0), "b": [2]},
             {"a": np.arange(6, dtype=np.float32), "b": [3]}, {"a": leaf.T, "b": [4.0]}]
    layouts = all(digest(dist.allreduce(t)) == digest(t) and
                  digest(dist.broadcast(t)) == digest(t) for t in trees)
    # more trees than layouts are kept: the oldest make room (a bounded cache), and are
    # worked out again when their trees come back
    many = [np.arange(float(k)) for k in range(1, 200)]
    layouts = layouts and all(np.array_equal(dist.allreduce(a), a) for a in many + many[:3]) \
        and len(dist._LAYOUTS) <= dist._LAYOUTS_KEPT
    del leaf, trees
    report(same=same, errors=errors, layouts=layouts, leaf_freed=kept() is None)


def pool_map() -> None:
    """mpi4py.futures' executor maps a compiled gradient as the serial loop does, in order."""
    from mpi4py.futures import MPIPoolExecutor

    params, x, onehot = batch(20, hidden=4)
    g = myir.grad(loss)
    xs = [x * (1 + 0.1 * k) for k in range(6)]
    serial = [digest(g(params, xk, onehot)) for xk in xs]
    with MPIPoolExecutor() as pool:
        parallel = [digest(r) for r in pool.map(g, [params] * 6, xs, [onehot] * 6)]
    report(same=parallel == serial)


if __name__ == "__main__":
    dist.init()
    globals()[sys.argv[1]]()
