"""The benchmark workloads: the shared ten and myir's own, as one set of tables.

`programs.py` and `handwritten.py` are byte-identical copies of shared/bench-workloads/,
never edited here; `check_shared()` warns when they drift from the shared originals.
`models.py` holds myir's own workloads, written the same way.  `WORKLOADS`, `WRT`,
`DTYPE`, `GRADS` (hand-written gradients) and `make_inputs` cover both; `function(name)`
is a workload's function.  `load_programs(np_namespace, tag)` re-executes both files with
their module-level `np` bound to another numpy-like namespace (jax.numpy, a thin torch
namespace), so every system runs the very same function bodies.
"""

import types
import warnings
from pathlib import Path

from bench.workloads import handwritten, models, programs

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[2] / "shared" / "bench-workloads"  # <repo>/../shared/bench-workloads
FILES = ("programs.py", "handwritten.py")

WORKLOADS = programs.WORKLOADS + models.WORKLOADS
WRT = {**programs.WRT, **models.WRT}
DTYPE = {**programs.DTYPE, **models.DTYPE}
GRADS = {**handwritten.GRADS, **models.GRADS}


def _home(name):
    return models if name in models.WORKLOADS else programs


def function(name):
    """The workload `name`'s function (numpy's)."""
    return getattr(_home(name), name)


def make_inputs(name, seed=0):
    """The positional arguments of workload `name`."""
    return _home(name).make_inputs(name, seed)


def check_shared():
    """Warn (never fail) if the copies differ from ../shared/bench-workloads/."""
    if not SHARED.is_dir():
        return None
    stale = [f for f in FILES if (HERE / f).read_bytes() != (SHARED / f).read_bytes()]
    if stale:
        warnings.warn(f"bench/workloads/{', '.join(stale)} differ from {SHARED}: "
                      "copy them again", stacklevel=2)
    return not stale


def load_programs(np_namespace, tag):
    """The workloads' functions, re-executed with `np` bound to `np_namespace`: a namespace
    with one attribute per workload."""
    functions = {}
    for home in (programs, models):
        path = Path(home.__file__)
        module = types.ModuleType(f"{__name__}.{path.stem}_{tag}")
        module.__file__ = str(path)
        exec(compile(path.read_bytes(), str(path), "exec"), module.__dict__)
        module.np = np_namespace  # the workloads reach numpy only through this global
        functions.update((name, getattr(module, name)) for name in home.WORKLOADS)
    return types.SimpleNamespace(**functions)
