"""The TVM lowering table: how each primitive becomes Relax, and which stay in numpy and why.

`LOWERINGS` maps a primitive name to a `Rule`: which operand positions must be static
(constants known at compile time: axes, shapes, indices), which are used only for their
shape, a test of whether the rule applies to these operand types, and the function emitting
the Relax expression.  `KEPT_IN_NUMPY` names every other primitive with the reason it is not
lowered; tests/test_primitive_tables.py checks that the two cover every primitive.

numpy semantics are kept exactly where it is cheap (dtype promotion: operands are cast to the
result dtype the type inference computed with numpy's rules; NaN propagation of maximum,
minimum, max and min), and documented where TVM differs by rounding only: reductions sum in
a different order than numpy's pairwise summation, and transcendental functions come from
LLVM's libm or TVM's fast-math (float32 only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from backends.tvm.program import Op, Program, Ref, Spec
from myir.ir.primitives import IN_PLACE, MATH_MORE


@dataclass(frozen=True)
class Rule:
    emit: Callable                      # (ctx, op) -> relax.Expr
    static: tuple[int, ...] = ()        # operand positions that must be compile-time constants
    shape_only: tuple[int, ...] = ()    # operand positions only the shape of is needed
    accepts: Callable = lambda args, out: True   # (operand Specs/consts, out Spec) -> bool
    gpu_only: bool = False              # lowered only for GPU targets (see KEPT_ON_CPU)


def _numeric(spec) -> bool:
    return isinstance(spec, Spec) and spec.dtype.kind in "biuf"


def _all_numeric(args, out) -> bool:
    return all(_numeric(a) or isinstance(a, (int, float, bool)) for a in args) and _numeric(out)


def _not_bool_out(args, out) -> bool:
    """Arithmetic on bools is logical in numpy (True + True is True); TVM's LLVM code
    generator has no add or multiply of bools."""
    return _all_numeric(args, out) and out.dtype != np.bool_


def _float_out(args, out) -> bool:
    return _all_numeric(args, out) and out.dtype.kind == "f"


def _float_in(args, out) -> bool:
    return _numeric(args[0]) and args[0].dtype.kind == "f"


class Context:
    """What a rule sees while one region is being built: the BlockBuilder, and operands as
    Relax expressions (cast as asked) or static Python values."""

    def __init__(self, bb, inputs, program: Program):
        self.bb = bb
        self.inputs = inputs
        self.program = program
        self.values: list = []
        self.scalar_fills: set[int] = set()   # fill ops the op being emitted reads as 0-d

    def emit(self, op: Op):
        """The Relax expression of `op`.  A fill operand (zeros, ones, a broadcast scalar:
        see `_fill_value`) of an elementwise op is read as its 0-d value, and the op's result
        broadcast afterwards if the fill was what gave it its shape: the full array of zeros
        is then never written to memory and read back (the gradient of `np.where` otherwise
        materialises zeros and broadcast seeds as large as its operands: hmlstm's, three
        1 MB arrays)."""
        self.scalar_fills = set()
        if op.prim in BROADCASTING and all(isinstance(self.spec(a), Spec) or a.kind == "const"
                                           for a in op.args):
            self.scalar_fills = {a.index for a in op.args if self._fill(a)}
        expr = LOWERINGS[op.prim].emit(self, op)
        if self.scalar_fills:
            shape = np.broadcast_shapes(*(() if a.kind == "const" or self._fill(a)
                                          else self.spec(a).shape for a in op.args))
            if shape != op.out.shape:
                expr = self.R.broadcast_to(self.bb.emit(expr), op.out.shape)
        return expr

    def _fill(self, ref: Ref) -> bool:
        return ref.kind == "op" and _fill_value(self, self.program.ops[ref.index]) is not None

    @property
    def R(self):
        from tvm import relax
        return relax.op

    def spec(self, ref: Ref):
        if ref.kind == "in":
            return self.program.inputs[ref.index]
        if ref.kind == "op":
            return self.program.ops[ref.index].out
        return ref.value     # a shape operand's Spec, or a constant

    def static(self, ref: Ref):
        assert ref.kind == "const", ref
        return ref.value

    def const(self, value, dtype):
        from tvm import relax
        return relax.const(np.asarray(value, dtype=dtype), dtype=str(np.dtype(dtype)))

    def tensor(self, ref: Ref, dtype=None):
        """The operand as a Relax tensor of `dtype` (numpy's `astype` semantics)."""
        if ref.kind == "const":
            return self.const(ref.value, dtype if dtype is not None else np.asarray(ref.value).dtype)
        if ref.kind == "op" and ref.index in self.scalar_fills:
            expr = _fill_value(self, self.program.ops[ref.index])
        else:
            expr = self.inputs[ref.index] if ref.kind == "in" else self.values[ref.index]
        have = self.spec(ref).dtype
        if dtype is not None and np.dtype(dtype) != have:
            expr = self.bb.emit(self.R.astype(expr, str(np.dtype(dtype))))
        return expr

    def common_dtype(self, refs) -> np.dtype:
        """numpy's result dtype for these operands, Python scalars being weak."""
        samples = []
        for ref in refs:
            spec = self.spec(ref)
            if isinstance(spec, Spec) and not spec.weak:
                samples.append(spec.dtype)
            else:
                samples.append(spec if ref.kind == "const" else spec.scalar(0))
        return np.result_type(*samples)


# -- rule families ------------------------------------------------------------------------

def _elementwise(name: str, accepts=_all_numeric) -> Rule:
    """Operands cast to the result dtype, then the Relax op: numpy computes in that dtype."""
    def emit(c: Context, op: Op):
        return getattr(c.R, name)(*(c.tensor(a, op.out.dtype) for a in op.args))
    return Rule(emit, accepts=accepts)


def _compare(name: str) -> Rule:
    """A comparison.  A float compared with itself is written as the NaN test it is: TVM's
    simplifier, once the operands are inlined into one kernel, folds `x != x` to false and
    `x == x`, `x <= x` to true, as for integers (`x < x` is false for NaN too)."""
    def emit(c: Context, op: Op):
        dtype = c.common_dtype(op.args)
        x, y = (c.tensor(a, dtype) for a in op.args)
        if op.args[0] == op.args[1] and op.args[0].kind in ("in", "op") \
                and np.dtype(dtype).kind in "fc" \
                and name in ("not_equal", "equal", "less_equal", "greater_equal"):
            nan = c.R.isnan(x)
            return nan if name == "not_equal" else c.R.logical_not(nan)
        return getattr(c.R, name)(x, y)
    return Rule(emit)


def _nan_aware(pick: str) -> Rule:
    """np.maximum/np.minimum propagate NaN from either side; a bare select would not."""
    def emit(c: Context, op: Op):
        x, y = (c.tensor(a, op.out.dtype) for a in op.args)
        R = c.R
        chosen = R.where(getattr(R, pick)(x, y), x, y)
        if op.out.dtype.kind != "f":
            return chosen
        return R.where(R.isnan(x), x, R.where(R.isnan(y), y, chosen))
    return Rule(emit)


def _pointwise(name: str, scalar: Callable) -> Rule:
    """An elementwise function Relax has no op for, written per element in TIR: `scalar`
    maps the result's dtype and the operands' elements (TIR expressions, cast to that dtype
    and broadcast to the result's shape) to the result's element."""
    def emit(c: Context, op: Op):
        from tvm import te
        shape = op.out.shape
        xs = []
        for a in op.args:
            x = c.tensor(a, op.out.dtype)
            spec = c.spec(a)
            if not isinstance(spec, Spec) or spec.shape != shape:
                x = c.bb.emit(c.R.broadcast_to(x, shape))
            xs.append(x)
        dtype = str(op.out.dtype)
        return c.bb.emit_te(lambda *ts: te.compute(
            ts[0].shape, lambda *i: scalar(dtype, *(t(*i) for t in ts)), name), *xs)
    return Rule(emit, accepts=_float_out)


def _logaddexp(log1p_of, exp_of, at_tie):
    """numpy's logaddexp loop (npy_logaddexp): at x == y (infinities included) x + at_tie,
    else the larger plus log1p(exp(-|x - y|)) (base 2: log2(1 + 2^-|x - y|)); NaN
    propagates through x - y."""
    def scalar(dtype, x, y):
        from tvm import tirx
        d = x - y
        zero = tirx.const(0, dtype)
        return tirx.Select(x == y, x + tirx.const(at_tie, dtype), tirx.Select(
            d > zero, x + log1p_of(dtype, exp_of(dtype, -d)),
            tirx.Select(d <= zero, y + log1p_of(dtype, exp_of(dtype, d)), d)))
    return scalar


def _log2_1p(dtype, x):
    """numpy's npy_log2_1p: log1p(x) / ln 2, as log1p(x) * log2(e)."""
    from tvm import tirx
    return tirx.log1p(x) * tirx.const(1.4426950408889634, dtype)


def _tir(name: str) -> Callable:
    """TIR's intrinsic of that name, TVM imported when a region is built."""
    def scalar(dtype, *xs):
        from tvm import tirx
        return getattr(tirx, name)(*xs)
    return scalar


def _libm(name: str) -> Callable:
    """libm's function of that name (`name`f for float32), which numpy's loop calls too:
    for cbrt, which TIR lacks, and atanh, which TIR writes as log((1 + x) / (1 - x)) / 2
    (0 for |x| < 1e-17)."""
    def scalar(dtype, *xs):
        from tvm import tirx
        return tirx.call_pure_extern(dtype, name + "f" if dtype == "float32" else name, *xs)
    return scalar


def _reduction(name: str) -> Rule:
    """sum/mean/prod/max/min over static axes; max/min propagate NaN like numpy."""
    def emit(c: Context, op: Op):
        x_ref, axis_ref, keep_ref = op.args
        axis, keepdims = c.static(axis_ref), bool(c.static(keep_ref))
        axis = list(axis) if isinstance(axis, tuple) else axis
        x = c.tensor(x_ref, op.out.dtype if name in ("sum", "mean", "prod") else None)
        R = c.R
        shape = c.spec(x_ref).shape
        axes = range(len(shape)) if axis is None else [axis] if isinstance(axis, int) else axis
        if all(shape[a] == 1 for a in axes):
            # Reducing axes of length 1 changes no value (numpy does not even add 0, so -0.0
            # stays -0.0).  Also, TVM's schedule helpers miscompile such a reduction followed
            # by elementwise work: mean over a (1, 4) array then cos gave cos(1).
            return R.reshape(x, op.out.shape)
        out = getattr(R, name)(x, axis=axis, keepdims=keepdims)
        if name in ("max", "min") and op.out.dtype.kind == "f":
            nans = R.sum(R.astype(R.isnan(x), "int32"), axis=axis, keepdims=keepdims)
            out = R.where(R.greater(nans, c.const(0, "int32")), c.const(np.nan, op.out.dtype), out)
        return out

    def accepts(args, out):
        # numpy raises on max/min of an empty array; an empty sum is fine but pointless here
        return _numeric(args[0]) and args[0].size > 0 and _numeric(out)
    return Rule(emit, static=(1, 2), accepts=accepts)


def _where(c: Context, op: Op):
    cond, x, y = op.args
    spec = c.spec(cond)
    cond_t = c.tensor(cond)
    if isinstance(spec, Spec) and spec.dtype != np.bool_:
        cond_t = c.R.not_equal(cond_t, c.const(0, spec.dtype))
    return c.R.where(cond_t, c.tensor(x, op.out.dtype), c.tensor(y, op.out.dtype))


def _strong_zero(c: Context, op: Op):
    d, x = (c.tensor(a, op.out.dtype) for a in op.args)
    zero = c.const(0, op.out.dtype)
    return c.R.where(c.R.equal(d, zero), zero, x)


def _clip(c: Context, op: Op):
    x, lo, hi = (c.tensor(a, op.out.dtype) for a in op.args)
    R = c.R
    clipped = R.minimum(R.maximum(x, lo), hi)
    return R.where(R.isnan(x), x, clipped) if op.out.dtype.kind == "f" else clipped


def _identity(c: Context, op: Op):
    return c.tensor(op.args[0], op.out.dtype)


def _square(c: Context, op: Op):
    x = c.tensor(op.args[0], op.out.dtype)
    return c.R.multiply(x, x)


def _reciprocal(c: Context, op: Op):
    return c.R.divide(c.const(1, op.out.dtype), c.tensor(op.args[0], op.out.dtype))


def _reshape_to_out(c: Context, op: Op):
    return c.R.reshape(c.tensor(op.args[0]), op.out.shape)


def _broadcast_to_out(c: Context, op: Op):
    return c.R.broadcast_to(c.tensor(op.args[0], op.out.dtype), op.out.shape)


def _transpose(c: Context, op: Op):
    axes = c.static(op.args[1])
    return c.R.permute_dims(c.tensor(op.args[0]), None if axes is None else list(axes))


def _swapaxes(c: Context, op: Op):
    x = op.args[0]
    ndim = len(c.spec(x).shape)
    a, b = (c.static(r) % ndim for r in op.args[1:])
    axes = list(range(ndim))
    axes[a], axes[b] = axes[b], axes[a]
    return c.R.permute_dims(c.tensor(x), axes)


def _zeros_like_out(c: Context, op: Op):
    return c.R.zeros(op.out.shape, str(op.out.dtype))


def _ones_like_out(c: Context, op: Op):
    return c.R.ones(op.out.shape, str(op.out.dtype))


def _sum_to_like(c: Context, op: Op):
    d = op.args[0]
    shape = c.spec(d).shape
    value = c.tensor(d, op.out.dtype)
    if shape == op.out.shape:
        return value
    if op.out.scalar is not None and not op.out.shape:
        return c.R.sum(value)
    lead = len(shape) - len(op.out.shape)
    axes = list(range(lead)) + [lead + i for i, n in enumerate(op.out.shape)
                                if n == 1 and shape[lead + i] != 1]
    return c.R.reshape(c.R.sum(value, axis=axes, keepdims=True), op.out.shape)


def _reduce_grad(c: Context, op: Op):
    dout, _, axis_ref, keep_ref = op.args
    axis, keepdims = c.static(axis_ref), c.static(keep_ref)
    value = c.tensor(dout, op.out.dtype)
    if axis is not None and not keepdims:
        value = c.R.expand_dims(value, list(axis) if isinstance(axis, tuple) else axis)
    return c.R.broadcast_to(value, op.out.shape)


def _basic_index(index, shape):
    """A static basic index (ints, slices, None, Ellipsis, or a tuple of them) as
    (begin, end, stride) per axis, the axes ints remove, and where None adds an axis —
    or None when the index is not basic."""
    index = index if isinstance(index, tuple) else (index,)
    if not all(isinstance(i, (int, slice, type(None), type(Ellipsis))) and not isinstance(i, bool)
               for i in index):
        return None
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > len(shape) or sum(i is Ellipsis for i in index) > 1:
        return None
    expanded = []
    for i in index:
        expanded.extend([slice(None)] * (len(shape) - used) if i is Ellipsis else [i])
    expanded.extend([slice(None)] * (len(shape) - sum(i is not None for i in expanded)))
    ranges, dropped, new_axes, axis, out_axis = [], [], [], 0, 0
    for i in expanded:
        if i is None:
            new_axes.append(out_axis)
            out_axis += 1
            continue
        n = shape[axis]
        if isinstance(i, int):
            if not -n <= i < n:
                return None   # numpy raises IndexError: leave that to numpy
            start = i % n
            ranges.append((start, start + 1, 1))
            dropped.append(axis)
        else:
            start, stop, step = i.indices(n)
            if step < 0:
                return None   # reversed slices stay in numpy (rare in array code)
            ranges.append((start, max(start, stop), step))
            out_axis += 1
        axis += 1
    return ranges, dropped, new_axes


def _getitem(c: Context, op: Op):
    x_ref, index_ref = op.args
    shape = c.spec(x_ref).shape
    ranges, dropped, new_axes = _basic_index(c.static(index_ref), shape)
    R = c.R
    value = c.tensor(x_ref)
    if any(r != (0, n, 1) for r, n in zip(ranges, shape)):
        value = c.bb.emit(R.strided_slice(value, list(range(len(shape))), [r[0] for r in ranges],
                                          [r[1] for r in ranges], [r[2] for r in ranges]))
    if dropped:
        value = c.bb.emit(R.squeeze(value, dropped))
    if new_axes:
        value = c.bb.emit(R.reshape(value, op.out.shape))
    return value


def _getitem_accepts(args, out):
    x, index = args
    return _numeric(x) and x.shape and _basic_index(index, x.shape) is not None and out.size > 0


def _getitem_grad(c: Context, op: Op):
    """The adjoint of a basic index: dout placed at the indexed positions, zeros elsewhere
    (a basic index never repeats a position, so no accumulation is needed)."""
    from tvm import te, tirx
    x_spec, index_ref, dout_ref = op.args
    shape = c.spec(x_spec).shape
    ranges, dropped, _ = _basic_index(c.static(index_ref), shape)
    dtype = str(op.out.dtype)
    kept = [a for a in range(len(shape)) if a not in dropped]
    dout = c.R.reshape(c.tensor(dout_ref, op.out.dtype), [
        (ranges[a][1] - ranges[a][0] + ranges[a][2] - 1) // ranges[a][2] for a in kept])

    def scatter(d):
        def at(*i):
            inside, src = tirx.const(True, "bool"), []
            for a, (start, stop, step) in enumerate(ranges):
                off = i[a] - start
                inside = tirx.all(inside, i[a] >= start, i[a] < stop, tirx.floormod(off, step) == 0)
                if a in kept:
                    src.append(tirx.floordiv(off, step))
            # if_then_else, unlike Select, never evaluates (reads) the branch not taken
            return tirx.if_then_else(inside, d(*src), tirx.const(0, dtype))
        return te.compute(shape, at, "getitem_grad")
    return c.bb.emit_te(scatter, c.bb.emit(dout))


def _getitem_grad_accepts(args, out):
    x, index, dout = args
    return _numeric(out) and bool(out.shape) and _basic_index(index, out.shape) is not None \
        and _numeric(dout) and dout.size > 0


def _fill_value(c: Context, op: Op):
    """The 0-d value an op broadcasts to its whole shape, or None if it is not a fill."""
    if op.prim in ("grad_zeros", "zeros_like"):
        return c.const(0, op.out.dtype)
    if op.prim in ("ones_like", "grad_seed"):
        return c.const(1, op.out.dtype)
    if op.prim in ("reduce_grad", "broadcast_to_like", "broadcast_to") \
            and isinstance(c.spec(op.args[0]), Spec) and c.spec(op.args[0]).shape == () \
            and op.args[0].kind != "op":
        return c.tensor(op.args[0], op.out.dtype)
    return None


def _grad_seed(c: Context, op: Op):
    return c.const(np.ones(op.out.shape), op.out.dtype)


def _matmul(c: Context, op: Op):
    return c.R.matmul(*(c.tensor(a, op.out.dtype) for a in op.args))


def _matmul_accepts(args, out):
    return _all_numeric(args, out) and all(isinstance(a, Spec) and 1 <= len(a.shape) <= 2
                                           for a in args)


_ARITH = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
          "ieee_truediv": "divide", "gadd": "add", "np_add": "add", "np_subtract": "subtract",
          "np_multiply": "multiply", "np_divide": "divide"}
_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan",
         "arcsin": "asin", "arccos": "acos", "arctan": "atan",
         "tanh": "tanh", "floor": "floor", "ceil": "ceil"}
_COMPARE = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
            "eq": "equal", "ne": "not_equal"}

LOWERINGS: dict[str, Rule] = {
    **{p: _elementwise(op, _not_bool_out) for p, op in _ARITH.items()},
    **{p: _elementwise(op, _float_out) for p, op in _MATH.items()},
    **{p: _compare(op) for p, op in _COMPARE.items()},
    **{p: _elementwise("power", _float_out) for p in ("pow", "power", "ieee_pow")},
    "arctan2": _elementwise("atan2", _float_out),
    "neg": _elementwise("negative"), "negative": _elementwise("negative"),
    "abs": _elementwise("abs"), "builtin_abs": _elementwise("abs"),
    "sign": _elementwise("sign", _float_out),
    "pos": Rule(_identity, accepts=lambda a, o: _all_numeric(a, o) and o.dtype != np.bool_),
    "square": Rule(_square, accepts=_all_numeric),
    "reciprocal": Rule(_reciprocal, accepts=_float_out),
    **{p: _pointwise(p, _tir(f)) for p, f in (
        ("log1p", "log1p"), ("log2", "log2"), ("log10", "log10"), ("exp2", "exp2"),
        ("arcsinh", "asinh"), ("arccosh", "acosh"), ("hypot", "hypot"), ("trunc", "trunc"))},
    **{p: _pointwise(p, _libm(f)) for p, f in (("cbrt", "cbrt"), ("arctanh", "atanh"))},
    "rint": _pointwise("rint", _tir("nearbyint")),      # half to even, as numpy's rint
    "logaddexp": _pointwise("logaddexp", _logaddexp(_tir("log1p"), _tir("exp"), math.log(2.0))),
    "logaddexp2": _pointwise("logaddexp2", _logaddexp(_log2_1p, _tir("exp2"), 1.0)),
    "maximum": _nan_aware("greater_equal"), "minimum": _nan_aware("less_equal"),
    "where": Rule(_where, accepts=_all_numeric),
    "strong_zero": Rule(_strong_zero, accepts=_float_out),
    "clip": Rule(_clip, accepts=_all_numeric),
    **{p: _reduction(p) for p in ("sum", "mean", "prod", "max", "min")},
    "reshape": Rule(_reshape_to_out, static=(1,)),
    "transpose": Rule(_transpose, static=(1,)),
    "swapaxes": Rule(_swapaxes, static=(1, 2)),
    "expand_dims": Rule(_reshape_to_out, static=(1,)),
    "squeeze": Rule(_reshape_to_out, static=(1,)),
    "broadcast_to": Rule(_broadcast_to_out, static=(1,)),
    "astype": Rule(_identity, static=(1,), accepts=lambda a, o: _numeric(a[0]) and _numeric(o)),
    "getitem": Rule(_getitem, static=(1,), accepts=_getitem_accepts),
    "grad_zeros": Rule(_zeros_like_out, shape_only=(0,)),
    "zeros_like": Rule(_zeros_like_out, shape_only=(0,), static=(1,)),
    "ones_like": Rule(_ones_like_out, shape_only=(0,), static=(1,)),
    "sum_to_like": Rule(_sum_to_like, shape_only=(1,)),
    "broadcast_to_like": Rule(_broadcast_to_out, shape_only=(1,)),
    "reduce_grad": Rule(_reduce_grad, static=(2, 3), shape_only=(1,)),
    "getitem_grad": Rule(_getitem_grad, static=(1,), shape_only=(0,),
                         accepts=_getitem_grad_accepts),
    "grad_seed": Rule(_grad_seed, shape_only=(0,), accepts=lambda a, o: o.dtype.kind == "f"),
    "grad_check_input": Rule(_identity, static=(1,), accepts=_float_in),
    "matmul": Rule(_matmul, accepts=_matmul_accepts, gpu_only=True),
    "dot": Rule(_matmul, accepts=_matmul_accepts, gpu_only=True),
}

# Rules whose result is numpy's broadcast of their operands, element by element: a fill
# operand among them may be read as its 0-d value (Context.emit).
BROADCASTING = {*_ARITH, *_MATH, *_COMPARE, "pow", "power", "ieee_pow", "arctan2", "neg", "negative",
                "abs", "builtin_abs", "sign", "square", "reciprocal", "log1p", "maximum",
                "minimum", "where", "clip", "strong_zero"}

# Lowered only for GPU targets.  On the CPU, OpenBLAS's matmul (which numpy calls) is 2–4x
# faster than TVM's scheduled matmul on these machines (tvm-0.27.md: MLP forward+backward
# 0.29–0.38 ms in numpy vs 0.62–0.73 ms in TVM), so a matmul splits a CPU region.
KEPT_ON_CPU = {name for name, rule in LOWERINGS.items() if rule.gpu_only}

_PYTHON_ONLY = "acts on Python values (numbers, strings, tuples, functions), not on arrays"
_MATH_MODULE = "`math` functions take Python floats only (math.exp(array) raises)"
KEPT_IN_NUMPY: dict[str, str] = {
    "vectorize_call": "a kernel of its own, its loop body the scalar function "
                      "(backends/tvm/kernel.py), not an op of a region",
    "jvp_check_tangent": "checks a jvp tangent against its primal, once, where the glue "
                         "receives it: nothing to compute",
    **{p: "integer division by zero must give numpy's 0/inf with a warning, not a SIGFPE; "
          "float floor division has numpy's own rounding"
       for p in ("floordiv", "mod", "np_floor_divide", "np_remainder")},
    **{p: "bitwise and shift operations on integer arrays are rare in differentiable code; "
          "numpy is exact" for p in ("bitand", "bitor", "bitxor", "lshift", "rshift", "invert")},
    **{p: _PYTHON_ONLY for p in (
        "is_", "is_not", "not_", "truth", "len", "range", "builtin_min", "builtin_max",
        "to_float", "to_int", "to_bool", "builtin_round", "builtin_divmod", "make_tuple",
        "unpack", "make_slice", "shape", "ndim",
        "size", "dtype", "cast", "env_getitem", "env_setitem", "select_grad", "switch",
        "make_exception", "raise_", "depend", "check_bound", "format", "concat_str",
        "print_")},
    **{"math_" + p: _MATH_MODULE for p in MATH_MORE.split()},
    **{p: "an update of one element or slice: numpy writes it in place where the old value "
          "is dead (the python backend's codegen), TVM would copy the whole array"
       for p in ("setitem", "copy")},
    "not_a_view": _PYTHON_ONLY,
    **{p: "dicts and records are Python containers; their arrays are lowered where used"
       for p in ("make_dict", "make_record", "getattr_", "record_replace", "dict_setitem",
                 "dict_get", "dict_keys", "dict_values", "dict_items", "dict_cons",
                 "contains", "iter_keys", "comp_length", "comp_next", "dict_pick", "children",
                 "rebuild",
                 "dict_items_grad", "iter_keys_grad")},
    **{p: "a Jacobian's trees taken apart and put together, around the loops that compute "
          "it (passes/jacobian_loops.py); their arrays are lowered where used"
       for p in ("tree_ravel", "tree_unravel", "jacobian_blocks", "jacobian_unblocks")},
    **{p: _PYTHON_ONLY for p in (
        "make_list list_append list_extend list_of_length list_order list_permute seq_repeat "
        "list_pop list_unpop setitem_slot to_list to_tuple builtin_sum sum_grad "
        "seq_grad array_grad").split()},
    **{"math_" + p: _MATH_MODULE for p in (
        "exp log log1p expm1 sqrt sin cos tan asin acos atan sinh cosh tanh fabs floor ceil "
        "pow atan2 hypot").split()},
    **{"aug_" + p: "`x op= y` on an array raises (it would mutate a shared array), on "
                   "scalars it is Python's operator" for p in (
        "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul")},
    **{"inplace_" + p: "`y[i] op= v`'s operation where numpy's in-place update casts to the "
                       "indexed part's dtype or raises (elsewhere it becomes the plain "
                       "operator)" for p in IN_PLACE},
    **{p: "TVM 0.27's LLVM code generator has no intrinsic for it (exp-based formulas lose "
          "numpy's accuracy near 0)" for p in ("sinh", "cosh")},
    **{p: "a float classification with a bool result, cheap in numpy; TVM's casts of "
          "operands to the result dtype do not apply" for p in ("isnan", "isinf", "isfinite")},
    "expm1": "TVM 0.27 has no expm1 intrinsic; exp(x) - 1 would lose numpy's accuracy near 0",
    "argmax": "NaN positions: numpy returns the first NaN, TVM's argmax ignores NaN",
    "argmin": "NaN positions: numpy returns the first NaN, TVM's argmin ignores NaN",
    "argsort": "no Relax sort with numpy's stable order on ties and NaN",
    "concatenate": "takes a tuple of arrays (regions pass single tensors); a copy in numpy",
    "stack": "takes a tuple of arrays (regions pass single tensors); a copy in numpy",
    "concat_grad": "returns a tuple of arrays",
    **{p: "a concatenation's sensitivity is a tuple or list; on arrays the typed optimizer "
          "makes it sum_to_like / broadcast_to_like" for p in ("sum_to_side", "broadcast_to_side")},
    **{p: "a loop gradient's residual stack lives in host code, between the loop's "
          "iterations" for p in ("stack_push", "stack_pop", "stack_empty")},
    "grad_cast": "a gradient's conversion to its parameter's type, once per gradient where "
                 "a dtype met a wider one: a numpy astype at the output",
    "unstack": "returns a tuple of arrays",
    "zeros": "no array operand: a constructor, allocated by numpy where used",
    "ones": "no array operand: a constructor, allocated by numpy where used",
    "empty": "uninitialised memory: nothing to compute",
    "full": "no array operand: a constructor, allocated by numpy where used",
    "array": "builds an array from Python values (lists, tuples)",
    "asarray": "builds an array from Python values (lists, tuples)",
    "arange": "no array operand: a constructor",
    "eye": "no array operand: a constructor",
    # numpy.linalg, contractions, scans, sorting and gathers
    **{p: "LAPACK through numpy (pivoting, convergence tests): numpy's values to the last "
          "bit, and LinAlgError where numpy raises it; TVM has no factorizations"
       for p in ("linalg_solve linalg_inv linalg_det linalg_slogdet linalg_cholesky "
                 "linalg_eigh linalg_qr linalg_svd").split()},
    **{p: "a contraction of any subscripts: numpy's einsum and BLAS; the gradient's "
          "subscripts are found by the python backend" for p in (
        "einsum", "einsum_grad", "tensordot", "tensordot_grad")},
    "convolve": "numpy's correlation loop (a dot product per output): numpy's values to "
                "the last bit",
    **{p: "a sequential scan along an axis: numpy's order of additions (multiplications)"
       for p in ("cumsum", "cumprod")},
    "sort": "no Relax sort with numpy's order of NaNs",
    "searchsorted": "binary search: no Relax equivalent with numpy's side='left'/'right'",
    **{p: "a gather (scatter-add for the gradient) by integer arrays: numpy's take and "
          "add.at, with numpy's IndexError" for p in (
        "take", "take_grad", "take_along_axis", "take_along_axis_grad")},
}
