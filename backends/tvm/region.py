"""A compiled region: the callable the generated Python calls in place of the region's
primitives.

Compilation: Program → Relax function (one `emit` per op through the lowering table) → the
target's pipeline (fusion + schedule) → executable, kept in a process-wide table keyed by
program, target and TVM version, and in the disk cache.

A call converts each argument the way the kernels need it and the results back to what numpy
would have produced:

* arrays go in zero-copy through DLPack when they are contiguous (and writable: DLPack
  cannot mark an array read-only), and are otherwise copied.  TVM's kernels assume 64-byte
  aligned inputs by default and *segfault* on numpy's usual 16-byte alignment (tvm-0.27.md,
  pitfall 3): the kernels that read a region's inputs are compiled for element alignment
  (`schedule._unaligned_params`), so no alignment can reach a user as a crash;
* scalars (Python or numpy) become 0-d arrays of their dtype (a kernel reads them with scalar
  loads, so their alignment does not matter);
* results come back zero-copy (`np.from_dlpack`), scalars as numpy scalars (`np.sum` gives
  `np.float64`, not a 0-d array), and on a GPU values that only flow into other regions stay
  on the device.
"""

from __future__ import annotations

import functools
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from backends.tvm import cache, load_tvm
from backends.tvm.lowering import Context
from backends.tvm.program import Program, parts
from backends.tvm.target import is_gpu
from myir.cache import open_cache


def build_module(program: Program, target=None):
    """The Relax IRModule of a program: function `main(inputs...) -> output or tuple`.  A
    large program is one function per part (`program.parts`), each returning the tuple of
    values that leave it, and `main` calls them in turn."""
    from tvm import relax

    if program.kernel:
        from backends.tvm.kernel import build_module as build_kernel
        return build_kernel(program, target)

    bb = relax.BlockBuilder()
    pieces = parts(program)
    params = _params(program, [f"in{i}" for i in range(len(program.inputs))])
    legalize = _Legalized(bb, target, program) \
        if target is not None and len(program.ops) >= LEGALIZE_ONCE_MIN else None
    if len(pieces) == 1:
        with bb.function("main", params):
            result = _body(bb, params, program, legalize)
            bb.emit_func_output(result)
        return bb.get()
    functions = []
    for k, part in enumerate(pieces):
        # a part's parameters are named after what they hold: `in<i>` the region's input i,
        # `v<j>` the value of op j (schedule._takes_inputs_unaligned tells them apart)
        inner = _params(part.program, [f"in{r.index}" if r.kind == "in" else f"v{r.index}"
                                       for r in part.sources])
        with bb.function(f"part{k}", inner, private=True):
            functions.append(bb.emit_func_output(_body(bb, inner, part.program, legalize,
                                                       as_tuple=True)))
    with bb.function("main", params):
        with bb.dataflow():
            values: dict[int, object] = {}
            for function, part in zip(functions, pieces):
                result = bb.emit(relax.Call(function, [
                    params[r.index] if r.kind == "in" else values[r.index]
                    for r in part.sources]))
                for m, j in enumerate(part.values):
                    values[j] = bb.emit(relax.TupleGetItem(result, m))
            outs = [values[i] for i in program.outputs]
            result = bb.emit_output(outs[0] if len(outs) == 1 else relax.Tuple(outs))
        bb.emit_func_output(result)
    return bb.get()


# Programs of at least this many ops legalize each distinct operation once (`_Legalized`).
# In a small region most operations are distinct, and legalizing one alone (a function and
# a pass run of its own) costs more than LegalizeOps' call; the benchmark workloads' regions
# (72 ops at most) compile as the pipeline alone makes them.
LEGALIZE_ONCE_MIN = 256


class _Legalized:
    """Relax operations as calls of their TIR functions, each distinct operation (operator,
    attributes, operand types, constant operands) legalized once.  TVM's LegalizeOps builds
    a TIR function for every call (through TOPI, in Python), 0.2–0.3 ms each: the largest
    part of a large region's compile, where a gradient's thousands of operations are a few
    dozen distinct ones.  An operation is legalized alone, in a function of its own, by the
    passes the pipeline runs up to LegalizeOps (schedule.legalize_passes: fast math and the
    target's library dispatch come first); one that does not become a single `call_tir` of
    its operands is left to the pipeline."""

    def __init__(self, bb, target, program: Program):
        from backends.tvm.schedule import fast_math, legalize_passes, sequential

        self.bb = bb
        self.made: dict = {}
        self.passes = sequential(target, legalize_passes(target, fast_math(program)))

    def __call__(self, expr):
        key = self._key(expr)
        if key is None:
            return expr
        found = self.made.get(key)
        if found is None:
            found = self.made[key] = self._legalize(expr)
        if not found:
            return expr
        from tvm import relax
        gv, fields, out = found
        return relax.call_tir(gv, [expr.args[f] if isinstance(f, int) else f for f in fields],
                              out)

    @staticmethod
    def _key(expr):
        from tvm import ir, relax

        if not isinstance(expr, relax.Call) or not isinstance(expr.op, ir.Op) \
                or expr.op.name in ("relax.call_tir", "relax.call_dps_packed"):
            return None
        args = []
        for a in expr.args:
            if isinstance(a, relax.Var) and isinstance(a.ty, relax.TensorType) \
                    and isinstance(a.ty.shape, relax.ShapeExpr):
                args.append((a.ty.dtype, tuple(int(v) for v in a.ty.shape.values)))
            elif isinstance(a, ir.expr.Constant):
                value = np.from_dlpack(a.value)
                args.append((value.dtype.str, value.shape, value.tobytes()))
            else:
                return None
        attrs = None if expr.attrs is None else load_tvm().ir.save_json(expr.attrs)
        return expr.op.name, attrs, tuple(args)

    def _legalize(self, expr):
        from tvm import relax

        params, args = [], []
        for i, a in enumerate(expr.args):
            if isinstance(a, relax.Var):
                params.append(relax.Var(f"p{i}", a.ty))
                args.append(params[-1])
            else:
                args.append(a)
        alone = relax.BlockBuilder()
        with alone.function("main", params):
            with alone.dataflow():
                out = alone.emit_output(relax.Call(expr.op, args, expr.attrs, expr.ty_args))
            alone.emit_func_output(out)
        mod = self.passes(alone.get())
        bindings = [b for block in mod["main"].body.blocks for b in block.bindings]
        call = bindings[0].value if len(bindings) == 1 else None
        if not isinstance(call, relax.Call) or not isinstance(call.op, load_tvm().ir.Op) \
                or call.op.name != "relax.call_tir" or len(call.args) != 2 \
                or not bindings[0].var.same_as(mod["main"].body.body):
            return False
        fields = []
        for a in call.args[1].fields:
            if any(a.same_as(p) for p in params):
                fields.append(int(a.name[1:]))
            elif isinstance(a, relax.Var):
                return False
            else:
                fields.append(a)
        gv = self.bb.add_func(mod[call.args[0]], call.args[0].name_hint)
        return gv, fields, call.ty_args[0] if len(call.ty_args) == 1 else list(call.ty_args)


def _params(program: Program, names: list[str]) -> list:
    from tvm import relax
    return [relax.Var(name, relax.TensorType(spec.shape, str(spec.dtype)))
            for name, spec in zip(names, program.inputs)]


def _body(bb, params, program: Program, legalize, as_tuple: bool = False):
    """The dataflow block of a program's ops; its output (a tuple when asked, or when there
    are several)."""
    from tvm import relax

    with bb.dataflow():
        ctx = Context(bb, params, program)
        for op in program.ops:
            expr = ctx.emit(op)
            ctx.values.append(bb.emit(expr if legalize is None else legalize(expr)))
        outs = [ctx.values[i] for i in program.outputs]
        return bb.emit_output(outs[0] if len(outs) == 1 and not as_tuple else relax.Tuple(outs))


@dataclass
class Compiled:
    """One program compiled for one target."""

    program: Program
    function: object            # the VM's `main`
    module: object              # the runtime module (holds the generated code)
    from_disk: bool = False
    compile_seconds: float = 0.0
    aligned_inputs: bool = False   # some kernel needs 64-byte aligned inputs (schedule.py)
    source_text: str | None = None   # kept with the library in the disk cache
    library_bytes: bytes | None = None   # as shipped to another process (`library`)

    @functools.cached_property
    def ir(self) -> str:
        """The Relax module before the pipeline (TVM script); built when asked, so a region
        loaded from the disk cache never builds it."""
        return build_module(self.program).script()

    @property
    def source(self) -> str:
        """The generated target code: CUDA C for GPU targets, LLVM IR for the CPU."""
        if self.source_text is None:
            self.source_text = generated_source(self.module)
        return self.source_text


def generated_source(module) -> str:
    cuda = module._collect_from_import_tree(lambda m: m.kind == "cuda")
    if cuda:
        return "\n".join(dict.fromkeys(m.inspect_source() for m in cuda))
    for m in module._collect_from_import_tree(lambda m: m.kind == "llvm"):
        return m.inspect_source("ll")
    return ""   # a library loaded back from disk has no source of its own


_compiled: dict[tuple, Compiled] = {}
_lock = threading.Lock()
STATS = {"compiled": 0, "disk_hits": 0, "memory_hits": 0, "shipped": 0}


def compile_program(program: Program, target) -> Compiled:
    """The compiled program, from memory, the disk cache or TVM (in that order)."""
    tvm = load_tvm()
    memo = (program.key, str(target))
    with _lock:
        found = _compiled.get(memo)
        if found is not None:
            STATS["memory_hits"] += 1
            return found
        start = time.perf_counter()
        device = tvm.cuda(0) if is_gpu(target) else tvm.cpu()
        # a CUDA library only loads where there is a GPU (and its driver)
        disk = open_cache() if device.exist else None
        name = cache.key(program.key, target, tvm.__version__)
        lib, source = cache.load(disk, name) if disk is not None else (None, None)
        from_disk = lib is not None
        kept_aligned: list = []
        if lib is None:
            from backends.tvm.schedule import (cpu_pipeline, fast_math, fusion_context,
                                               gpu_pipeline)

            float32 = fast_math(program)
            pipeline = gpu_pipeline(target, float32) if is_gpu(target) \
                else cpu_pipeline(target, float32, kept_aligned)
            with fusion_context(program):
                lib = tvm.compile(build_module(program, target), target,
                                  relax_pipeline=pipeline)
            lib = lib.mod if hasattr(lib, "mod") else lib
            if disk is not None and not kept_aligned:
                source = generated_source(lib)
                cache.store(disk, name, lib, source)
        function = _main_function(lib, device) if device.exist else None
        STATS["disk_hits" if from_disk else "compiled"] += 1
        result = Compiled(program, function, lib, from_disk, time.perf_counter() - start,
                          aligned_inputs=bool(kept_aligned), source_text=source)
        _compiled[memo] = result
        return result


def library(region: "Region") -> bytes | None:
    """The region's kernels as the bytes of a shared library, for another process that has
    not compiled them (`install_library`): the disk cache's copy, else exported now (and
    kept).  None for
    kernels that need aligned inputs, which the call must know of (`Compiled.aligned_inputs`):
    the other process compiles those itself."""
    compiled = region.compiled
    if compiled.aligned_inputs:
        return None
    if compiled.library_bytes is not None:
        return compiled.library_bytes
    tvm = load_tvm()
    disk = open_cache()
    name = cache.key(region.program.key, region.target, tvm.__version__)
    data = disk.read(f"{name}.so") if disk is not None else None
    if data is None:
        fd, tmp = tempfile.mkstemp(suffix=".so")
        os.close(fd)
        try:
            compiled.module.export_library(tmp)
            data = Path(tmp).read_bytes()
        except Exception:   # e.g. no C compiler to link it with
            return None
        finally:
            os.unlink(tmp)
    compiled.library_bytes = data   # a process pool pickles the function with every task
    return data


def install_library(program: Program, target, data: bytes) -> None:
    """Make the kernels another process compiled (`library`) the compiled form of `program`
    for `target` in this process, so that a region of it is not compiled again.  They are not
    written into the disk cache, which holds only what this user's myir built."""
    tvm = load_tvm()
    device = tvm.cuda(0) if is_gpu(target) else tvm.cpu()
    memo = (program.key, str(target))
    if not device.exist or memo in _compiled:
        return
    start = time.perf_counter()
    fd, tmp = tempfile.mkstemp(suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        lib = tvm.runtime.load_module(tmp)
    except RuntimeError:    # built for another CPU or TVM: the region compiles here
        return
    finally:
        os.unlink(tmp)      # loaded already: the file is no longer needed
    with _lock:
        STATS["shipped"] += 1
        _compiled.setdefault(memo, Compiled(program, _main_function(lib, device), lib, True,
                                            time.perf_counter() - start))


def _main_function(lib, device):
    from tvm import relax
    return relax.VirtualMachine(lib, device)["main"]


def _as_tensor(x: np.ndarray):
    """x as a TVM tensor, without copying when it is contiguous and writable (DLPack cannot
    mark an array read-only), else through a contiguous numpy copy (a slice of a gate matrix
    in an lstm step: numpy's copy and DLPack take ~1 µs where a TVM allocation and copy took
    ~6 µs).  The checks come first: a failing `from_dlpack` costs ~80 µs in exception
    handling.  (CPU kernels take inputs with element alignment only: see
    schedule._unaligned_params; GPU inputs are copied to the device anyway.)"""
    if not (x.flags.c_contiguous and x.flags.writeable):
        x = np.array(x, order="C")
    return _from_dlpack(x)


def _as_aligned_tensor(x: np.ndarray):
    """x as a TVM tensor for kernels that assume 64-byte alignment: copied unless aligned."""
    if x.flags.c_contiguous and x.flags.writeable \
            and not x.__array_interface__["data"][0] % ALIGNMENT:
        return _from_dlpack(x)
    return _copy(x)


ALIGNMENT = 64   # what TVM's kernels assume of their buffers unless told otherwise


def _from_dlpack(x: np.ndarray):
    import tvm_ffi
    return tvm_ffi.from_dlpack(x, require_alignment=0, require_contiguous=False)


def _copy(x: np.ndarray):
    tvm = load_tvm()
    buf = tvm.runtime.empty(x.shape, str(x.dtype))
    np.copyto(np.from_dlpack(buf), x)
    return buf


@dataclass
class Region:
    """A region of one graph, compiled: called by the generated code with the region's
    inputs, returns its output (or the tuple of its outputs)."""

    name: str
    program: Program
    target: object
    inputs: list[str] = field(default_factory=list)    # names of the nodes flowing in
    outputs: list[str] = field(default_factory=list)   # names of the nodes flowing out
    on_device: list[bool] = field(default_factory=list)  # per output: only regions use it
    compiled: Compiled | None = None

    def __post_init__(self):
        self.__name__ = self.name
        self.compiled = compile_program(self.program, self.target)
        self._call = self._make_call()

    def __reduce__(self):
        """Pickled as what it is compiled from (`myir/saved.py`): unpickling compiles it
        again, from the memory or disk cache."""
        return Region, (self.name, self.program, self.target, self.inputs, self.outputs,
                        self.on_device)

    @property
    def ir(self) -> str:
        return self.compiled.ir

    @property
    def source(self) -> str:
        return self.compiled.source

    def __repr__(self) -> str:
        return (f"<region {self.name}: {', '.join(self.inputs)} -> {', '.join(self.outputs)}, "
                f"{len(self.program.ops)} ops, target {self.target.kind.name}>")

    def __call__(self, *args):
        return self._call(*args)

    def _make_call(self):
        """A Python function specialised to this region's argument and result kinds, so a
        call does only the conversions it needs (typically 1–3 µs in all)."""
        if self.compiled.function is None:
            return self._no_device
        gpu = is_gpu(self.target)
        env = {"fn": self.compiled.function, "np": np,
               "as_tensor": _as_aligned_tensor if self.compiled.aligned_inputs else _as_tensor}
        if gpu:
            tvm = load_tvm()
            env.update(tensor=tvm.runtime.tensor, Tensor=tvm.runtime.Tensor, dev=tvm.cuda(0))
        args = []
        for i, spec in enumerate(self.program.inputs):
            value = f"a{i}" if spec.scalar is None else f"np.asarray(a{i}, d{i})"
            env[f"d{i}"] = spec.dtype
            if gpu:   # values other regions left on the device go straight in
                value = f"(a{i} if type(a{i}) is Tensor else tensor({value}, dev))"
            elif spec.scalar is None:
                value = f"as_tensor(a{i})"
            args.append(value)
        outs = []
        for k, op_index in enumerate(self.program.outputs):
            item = "r" if len(self.program.outputs) == 1 else f"r[{k}]"
            if gpu and self.on_device[k]:
                outs.append(item)   # stays a device tensor, for the next region
                continue
            host = f"{item}.numpy()" if gpu else f"np.from_dlpack({item})"
            scalar = self.program.ops[op_index].out.scalar is not None
            outs.append(host + ("[()]" if scalar else ""))
        params = ", ".join(f"a{i}" for i in range(len(self.program.inputs)))
        lines = [f"def call({params}):", f"    r = fn({', '.join(args)})",
                 f"    return {', '.join(outs)}"]
        exec("\n".join(lines), env)
        return env["call"]

    def _no_device(self, *args):
        from myir.errors import MyirError
        raise MyirError(f"region {self.name} was compiled for {self.target.kind.name}, but this "
                        "machine has no such device",
                        hint="use target='llvm' to run here; the CUDA source is in "
                             "`lower(...).regions[i].source`")
