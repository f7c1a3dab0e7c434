"""float64 exp, log and tanh that LLVM can vectorize, for the CPU target.

TVM lowers `exp`/`log` of float64 to LLVM's `llvm.exp`/`llvm.log` intrinsics, which LLVM turns
into one scalar libm call per lane: a vectorized loop of float64 transcendentals runs at libm's
scalar speed.  TVM writes `tanh` as (1 - e^-2x) / (1 + e^-2x), which cancels for small x
(tanh(1e-20) came out 0, tanh(1e-8) with 8 correct digits).  Here all three are written in
plain arithmetic and bit operations, which vectorize on AVX2:

* exp: x = k·ln2 + r with |r| ≤ ln2/2 (Cody–Waite: ln2 split so k·LN2_HI is exact), e^r by
  its Taylor series to degree 13 (truncation error < 1e-17), times 2^k built in the exponent
  bits (in two halves, so results down to the smallest subnormal come out right);
* log: x = m·2^e with m in [√½, √2), log m = 2·atanh(s), s = (m-1)/(m+1), |s| < 0.172, by its
  odd series to s^23 (truncation error < 1e-18), plus e·ln2 (split again); subnormal inputs
  are scaled by 2^54 first;
* tanh: for |x| < 0.55, e = e^(2|x|) - 1 by its Taylor series (nested, so small x keep their
  relative precision) and tanh = e / (e + 2); above, (1 - z) / (1 + z) with z = e^(-2|x|) ≤ 1/3,
  which does not cancel; the sign is put back last (so tanh(-0.0) is -0.0).

Measured on 2^20 points (tests/test_tvm.py::test_vector_math_accuracy): at most 1 ulp from
numpy for exp over [-745, 710], at most 2 ulp for log over [1e-310, 1e300], at most 3 ulp for tanh
over ±[1e-300, 1e3] (TVM's own: 9e15 ulp, all wrong digits, below 1e-17); special values (±0, ±inf,
NaN, negative, overflow, underflow) exactly numpy's.  A vectorized float64 exp over 2^20
points took 2.1 ms instead of 9.5 ms with libm.

The integer ↔ float conversions use the 2^52 trick (adding 2^52 puts a small integer in the
mantissa bits) because AVX2 has no packed int64 ↔ float64 conversion.
"""

from __future__ import annotations

import math

import numpy as np

from backends.tvm import load_tvm

LN2_HI = 0.6931471803691238       # 0x3fe62e42fee00000: k * LN2_HI is exact for |k| < 2**21
LN2_LO = 1.9082149292705877e-10   # ln 2 - LN2_HI
TWO52 = 4503599627370496.0        # 2**52
TWO52_BITS = int(np.float64(TWO52).view(np.int64))
EXP_MAX = 709.782712893384        # above: inf
EXP_MIN = -745.1332191019412      # below: 0


class _Lanes:
    """Constants and bit casts at the width of the vector being lowered (float64xN)."""

    def __init__(self, lanes: int):
        self.lanes = lanes

    def ty(self, scalar: str) -> str:
        return f"{scalar}x{self.lanes}" if self.lanes > 1 else scalar

    def c(self, value, scalar="float64"):
        from tvm import tirx
        k = tirx.const(value, scalar)
        return tirx.Broadcast(k, self.lanes) if self.lanes > 1 else k

    def bits(self, x):
        from tvm import tirx
        return tirx.reinterpret(self.ty("int64"), x)

    def double(self, b):
        from tvm import tirx
        return tirx.reinterpret(self.ty("float64"), b)

    def pow2(self, k):
        """2**k for an integer-valued float k in [-1022, 1023]."""
        from tvm import tirx
        biased = self.bits(k + self.c(TWO52 + 1023.0)) - self.c(TWO52_BITS, "int64")
        return self.double(tirx.shift_left(biased, self.c(52, "int64")))


class _Bindings:
    """Values a formula reads more than once, bound to variables (`tirx.Let`) so each is
    computed once.  The argument of exp/log/tanh is the whole fused expression of its
    operand, and a formula reads it and its reductions many times (r thirteen times in exp's
    series): written out at each read, a tanh of an exp of an exp multiplied the code LLVM
    receives by each formula's read count in turn.  Comparisons stay unbound: TVM 0.27's
    passes reject a Let of a boolean vector (they build an IntImm of type boolx8)."""

    def __init__(self):
        self.bound: list = []

    def __call__(self, value, name: str):
        from tvm import tirx
        if isinstance(value, (tirx.Var, tirx.IntImm, tirx.FloatImm, tirx.Broadcast)):
            return value
        var = tirx.Var(name, str(value.ty))
        self.bound.append((var, value))
        return var

    def wrap(self, body):
        from tvm import tirx
        for var, value in reversed(self.bound):
            body = tirx.Let(var, value, body)
        return body


def exp_f64(x, lanes: int):
    from tvm import tirx
    v = _Lanes(lanes)
    c = v.c
    let = _Bindings()
    x = let(x, "x")
    xc = let(tirx.max(tirx.min(x, c(710.0)), c(-746.0)), "xc")   # keeps k in range (NaN: below)
    k = let(tirx.floor(xc * c(1.0 / math.log(2.0)) + c(0.5)), "k")
    r = let((xc - k * c(LN2_HI)) - k * c(LN2_LO), "r")
    p = c(1.0 / math.factorial(13))
    for n in range(12, -1, -1):
        p = p * r + c(1.0 / math.factorial(n))
    half = let(tirx.floor(k * c(0.5)), "half")
    y = p * v.pow2(half) * v.pow2(k - half)
    y = tirx.Select(xc >= c(EXP_MAX), c(math.inf), y)
    y = tirx.Select(xc <= c(EXP_MIN), c(0.0), y)
    return let.wrap(tirx.Select(tirx.isnan(x), x, y))


def log_f64(x, lanes: int):
    from tvm import tirx
    v = _Lanes(lanes)
    c = v.c
    let = _Bindings()
    x = let(x, "x")
    tiny = x < c(2.2250738585072014e-308)                   # subnormal (or ≤ 0: see below)
    xs = tirx.Select(tiny, x * c(18014398509481984.0), x)   # · 2**54
    b = let(v.bits(xs), "b")
    e_biased = tirx.shift_right(b, c(52, "int64"))          # sign bit 0 for the x > 0 used
    m = let(v.double(tirx.bitwise_or(tirx.bitwise_and(b, c((1 << 52) - 1, "int64")),
                                     c(1023 << 52, "int64"))), "m")   # in [1, 2)
    big = m > c(math.sqrt(2.0))
    m = let(tirx.Select(big, m * c(0.5), m), "m")
    e = v.double(tirx.bitwise_or(e_biased, c(TWO52_BITS, "int64"))) - c(TWO52 + 1023.0)
    e = let(e + tirx.Select(big, c(1.0), c(0.0)) - tirx.Select(tiny, c(54.0), c(0.0)), "e")
    s = let((m - c(1.0)) / (m + c(1.0)), "s")
    s2 = let(s * s, "s2")
    q = c(1.0 / 23.0)
    for n in range(21, 1, -2):
        q = q * s2 + c(1.0 / n)
    t = let(s * c(2.0), "t")   # log m = t + t·s²·q: the small tail added last keeps t's precision
    y = e * c(LN2_HI) + (t + (t * s2 * q + e * c(LN2_LO)))
    y = tirx.Select(x == c(math.inf), x, y)
    y = tirx.Select(x == c(0.0), c(-math.inf), y)
    y = tirx.Select(x < c(0.0), c(math.nan), y)
    return let.wrap(tirx.Select(tirx.isnan(x), x, y))


def tanh_f64(x, lanes: int):
    from tvm import tirx
    c = _Lanes(lanes).c
    let = _Bindings()
    x = let(x, "x")
    a = let(tirx.abs(x), "a")
    y = let(a * c(2.0), "y")
    e = c(1.0)                         # e^y - 1 = y(1 + y/2(1 + y/3(1 + ...)))
    for n in range(22, 1, -1):
        e = c(1.0) + y * c(1.0 / n) * e
    e = let(y * e, "e")
    z = let(exp_f64(-y, lanes), "z")
    t = let(tirx.Select(a < c(0.55), e / (e + c(2.0)), (c(1.0) - z) / (c(1.0) + z)), "t")
    t = tirx.Select(x < c(0.0), -t, t)
    return let.wrap(tirx.Select(tirx.isnan(x) | (x == c(0.0)), x, t))


def _lowering(fn, op_name):
    """`fn` for float64 (scalar or vector), TVM's own lowering for other dtypes."""
    tvm = load_tvm()
    theirs = tvm.ir.Op.get(op_name).get_attr("llvm.FLowerIntrinsic")

    def lower(call):
        ty = str(call.ty)
        if ty == "float64" or ty.startswith("float64x"):
            return fn(call.args[0], int(ty.split("x")[1]) if "x" in ty else 1)
        return theirs(call)
    return lower


_installed = False


def install() -> None:
    """Make TVM's LLVM code generator use these for float64 exp, log and tanh (other dtypes
    keep TVM's lowering).  TVM keeps intrinsic lowerings in one registry per process, so this
    applies to every LLVM module compiled after it: done once, when the first region is
    compiled for the CPU."""
    global _installed
    if _installed:
        return
    from tvm import tirx
    for name, fn in (("exp", exp_f64), ("log", log_f64), ("tanh", tanh_f64)):
        op_name = f"tirx.{name}"
        tirx.register_intrin_lowering(op_name, target="llvm", f=_lowering(fn, op_name), level=99)
    _installed = True
