"""`python -m bench.deep_loop [--n N] [--backend B[,B]] [--limit S] [--branches]` — a deep
`while` loop.

A myir-only workload: a `while` loop of N iterations (10^6 by default), its forward and its
gradient, each timed in a fresh process, compile included, with the process's peak memory.
With `--branches` the loop's body has a `continue` and an `if` that joins again: three
paths per iteration, each with records of its own (passes/ad.py).
The gradient runs twice: with the pipeline (program cache off), and in a second process that
loads the program the first one saved, at CPython's default recursion limit either way.  The
gradient is checked against the derivative carried forward alongside the loop in CPython.

JAX gets two rows that say what it does with the same loop: a Python `while` under `jit` is
unrolled while tracing (timed at a small N to show the cost per iteration; N = 10^6 is not
attempted), and `lax.while_loop`, which traces once, cannot be reverse-differentiated.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROGRAM = '''import math


def deep_loop(x, n):
    r = x
    i = 0
    while i < n:
        r = r + 0.001 * math.sin(r)
        i += 1
    return r
'''

# The same loop with several paths per iteration: one in three skipped by `continue`, the
# others alternating between two updates that join again.
BRANCHES = '''import math


def deep_loop(x, n):
    r = x
    i = 0
    while i < n:
        i += 1
        if i % 3 == 0:
            continue
        if i % 2 == 0:
            r = r + 0.001 * math.sin(r)
        else:
            r = r * 0.9999 + 0.0001
    return r
'''


def _derivative(x: float, n: int, branches: bool) -> float:
    """d deep_loop / dx, carried forward with the loop: r' = r' * (1 + 0.001 cos r) (or
    r' * 0.9999 on the other path of BRANCHES)."""
    import math
    r, dr = x, 1.0
    for i in range(1, n + 1):
        if branches and i % 3 == 0:
            continue
        if branches and i % 2 == 1:
            r, dr = r * 0.9999 + 0.0001, dr * 0.9999
        else:
            r, dr = r + 0.001 * math.sin(r), dr * (1.0 + 0.001 * math.cos(r))
    return dr


def _load(directory: Path):
    sys.path.insert(0, str(directory))
    import deep_loop_program
    return deep_loop_program.deep_loop


def cell(system: str, mode: str, n: int, directory: Path) -> dict:
    """One measurement in this (fresh) process: seconds from building the callable to the
    end of its first call, and the peak resident memory of the process."""
    f = _load(directory)
    x = 0.5
    if system == "cpython":
        build = lambda: f                                   # noqa: E731
    elif system.startswith("myir-"):
        import myir
        import myir.pipeline  # noqa: F401  (imports are outside the clock)
        backend = system.removeprefix("myir-")
        target = f if mode == "forward" else myir.grad(f, "x")
        build = lambda: myir.compile(target, backend=backend)  # noqa: E731
    else:
        try:
            return _jax(mode, n, x, _has_branches(directory))
        except ImportError as e:
            return {"status": "n/a", "reason": f"not installed ({e})"}
    start = time.perf_counter()
    value = build()(x, n)
    seconds = time.perf_counter() - start
    want = f(x, n) if mode == "forward" else _derivative(x, n, _has_branches(directory))
    return {"seconds": seconds, "peak_mb": _peak_mb(), "value": value,
            "matches": abs(value - want) <= 1e-12 * max(1.0, abs(want))}


def _has_branches(directory: Path) -> bool:
    return (directory / "deep_loop_program.py").read_text() == BRANCHES


def _jax(mode: str, n: int, x: float, branches: bool) -> dict:
    import types

    import jax
    from jax import lax
    jax.config.update("jax_enable_x64", True)
    # the same function body, its `math.sin` being jax.numpy's (math.sin cannot take a tracer)
    namespace = {}
    exec(BRANCHES if branches else PROGRAM, namespace)
    namespace["math"] = types.SimpleNamespace(sin=jax.numpy.sin)
    f = namespace["deep_loop"]
    if mode == "unrolled":
        # The Python loop is traced with n static: every iteration becomes operations.
        fn = jax.jit(jax.grad(f), static_argnums=1)
    else:
        def body(state):
            i, r = state
            if not branches:
                return i + 1, r + 0.001 * jax.numpy.sin(r)
            i = i + 1
            stepped = jax.numpy.where(i % 2 == 0, r + 0.001 * jax.numpy.sin(r),
                                      r * 0.9999 + 0.0001)
            return i, jax.numpy.where(i % 3 == 0, r, stepped)
        fn = jax.grad(lambda x, n: lax.while_loop(lambda s: s[0] < n, body, (0, x))[1])
    start = time.perf_counter()
    try:
        value = float(fn(x, n))
    except Exception as e:      # what JAX says is the result
        return {"status": "fails", "reason": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_mb": _peak_mb(), "value": value,
            "matches": abs(value - _derivative(x, n, branches)) <= 1e-12 * max(1.0, abs(value))}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_cell(system: str, mode: str, n: int, directory: Path, cache: str, limit: float) -> dict:
    """`cell` in a fresh process with the program cache `cache` ("off", or a directory)."""
    env = dict(os.environ, MYIR_CACHE_DIR=cache, MYIR_PROGRAM_CACHE="on" if cache != "off" else "off",
              
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "bench.deep_loop", "--cell", system, mode, str(n), str(directory)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit, env=env, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "reason": f"> {limit:g} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": "fails", "reason": f"exit {done.returncode}: {tail[:160]}"}
    return json.loads(lines[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.deep_loop", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10 ** 6, help="iterations (default 10^6)")
    parser.add_argument("--backend", default="python,tvm", help="myir backends (default python,tvm)")
    parser.add_argument("--jax-n", type=int, default=1000, help="iterations JAX unrolls (default 1000)")
    parser.add_argument("--no-jax", action="store_true")
    parser.add_argument("--branches", action="store_true",
                        help="a loop with a `continue` and an `if` that joins (3 paths)")
    parser.add_argument("--limit", type=float, default=600, help="seconds per process (default 600)")
    parser.add_argument("--cell", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cell:
        system, mode, n, directory = args.cell
        print(json.dumps(cell(system, mode, int(n), Path(directory))))
        return 0
    directory = Path(tempfile.mkdtemp(prefix="deep_loop_"))
    (directory / "deep_loop_program.py").write_text(BRANCHES if args.branches else PROGRAM)
    rows = [("cpython", "forward", args.n, "off")]
    for backend in args.backend.split(","):
        saved = str(directory / f"cache-{backend}")
        rows += [(f"myir-{backend}", "forward", args.n, "off"), (f"myir-{backend}", "grad", args.n, "off"),
                 (f"myir-{backend}", "grad", args.n, saved), (f"myir-{backend}", "grad (saved)", args.n, saved)]
    if not args.no_jax:
        rows += [("jax", "unrolled", args.jax_n, "off"), ("jax", "lax.while_loop", args.n, "off")]
    loop = "with a `continue` and an `if` that joins" if args.branches else \
        "`while i < n: r = r + 0.001 * math.sin(r)`"
    print(f"deep_loop: {loop}, n = {args.n:,}; fresh process per row, compile included\n")
    print("| system | mode | n | s | peak MB | checked | / cpython forward | / its forward |")
    print("|---|---|---:|---:|---:|---|---:|---:|")
    forward = {}
    for system, mode, n, cache in rows:
        result = run_cell(system, mode.split(" ")[0] if system != "jax" else mode, n, directory, cache, args.limit)
        if cache != "off" and mode == "grad":
            continue    # the run that saves the program, for the next row to load
        if "seconds" not in result:
            print(f"| {system} | {mode} | {n:,} | {result['status']}: {result['reason']} | | | | |")
            continue
        if mode == "forward":
            forward[system] = result["seconds"]
        ratios = [f"{result['seconds'] / forward[s]:.1f}x" if s in forward and n == args.n else ""
                  for s in ("cpython", system)]
        print(f"| {system} | {mode} | {n:,} | {result['seconds']:.3g} | {result['peak_mb']:.0f} | "
              f"{'ok' if result['matches'] else 'MISMATCH'} | {' | '.join(ratios)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
