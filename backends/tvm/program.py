"""A region as a small, self-contained straight-line program: what TVM compiles.

A region is cut out of a typed graph (`backends.tvm.regions`), but what gets compiled must not
depend on graph nodes: it is cached in memory and on disk, shared by every compiled function
that contains the same computation on the same shapes.  So a region is copied into a
`Program` — inputs with their dtypes and shapes, a list of primitive applications whose
operands are inputs, earlier ops or static constants, and the ops whose values leave the
region.  Its `key` is a stable text of all of that: the cache key, with the target and TVM's
version added by the cache.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

# The scalar types of Python whose values are "weak" in numpy's promotion (NEP 50): 2.0 * a
# keeps a's float32, where np.float64(2.0) * a would give float64.
WEAK = (bool, int, float, complex)


@dataclass(frozen=True)
class Spec:
    """The type of a value inside a region: dtype and (static) shape, and for a scalar the
    Python or numpy type it has outside (so a region hands back `np.float64`, not a 0-d
    array, where numpy would)."""

    dtype: np.dtype
    shape: tuple[int, ...]
    scalar: type | None = None

    @property
    def weak(self) -> bool:
        return self.scalar in WEAK

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self) -> str:
        if self.scalar is not None:
            return self.scalar.__name__
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Ref:
    """An operand: region input `index`, the result of op `index`, a static constant `value`
    (axes, shapes, slices, Python scalars), or `shape` — an operand only its Spec is used of
    (the `x` of `zeros_like(x)`), which therefore need not be passed in."""

    kind: str           # "in" | "op" | "const" | "shape"
    index: int = 0
    value: object = None

    def __repr__(self) -> str:
        if self.kind == "const":
            return repr(self.value)
        if self.kind == "shape":
            return f"shape_of({self.value!r})"
        return f"{'%' if self.kind == 'op' else 'in'}{self.index}"


@dataclass(frozen=True)
class Op:
    prim: str
    args: tuple[Ref, ...]
    out: Spec


@dataclass(frozen=True)
class Program:
    inputs: tuple[Spec, ...]
    ops: tuple[Op, ...]
    outputs: tuple[int, ...]     # indices of the ops whose values leave the region
    # one loop nest computing every output per element (vectorize: backends/tvm/kernel.py)
    # rather than Relax ops for TVM to fuse
    kernel: bool = False

    def __str__(self) -> str:
        lines = [f"{'kernel' if self.kernel else 'region'}({', '.join(f'in{i}: {s!r}' for i, s in enumerate(self.inputs))}):"]
        for i, op in enumerate(self.ops):
            lines.append(f"  %{i}: {op.out!r} = {op.prim}({', '.join(map(repr, op.args))})")
        lines.append(f"  return {', '.join(f'%{i}' for i in self.outputs)}")
        return "\n".join(lines)

    @functools.cached_property
    def key(self) -> str:
        """Stable across processes: every part is printed by repr of plain values."""
        specs = [*self.inputs, *(op.out for op in self.ops)]
        return str(self) + "\n" + repr([(s.dtype.str, s.shape, s.scalar and s.scalar.__name__)
                                        for s in specs])


@dataclass(frozen=True)
class Part:
    """A part of a program (`parts`): `program`, whose inputs are `sources` (Ref("in", i):
    the whole program's input i; Ref("op", j): the value of the whole program's op j, which
    an earlier part computes) and whose outputs are the whole program's ops `values`."""

    program: Program
    sources: tuple[Ref, ...]
    values: tuple[int, ...]


# The most ops in one part of a region.  TVM's Relax passes are not all linear in a
# function's size (FuseOps took 0.17 s on 2,000 elementwise ops and 2.7 s on 8,000;
# KillAfterLastUse, FoldConstant and VMShapeLower grow alike), so a large region becomes one
# Relax function per part, which its `main` calls in turn (region.build_module): each
# function's passes are bounded, and so the region's compile is linear in its size.  A value
# one part hands another is written to memory where fusion might have kept it in registers,
# so parts are large; no benchmark workload's region comes near this size.
PART_OPS = 1024


def parts(program: Program, limit: int | None = None) -> list[Part]:
    """The program as consecutive runs of at most `limit` ops, of equal sizes, each with the
    values it reads from the inputs and the parts before it, and the values that leave it
    (used by a later part, or the program's outputs).  The ops are in evaluation order, so
    each part reads only parts before it.  One part (the program itself) when it is small
    enough; a kernel (one loop nest) is never split."""
    n, limit = len(program.ops), limit or PART_OPS
    if n <= limit or program.kernel:
        return [Part(program, tuple(Ref("in", i) for i in range(len(program.inputs))),
                     program.outputs)]
    count = -(-n // limit)
    bounds = [n * k // count for k in range(count + 1)]
    last_use = {i: n for i in program.outputs}     # the last op (n: outside) reading each op
    for j, op in enumerate(program.ops):
        for ref in op.args:
            if ref.kind == "op":
                last_use[ref.index] = max(last_use.get(ref.index, 0), j)
    result = []
    for start, end in zip(bounds, bounds[1:]):
        sources: list[Ref] = []
        where: dict[Ref, int] = {}

        def local(ref: Ref) -> Ref:
            if ref.kind == "in" or (ref.kind == "op" and ref.index < start):
                if ref not in where:
                    where[ref] = len(sources)
                    sources.append(ref)
                return Ref("in", where[ref])
            return Ref("op", ref.index - start) if ref.kind == "op" else ref

        ops = tuple(Op(op.prim, tuple(local(a) for a in op.args), op.out)
                    for op in program.ops[start:end])
        values = tuple(j for j in range(start, end) if last_use.get(j, 0) >= end)
        if not values:
            continue    # nothing it computes is used
        specs = tuple(program.inputs[r.index] if r.kind == "in" else program.ops[r.index].out
                      for r in sources)
        result.append(Part(Program(specs, ops, tuple(j - start for j in values)),
                           tuple(sources), values))
    return result


def evaluate(program: Program, *args):
    """Run a program with the python backend's implementations: the reference a compiled
    region must agree with (tests; debugging a wrong result down to one region)."""
    from backends.python.impls import callable_of

    values: list = []

    def value(ref: Ref):
        if ref.kind == "in":
            return args[ref.index]
        if ref.kind == "op":
            return values[ref.index]
        if ref.kind == "shape":
            spec = ref.value
            return np.zeros(spec.shape, spec.dtype) if spec.scalar is None else spec.scalar(0)
        return ref.value

    for op in program.ops:
        values.append(callable_of(op.prim)(*(value(r) for r in op.args)))
    outs = tuple(values[i] for i in program.outputs)
    return outs[0] if len(outs) == 1 else outs
