"""Gradient rules of the differentiable primitives, written in the compiled subset.

This module is never run: the frontend parses each `bprop_<primitive>(inputs..., out, dout)`
into a graph that returns the tuple of the inputs' gradients.  Because the rules are graphs
of primitives that have rules themselves, the AD can differentiate its own output: grad of
grad works, through control flow too.

Conventions at kinks (subgradients), chosen as JAX does:
* `abs(x)` and `sign`: the gradient of abs at 0 is 0 (sign(0) = 0).
* `maximum(x, y)` / `minimum`: at ties each operand gets half of the gradient.
* `max` / `min` reductions and builtin `min()`/`max()`: ties share the gradient equally.
* Where a slope is infinite, the rules give inf (nan for 0 * inf and 0 / 0), as numpy and
  JAX do, for Python floats too (`ieee_truediv`, `ieee_pow`: CPython's `/` and `**` raise
  there): sqrt and `x ** 0.5` at 0 have slope inf.
* `x ** y` at x = 0: y * 0 ** (y - 1), so 0 for y > 1, 1 for y = 1, inf for 0 < y < 1; and
  0 for y = 0, as JAX has it for an integer exponent 0 (x ** 0 is the constant 1; the same
  for 0.0, where JAX's 0 * inf gives nan).
Broadcasting: each operand's gradient is summed back to its shape (`sum_to_like`).
"""

import math

import numpy as np

from myir.ir.primitives import PRIMITIVES as _P

sum_to = _P["sum_to_like"]
broadcast_like = _P["broadcast_to_like"]
reduce_grad = _P["reduce_grad"]
getitem_grad = _P["getitem_grad"]
zeros = _P["grad_zeros"]
env_getitem = _P["env_getitem"]
env_setitem = _P["env_setitem"]
gadd = _P["gadd"]
switch = _P["switch"]
concat_grad = _P["concat_grad"]
unstack = _P["unstack"]
grad_cast = _P["grad_cast"]
ieee_truediv = _P["ieee_truediv"]
ieee_pow = _P["ieee_pow"]


# ------------------------------------------------------------------ arithmetic

def bprop_add(x, y, out, dout):
    return (sum_to(dout, x), sum_to(dout, y))


def bprop_sub(x, y, out, dout):
    return (sum_to(dout, x), sum_to(-dout, y))


def bprop_mul(x, y, out, dout):
    return (sum_to(dout * y, x), sum_to(x * dout, y))


def bprop_truediv(x, y, out, dout):
    return (sum_to(dout / y, x), sum_to(-dout * x / (y * y), y))


def bprop_pow(x, y, out, dout):
    dx = dout * y * ieee_pow(x, y - (y != 0))
    dy = dout * out * np.log(np.where(x > 0, x, 1.0))
    return (sum_to(dx, x), sum_to(dy, y))


def bprop_neg(x, out, dout):
    return (-dout,)


def bprop_pos(x, out, dout):
    return (dout,)


def bprop_mod(x, y, out, dout):
    return (sum_to(dout, x), sum_to(-dout * ((x - out) / y), y))


def bprop_floordiv(x, y, out, dout):
    return (zeros(x), zeros(y))


# ------------------------------------------------------------------ elementwise math

def bprop_exp(x, out, dout):
    return (dout * out,)


def bprop_expm1(x, out, dout):
    return (dout * (out + 1.0),)


def bprop_log(x, out, dout):
    return (dout / x,)


def bprop_log1p(x, out, dout):
    return (dout / (1.0 + x),)


def bprop_sqrt(x, out, dout):
    return (ieee_truediv(dout, 2.0 * out),)


def bprop_sin(x, out, dout):
    return (dout * np.cos(x),)


def bprop_cos(x, out, dout):
    return (-dout * np.sin(x),)


def bprop_tan(x, out, dout):
    return (dout * (1.0 + out * out),)


def bprop_tanh(x, out, dout):
    return (dout * (1.0 - out * out),)


def bprop_sinh(x, out, dout):
    return (dout * np.cosh(x),)


def bprop_cosh(x, out, dout):
    return (dout * np.sinh(x),)


def bprop_arcsin(x, out, dout):
    return (dout / np.sqrt(1.0 - x * x),)


def bprop_arccos(x, out, dout):
    return (-dout / np.sqrt(1.0 - x * x),)


def bprop_arctan(x, out, dout):
    return (dout / (1.0 + x * x),)


def bprop_abs(x, out, dout):
    return (dout * np.sign(x),)


bprop_builtin_abs = bprop_abs


def bprop_square(x, out, dout):
    return (dout * 2.0 * x,)


bprop_negative = bprop_neg


def bprop_reciprocal(x, out, dout):
    return (-dout * out * out,)


bprop_power = bprop_pow


def _share(first, tie, dout):
    """dout where `first`, half of it on ties, else 0 (in dout's dtype)."""
    return np.where(first, dout, np.where(tie, dout * 0.5, zeros(dout)))


def bprop_maximum(x, y, out, dout):
    return (sum_to(_share(x > y, x == y, dout), x), sum_to(_share(y > x, x == y, dout), y))


def bprop_minimum(x, y, out, dout):
    return (sum_to(_share(x < y, x == y, dout), x), sum_to(_share(y < x, x == y, dout), y))


def bprop_arctan2(x, y, out, dout):
    d = x * x + y * y
    return (sum_to(ieee_truediv(dout * y, d), x), sum_to(ieee_truediv(-dout * x, d), y))


def bprop_where(cond, x, y, out, dout):
    z = zeros(dout)
    return (zeros(cond), sum_to(np.where(cond, dout, z), x), sum_to(np.where(cond, z, dout), y))


def bprop_clip(x, lo, hi, out, dout):
    outside = np.where(x < lo, True, x > hi)
    return (np.where(outside, zeros(dout), dout), zeros(lo), zeros(hi))


def bprop_to_float(x, out, dout):
    return (dout,)


def bprop_cast(x, dtype, out, dout):
    return (dout, zeros(dtype))


def bprop_astype(x, dtype, out, dout):
    return (dout.astype(x.dtype), zeros(dtype))


# ------------------------------------------------------------------ math module
# Same derivatives; those that call a function call math's, so second derivatives keep
# math's semantics.

bprop_math_exp = bprop_exp
bprop_math_expm1 = bprop_expm1
bprop_math_log = bprop_log
bprop_math_log1p = bprop_log1p
bprop_math_sqrt = bprop_sqrt
bprop_math_tan = bprop_tan
bprop_math_tanh = bprop_tanh
bprop_math_atan = bprop_arctan
bprop_math_fabs = bprop_abs
bprop_math_pow = bprop_pow
bprop_math_atan2 = bprop_arctan2


def bprop_math_sin(x, out, dout):
    return (dout * math.cos(x),)


def bprop_math_cos(x, out, dout):
    return (-dout * math.sin(x),)


def bprop_math_sinh(x, out, dout):
    return (dout * math.cosh(x),)


def bprop_math_cosh(x, out, dout):
    return (dout * math.sinh(x),)


def bprop_math_asin(x, out, dout):
    return (ieee_truediv(dout, math.sqrt(1.0 - x * x)),)


def bprop_math_acos(x, out, dout):
    return (ieee_truediv(-dout, math.sqrt(1.0 - x * x)),)


def bprop_math_hypot(x, y, out, dout):
    return (ieee_truediv(dout * x, out), ieee_truediv(dout * y, out))


# ------------------------------------------------------------------ reductions

def bprop_sum(x, axis, keepdims, out, dout):
    return (reduce_grad(dout, x, axis, keepdims), zeros(axis), zeros(keepdims))


def bprop_mean(x, axis, keepdims, out, dout):
    count = np.size(x) / np.size(out)
    return (reduce_grad(dout, x, axis, keepdims) / count, zeros(axis), zeros(keepdims))


def bprop_prod(x, axis, keepdims, out, dout):
    return (reduce_grad(dout * out, x, axis, keepdims) / x, zeros(axis), zeros(keepdims))


def _extremum_grad(x, axis, keepdims, out, dout):
    one = zeros(x) + 1.0
    hit = np.where(x == reduce_grad(out, x, axis, keepdims), one, zeros(x))
    ties = reduce_grad(np.sum(hit, axis=axis, keepdims=keepdims), x, axis, keepdims)
    return reduce_grad(dout, x, axis, keepdims) * hit / ties


def bprop_max(x, axis, keepdims, out, dout):
    return (_extremum_grad(x, axis, keepdims, out, dout), zeros(axis), zeros(keepdims))


def bprop_min(x, axis, keepdims, out, dout):
    return (_extremum_grad(x, axis, keepdims, out, dout), zeros(axis), zeros(keepdims))


# ------------------------------------------------------------------ linear algebra, shapes

def _matmul_grads(x, y, dout):
    if x.ndim == 1 and y.ndim == 1:
        return (dout * y, dout * x)
    if x.ndim == 1 and y.ndim == 2:
        return (np.matmul(y, dout), sum_to(np.expand_dims(x, -1) * np.expand_dims(dout, -2), y))
    if x.ndim == 1:
        dx = np.matmul(y, np.expand_dims(dout, -1))[..., 0]
        return (sum_to(dx, x), sum_to(np.expand_dims(x, -1) * np.expand_dims(dout, -2), y))
    if x.ndim == 2 and y.ndim == 1:
        return (np.expand_dims(dout, -1) * y, np.matmul(np.swapaxes(x, -1, -2), dout))
    if y.ndim == 1:
        dy = np.matmul(np.swapaxes(x, -1, -2), np.expand_dims(dout, -1))[..., 0]
        return (sum_to(np.expand_dims(dout, -1) * y, x), sum_to(dy, y))
    return (sum_to(np.matmul(dout, np.swapaxes(y, -1, -2)), x),
            sum_to(np.matmul(np.swapaxes(x, -1, -2), dout), y))


def bprop_matmul(x, y, out, dout):
    return _matmul_grads(x, y, dout)


def bprop_dot(x, y, out, dout):
    if np.ndim(x) == 0 or np.ndim(y) == 0:  # np.dot with a scalar multiplies
        return bprop_mul(x, y, out, dout)
    return _matmul_grads(x, y, dout)


def bprop_transpose(x, axes, out, dout):
    if axes is None:
        return (np.transpose(dout), zeros(axes))
    return (np.transpose(dout, np.argsort(axes)), zeros(axes))


def bprop_reshape(x, shape, out, dout):
    return (np.reshape(dout, np.shape(x)), zeros(shape))


def bprop_broadcast_to(x, shape, out, dout):
    return (sum_to(dout, x), zeros(shape))


def bprop_expand_dims(x, axis, out, dout):
    return (np.reshape(dout, np.shape(x)), zeros(axis))


def bprop_squeeze(x, axis, out, dout):
    return (np.reshape(dout, np.shape(x)), zeros(axis))


def bprop_concatenate(arrays, axis, out, dout):
    return (concat_grad(arrays, axis, dout), zeros(axis))


def bprop_concat_grad(arrays, axis, dout_, out, dout):
    return (zeros(arrays), zeros(axis), np.concatenate(dout, axis))


def bprop_stack(arrays, axis, out, dout):
    return (unstack(dout, axis), zeros(axis))


def bprop_unstack(x, axis, out, dout):
    return (np.stack(dout, axis), zeros(axis))


def bprop_swapaxes(x, a, b, out, dout):
    return (np.swapaxes(dout, a, b), zeros(a), zeros(b))


# ------------------------------------------------------------------ structure

def bprop_getitem(x, index, out, dout):
    return (getitem_grad(x, index, dout), zeros(index))


def bprop_getitem_grad(x, index, dout_, out, dout):
    # getitem_grad of a value with no gradient (a range, a string) is the constant None,
    # and so is its sensitivity: nothing flows back to dout_ from it.
    return (zeros(x), zeros(index), dout[index] if dout is not None else zeros(dout_))


def bprop_check_bound(x, name, out, dout):
    return (dout, zeros(name))


def bprop_unpack(x, n, out, dout):
    return (dout, zeros(n))


def bprop_depend(x, effect, out, dout):
    return (dout, zeros(effect))


def bprop_switch(cond, a, b, out, dout):
    return (zeros(cond), switch(cond, dout, zeros(a)), switch(cond, zeros(b), dout))


def bprop_env_getitem(env, key, default, out, dout):
    return (env_setitem(zeros(env), key, dout), zeros(key), zeros(default))


def bprop_env_setitem(env, key, value, out, dout):
    return (dout, zeros(key), env_getitem(dout, key, zeros(value)))


def bprop_gadd(x, y, out, dout):
    return (dout, dout)


def bprop_grad_zeros(x, out, dout):
    return (zeros(x),)


def bprop_sum_to_like(d, x, out, dout):
    return (broadcast_like(dout, d), zeros(x))


def bprop_broadcast_to_like(d, x, out, dout):
    return (sum_to(dout, d), zeros(x))


def bprop_reduce_grad(d, x, axis, keepdims, out, dout):
    return (sum_to(np.sum(dout, axis=axis, keepdims=keepdims), d), zeros(x), zeros(axis),
            zeros(keepdims))


def bprop_grad_check_input(x, name, out, dout):
    return (dout, zeros(name))


def bprop_ieee_truediv(x, y, out, dout):
    return (sum_to(ieee_truediv(dout, y), x), sum_to(ieee_truediv(-dout * x, y * y), y))


bprop_ieee_pow = bprop_pow


def bprop_grad_cast(d, x, out, dout):
    return (grad_cast(dout, d), zeros(x))


def bprop_select_grad(out_, x, dout_, count, out, dout):
    return (zeros(out_), zeros(x), np.where(x == out_, dout / count, 0.0), zeros(count))
