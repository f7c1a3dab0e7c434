"""The benchmark workloads: byte-identical copies of shared/bench-workloads/.

`programs.py` and `handwritten.py` are copies, never edited here; `check_shared()` warns
when they drift from the shared originals.  `load_programs(np_namespace, tag)` re-executes
programs.py with its module-level `np` bound to another numpy-like namespace (jax.numpy,
a thin torch namespace), so every system runs the very same function bodies.
"""

import types
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[2] / "shared" / "bench-workloads"  # <repo>/../shared/bench-workloads
FILES = ("programs.py", "handwritten.py")


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
    """A fresh module holding programs.py's functions with `np` bound to `np_namespace`."""
    path = HERE / "programs.py"
    module = types.ModuleType(f"{__name__}.programs_{tag}")
    module.__file__ = str(path)
    exec(compile(path.read_bytes(), str(path), "exec"), module.__dict__)
    module.np = np_namespace  # the workloads reach numpy only through this global
    return module
