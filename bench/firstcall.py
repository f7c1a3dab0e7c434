"""`python -m bench.firstcall SYSTEM WORKLOAD MODE` — first-call time in this fresh process.

Prints one JSON line: {"system", "workload", "mode", "first_call_ms", "second_call_ms"}, or
{"system", "workload", "mode", "status", "reason"} when the system cannot run it.
The clock covers building the callable (jax.jit(...), myir.compile(...)) and its first call
(tracing, compiling, running); imports and input conversion happen before it starts.
"""

import sys

from bench import set_threads, threads_from_argv

if __name__ == "__main__":
    set_threads(threads_from_argv(sys.argv[1:]))  # before numpy is imported

import json  # noqa: E402
import time  # noqa: E402

from bench.systems import NotApplicable, Unavailable, make_system  # noqa: E402
from bench import workloads  # noqa: E402


def first_call(system_name, workload, mode):
    result = {"system": system_name, "workload": workload, "mode": mode}
    system = make_system(system_name)
    try:
        system.load()
        args = system.inputs(workload, mode, workloads.make_inputs(workload, 0))
        t0 = time.perf_counter_ns()
        fn = system.build(workload, mode, args)
        fn(*args)
        t1 = time.perf_counter_ns()
        fn(*args)
        t2 = time.perf_counter_ns()
    except NotApplicable as e:
        return result | {"status": "-", "reason": str(e)}
    except Unavailable as e:
        return result | {"status": "n/a", "reason": str(e)}
    except Exception as e:
        return result | {"status": "fails", "reason": system.failure(e)}
    return result | {"first_call_ms": (t1 - t0) / 1e6, "second_call_ms": (t2 - t1) / 1e6}


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    print(json.dumps(first_call(*sys.argv[1:4])))
