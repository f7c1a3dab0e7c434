"""`python -m bench.compile_time [--only W[,W]] [--backend B] [--mode forward|grad|both]
[--repeats N] [--threads N] [--out DIR]` — myir compile time per workload, in ms.

Each measurement builds a fresh compiled object (myir.compile(f) / myir.grad(f, *WRT)) and
times `.lower(*args)`: the whole pipeline for that signature, without running the code.
Where `lower` does not exist yet it falls back to: first call minus the median steady call.
The first measurement in the process is reported apart ("cold": it also pays one-time
costs such as parsing primitive rules); the median is over the `--repeats` after it.
With `lower`, the medians of its steps (`Lowered.timings`) are reported too, and what type
inference adds to the rest of the pipeline before TVM (issue 8: at most 30%).
"""

import sys

from bench import set_threads, threads_from_argv

if __name__ == "__main__":
    set_threads(threads_from_argv(sys.argv[1:]))  # before numpy is imported

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from bench.systems import Myir, Unavailable  # noqa: E402
from bench.timing import timed_calls  # noqa: E402
from bench import workloads  # noqa: E402


def one_compile_ms(system, workload, mode, args):
    """(method, ms) for one fresh compile of workload in mode."""
    compiled = system.build(workload, mode, args)
    clock = time.perf_counter_ns
    if hasattr(compiled, "lower"):
        t0 = clock()
        lowered = compiled.lower(*args)
        return "lower", (clock() - t0) / 1e6, getattr(lowered, "timings", {})
    t0 = clock()
    compiled(*args)
    first = clock() - t0
    return "first call - steady", (first - timed_calls(compiled, args, 5)) / 1e6, {}


def compile_times(system, workload, mode, repeats):
    args = workloads.make_inputs(workload, 0)
    row = {"workload": workload, "mode": mode}
    try:
        runs = [one_compile_ms(system, workload, mode, args) for _ in range(repeats + 1)]
    except Unavailable as e:
        return row | {"status": "n/a", "reason": str(e)}
    except Exception as e:
        return row | {"status": "fails", "reason": system.failure(e)}
    times = [ms for _, ms, _ in runs]
    steps = {name: statistics.median(t.get(name, 0.0) for _, _, t in runs[1:])
             for name in runs[-1][2]}
    return row | {"status": "ok", "method": runs[0][0], "cold_ms": times[0], "ms": times[1:],
                  "median_ms": statistics.median(times[1:]), "steps_ms": steps}


def inference_cost(steps: dict) -> float | None:
    """What type inference adds to the rest of the pipeline before TVM (parse to codegen,
    less `tvm`), as a fraction of it."""
    rest = sum(ms for name, ms in steps.items() if name not in ("tvm", "infer"))
    return steps["infer"] / rest if "infer" in steps and rest else None


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.compile_time",
                                description=__doc__.splitlines()[0])
    p.add_argument("--only", help="comma-separated workloads (default: all)")
    p.add_argument("--backend", default="python")
    p.add_argument("--mode", choices=("forward", "grad", "both"), default="both")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, help="threads for every library (default 2)")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = p.parse_args(argv)
    names = args.only.split(",") if args.only else workloads.WORKLOADS
    modes = ("forward", "grad") if args.mode == "both" else (args.mode,)
    system = Myir(args.backend)
    try:
        system.load()
    except Unavailable as e:
        print(f"{system.name}: {e}")
        return 0
    rows = [compile_times(system, w, m, args.repeats) for w in names for m in modes]
    lines = [f"# myir compile time ({system.name}), ms", "",
             f"cold = first compile in the process; median of {args.repeats} fresh compiles after it.",
             "Steps: medians (ms) of `Lowered.timings`; infer adds = inference's time over the "
             "rest of the pipeline before TVM.", "",
             "| workload | mode | cold | median | steps | infer adds |", "|---|---|---:|---:|---|---:|"]
    for r in rows:
        if r["status"] == "ok":
            steps = ", ".join(f"{k} {v:,.1f}" for k, v in r["steps_ms"].items())
            share = inference_cost(r["steps_ms"])
            lines.append(f"| {r['workload']} | {r['mode']} | {r['cold_ms']:,.1f} | "
                         f"{r['median_ms']:,.1f} | {steps or r['method']} | "
                         f"{'' if share is None else f'{share:.0%}'} |")
        else:
            lines.append(f"| {r['workload']} | {r['mode']} | {r['status']} | | {r['reason']} | |")
    markdown = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compile_time.md").write_text(markdown)
    (args.out / "compile_time.json").write_text(json.dumps(rows, indent=1))
    print(markdown)
    print(f"written: {args.out / 'compile_time.md'}, {args.out / 'compile_time.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
