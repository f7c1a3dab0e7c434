"""The one timing routine every system goes through.

A *sample* is the median of `n` individually timed calls (time.perf_counter_ns around each
call), `n` chosen per callable so a sample takes about `target_ns`.  `measure` takes
`samples` samples of every callable, interleaved (round r runs the callables in the order
rotated by r), so slow drift of the machine hits every system alike.
"""

import gc
import statistics
import time

MAX_CALLS = 100_000


def timed_calls(fn, args, n):
    """Median wall time in ns of n calls fn(*args), each timed on its own."""
    clock = time.perf_counter_ns
    times = []
    for _ in range(n):
        t0 = clock()
        fn(*args)
        times.append(clock() - t0)
    return statistics.median(times)


def calls_per_sample(fn, args, target_ns, warmup_ns):
    """Warm up (at least 2 calls and warmup_ns); the call count for one sample follows from
    the median warm-up call."""
    clock = time.perf_counter_ns
    times = []
    while len(times) < 2 or sum(times) < warmup_ns:
        t0 = clock()
        fn(*args)
        times.append(clock() - t0)
    per_call = statistics.median(times)
    return max(1, min(MAX_CALLS, round(target_ns / max(per_call, 1))))


def measure(callables, samples, target_ns, warmup_ns):
    """{key: (fn, args)} -> {key: {"calls_per_sample": n, "samples_ns": [...]}}."""
    counts = {k: calls_per_sample(fn, args, target_ns, warmup_ns)
              for k, (fn, args) in callables.items()}
    results = {k: {"calls_per_sample": counts[k], "samples_ns": []} for k in callables}
    keys = list(callables)
    for r in range(samples if keys else 0):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            fn, args = callables[k]
            gc.collect()  # start each sample from the same heap state; GC during it counts
            results[k]["samples_ns"].append(timed_calls(fn, args, counts[k]))
    return results


def overhead_ns():
    """What timing an empty call costs (timer + call), for the record; never subtracted."""
    return timed_calls(lambda: None, (), 20_000)
