"""The demo's MLP (`python -m myir demo`) trained data-parallel over MPI (`myir.distributed`):

    mpiexec -n 2 -bind-to core python examples/distributed_train.py
    python examples/distributed_train.py        # one process: the same training, to rounding

Every rank computes the loss and gradient of its rows of the batch with one compiled
`value_and_grad`, the ranks average their gradients weighted by their rows (so the result is
the full batch's gradient, however the rows split), and every rank takes the same step.
`--check` also compares the ranks' parameters after every step, bit for bit.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time

import numpy as np

import myir
from myir import distributed as dist
from myir.demo import init_params, loss, predict, spirals


def same_on_every_rank(params) -> bool:
    """Whether every rank holds these very bits (a digest of each rank's, compared)."""
    if dist.size() == 1:
        return True
    from mpi4py import MPI

    digest = hashlib.sha256(b"".join(np.ascontiguousarray(p).tobytes() for p in params))
    return len(set(MPI.COMM_WORLD.allgather(digest.digest()))) == 1


def train(steps: int, hidden: int, points: int, lr: float, check: bool = False):
    """(the final parameters, the loss of each step over the whole batch), the same on every
    rank."""
    rng = np.random.default_rng(0)
    x, labels = spirals(points, 1.5, 0.04, rng)
    onehot = np.eye(2)[labels]
    params = dist.broadcast(init_params(hidden, rng))
    xs, ys = dist.shard(x, onehot)
    step = dist.compile_once(myir.value_and_grad(loss), params, xs, ys)
    losses = []
    for i in range(steps):
        value, grads = step(params, xs, ys)
        value, grads = dist.allreduce((value, grads), op="mean", weight=len(xs))
        params = tuple(p - lr * g for p, g in zip(params, grads))
        losses.append(value)
        if check and not same_on_every_rank(params):
            raise AssertionError(f"the ranks' parameters differ after step {i + 1}")
    return params, losses


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--hidden", type=int, default=32, help="hidden units (default 32)")
    parser.add_argument("--points", type=int, default=200,
                        help="points per spiral arm; the batch has twice as many (default 200)")
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--check", action="store_true",
                        help="compare the ranks' parameters after every step")
    parser.add_argument("--save", metavar="PATH",
                        help="rank 0 writes the final parameters and losses here (.npz)")
    args = parser.parse_args(argv)

    dist.init()
    start = time.perf_counter()
    params, losses = train(args.steps, args.hidden, args.points, args.lr, args.check)
    seconds = time.perf_counter() - start
    rng = np.random.default_rng(0)
    x, labels = spirals(args.points, 1.5, 0.04, rng)
    accuracy = float(np.mean(predict(params, x) == labels))
    if dist.rank() == 0:
        print(f"{dist.size()} process{'es' * (dist.size() > 1)}, {len(x)} points, "
              f"{args.steps} steps in {seconds:.2f} s: final loss {losses[-1]:.4f}, "
              f"accuracy {accuracy:.1%}")
        if args.save:
            np.savez(args.save, *params, losses=np.array(losses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
