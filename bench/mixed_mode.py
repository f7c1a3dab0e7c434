"""The `hmlstm_vec` row: the HM-LSTM cell as a scalar function with `if`/`elif` under
`myir.vectorize`, its gradient by mixed mode (forward mode inside one fused kernel), against
the same cell written with `np.where` (`hmlstm`): myir's reverse mode, JAX's `jit(grad)` and
the hand-written numpy gradient.

    python -m bench.mixed_mode [--n 512] [--samples 7] [--threads 2] [--backend tvm]

Every gradient is checked against the hand-written one (relative 1e-4, float32) before it is
timed; the systems take turns (bench/timing.py: medians of samples, interleaved rounds); the
load average at the start is printed with the table, since these machines are shared.
"""

import sys

from bench import set_threads, steady_malloc, threads_from_argv

if __name__ == "__main__":
    set_threads(threads_from_argv(sys.argv))

import argparse  # noqa: E402
import os  # noqa: E402

import numpy as np  # noqa: E402

import myir  # noqa: E402


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def cell(c, f, i, g, z1, z2):
    """One element of the HM-LSTM cell update: FLUSH, UPDATE or COPY (workloads' `hmlstm`)."""
    if z1 == 1.0:
        return sigmoid(i) * np.tanh(g)
    elif z2 == 1.0:
        return sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    else:
        return c


def hmlstm_vec(c_prev, f, i, g, z1, z2):
    return np.sum(myir.vectorize(cell)(c_prev, f, i, g, z1, z2))


def inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    c, f, i, g = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(4))
    z1 = (rng.uniform(size=n) < 0.3).astype(np.float32)
    z2 = (rng.uniform(size=n) < 0.5).astype(np.float32)
    return c, f, i, g, z1, z2


def systems(backend: str) -> dict:
    """name -> (gradient function, converts the inputs), for the systems installed."""
    from bench.workloads import handwritten, load_programs, programs

    wrt = programs.WRT["hmlstm"]
    found = {
        f"myir-{backend} mixed (vectorize)": (myir.grad(hmlstm_vec, *wrt, backend=backend),
                                              lambda a: a),
        f"myir-{backend} reverse (np.where)": (myir.grad(programs.hmlstm, *wrt,
                                                         backend=backend), lambda a: a),
        "handwritten (numpy)": (handwritten.GRADS["hmlstm"], lambda a: a),
    }
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return found
    jitted = jax.jit(jax.grad(load_programs(jnp, "jax").hmlstm, argnums=wrt))
    found["jax jit(grad) (np.where)"] = (
        lambda *a: jax.block_until_ready(jitted(*a)),
        lambda a: tuple(jax.device_put(x) for x in a))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--backend", default="tvm")
    parser.add_argument("--sample-ms", type=float, default=30.0)
    opts = parser.parse_args(argv)
    from bench.timing import measure

    malloc = steady_malloc()
    load = os.getloadavg()[0]
    args = inputs(opts.n)
    found = systems(opts.backend)
    reference = found["handwritten (numpy)"][0](*args)
    callables = {}
    for name, (fn, convert) in found.items():
        a = convert(args)
        got = fn(*a)
        errors = [float(np.max(np.abs(np.asarray(x) - r)) / max(float(np.max(np.abs(r))), 1e-30))
                  for x, r in zip(got, reference)]
        if max(errors) > 1e-4:
            print(f"{name}: WRONG (relative error {max(errors):.2e}); not timed")
            continue
        callables[name] = (fn, a)
    results = measure(callables, opts.samples, opts.sample_ms * 1e6, 2 * opts.sample_ms * 1e6)
    medians = {k: float(np.median(v["samples_ns"])) / 1e3 for k, v in results.items()}
    mixed = next(k for k in medians if "mixed" in k)
    print(f"hmlstm_vec gradient, float32 {opts.n}x{opts.n}, {opts.threads} threads, "
          f"{opts.samples} interleaved rounds; load average {load:.2f}; {malloc}")
    print("| system | median µs | mixed / system |\n|---|---:|---:|")
    for k, t in medians.items():
        print(f"| {k} | {t:.0f} | {medians[mixed] / t:.2f} |")


if __name__ == "__main__":
    main()
