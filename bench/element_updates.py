"""`python -m bench.element_updates [--samples S]` — element updates in a loop.

`y[i] = f(i)` for i in range(n) on a local `np.zeros(n)`: compiled code is functional
(`y = setitem(y, i, v)` makes a new array), and the python backend writes in place where
the old array is dead.  Written as copies, the loop would cost O(n^2); this bench shows it
costs O(n), like CPython: the per-call time of the compiled function and of CPython for
n = 10^3, 10^4, 10^5 (medians of interleaved samples, bench/timing.py), and the time per
element.  The second workload updates a row of a 2-D array and a slice; the third appends
to a local list (`xs = xs + [v]` as a new value, `xs.append(v)` in place where the old
list is dead).
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

import myir
from bench.timing import measure


def squares(n):
    y = np.zeros(n)
    for i in range(n):
        y[i] = i * 0.5 + 1.0
    return y


def rows(n):
    y = np.zeros((n, 3))
    for i in range(n):
        y[i, 0] = i
        y[i, 1:] += 1.0
    return y


def appends(n):
    xs = []
    for i in range(n):
        xs.append(i * 0.5 + 1.0)
    return xs


WORKLOADS = (squares, rows, appends)
SIZES = (1_000, 10_000, 100_000)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{'workload':<10}{'n':>8}{'myir ms':>12}{'CPython ms':>12}{'myir ns/elt':>13}"
          f"{'ratio':>8}")
    for fn in WORKLOADS:
        compiled = myir.compile(fn)
        for n in SIZES:
            assert np.array_equal(compiled(n), fn(n))
            results = measure({"myir": (compiled, (n,)), "cpython": (fn, (n,))},
                              args.samples, target_ns=200_000_000, warmup_ns=100_000_000)
            ms = {k: statistics.median(r["samples_ns"]) / 1e6 for k, r in results.items()}
            print(f"{fn.__name__:<10}{n:>8}{ms['myir']:>12.3f}{ms['cpython']:>12.3f}"
                  f"{ms['myir'] * 1e6 / n:>13.1f}{ms['myir'] / ms['cpython']:>8.2f}")


if __name__ == "__main__":
    main()
