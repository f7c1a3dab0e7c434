"""`python -m bench.distributed [--quick]`: myir.distributed on MPI (the `dist` extra).

Three measurements and a model, printed as markdown:

1. `allreduce` of a parameter tree (a dict of four float64 arrays, 10^3 to 10^7 values in
   all) on 2 ranks, against mpi4py's raw `Allreduce` of one flat buffer of as many values,
   and of that buffer in the pieces `allreduce` sends (`PIECE_BYTES`; not run where the
   buffer is one piece, the raw call again): what packing the tree's leaves (and checking
   the ranks' trees agree) costs on top of MPI.
2. The demo's MLP (`myir.demo.loss`, hidden 256) trained data-parallel at 1 and 2
   processes, one thread each: samples per second of `value_and_grad` + `allreduce` + the
   update, at a batch where compute dominates.
3. A weak-scaling projection to 8-64 workers — a model, not a measurement: step time
   T(W) = t_compute + 2(W-1)·α + 2(W-1)/W · P·8 bytes / β (ring all-reduce: each worker
   sends and receives 2(W-1)/W·P values in 2(W-1) messages), with α and β fitted to the
   measured 2-rank raw Allreduce times (`fit`) and t_compute the measured 1-process step.  α and β here
   are this machine's shared memory; between nodes they are the network's.

Each rank runs with OMP/OPENBLAS/MKL/TVM_NUM_THREADS=1, bound to its own core by the
launcher (`-bind-to core`); the machine's load average is printed with the figures, since
other work on its cores shows in them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

SIZES = [10 ** k for k in range(3, 8)]
HIDDEN = 256
THREADS = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                            "TVM_NUM_THREADS")}


def _tree(n: int, np):
    """A parameter tree of `n` float64 values in four leaves of an MLP's proportions."""
    w1, b1, w2 = n * 6 // 10, n // 100, n * 3 // 10
    return {"W1": np.ones(w1), "b1": np.ones(b1), "W2": np.ones(w2),
            "b2": np.ones(n - w1 - b1 - w2)}


def _times_ms(runs: list, repeat: int, comm) -> list[tuple[float, float]]:
    """(fastest, median) of `repeat` timed calls of each of `runs`, in ms, the ranks starting
    each call together; a call takes as long as its slowest rank.  The runs are taken in
    turn, so that a burst of other work on the machine hits them alike, in a fresh random
    order each round (the same on every rank): each run follows each of the others as often,
    so none finds another's data in the cache more often than the rest."""
    import numpy as np
    from mpi4py import MPI

    times = [[] for _ in runs]
    order = np.random.default_rng(0)
    for _ in range(repeat):
        for k in order.permutation(len(runs)):
            comm.Barrier()
            start = time.perf_counter()
            runs[k]()
            times[k].append(time.perf_counter() - start)
    return [(comm.allreduce(min(samples), op=MPI.MAX) * 1e3,
             comm.allreduce(float(np.median(samples)), op=MPI.MAX) * 1e3)
            for samples in times]


def worker_allreduce(quick: bool) -> dict:
    import numpy as np
    from mpi4py import MPI

    from myir import distributed as dist

    comm = MPI.COMM_WORLD
    rows = []
    for n in SIZES:
        repeat = max(5 if quick else 60, min(200, 2 * 10 ** 8 // n // (10 if quick else 1)))
        tree = _tree(n, np)
        flat, out = np.ones(n), np.empty(n)
        runs = {"ours": lambda: dist.allreduce(tree), "raw": lambda: comm.Allreduce(flat, out)}
        step = dist.PIECE_BYTES // flat.itemsize
        if n > step:    # in one piece it is the raw call again, whose buffers would only
            # crowd the others' out of the cache; the pieces' own buffers: sharing raw's,
            # one would find the other's data in the cache
            flat2, out2 = np.ones(n), np.empty(n)
            runs["pieces"] = lambda: [comm.Allreduce(flat2[at:at + step], out2[at:at + step])
                                      for at in range(0, n, step)]

        for run in runs.values():   # warm: first-call costs are not the subject
            run()
        row = {"values": n}
        for name, (fastest, median) in zip(runs, _times_ms(list(runs.values()), repeat, comm)):
            row[f"{name}_ms"], row[f"{name}_median_ms"] = fastest, median
        rows.append(row)
    return {"allreduce": rows}


def worker_train(batch: int, steps: int) -> dict:
    import numpy as np

    import myir
    from myir import distributed as dist
    from myir.demo import init_params, loss, spirals

    rng = np.random.default_rng(0)
    x, labels = spirals(batch // 2, 1.5, 0.04, rng)
    onehot = np.eye(2)[labels]
    params = dist.broadcast(init_params(HIDDEN, rng))
    xs, ys = dist.shard(x, onehot)
    step = dist.compile_once(myir.value_and_grad(loss), params, xs, ys)

    def train(count):
        nonlocal params
        for _ in range(count):
            value, grads = step(params, xs, ys)
            value, grads = dist.allreduce((value, grads), op="mean", weight=len(xs))
            params = tuple(p - 0.1 * g for p, g in zip(params, grads))

    train(3)
    compute, cpu = [], []
    for _ in range(3):       # the step's compute alone, for the model
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step(params, xs, ys)
        compute.append((time.perf_counter() - start) / steps)
        cpu.append((time.process_time() - start_cpu) / steps)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    ((best, _),) = _times_ms([lambda: train(steps)], 3, comm)
    best /= steps
    return {"size": dist.size(), "batch": batch, "step_ms": best,
            "samples_per_s": batch / best * 1e3, "compute_ms": min(compute) * 1e3,
            "compute_cpu_ms": min(cpu) * 1e3,
            "parameters": int(sum(p.size for p in params))}


def launch(n: int, *args: str) -> dict:
    """Run this module's worker on `n` ranks; rank 0's result."""
    command = [shutil.which("mpiexec") or "mpiexec", "-n", str(n), "-bind-to", "core",
               sys.executable, "-m", "bench.distributed", "--worker", *args]
    out = subprocess.run(command, env={**os.environ, **THREADS}, capture_output=True,
                         text=True, timeout=600)
    if out.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{out.stderr}")
    return json.loads(out.stdout.splitlines()[-1])


def fit(rows) -> tuple[float, float]:
    """α (s) and β (bytes/s) from the raw Allreduce on 2 ranks, whose ring is 2 messages of
    P values in all: T = 2α + P·8/β.  α from the smallest size (where P·8/β is negligible),
    β from the largest."""
    small, large = rows[0], rows[-1]
    alpha = small["raw_ms"] * 1e-3 / 2
    return alpha, large["values"] * 8 / (large["raw_ms"] * 1e-3 - 2 * alpha)


def projection(alpha: float, beta: float, compute_s: float, parameters: int) -> list:
    out = []
    for w in (8, 16, 32, 64):
        comm = 2 * (w - 1) * alpha + 2 * (w - 1) / w * parameters * 8 / beta
        out.append((w, (compute_s + comm) * 1e3, compute_s / (compute_s + comm)))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.distributed",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and steps")
    parser.add_argument("--batch", type=int, default=16384,
                        help="samples per step (all ranks together; default 16384)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of 1 and 2 processes, in turn (default 3; the fastest counts)")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        from bench import steady_malloc

        steady_malloc()     # freed buffers are reused, as in bench's other measurements
        kind, *rest = args.worker
        result = worker_allreduce(rest == ["quick"]) if kind == "allreduce" \
            else worker_train(int(rest[0]), int(rest[1]))
        from myir import distributed as dist

        if dist.rank() == 0:
            print(json.dumps(result))
        return 0

    steps = 5 if args.quick else 20
    load = os.getloadavg()
    reduce = launch(2, "allreduce", *(["quick"] if args.quick else []))["allreduce"]
    # 1 and 2 processes in turn, the fastest run of each: other work on the machine comes
    # and goes
    runs = [(launch(1, "train", str(args.batch), str(steps)),
             launch(2, "train", str(args.batch), str(steps))) for _ in range(args.rounds)]
    one = max((r[0] for r in runs), key=lambda r: r["samples_per_s"])
    two = max((r[1] for r in runs), key=lambda r: r["samples_per_s"])
    load_after = os.getloadavg()

    print(f"# myir.distributed on {os.cpu_count()} CPUs (load average {load[0]:.2f} before, "
          f"{load_after[0]:.2f} after); MPI: mpiexec -bind-to core, one thread per rank\n")
    print("## allreduce on 2 ranks: a 4-leaf float64 tree vs raw Allreduce of one flat "
          "buffer, and of the same buffer in the pieces `allreduce` sends (ms: median of "
          "interleaved calls, fastest in brackets)\n")
    print("| values | myir allreduce | raw Allreduce | raw, in pieces | ratio to raw |\n"
          "|---|---|---|---|---|")
    for r in reduce:
        print(f"| {r['values']:.0e} | " + " | ".join(
            f"{r[f'{k}_median_ms']:.3f} ({r[f'{k}_ms']:.3f})" if f"{k}_ms" in r else "one piece"
            for k in ("ours", "raw", "pieces"))
            + f" | {r['ours_median_ms'] / r['raw_median_ms']:.2f}x |")
    print(f"\n## the demo MLP (2-{HIDDEN}-2, {one['parameters']} parameters), batch "
          f"{args.batch}, data-parallel\n")
    print("| processes | step ms | compute ms (rank 0) | compute CPU ms (rank 0) | samples/s | "
          "speed-up |\n|---|---|---|---|---|---|")
    for r in (one, two):
        print(f"| {r['size']} | {r['step_ms']:.2f} | {r['compute_ms']:.2f} | "
              f"{r['compute_cpu_ms']:.2f} | "
              f"{r['samples_per_s']:.0f} | {r['samples_per_s'] / one['samples_per_s']:.2f}x |")
    alpha, beta = fit(reduce)
    compute = one["compute_ms"] * 1e-3
    print(f"\n## weak scaling, a model (not measured): {args.batch} samples per worker\n")
    print(f"T(W) = t_compute + 2(W-1)·α + 2(W-1)/W·P·8 B/β, with t_compute = "
          f"{compute * 1e3:.2f} ms (measured, 1 process), P = {one['parameters']}, and "
          f"α = {alpha * 1e6:.1f} µs, β = {beta / 1e9:.2f} GB/s fitted to the raw 2-rank "
          "Allreduce times above (this machine's shared memory; across nodes, the "
          "network's)\n")
    print("| workers | step ms | efficiency t_compute/T |\n|---|---|---|")
    for w, t, e in projection(alpha, beta, compute, one["parameters"]):
        print(f"| {w} | {t:.2f} | {e:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
