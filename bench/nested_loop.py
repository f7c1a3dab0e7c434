"""`python -m bench.nested_loop [--sizes N,M ...] [--backend B] [--repeat K]` — the gradient
of a `while` loop nested in a `while` loop.

n outer iterations of m inner ones of `r = r * x + 0.1`: the outer loop's gradient pushes
the inner loop's stacks in its records and its backward loop runs the inner backward loop
in place (passes/ad.py), so the time per step should not depend on how the n * m steps
split between the loops.  Prints, per (n, m), the median over `--repeat` calls of the
compiled gradient (compiled once before), checked against the closed form
0.1 * (1 - N x^(N-1) + (N-1) x^N) / (1 - x)^2 + (N+1) x^N of the N = n * m steps, and the
compile time (median of `--repeat` compiles at a small size, after a first one that fills
the process's caches); and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def nested(x, n, m):
    r = x
    i = 0
    while i < n:
        j = 0
        while j < m:
            r = r * x + 0.1
            j += 1
        i += 1
    return r


def derivative(x: float, steps: int) -> float:
    """d nested / dx, for N = n * m steps: r = x^(N+1) + 0.1 * (x^0 + ... + x^(N-1))."""
    return 0.1 * (1 - steps * x ** (steps - 1) + (steps - 1) * x ** steps) / (1 - x) ** 2 \
        + (steps + 1) * x ** steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nested_loop",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", default=["1000,1000", "100000,10"],
                        help="n,m pairs (default 1000,1000 100000,10)")
    parser.add_argument("--backend", default="python")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    os.environ.setdefault("MYIR_PROGRAM_CACHE", "off")
    import myir

    myir.grad(nested, "x", backend=args.backend).lower(0.9, 3, 4)     # the process's first
    compiles = []                                                      # compile: caches
    for _ in range(args.repeat):
        g = myir.grad(nested, "x", backend=args.backend)
        start = time.perf_counter()
        g.lower(0.9, 3, 4)
        compiles.append(time.perf_counter() - start)
    print(f"compile (grad, {args.backend}): {statistics.median(compiles) * 1e3:.0f} ms")
    g = myir.grad(nested, "x", backend=args.backend)
    x = 0.999
    for size in args.sizes:
        n, m = map(int, size.split(","))
        value = g(x, n, m)
        assert abs(value - derivative(x, n * m)) <= 1e-8 * abs(value), (value, size)
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            g(x, n, m)
            times.append(time.perf_counter() - start)
        print(f"(n, m) = ({n}, {m}): {statistics.median(times):.3f} s")
    print(f"load average: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
