"""Runs the benchmark: checks, interleaved timing, first-call subprocesses, report.

Entry point: `python -m bench` (bench/__main__.py sets the thread count before this module
imports numpy).  See bench/README.md for the method.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from bench import hessians, report, steady_malloc, threads, timing
from bench.checks import check
from bench.systems import NotApplicable, Unavailable, make_system, short
from bench import workloads
from bench.workloads import check_shared

BASE_SYSTEMS = ("cpython", "handwritten", "jax", "torch")
FIRSTCALL_SYSTEMS = ("jax", "myir")  # systems that compile on their first call
REPO = Path(__file__).resolve().parent.parent


@dataclass
class Cell:
    """The outcome of one system on one workload in one mode."""
    workload: str
    mode: str
    system: str
    status: str  # ok | WRONG | n/a | fails | -
    reason: str = ""
    check: str = ""
    calls_per_sample: int = 0
    samples_ns: list = field(default_factory=list)
    first_call_ms: list = field(default_factory=list)
    first_call_saved_ms: list = field(default_factory=list)   # myir: the program saved

    @property
    def median_us(self):
        return statistics.median(self.samples_ns) / 1e3 if self.samples_ns else None


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="fewer, shorter samples and no first-call runs (about a minute)")
    p.add_argument("--only", help="comma-separated workloads (default: all)")
    p.add_argument("--backend", default="python",
                   help="myir backend(s), comma-separated: system myir-B for each (default python); "
                        "B+fastmath compiles with fastmath=True, B+noopt with optimize=False")
    p.add_argument("--systems", help="comma-separated systems to run (default: all)")
    p.add_argument("--mode", choices=("forward", "grad", "both", "hessian"), default="both",
                   help="both: forward and grad; hessian: the Hessian rows (bench/hessians.py)")
    p.add_argument("--threads", type=int, default=threads(),
                   help="threads for every library (default 2; set before numpy is imported)")
    p.add_argument("--samples", type=int, help="samples per system (default 7, quick 3)")
    p.add_argument("--sample-ms", type=float, help="target time of one sample (default 30, quick 20)")
    p.add_argument("--firstcall-runs", type=int,
                   help="fresh processes per first-call measurement (default 3, quick 0)")
    p.add_argument("--malloc", choices=("steady", "default"), default="steady",
                   help="steady (default): fix glibc malloc's thresholds so large temporaries "
                        "are not returned to the kernel and faulted back in (see "
                        "bench.steady_malloc); default: glibc's adaptive behaviour")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = p.parse_args(argv)
    if args.threads != threads():
        p.error("--threads must be parsed before numpy is imported: run `python -m bench`")
    args.samples = args.samples or (3 if args.quick else 7)
    args.sample_ms = args.sample_ms or (20.0 if args.quick else 30.0)
    if args.firstcall_runs is None:
        args.firstcall_runs = 0 if args.quick else 3
    args.workloads = args.only.split(",") if args.only else list(workloads.WORKLOADS)
    unknown = set(args.workloads) - set(workloads.WORKLOADS)
    if unknown:
        p.error(f"unknown workload(s) {sorted(unknown)}; known: {', '.join(workloads.WORKLOADS)}")
    args.modes = ("forward", "grad") if args.mode == "both" else (args.mode,)
    all_systems = list(BASE_SYSTEMS) + [f"myir-{b}" for b in args.backend.split(",")]
    args.system_names = args.systems.split(",") if args.systems else all_systems
    return args


def load_systems(names):
    """{name: system or the reason it is unavailable}."""
    systems = {}
    for name in names:
        system = make_system(name)
        try:
            system.load()
            systems[name] = system
        except Unavailable as e:
            systems[name] = str(e)
    return systems


def prepare(system, workload, mode, inputs, reference):
    """Build and check one cell: (Cell, (fn, args) ready to time, or None)."""
    cell = Cell(workload, mode, system.name, "ok")
    try:
        args = system.inputs(workload, mode, inputs)
        fn = system.build(workload, mode, args)
    except NotApplicable as e:
        cell.status, cell.reason = "-", str(e)
        return cell, None
    except Unavailable as e:
        cell.status, cell.reason = "n/a", str(e)
        return cell, None
    except Exception as e:
        cell.status, cell.reason = "fails", system.failure(e)
        return cell, None
    try:
        out = fn(*args)  # first call: compiles where the system compiles
    except Exception as e:
        cell.status, cell.reason = "fails", system.failure(e)
        return cell, None
    try:
        result = check(workload, mode, inputs, out, reference)
    except Exception as e:  # a result of the wrong kind altogether
        cell.status, cell.reason = "WRONG", f"result not checkable: {short(e)}"
        return cell, None
    cell.check = result.describe()
    if not result.ok:
        cell.status, cell.reason = "WRONG", result.describe()
        return cell, None
    return cell, (fn, args)


def first_call_ms(system, workload, mode, runs, **env):
    """First-call times (ms) of `runs` fresh processes (with `env` added to the
    environment), or a failure reason."""
    times = []
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-m", "bench.firstcall", system, workload, mode],
            cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ, **env})
        try:
            result = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            return f"first-call process failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"
        if "first_call_ms" not in result:
            return result.get("reason", "?")
        times.append(result["first_call_ms"])
    return times


def measure_first_calls(cell, runs):
    """myir's first call twice: running the pipeline (regions found in the disk cache:
    the cell's own run compiled them), and loading the program saved by one more process."""
    if cell.system.startswith("myir"):
        variants = {"first_call_ms": {"MYIR_PROGRAM_CACHE": "off"},
                    "first_call_saved_ms": {"MYIR_PROGRAM_CACHE": "on"}}
        first_call_ms(cell.system, cell.workload, cell.mode, 1, MYIR_PROGRAM_CACHE="on")
    else:
        variants = {"first_call_ms": {}}
    for attribute, env in variants.items():
        times = first_call_ms(cell.system, cell.workload, cell.mode, runs, **env)
        if isinstance(times, str):
            cell.reason = f"first call: {times}"
            return
        setattr(cell, attribute, times)


def run(args):
    systems = load_systems(args.system_names)
    sample_ns, warmup_ns = int(args.sample_ms * 1e6), int(args.sample_ms * 2e6)
    cells = []
    for workload in args.workloads:
        inputs = workloads.make_inputs(workload, 0)
        references = {"forward": workloads.function(workload)(*inputs),
                      "grad": workloads.GRADS[workload](*inputs)
                      if workload in workloads.GRADS else None,
                      "hessian": hessians.HESSIANS[workload](*inputs)
                      if workload in hessians.HESSIANS else None}
        for mode in args.modes:
            ready = {}
            for name, system in systems.items():
                if isinstance(system, str):
                    cell, todo = Cell(workload, mode, name, "n/a", system), None
                else:
                    # the hand-written gradient is the reference: check it by finite differences
                    ref = None if name == "handwritten" else references[mode]
                    cell, todo = prepare(system, workload, mode, inputs, ref)
                cells.append(cell)
                if todo:
                    ready[name] = (cell, todo)
            measured = timing.measure({k: fa for k, (_, fa) in ready.items()},
                                      args.samples, sample_ns, warmup_ns)
            for name, (cell, _) in ready.items():
                cell.calls_per_sample = measured[name]["calls_per_sample"]
                cell.samples_ns = measured[name]["samples_ns"]
            print(f"  {workload:15s} {mode:8s} " + "  ".join(
                f"{c.system}={c.median_us:.4g}us" if c.median_us else f"{c.system}={c.status}"
                for c in cells[-len(systems):]), file=sys.stderr, flush=True)
    if args.firstcall_runs:
        for cell in cells:
            if cell.status == "ok" and cell.system.split("-")[0] in FIRSTCALL_SYSTEMS:
                measure_first_calls(cell, args.firstcall_runs)
    return systems, cells


def metadata(args, systems, started):
    versions = {name: (s.version() if not isinstance(s, str) else f"unavailable: {s}")
                for name, s in systems.items()}
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
        "seconds": round(time.time() - started, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "versions": versions,
        "threads": args.threads,
        "malloc": args.malloc_note,
        "samples": args.samples,
        "sample_ms": args.sample_ms,
        "firstcall_runs": args.firstcall_runs,
        "empty_call_ns": timing.overhead_ns(),
        "argv": sys.argv[1:],
    }


def main(argv=None):
    args = parse_args(argv)
    args.malloc_note = steady_malloc() if args.malloc == "steady" else "malloc: default"
    started = time.time()
    if check_shared() is None:
        print("note: ../shared/bench-workloads not found; copies not checked", file=sys.stderr)
    print(f"bench: {len(args.workloads)} workload(s), modes {'/'.join(args.modes)}, "
          f"{args.threads} thread(s), {args.samples} samples of ~{args.sample_ms:g} ms",
          file=sys.stderr)
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"warning: load average {load:.1f} at start: other processes compete for the "
              f"CPUs, and multithreaded BLAS degrades badly when they do", file=sys.stderr)
    systems, cells = run(args)
    meta = metadata(args, systems, started) | {"load_average_at_start": load}
    args.out.mkdir(parents=True, exist_ok=True)
    markdown = report.markdown(meta, list(systems), cells)
    (args.out / "bench.md").write_text(markdown)
    (args.out / "bench.json").write_text(json.dumps(
        {"meta": meta, "cells": [asdict(c) | {"median_us": c.median_us} for c in cells]},
        indent=1))
    chart_note = report.chart(list(systems), cells, args.out / "ratios.png")
    print(markdown)
    print(f"written: {args.out / 'bench.md'}, {args.out / 'bench.json'}; {chart_note}")
    return 0
