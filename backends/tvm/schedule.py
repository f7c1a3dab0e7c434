"""Relax pipelines: how a region's Relax function becomes fast kernels.

TVM 0.27's plain `tvm.compile(mod, "llvm")` neither fuses nor schedules on the CPU: three
elementwise ops become three naive serial loops (tvm-0.27.md, pitfalls 1–2).  The CPU pipeline
here legalizes, fuses (FuseOps/FuseTIR), then schedules every fused kernel with one rule:
inline the injective blocks read once into their consumer (true loop fusion: no full-size
intermediates), compute the values read more than once one vector at a time in the same loop
(so each is computed once and the kernel grows linearly with the region), vectorize the
innermost loop and run the outer one on the thread pool when there is enough work;
reductions get their spatial loops parallelized.  Measured on the 10-op chain of
tvm-0.27.md: 10 ms unscheduled → 0.8 ms (2 threads, fast math, float32).

Full reductions (np.sum of a fused chain, which gets inlined into the reduction) are split
into partial sums computed in parallel (rfactor).

float32 regions also get `FastMathTransform` (fast exp/tanh/erf).  Measured on 2^20 points in
[-20, 20] against float64 (tests/test_tvm.py::test_fast_math_error checks the bound): fast exp's
largest relative error is 1.2e-7 (numpy's float32 exp: 2.0e-7), fast tanh's 3.0e-7 (numpy's:
1.1e-7): within 3 ulp of float32, where TVM's default float32 tanh gives tanh(1e-8) = 0.
float64 exp, log and tanh are written in arithmetic LLVM vectorizes (vmath.py: within 1, 2 and
3 ulp of numpy; libm's scalar calls made exp 4.6x slower, and TVM's tanh cancels near 0).
"""

from __future__ import annotations

from backends.tvm import load_tvm

PARALLEL_MIN = 1 << 14   # elements below which the thread pool's wake-up costs more than it saves
VECTOR = 8               # lanes: float32 on AVX2 (float64 uses two registers: still fine)
REDUCTION_CHUNKS = 64    # partial sums of a full reduction: enough to balance any core count
# The most operations FuseOps puts in one kernel ("relax.FuseOps.max_depth"; with TVM's
# default, a gradient's fused kernels were limited only by its dataflow).  A kernel's
# packed-API wrapper checks each of its buffers (about 140 lines of LLVM IR per buffer), and
# a gradient's fused kernels read many values computed by others: in a 1,000-operation
# region one kernel took 78 buffers, an 11,000-line function whose machine code took LLVM
# longer than the rest of the region's compile, and 4x the operations took 5x as long.
# Bounded groups keep every kernel, and so LLVM's time per operation, bounded (and TVM
# compiles a repeated group once).  On large arrays a group's intermediates stay in
# registers instead of memory, so the bound is loose there (no benchmark workload's region,
# 72 operations at most, fuses differently); under MIN_ELEMENTS an intermediate is a few
# cache lines.
FUSE_DEPTH = 64
FUSE_DEPTH_SMALL = 16


def fusion_context(program):
    """The PassContext a region compiles in: the current one, with FuseOps' group bound
    (FUSE_DEPTH) set for the size of the program's arrays, and without TIR's assertions.

    Those are the checks of each kernel's packed-API wrapper on every buffer it is handed
    (type, dtype, shape, strides, alignment: ~140 lines of LLVM IR per buffer), and made two
    thirds of a gradient region's code (19,000 lines of 1,000 ops' kernels, 6,300 without
    them) and a third of its compile time.  Only the region's VM calls the kernels, with
    tensors it allocated or checked itself: its `main` checks the region's inputs
    (VMShapeLower's tensor checks, which are not TIR's), and region.py hands it arrays of the
    program's dtypes and shapes, aligned as its kernels need."""
    from backends.tvm.regions import MIN_ELEMENTS
    tvm = load_tvm()

    current = tvm.transform.PassContext.current()
    largest = max([op.out.size for op in program.ops] + [s.size for s in program.inputs],
                  default=0)
    depth = FUSE_DEPTH if largest >= MIN_ELEMENTS else FUSE_DEPTH_SMALL
    return tvm.transform.PassContext(
        opt_level=current.opt_level, required_pass=current.required_pass,
        disabled_pass=current.disabled_pass, instruments=current.instruments,
        config={**dict(current.config), "relax.FuseOps.max_depth": depth,
                "tirx.disable_assert": True})


def _static_extent(loops_dom, n) -> int:
    from tvm import tirx
    extent = 1
    for it in loops_dom[:n]:
        extent *= int(it.dom) if isinstance(it.dom, (int, tirx.IntImm)) else 1 << 30
    return extent


def _unit_stride_inner(sch, info) -> bool:
    """Whether a read of the block is indexed by the innermost spatial iterator in its last
    dimension (C[i, j] += A[i, k] * B[k, j]): then loop order i, k, j vectorizes over j."""
    from tvm import tirx
    block = sch.get(info.block_rv)
    j = info.iters[len(info.iters) - 2].var
    return any(isinstance(r.region[-1].min, tirx.Var) and r.region[-1].min.same_as(j)
               for r in block.reads)


def _schedule_cpu(func, target, tunable):
    from tvm import s_tir, tirx
    from tvm.s_tir import dlight

    if not isinstance(func, tirx.PrimFunc):
        return None
    sch = s_tir.Schedule(func, error_render_level="none")   # refusals are expected here
    infos = dlight.normalize_prim_func(sch)
    if infos is None:
        return None
    left, shared = _inline_without_copies(sch, infos)
    anchor = None     # the block the shared values are computed for, loop by loop
    for info in left:
        if any(info is s for s in shared):
            continue
        anchor = info.block_rv
        dom = info.dom_kind()
        loops = sch.get_loops(info.block_rv)
        lead = len(dom) - len(dom.lstrip("S"))
        if lead == 0 or (not info.is_injective() and _static_extent(info.iters, lead) == 1):
            # on a copy: TVM 0.27's rfactor fails (an InternalError) on a reduction block
            # followed by another one in its function (np.mean's division); such a reduction
            # then runs serially, in TVM
            trial = sch.copy()
            try:
                partial = _parallel_full_reduction(trial, info.iters[lead:], loops[lead:],
                                                   dom[lead:])
            except Exception:  # noqa: BLE001 - TVM's error: the serial schedule stays
                continue
            sch = trial
            anchor = partial if partial is not None else anchor
            continue
        if info.is_injective():
            _schedule_injective(sch, info, loops, lead)
        elif dom == "S" * lead + "R" and lead >= 2 and _unit_stride_inner(sch, info):
            # matmul-like (also a sum over a leading axis): i, k, j order, j vectorized
            *rows, j = loops[:lead]
            sch.reorder(*rows, loops[lead], j)
            outer = sch.fuse(*rows) if len(rows) > 1 else rows[0]
            if _static_extent(info.iters, len(dom)) >= 4 * PARALLEL_MIN:
                sch.parallel(outer)
            if int(info.iters[lead - 1].dom) % VECTOR == 0:
                sch.vectorize(sch.split(j, [None, VECTOR])[1])
        elif _static_extent(info.iters, len(dom)) >= 4 * PARALLEL_MIN \
                and _static_extent(info.iters, lead) >= 2:
            # Other reductions: rows in parallel.  (No decompose_reduction: afterwards
            # parallel/vectorize refuse the block, tvm-0.27.md pitfall 9.)
            sch.parallel(sch.fuse(*loops[:lead]) if lead > 1 else loops[0])
    _compute_shared_at(sch, shared, anchor)
    return sch


def _schedule_injective(sch, info, loops, lead) -> None:
    outer = sch.fuse(*loops[:lead]) if lead > 1 else loops[0]
    extent = _static_extent(info.iters, lead)
    if extent % VECTOR == 0 and extent >= 4 * VECTOR:
        outer, inner = sch.split(outer, [None, VECTOR])
        sch.vectorize(inner)
    if extent >= PARALLEL_MIN:
        sch.parallel(outer)


def _compute_shared_at(sch, shared, anchor) -> None:
    """Compute each shared value (a block `_inline_without_copies` kept) inside the loop of
    the function's last block, one step at a time: in the loop around its innermost one
    (around the vector lanes), so a shared value lives in a buffer of one vector, which LLVM
    keeps in registers, instead of a full array written and read back by a loop of its own
    (and a loop of 8 steps that LLVM unrolls: code, and compile time, 8 times over).  Only
    values with as many elements as that block has steps, so no value is computed twice
    (a broadcast operand, smaller, would be); the others get a loop of their own."""
    from tvm import tirx

    loops = sch.get_loops(anchor) if anchor is not None else []
    at = len(loops) - 2 if len(loops) > 1 else len(loops) - 1
    steps = 1
    for loop in loops:
        extent = sch.get(loop).extent
        steps *= int(extent) if isinstance(extent, (int, tirx.IntImm)) else 0
    for info in reversed(shared):
        lead = len(info.iters)
        if loops and steps and _static_extent(info.iters, lead) == steps:
            try:
                sch.compute_at(info.block_rv, loops[at], preserve_unit_loops=False)
            except Exception:  # noqa: BLE001 - TVM's refusal: a loop of its own
                pass
            else:
                inner = sch.get_loops(info.block_rv)[at + 1:]
                if inner:
                    _vectorize_lanes(sch, sch.fuse(*inner) if len(inner) > 1 else inner[0])
                continue
        if lead:    # a 0-d value (a scalar the region computes once) has no loop
            _schedule_injective(sch, info, sch.get_loops(info.block_rv), lead)


def _vectorize_lanes(sch, loop) -> None:
    from tvm import tirx
    extent = sch.get(loop).extent
    if isinstance(extent, (int, tirx.IntImm)) and int(extent) % VECTOR == 0:
        sch.vectorize(sch.split(loop, [None, VECTOR])[1] if int(extent) > VECTOR else loop)


def _loads(expr) -> dict:
    """How many times `expr` reads each buffer (keyed by the buffer's variable)."""
    from tvm import ir
    counts: dict = {}
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, ir.expr.TensorLoad):
            counts[e.source] = counts.get(e.source, 0) + 1
            stack.extend(e.indices)
            continue
        for field in type(e).__tvm_ffi_type_info__.fields:
            value = getattr(e, field.name)
            if isinstance(value, ir.expr.Expr):
                stack.append(value)
            elif isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
                stack.extend(v for v in value if isinstance(v, ir.expr.Expr))
    return counts


def _cheap(value) -> bool:
    """A value that costs nothing to recompute at each use: a load (reshape, broadcast_to,
    a transpose), a constant, or a cast of one."""
    from tvm import ir, tirx
    while isinstance(value, tirx.Cast):
        value = value.value
    return isinstance(value, (ir.expr.TensorLoad, tirx.IntImm, tirx.FloatImm))


def _inline_without_copies(sch, infos):
    """Inline the injective blocks whose value is read once, or is cheap, into their
    consumers; the others stay blocks of their own, computed once into their buffer.
    Returns the blocks left.

    dlight's `try_inline` inlines every injective block, and TVM's inlining substitutes a
    value's expression at each of its reads: a value read twice is copied twice, so a chain
    of statements each reading the previous two values became an expression of 2^N nodes
    (six numpy statements compiled for minutes, almost all of it in LLVM).  Here a block's
    reads are counted as they will be after inlining (a cheap block inlined into k reads
    multiplies the reads of what it reads by k), consumers first, so the fused kernel stays
    linear in the region's size and computes each value once.  Returns the blocks left,
    and those of them that are injective values read by other blocks (`_compute_shared_at`
    places them)."""
    from tvm import tirx

    blocks = [sch.get(info.block_rv) for info in infos]
    writer = {w.source: k for k, b in enumerate(blocks) for w in b.writes}
    reads = []
    for k, block in enumerate(blocks):
        counts = _loads(block.body.value) if isinstance(block.body, tirx.BufferStore) else {}
        reads.append({writer[v]: n for v, n in counts.items() if writer.get(v, k) != k})
    uses = [0] * len(blocks)
    inline = [False] * len(blocks)
    for k in reversed(range(len(blocks))):
        inline[k] = uses[k] > 0 and infos[k].is_injective() \
            and isinstance(blocks[k].body, tirx.BufferStore) \
            and (uses[k] == 1 or _cheap(blocks[k].body.value))
        for producer, n in reads[k].items():
            uses[producer] += n * (uses[k] if inline[k] else 1)
    left, shared = [], []
    for k, info in enumerate(infos):
        if inline[k]:
            try:
                sch.compute_inline(info.block_rv)
                continue
            except Exception:  # noqa: BLE001 - TVM's refusal (an output buffer): kept
                pass
        left.append(info)
        if uses[k] and infos[k].is_injective():
            shared.append(info)
    return left, shared


def _parallel_full_reduction(sch, iters, loops, dom):
    """A reduction to one value (np.sum of a fused elementwise chain: the chain is inlined
    into it) would run serially, one element at a time; rfactor splits it into partial
    results computed in parallel, then combines those.  Where the elements split into whole
    steps of VECTOR lanes, there is one partial result per chunk and lane, so the chain runs
    VECTOR lanes wide (Black-Scholes' 35 float64 operations then a sum, on one core: 5.7 ms
    -> 2.0 ms for 100,000 options, numpy 4.8 ms); otherwise REDUCTION_CHUNKS scalar ones.
    Below 4 * PARALLEL_MIN elements there is one chunk, still VECTOR lanes wide.  Returns
    the partial-result block, which now reads the chain (None where there is none)."""
    extent = _static_extent(iters, len(dom))
    parallel = extent >= 4 * PARALLEL_MIN
    if set(dom) != {"R"} or extent < 4 * VECTOR:
        return None
    chunks = _chunks(extent) if parallel else 1 if extent % VECTOR == 0 else None
    if chunks is None and not parallel:
        return None
    r = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    if chunks is None:
        chunks, _ = sch.split(r, [REDUCTION_CHUNKS, None])
        partial = sch.rfactor(chunks, 0)
        sch.parallel(sch.get_loops(partial)[-2])   # the chunk loop, in the partial-sum block
        return partial
    # chunk c, lane l sums elements c * (extent / chunks) + m * VECTOR + l over m: the lanes
    # of one step m are adjacent elements, so the partial-sum block's lane loop vectorizes
    c, m, lane = sch.split(r, [chunks, None, VECTOR])
    sch.reorder(c, lane, m)
    partial = sch.rfactor(sch.fuse(c, lane), 0)
    cl, m = sch.get_loops(partial)[-2:]
    c, lane = sch.split(cl, [chunks, VECTOR])
    sch.reorder(c, m, lane)
    sch.vectorize(lane)
    if chunks > 1:
        sch.parallel(c)
    return partial


def _chunks(extent: int) -> int | None:
    """The number of chunks (nearest REDUCTION_CHUNKS) that splits `extent` elements into
    whole steps of VECTOR lanes, or None where there is none."""
    if extent % VECTOR:
        return None
    steps = extent // VECTOR
    divisors = [d for d in range(8, 4 * REDUCTION_CHUNKS + 1) if steps % d == 0]
    return min(divisors, key=lambda d: abs(d - REDUCTION_CHUNKS), default=None)


def _unaligned_params(func):
    """`func` with parameter buffers that assume only element alignment.  Buffers default to
    64-byte alignment, so LLVM emits aligned AVX loads, which fault on numpy's 16-byte
    aligned arrays; with this, kernels take the caller's arrays as they are instead of a
    copy per call (1 MB of float32 costs ~0.1–0.2 ms to copy).  Unaligned AVX loads cost
    the same on current x86 CPUs.  TVM has no Python API to rebuild a PrimFunc's
    parameters, so the function goes through its TVMScript text (~15 ms per kernel, paid
    once: compiled regions are cached on disk)."""
    import re

    import numpy as np
    tvm = load_tvm()

    # TVMScript prints float64's extreme values (a max reduction's initial value) as long
    # literals that its own parser then rejects; name them instead
    text = re.sub(r"T\.float64\((-?)\d{300,}\.0\)",
                  lambda m: f'T.{"min" if m.group(1) else "max"}_value("float64")', func.script())
    head, sep, body = text.partition("):\n")
    head = re.sub(r'T\.Buffer\(\((.*?)\), "(\w+)"\)',
                  lambda m: f'T.Buffer(({m.group(1)}), "{m.group(2)}", '
                            f'align={np.dtype(m.group(2)).itemsize})', head)
    return tvm.script.from_source(head + sep + body)


def _takes_inputs_unaligned(kept_aligned: list):
    """A module pass: the kernels called on the region's inputs (user arrays: the parameters
    `in<i>` of `main`, and of the functions of a region's parts, region.build_module) get
    unaligned parameters; kernels on values TVM allocated (64-byte aligned) keep their
    alignment.  A kernel TVMScript cannot round-trip (it prints some
    float64 constants it then refuses to parse) keeps its alignment and is reported in
    `kept_aligned`: its region then copies misaligned inputs."""
    import re

    tvm = load_tvm()
    from tvm import relax

    call_tir = tvm.ir.Op.get("relax.call_tir")

    @tvm.transform.module_pass(opt_level=0)
    def unaligned(mod, ctx):
        kernels = set()
        for function in mod.functions.values():
            if not isinstance(function, relax.Function):
                continue
            params = {p for p in function.params if re.fullmatch(r"in\d+", p.name)}
            for block in function.body.blocks:
                for binding in block.bindings:
                    call = binding.value
                    if isinstance(call, relax.Call) and call.op.same_as(call_tir) \
                            and any(a in params for a in call.args[1].fields):
                        kernels.add(call.args[0])
        for gv in kernels:
            try:
                mod[gv] = _unaligned_params(mod[gv])
            except tvm.error.DiagnosticError:
                kept_aligned.append(gv.name_hint)
        return mod
    return unaligned


def fast_math(program) -> bool:
    """Whether a region gets FastMathTransform: when it computes no float64 value."""
    import numpy as np
    return all(op.out.dtype != np.float64 for op in program.ops)


def legalize_passes(target, float32: bool) -> list:
    """The passes of a region's pipeline up to and including LegalizeOps: fast math (float32),
    the target's library dispatch (sort, scan, sampling), then TIR functions for the Relax
    operations.  region._Legalized runs them on operations alone."""
    from tvm import relax

    from backends.tvm import vmath
    from backends.tvm.target import is_gpu

    backend = relax.backend.cuda.pipeline if is_gpu(target) \
        else relax.backend.cpu_generic.pipeline
    if not is_gpu(target):
        vmath.install()   # float64 exp/log (and tanh, written with exp) vectorize
    return ([relax.transform.FastMathTransform()] if float32 else []) \
        + backend.library_dispatch_passes(target) + [relax.transform.LegalizeOps()]


def cpu_pipeline(target, float32: bool, kept_aligned: list):
    from tvm import relax
    from tvm.s_tir import dlight

    generic = relax.backend.cpu_generic.pipeline
    rule = dlight.ScheduleRule.from_callable("MyirCPU")(_schedule_cpu)
    passes = legalize_passes(target, float32) + _fusion_passes() \
        + [dlight.ApplyDefaultSchedule(rule), _takes_inputs_unaligned(kept_aligned)] \
        + generic.dataflow_lower_passes(target) + generic.finalize_passes(target)
    return sequential(target, passes)


def _safe(rule):
    """`rule`, except that an exception means 'not applicable': dlight's GPU rules can raise
    instead of declining (gpu.Reduction on a full reduction to 0-d followed by an elementwise
    op, tvm-0.27.md)."""
    from tvm.s_tir import dlight

    @dlight.ScheduleRule.from_callable(f"Safe{type(rule).__name__}")
    def apply(func, target, tunable):
        try:
            return rule.apply(func, target, tunable)
        except Exception:  # noqa: BLE001 - a failing rule just does not apply
            return None
    return apply


def gpu_pipeline(target, float32: bool):
    """CUDA's default pipeline with exception-safe dlight rules, and without gpu.GEMV, whose
    kernels can exceed the 48 KB of static shared memory (ptxas rejects them)."""
    from tvm import relax
    from tvm.s_tir import dlight

    cuda = relax.backend.cuda.pipeline
    rules = [_safe(r) for r in (dlight.gpu.Matmul(), dlight.gpu.Reduction(),
                               dlight.gpu.GeneralReduction(), dlight.gpu.Fallback())]
    passes = legalize_passes(target, float32) + _fusion_passes() \
        + [dlight.ApplyDefaultSchedule(*rules)] \
        + cuda.dataflow_lower_passes(target) + cuda.finalize_passes(target)
    return sequential(target, passes)


def _fusion_passes() -> list:
    """The passes after LegalizeOps that fuse a region's TIR functions into kernels (those
    of TVM's CPU and CUDA pipelines)."""
    from tvm import relax
    return [relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(),
            relax.transform.FuseOps(), relax.transform.FuseTIR()]


def sequential(target, passes):
    """`passes` in order as one module pass that runs them with `target` as the current
    target, which LegalizeOps' dispatch and dlight's rules read (the CPU and CUDA
    pipelines, and `region._Legalized`'s operations legalized alone)."""
    tvm = load_tvm()

    @tvm.transform.module_pass(opt_level=0)
    def pipeline(mod, ctx):
        with target:
            return tvm.transform.Sequential(passes)(mod)
    return pipeline
