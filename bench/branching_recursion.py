"""`python -m bench.branching_recursion [--backend B] [--repeat K]` — gradients of
recursion with two calls on a path, which makes no closure per call
(passes/defunctionalise.py).

`fib` (two calls, n = 12 and 20: 465 and 21,891 calls) and `heap_walk` (a complete binary
tree stored in an array, depths 6 and 10), with respect to x.  Prints, per case, the best
over `--repeat` runs of CPython's forward, the compiled forward, the compiled gradient
(checked against central finite differences), and for fib a hand-written adjoint (a
forward pass pushing what each call's adjoint reads onto a list, a backward pass popping
it); the gradient's compile time; the second derivative of fib(12), its compile time
and run time; and the load average.
"""

from __future__ import annotations

import argparse
import math
import os
import time
import timeit

import numpy as np


def fib(x, n):
    if n < 2:
        return x * n + math.sin(x)
    return fib(x, n - 1) * 0.5 + fib(x * 1.01, n - 2)


def fib_by_hand(x, n):
    """d fib / dx with a stack of records: (0, n, x) at a leaf, (1,) elsewhere."""
    stack = []

    def forward(x, n):
        if n < 2:
            stack.append((0, n, x))
            return x * n + math.sin(x)
        a = forward(x, n - 1)
        b = forward(x * 1.01, n - 2)
        stack.append((1,))
        return a * 0.5 + b

    def backward(d):
        record = stack.pop()
        if record[0] == 0:
            return d * record[1] + d * math.cos(record[2])
        db = backward(d)
        return backward(d * 0.5) + db * 1.01

    forward(x, n)
    return backward(1.0)


def heap_walk(x, w, i, depth):
    if depth == 0:
        return math.sin(w[i] * x)
    left = heap_walk(x, w, 2 * i + 1, depth - 1)
    right = heap_walk(x * w[i], w, 2 * i + 2, depth - 1)
    return left * right + w[i] * x


def _best(fn, repeat: int) -> float:
    one = min(timeit.repeat(fn, number=1, repeat=3))
    number = max(1, int(0.05 / max(one, 1e-7)))
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.branching_recursion",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="python")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    os.environ.setdefault("MYIR_PROGRAM_CACHE", "off")
    import myir

    w = np.linspace(0.1, 0.9, 2 ** 11)
    cases = [("fib", fib, (0.3, 12)), ("fib", fib, (0.3, 20)),
             ("heap_walk", heap_walk, (0.7, w, 0, 6)), ("heap_walk", heap_walk, (0.7, w, 0, 10))]
    compiled = {}
    for name, f, a in cases:
        if name not in compiled:
            start = time.perf_counter()
            compiled[name] = myir.compile(f, backend=args.backend), \
                myir.grad(f, "x", backend=args.backend)
            compiled[name][1].lower(*a)
            print(f"{name}: gradient compiled in {time.perf_counter() - start:.2f} s")
        forward, gradient = compiled[name]
        h = 1e-6 * abs(a[0])
        expected = (f(a[0] + h, *a[1:]) - f(a[0] - h, *a[1:])) / (2 * h)
        got = gradient(*a)
        assert abs(got - expected) <= 1e-6 * max(1.0, abs(expected)), (name, got, expected)
        cpython = _best(lambda: f(*a), args.repeat)
        fwd = _best(lambda: forward(*a), args.repeat)
        grad = _best(lambda: gradient(*a), args.repeat)
        line = (f"{name}({a[-1]}): CPython {cpython * 1e6:.1f} us, forward {fwd * 1e6:.1f} us, "
                f"gradient {grad * 1e6:.1f} us = {grad / fwd:.2f}x forward, "
                f"{grad / cpython:.2f}x CPython")
        if f is fib:
            by_hand = _best(lambda: fib_by_hand(*a), args.repeat)
            line += f", {grad / by_hand:.2f}x the hand-written adjoint ({by_hand * 1e6:.1f} us)"
        print(line, flush=True)
    start = time.perf_counter()
    second = myir.grad(myir.grad(fib, "x"), "x", backend=args.backend)
    second.lower(0.3, 12)
    compile_s = time.perf_counter() - start
    h = 1e-6
    first = compiled["fib"][1]
    expected = (first(0.3 + h, 12) - first(0.3 - h, 12)) / (2 * h)
    assert abs(second(0.3, 12) - expected) <= 1e-5 * abs(expected), (second(0.3, 12), expected)
    print(f"fib(12), second derivative: compiled in {compile_s:.2f} s, "
          f"{_best(lambda: second(0.3, 12), args.repeat) * 1e3:.2f} ms")
    print(f"load average: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
