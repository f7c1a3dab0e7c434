"""Programs of a given size N, in families, for `bench.compile_scaling`: how compile time
grows with the program.

Each family's `source(n)` is the text of a module defining `f`; `INPUTS[family]` makes its
arguments and `WRT[family]` the positions its gradient is taken with respect to.  The
modules reach numpy only through the global `np`, so JAX runs the same text with `np`
bound to `jax.numpy`.

* A: N statements of straight-line scalar code, each using the previous two values.
* B: the same statements on (64,) float64 arrays, summed at the end.
* C: a `while` loop whose body holds N such statements and an `if`.
* D: a chain of N helper functions, each calling the next (call depth N).
* D50: N helper functions in chains of depth 50, their results added up.
"""

import numpy as np

FAMILIES = ("A", "B", "C", "D", "D50")
# D's call depth is N: CPython itself (and so JAX tracing) stops at depth 1,000.
MAX_N = {"D": 800}
CHAIN = 50      # D50's call depth

# Statement k of a straight-line family, from the two values before it (`p`, `q`: the
# previous and the one before) and the input `x`.  Every value stays within [-2, 2].
_STATEMENTS = (
    "{p} * np.cos({q}) - 0.1 * x",
    "np.exp(-{p} * {p}) + {q} * 0.25",
    "np.sin({p}) * x + {q} * 0.5",
    "np.tanh({p} + {q}) * 0.9",
)


def _straight_line(n: int, indent: str, first: str, second: str) -> tuple[list[str], str]:
    """n statements `a2 = ...` to `a{n+1} = ...` from a0 = first, a1 = second; the lines and
    the last value's name."""
    lines = [f"{indent}a0 = {first}", f"{indent}a1 = {second}"]
    for i in range(2, n + 2):
        expr = _STATEMENTS[(i - 2) % len(_STATEMENTS)].format(p=f"a{i - 1}", q=f"a{i - 2}")
        lines.append(f"{indent}a{i} = {expr}")
    return lines, f"a{n + 1}"


def _module(lines: list[str]) -> str:
    return "\n".join(["import numpy as np", "", "", *lines, ""])


def source_A(n: int) -> str:
    body, last = _straight_line(n, "    ", "x", "y")
    return _module(["def f(x, y):", *body, f"    return {last}"])


def source_B(n: int) -> str:
    body, last = _straight_line(n, "    ", "x", "y")
    return _module(["def f(x, y):", *body, f"    return np.sum({last})"])


def source_C(n: int) -> str:
    body, last = _straight_line(n, "        ", "s", "s * 0.5 + y")
    return _module([
        "def f(x, y, steps):",
        "    s = x",
        "    i = 0",
        "    while i < steps:",
        *body,
        "        if i % 2 == 0:",
        f"            s = {last} * 0.5 + s * 0.25",
        "        else:",
        f"            s = {last} * 0.25 - s * 0.5",
        "        i = i + 1",
        "    return s",
    ])


def _chain(prefix: str, depth: int) -> list[str]:
    """Helpers {prefix}0 .. {prefix}{depth-1}, each calling the next."""
    lines = []
    for i in range(depth):
        call = f"{prefix}{i + 1}(u, y)" if i < depth - 1 else "u * y"
        lines += [f"def {prefix}{i}(x, y):",
                  "    u = x * 0.9 + np.sin(y) * 0.1",
                  f"    v = {call}",
                  "    return v + u * 0.01", "", ""]
    return lines


def source_D(n: int) -> str:
    return _module(["def f(x, y):", "    return h0(x, y)", "", "", *_chain("h", n)])


def source_D50(n: int) -> str:
    depths = [CHAIN] * (n // CHAIN) + ([n % CHAIN] if n % CHAIN else [])
    heads = " + ".join(f"c{k}_0(x, y)" for k in range(len(depths)))
    lines = ["def f(x, y):", f"    return {heads}", "", ""]
    for k, depth in enumerate(depths):
        lines += _chain(f"c{k}_", depth)
    return _module(lines)


SOURCES = {"A": source_A, "B": source_B, "C": source_C, "D": source_D, "D50": source_D50}


def _arrays():
    rng = np.random.default_rng(0)
    return rng.uniform(-1.0, 1.0, 64), rng.uniform(-1.0, 1.0, 64)


INPUTS = {"A": lambda: (0.3, 0.7), "B": _arrays, "C": lambda: (0.3, 0.7, 3),
          "D": lambda: (0.3, 0.7), "D50": lambda: (0.3, 0.7)}
WRT = {"A": (0, 1), "B": (0, 1), "C": (0, 1), "D": (0, 1), "D50": (0, 1)}


def source(family: str, n: int) -> str:
    return SOURCES[family](n)
