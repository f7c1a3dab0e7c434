"""`python -m myir demo`: compile a few ordinary Python functions, check them against
CPython, and show what the compiler made of one (its graph and the generated code)."""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import myir


def newton_sqrt(a):
    """A `while` loop on data."""
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


def compose(f, g):
    return lambda x: f(g(x))


def closures(x, n):
    """Closures, higher-order functions, `for` over a range, `break`."""
    h = compose(math.sin, lambda t: t * 2.0)
    total = 0.0
    for i in range(n):
        if total > 10.0:
            break
        total += h(x + i)
    return total


def collatz(n):
    """Recursion and integer arithmetic."""
    if n == 1:
        return 0
    return 1 + collatz(n // 2 if n % 2 == 0 else 3 * n + 1)


def softmax_rows(x):
    """numpy: reductions with axis/keepdims and broadcasting."""
    z = x - np.max(x, axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


CASES = [
    (newton_sqrt, (2.0,)),
    (closures, (0.5, 40)),
    (collatz, (27,)),
    (softmax_rows, (np.arange(6.0).reshape(2, 3),)),
]


def per_call_us(fn, args, repeat: int = 2000) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / repeat)
    return best * 1e6


def main(argv=()) -> int:
    parser = argparse.ArgumentParser(prog="python -m myir demo",
                                     description="Compile and run a few functions.")
    parser.add_argument("--backend", default=None, help="backend to compile with")
    args = parser.parse_args(list(argv))
    print(f"myir {myir.__version__}: compiling {len(CASES)} functions\n")
    print(f"{'function':<14} {'result':<28} {'== CPython':<11} {'compiled':>10} {'CPython':>10}")
    for fn, fargs in CASES:
        compiled = myir.compile(fn, backend=args.backend)
        got, want = compiled(*fargs), fn(*fargs)
        same = bool(np.array_equal(got, want)) if isinstance(want, np.ndarray) else got == want
        text = np.array2string(got, precision=3) if isinstance(got, np.ndarray) else repr(got)
        print(f"{fn.__name__:<14} {text.splitlines()[0][:28]:<28} {str(same):<11} "
              f"{per_call_us(compiled, fargs):>8.2f}µs {per_call_us(fn, fargs):>8.2f}µs")
        if not same:
            print(f"  MISMATCH: CPython gives {want!r}")
            return 1
    lowered = myir.compile(newton_sqrt).lower(2.0)
    print("\nThe graph of newton_sqrt (a loop is a graph calling itself in tail position):\n")
    print(lowered.graph("parsed"))
    print("\nThe Python myir generated from that graph:\n")
    print(lowered.source)
    return 0
