"""`python -m bench.compile_scaling [--quick] [--families F[,F]] [--backend B[,B]]
[--sizes N[,N]] [--mode forward|grad|both] [--no-jax] [--limit S] [--clock wall|cpu] [--out DIR]`
— how compile time grows with the program.

For each family of generated programs (`bench/scaling_programs.py`), size N (25 to 1,600,
doubling), system and mode, one fresh process times the first call: building the callable
and calling it once, imports done before the clock starts.  myir runs with its disk caches
off (`MYIR_CACHE_DIR=off`: no saved program, no TVM region cache), so every stage runs; it
also reports its stages' times (`Lowered.timings`).  JAX, when installed, is timed as
`jax.jit(f)` and `jax.jit(jax.grad(f, argnums=WRT))`.  A process that runs past `--limit`
seconds is killed and its cell reported as "> limit" (the larger sizes of that row are not
tried).

k is the slope of log(time) over log(N), fitted over N = 200 to 1,600 (over every size
measured with `--quick`).  Time is wall-clock time; `--clock cpu` tables and fits the
process's CPU time instead, which other work on a shared machine disturbs less (JAX's
compiles use several threads: their CPU time is larger than their wall time).  Results: `compile_scaling.md`, `.json` and `.png` (log-log plot,
skipped when matplotlib is missing) in `--out` (default bench/results/).

`python -m bench.compile_scaling --cell FAMILY N SYSTEM MODE DIR` is one measurement, as
a JSON line: what the parent runs in each fresh process.
"""

import sys

from bench import set_threads, threads_from_argv

if __name__ == "__main__":
    set_threads(threads_from_argv(sys.argv[1:]))  # before numpy is imported

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402

from bench import scaling_programs  # noqa: E402
from bench.systems import short, static_positions  # noqa: E402

SIZES = (25, 50, 100, 200, 400, 800, 1600)
QUICK_SIZES = (25, 50)
FIT_FROM = 200
REPO = Path(__file__).resolve().parent.parent


def write_module(family: str, n: int, directory: Path) -> Path:
    path = directory / f"scaling_{family}_{n}.py"
    if not path.exists():
        path.write_text(scaling_programs.source(family, n))
    return path


def load_module(path: Path, np_namespace):
    """The generated module at `path`, its functions reaching numpy through `np_namespace`."""
    module = types.ModuleType(path.stem)
    module.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    module.np = np_namespace
    return module


def cell(family: str, n: int, system: str, mode: str, directory: Path) -> dict:
    """One first-call measurement in this process (fresh: nothing compiled before)."""
    result = {"family": family, "n": n, "system": system, "mode": mode}
    args = scaling_programs.INPUTS[family]()
    wrt = scaling_programs.WRT[family]
    path = write_module(family, n, directory)
    try:
        if system == "jax":
            build, args = _jax(path, args, wrt, mode)
        else:
            build = _myir(path, system.removeprefix("myir-"), wrt, mode)
        start, cpu = time.perf_counter(), time.process_time()
        fn = build()
        fn(*args)
        result["ms"] = (time.perf_counter() - start) * 1e3
        result["cpu_ms"] = (time.process_time() - cpu) * 1e3
        prepared = getattr(fn, "prepare", None)
        if prepared is not None:    # the pipeline's stages, for the compile just done
            result["stages_ms"] = prepared(*args).timings
    except ImportError as e:
        return result | {"status": "n/a", "reason": f"not installed ({short(e)})"}
    except Exception as e:      # reported, the other cells go on
        return result | {"status": "fails", "reason": short(e)}
    return result | {"status": "ok"}


def _myir(path: Path, backend: str, wrt: tuple, mode: str):
    import numpy as np

    import myir
    import myir.pipeline  # noqa: F401  (imports are outside the clock)
    if backend == "tvm":
        import backends.tvm.regions  # noqa: F401
        from backends.tvm import load_tvm

        load_tvm()
    f = load_module(path, np).f
    if mode == "forward":
        return lambda: myir.compile(f, backend=backend)
    return lambda: myir.compile(myir.grad(f, *wrt), backend=backend)


def _jax(path: Path, args: tuple, wrt: tuple, mode: str):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    f = load_module(path, jnp).f
    if mode == "grad":
        f = jax.grad(f, argnums=wrt)
    static = static_positions(args)
    args = tuple(jax.device_put(a) if i not in static else a for i, a in enumerate(args))

    def build():
        jitted = jax.jit(f, static_argnums=static)
        return lambda *a: jax.block_until_ready(jitted(*a))
    return build, args


def run_cell(family, n, system, mode, directory, limit) -> dict:
    """`cell` in a fresh process, killed after `limit` seconds."""
    env = dict(os.environ, MYIR_CACHE_DIR="off", MYIR_PROGRAM_CACHE="off",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "bench.compile_scaling", "--cell", family, str(n),
               system, mode, str(directory)]
    row = {"family": family, "n": n, "system": system, "mode": mode}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit, env=env,
                              cwd=REPO)
    except subprocess.TimeoutExpired:
        return row | {"status": "timeout", "reason": f"> {limit:g} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return row | {"status": "fails", "reason": f"exit {done.returncode}: {tail[:160]}"}
    return json.loads(lines[-1])


def slope(points: list[tuple[int, float]], lowest: int) -> float | None:
    """Least-squares slope of log(ms) over log(N), for N >= lowest."""
    xs = [math.log(n) for n, _ in points if n >= lowest]
    ys = [math.log(ms) for n, ms in points if n >= lowest]
    if len(xs) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def summarise(rows: list[dict], sizes: tuple, lowest: int, clock: str = "ms") -> list[dict]:
    """One line per (family, system, mode): time per N, k, the largest N measured; time is
    each cell's `clock` ("ms": wall, "cpu_ms": CPU)."""
    lines = {}
    for r in rows:
        lines.setdefault((r["family"], r["system"], r["mode"]), []).append(r)
    result = []
    for (family, system, mode), cells in lines.items():
        points = [(c["n"], c[clock]) for c in cells if c["status"] == "ok"]
        stopped = [c for c in cells if c["status"] != "ok"]
        fitted = slope(points, lowest)
        # k is open to doubt when a size in its range did not finish
        trusted = not any(c["n"] >= lowest for c in stopped)
        result.append({"family": family, "system": system, "mode": mode, "clock": clock,
                       "cells": {c["n"]: c for c in cells}, "k": fitted, "k_complete": trusted,
                       "largest": max(points) if points else None})
    return result


def markdown(summary: list[dict], sizes: tuple, lowest: int) -> str:
    head = " | ".join(f"N={n}" for n in sizes)
    clock = "CPU time" if summary and summary[0]["clock"] == "cpu_ms" else "wall time"
    out = [f"# Compile time against program size (first call, ms of {clock}; disk caches off)",
           "",
           f"k = slope of log(time) over log(N) for N >= {lowest}.", "",
           f"| family | system | mode | {head} | k |",
           "|---|---|---|" + "---:|" * (len(sizes) + 1)]
    for s in summary:
        cells = []
        for n in sizes:
            c = s["cells"].get(n)
            cells.append("" if c is None else f"{c[s['clock']]:,.0f}" if c["status"] == "ok"
                         else c["reason"] if c["status"] == "timeout" else c["status"])
        k = "" if s["k"] is None else f"{s['k']:.2f}" + ("" if s["k_complete"] else " (partial)")
        out.append(f"| {s['family']} | {s['system']} | {s['mode']} | {' | '.join(cells)} | {k} |")
    failures = [c for s in summary for c in s["cells"].values()
                if c["status"] in ("fails", "n/a")]
    if failures:
        out += ["", "Not measured:", ""]
        out += [f"- {c['family']} N={c['n']} {c['system']} {c['mode']}: {c['status']}: "
                f"{c['reason']}" for c in failures]
    return "\n".join(out) + "\n"


def plot(summary: list[dict], families: tuple, path: Path) -> str:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped: matplotlib is not installed (pip install -e '.[bench]')"
    cpu = bool(summary) and summary[0]["clock"] == "cpu_ms"
    fig, axes = plt.subplots(1, len(families), figsize=(4.2 * len(families), 4), squeeze=False)
    for ax, family in zip(axes[0], families):
        for s in summary:
            if s["family"] != family:
                continue
            points = sorted((n, c[s["clock"]]) for n, c in s["cells"].items()
                            if c["status"] == "ok")
            if not points:
                continue
            k = "" if s["k"] is None else f" (k {s['k']:.2f})"
            ax.plot(*zip(*points), marker="o", linestyle="-" if s["mode"] == "forward" else "--",
                    label=f"{s['system']} {s['mode']}{k}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"family {family}")
        ax.set_xlabel("N")
        ax.set_ylabel("first call, ms" + (" of CPU" if cpu else ""))
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return f"written: {path}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compile_scaling",
                                description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help=f"a smoke run: N = {', '.join(map(str, QUICK_SIZES))}, the python backend")
    p.add_argument("--families", default=",".join(scaling_programs.FAMILIES))
    p.add_argument("--backend", help="myir backend(s), comma-separated (default python,tvm)")
    p.add_argument("--sizes", help="comma-separated N (default 25 to 1600, doubling)")
    p.add_argument("--mode", choices=("forward", "grad", "both"), default="both")
    p.add_argument("--no-jax", action="store_true", help="do not time JAX")
    p.add_argument("--limit", type=float, default=120.0, help="seconds per compile (default 120)")
    p.add_argument("--threads", type=int, help="threads for every library (default 2)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="the time tabled and fitted: wall-clock (default) or the process's CPU")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    p.add_argument("--cell", nargs=5, metavar=("FAMILY", "N", "SYSTEM", "MODE", "DIR"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.cell:
        family, n, system, mode, directory = args.cell
        print(json.dumps(cell(family, int(n), system, mode, Path(directory))))
        return 0
    sizes = tuple(int(n) for n in args.sizes.split(",")) if args.sizes \
        else QUICK_SIZES if args.quick else SIZES
    lowest = min(sizes) if args.quick else FIT_FROM
    backends = args.backend.split(",") if args.backend else ["python"] if args.quick \
        else ["python", "tvm"]
    systems = [f"myir-{b}" for b in backends] + ([] if args.no_jax else ["jax"])
    families = tuple(args.families.split(","))
    modes = ("forward", "grad") if args.mode == "both" else (args.mode,)
    rows = []
    with tempfile.TemporaryDirectory(prefix="myir-scaling-") as tmp:
        for family in families:
            for system in systems:
                for mode in modes:
                    rows += _row(family, system, mode, sizes, Path(tmp), args.limit)
    summary = summarise(rows, sizes, lowest, "cpu_ms" if args.clock == "cpu" else "ms")
    text = markdown(summary, sizes, lowest)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compile_scaling.md").write_text(text)
    (args.out / "compile_scaling.json").write_text(json.dumps(rows, indent=1))
    print(text)
    print(plot(summary, families, args.out / "compile_scaling.png"))
    print(f"written: {args.out / 'compile_scaling.md'}, {args.out / 'compile_scaling.json'}")
    return 0


def _row(family, system, mode, sizes, directory, limit) -> list[dict]:
    """The cells of one line, smallest N first, stopping at the first that does not finish
    (a larger program would not either)."""
    cells = []
    for n in sizes:
        if n > scaling_programs.MAX_N.get(family, n):
            continue
        c = run_cell(family, n, system, mode, directory, limit)
        cells.append(c)
        shown = f"{c['ms']:,.0f} ms" if c["status"] == "ok" else f"{c['status']} {c['reason']}"
        print(f"  {family} N={n} {system} {mode}: {shown}", flush=True)
        if c["status"] != "ok":
            break
    return cells


if __name__ == "__main__":
    sys.exit(main())
