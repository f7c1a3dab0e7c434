"""myir's benchmark harness: `python -m bench --help`; the method is in bench/README.md.

This file must not import numpy (nor anything that does): the entry points call
`set_threads` before numpy is imported, so that every library sizes its thread pools
from the same number.
"""

import os
import sys
import warnings

DEFAULT_THREADS = 2
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def threads_from_argv(argv):
    """The value of `--threads N` / `--threads=N` in argv (parsed properly later), else
    $BENCH_THREADS (how a parent run hands it to its subprocesses), else the default."""
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return int(os.environ.get("BENCH_THREADS", DEFAULT_THREADS))


def set_threads(n):
    """Give every library the same thread count; call before numpy/jax/torch are imported."""
    if "numpy" in sys.modules:
        warnings.warn("numpy was imported before set_threads: its BLAS may ignore the count")
    os.environ["BENCH_THREADS"] = str(n)
    for var in THREAD_VARS:
        os.environ[var] = str(n)
    # XLA has no working thread-count flag of its own (an unknown --flag aborts it); it sizes
    # its pool from the CPU affinity, so limit that too when fewer threads than CPUs are asked.
    xla = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in xla:  # keep a user's (or a parent run's) setting
        eigen = "true" if n > 1 else "false"
        xla += f" --xla_cpu_multi_thread_eigen={eigen} intra_op_parallelism_threads={n}"
        os.environ["XLA_FLAGS"] = xla.strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the harness compares CPU execution
    if hasattr(os, "sched_getaffinity") and n < len(os.sched_getaffinity(0)):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:n])
    # torch reads OMP_NUM_THREADS; bench.systems also calls torch.set_num_threads(n).


def threads():
    return int(os.environ.get("BENCH_THREADS", DEFAULT_THREADS))


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


def steady_malloc() -> str:
    """Keep freed memory in the process, so every system runs at its steady state.

    By default glibc serves a large allocation (a temporary array of 1-8 MB in blackscholes
    and hmlstm) with a fresh mmap, or returns the top of the heap to the kernel once enough
    of it is free, and it adapts both thresholds to what was freed before: whether a
    temporary costs a page fault per 4 KB then depends on what ran earlier in the process,
    and those workloads' times moved by up to 3x between runs (for every system, and not
    in the same direction).  Fixing the thresholds (mmap only above 32 MB, glibc's largest
    setting; no trimming) takes that away for every library in the process alike.  Returns
    what was done, for the report."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return "malloc: default (no glibc mallopt)"
    ok = all(mallopt(param, value) == 1 for param, value in (
        (_M_MMAP_THRESHOLD, 32 << 20), (_M_TRIM_THRESHOLD, 1 << 30), (_M_TOP_PAD, 64 << 20)))
    return "malloc: steady (glibc mallopt: mmap above 32 MB, no trim)" if ok \
        else "malloc: default (mallopt refused)"
