"""numpy's API as compiled code runs it: values against numpy itself, gradients against
central finite differences, over hypothesis-drawn values, shapes (from small lists, so each
subject compiles a handful of signatures), axes, keepdims and dtypes.

Values are numpy's to the last bit on the python backend (the compositions of
frontend/numpy_functions.py follow numpy's own steps); the tvm backend may differ in the last
bits (`programs_check.TVM_TOLERANCE`).  float32 operands give float32 results.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
from numpy import add, maximum, multiply
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import myir
from tests.programs_check import DEFAULT_BACKENDS, TVM_TOLERANCE
from tests.test_grad_primitives import assert_grads_close, numerical_grad

BACKEND = os.environ.get("MYIR_TEST_BACKENDS", DEFAULT_BACKENDS).split(",")[0].strip()
BACKEND = None if BACKEND in ("", "default") else BACKEND
EXACT = BACKEND == "python"


@functools.lru_cache(maxsize=None)
def compiled(f):
    return myir.compile(f, backend=BACKEND)


# ------------------------------------------------------------------------------- subjects
# One argument, an array of any of SHAPES (rank >= 1); `axis` values valid for all of them.

def var_all(x): return np.var(x)
def var_ax0_ddof1(x): return np.var(x, axis=0, ddof=1)
def var_last_keep(x): return np.var(x, axis=-1, keepdims=True)
def std_all(x): return np.std(x)
def std_ax0_keep(x): return np.std(x, axis=0, ddof=1, keepdims=True)
def average_ax0(x): return np.average(x, axis=0)
def average_w(x): return np.average(x, weights=np.abs(x) + 1.0)
def ptp_all(x): return np.ptp(x)
def ptp_ax0(x): return np.ptp(x, axis=0, keepdims=True)
def any_ax0(x): return np.any(x > 0.5, axis=0)
def all_all(x): return np.all(x > -1.5)
def count_nonzero_all(x): return np.count_nonzero(x > 0)
def cbrt(x): return np.cbrt(x)
def log2(x): return np.log2(np.abs(x) + 0.5)
def log10(x): return np.log10(np.abs(x) + 0.5)
def exp2(x): return np.exp2(x)
def sinc(x): return np.sinc(x)
def hypot(x): return np.hypot(x, 0.5 - x)
def logaddexp(x): return np.logaddexp(x, 2.0 * x)
def logaddexp2(x): return np.logaddexp2(x, 0.25)
def nan_to_num(x): return np.nan_to_num(np.log(x))
def isfinite(x): return np.isfinite(np.log(x))
def isinf_isnan(x): return np.isinf(1.0 / (x - x)) == np.isnan(np.sqrt(x))
def ravel(x): return np.ravel(x)
def atleast_2d(x): return np.atleast_2d(x)
def atleast_3d(x): return np.atleast_3d(x)
def moveaxis(x): return np.moveaxis(x, 0, -1)
def flip_all(x): return np.flip(x)
def flip0(x): return np.flip(x, 0)
def roll_flat(x): return np.roll(x, 2)
def roll0(x): return np.roll(x, -1, axis=0)
def repeat_flat(x): return np.repeat(x, 2)
def repeat0(x): return np.repeat(x, 3, axis=0)
def tile(x): return np.tile(x, (2, 1))
def pad(x): return np.pad(x, 1)
def pad_values(x): return np.pad(x, (1, 2), constant_values=1.5)
def hstack(x): return np.hstack((x, 2.0 * x))
def vstack(x): return np.vstack((x, x * x))
def split(x): return np.split(x, (1,))[1] * np.sum(np.split(x, 1, axis=-1)[0])
def outer(x): return np.outer(x, np.sin(x))
def inner(x): return np.inner(x, x)
def vdot(x): return np.vdot(x, np.cos(x))
def full_like(x): return np.full_like(x, 2.5) * x
def diff0(x): return np.diff(x, axis=0)
def diff2(x): return np.diff(x, 2, axis=-1) if np.shape(x)[-1] > 2 else np.diff(x, axis=-1)
def append(x): return np.append(x, np.cos(x))
def median_all(x): return np.median(x)
def median0(x): return np.median(x, axis=0, keepdims=True)
def isclose(x): return np.isclose(x, x * (1 + 1e-9))
def logical(x): return np.logical_xor(np.logical_and(x > 0, x < 1), np.logical_not(x > -1))
def compare(x): return np.less_equal(x, 0.5) == np.greater(0.5, x)
def degrees(x): return np.deg2rad(np.degrees(x))
def methods(x): return x.var(axis=0) + x.std() + np.sum(x.flatten()) * x.ravel()[0]
def round2(x): return np.round(x * 10.0, 1) + np.around(x, -1) + np.rint(x) + np.trunc(x)
def remainder(x):
    return np.remainder(x, 0.75) + np.floor_divide(x, 0.5) + np.fmod(x, -0.75) \
        + np.fmod(-x, 0.6) + np.fmod(np.floor(x * 4), 2.0) \
        + np.remainder(2.5, np.exp(x)) + np.floor_divide(2.5, np.exp(x))   # x's float32 kept
def fmod(x): return np.fmod(x, -0.75) * x + np.fmod(-x, np.exp(x))
def inverse_hyperbolic(x): return np.arcsinh(x) + np.arccosh(x * x + 1.5) + np.arctanh(x / 3.0)
def np_copy(x): return np.copy(x) * x
def positive(x): return np.positive(x) - x * 0.5
def fabs(x): return np.fabs(x)
def float_power(x): return np.float_power(np.abs(x) + 0.5, 1.5)
def fmax_fmin(x): return np.fmax(x, -x) + np.fmin(np.nan, x) + np.fmax(x, np.nan)
def nansum_nanmean(x):
    y = np.where(x > 1.37, np.nan, x)
    return np.nansum(y, axis=0, keepdims=True) + np.nanmean(np.append(y, 1.0)) + np.nansum(y)
def round_method(x): return x.round(1) + x.round()
def heaviside(x): return np.heaviside(x, 0.5) * x + np.heaviside(x - x, x)

# Two-dimensional and more.
def trace(m): return np.trace(m)
def diagonal(m): return np.diagonal(m, 1)
def diag_of_matrix(m): return np.diag(m)
def triu(m): return np.triu(m)
def tril(m): return np.tril(m, -1)
def diag_of_row(m): return np.diag(m[0], 1)
def fliplr(m): return np.fliplr(m)
def swap_last(m): return np.moveaxis(m, -1, 0)
def matrix_methods(m): return m.trace() + m.diagonal() + m.repeat(2, axis=1)[0, :1]

ANY_RANK = [var_all, var_ax0_ddof1, var_last_keep, std_all, std_ax0_keep, average_ax0, average_w,
            ptp_all, ptp_ax0, any_ax0, all_all, count_nonzero_all, cbrt, log2, log10, exp2,
            sinc, hypot, logaddexp, logaddexp2, nan_to_num, isfinite, isinf_isnan, ravel,
            atleast_2d, atleast_3d, moveaxis, flip_all, flip0, roll_flat, roll0, repeat_flat,
            repeat0, tile, pad, pad_values, hstack, vstack, split, full_like, diff0, diff2,
            append, median_all, median0, isclose, logical, compare, degrees, methods, round2,
            remainder, fmod, inverse_hyperbolic, np_copy, positive, fabs, float_power, fmax_fmin,
            nansum_nanmean, round_method, heaviside]
MATRIX = [trace, diagonal, diag_of_matrix, triu, tril, diag_of_row, fliplr, swap_last,
          matrix_methods]
VECTOR = [outer, inner, vdot]

SHAPES = {"any": [(3,), (2, 3), (3, 1, 2)], "matrix": [(3, 3), (2, 4), (4, 2)],
          "vector": [(1,), (4,)]}
KIND = {**{f: "any" for f in ANY_RANK}, **{f: "matrix" for f in MATRIX},
        **{f: "vector" for f in VECTOR}}
# Subjects without a gradient: boolean or integer results.
NOT_DIFFERENTIABLE = {any_ax0, all_all, count_nonzero_all, isfinite, isinf_isnan, isclose,
                      logical, compare, round2, remainder, round_method}
# Subjects whose values the finite differences must keep away from a kink or a pole.
KINKED = {ptp_all, ptp_ax0, cbrt, hypot, log2, log10, nan_to_num, average_w, sinc, median_all,
          median0, fabs, fmax_fmin, float_power, heaviside, fmod}


def arrays(kind, dtype=np.float64, low=-2.0, high=2.0):
    return st.sampled_from(SHAPES[kind]).flatmap(lambda shape: hnp.arrays(
        dtype, shape, elements=st.floats(low, high, width=np.dtype(dtype).itemsize * 8)))


def assert_same(got, want):
    """numpy's value: same type, dtype and shape; the same bits on the python backend."""
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    assert type(got) is type(want), (type(got), type(want))
    assert np.shape(got) == np.shape(want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    if EXACT or np.asarray(want).dtype.kind not in "fc":
        np.testing.assert_array_equal(got, want)
    else:
        rtol = TVM_TOLERANCE[np.asarray(want).dtype]
        scale = max(float(np.max(np.abs(np.nan_to_num(want)), initial=0.0)), 1.0)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("f", ANY_RANK + MATRIX + VECTOR, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@settings(max_examples=2)
@given(data=st.data())
def test_value_like_numpy(f, dtype, data):
    x = data.draw(arrays(KIND[f], dtype))
    assert_same(compiled(f)(x), f(x))


def weighted(y):
    """A float from an array, with weights that tell its elements apart."""
    return np.sum(y * (1.0 + np.reshape(np.arange(np.size(y)), np.shape(y))))


# The losses the gradient tests differentiate, one per subject.
def loss_var_all(x): return weighted(np.sin(var_all(x)))
def loss_var_ax0_ddof1(x): return weighted(np.sin(var_ax0_ddof1(x)))
def loss_var_last_keep(x): return weighted(np.sin(var_last_keep(x)))
def loss_std_all(x): return weighted(np.sin(std_all(x)))
def loss_std_ax0_keep(x): return weighted(np.sin(std_ax0_keep(x)))
def loss_average_ax0(x): return weighted(np.sin(average_ax0(x)))
def loss_average_w(x): return weighted(np.sin(average_w(x)))
def loss_ptp_all(x): return weighted(np.sin(ptp_all(x)))
def loss_ptp_ax0(x): return weighted(np.sin(ptp_ax0(x)))
def loss_cbrt(x): return weighted(np.sin(cbrt(x)))
def loss_log2(x): return weighted(np.sin(log2(x)))
def loss_log10(x): return weighted(np.sin(log10(x)))
def loss_exp2(x): return weighted(np.sin(exp2(x)))
def loss_sinc(x): return weighted(np.sin(sinc(x)))
def loss_hypot(x): return weighted(np.sin(hypot(x)))
def loss_logaddexp(x): return weighted(np.sin(logaddexp(x)))
def loss_logaddexp2(x): return weighted(np.sin(logaddexp2(x)))
def loss_nan_to_num(x): return weighted(np.sin(nan_to_num(x)))
def loss_ravel(x): return weighted(np.sin(ravel(x)))
def loss_atleast_2d(x): return weighted(np.sin(atleast_2d(x)))
def loss_atleast_3d(x): return weighted(np.sin(atleast_3d(x)))
def loss_moveaxis(x): return weighted(np.sin(moveaxis(x)))
def loss_flip_all(x): return weighted(np.sin(flip_all(x)))
def loss_flip0(x): return weighted(np.sin(flip0(x)))
def loss_roll_flat(x): return weighted(np.sin(roll_flat(x)))
def loss_roll0(x): return weighted(np.sin(roll0(x)))
def loss_repeat_flat(x): return weighted(np.sin(repeat_flat(x)))
def loss_repeat0(x): return weighted(np.sin(repeat0(x)))
def loss_tile(x): return weighted(np.sin(tile(x)))
def loss_pad(x): return weighted(np.sin(pad(x)))
def loss_pad_values(x): return weighted(np.sin(pad_values(x)))
def loss_hstack(x): return weighted(np.sin(hstack(x)))
def loss_vstack(x): return weighted(np.sin(vstack(x)))
def loss_split(x): return weighted(np.sin(split(x)))
def loss_outer(x): return weighted(np.sin(outer(x)))
def loss_inner(x): return weighted(np.sin(inner(x)))
def loss_vdot(x): return weighted(np.sin(vdot(x)))
def loss_full_like(x): return weighted(np.sin(full_like(x)))
def loss_diff0(x): return weighted(np.sin(diff0(x)))
def loss_diff2(x): return weighted(np.sin(diff2(x)))
def loss_append(x): return weighted(np.sin(append(x)))
def loss_median_all(x): return weighted(np.sin(median_all(x)))
def loss_median0(x): return weighted(np.sin(median0(x)))
def loss_degrees(x): return weighted(np.sin(degrees(x)))
def loss_methods(x): return weighted(np.sin(methods(x)))
def loss_inverse_hyperbolic(x): return weighted(np.sin(inverse_hyperbolic(x)))
def loss_np_copy(x): return weighted(np.sin(np_copy(x)))
def loss_positive(x): return weighted(np.sin(positive(x)))
def loss_fabs(x): return weighted(np.sin(fabs(x)))
def loss_float_power(x): return weighted(np.sin(float_power(x)))
def loss_fmax_fmin(x): return weighted(np.sin(fmax_fmin(x)))
def loss_fmod(x): return weighted(np.sin(fmod(x)))
def loss_nansum_nanmean(x): return weighted(np.sin(nansum_nanmean(x)))
def loss_heaviside(x): return weighted(np.sin(heaviside(x)))
def loss_trace(x): return weighted(np.sin(trace(x)))
def loss_diagonal(x): return weighted(np.sin(diagonal(x)))
def loss_diag_of_matrix(x): return weighted(np.sin(diag_of_matrix(x)))
def loss_triu(x): return weighted(np.sin(triu(x)))
def loss_tril(x): return weighted(np.sin(tril(x)))
def loss_diag_of_row(x): return weighted(np.sin(diag_of_row(x)))
def loss_fliplr(x): return weighted(np.sin(fliplr(x)))
def loss_swap_last(x): return weighted(np.sin(swap_last(x)))
def loss_matrix_methods(x): return weighted(np.sin(matrix_methods(x)))


LOSSES = {name[5:]: f for name, f in globals().items() if name.startswith("loss_")}


@functools.lru_cache(maxsize=None)
def gradient(f):
    return myir.grad(f, backend=BACKEND)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("f", [f for f in ANY_RANK + MATRIX + VECTOR
                               if f not in NOT_DIFFERENTIABLE],
                         ids=lambda f: f.__name__)
@settings(max_examples=2)
@given(data=st.data())
def test_gradient_against_finite_differences(f, data):
    low = 0.2 if f in KINKED else -2.0
    x = data.draw(arrays(KIND[f], np.float64, low, 2.0))
    if f in (ptp_all, ptp_ax0, std_all, std_ax0_keep, median_all, median0, methods):
        # ties (of extremes, of the middle values; all values equal) are kinks
        x = x + np.arange(x.size).reshape(x.shape) * 1e-2
    loss = LOSSES[f.__name__]
    assert_grads_close(gradient(loss)(x), numerical_grad(loss, (x,), 0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("f", [f for f in ANY_RANK + MATRIX if f not in NOT_DIFFERENTIABLE],
                         ids=lambda f: f.__name__)
def test_float32_gradient_stays_float32(f):
    x = (np.arange(9, dtype=np.float32).reshape(3, 3) + 1.0) / 4
    g = gradient(LOSSES[f.__name__])(x)
    assert g.dtype == np.float32 and g.shape == x.shape


# ------------------------------------------------------------------ numpy's arithmetic
# np.add, np.subtract, np.multiply and np.divide are numpy's ufuncs, not Python's operators:
# on Python numbers they give numpy scalars, bools stay bools, and a division by 0 is inf.

def arithmetic(x, y):
    return np.add(x, y), np.subtract(x, y), np.multiply(x, y), np.divide(x, y), \
        np.true_divide(x, y)


ARITHMETIC_OPERANDS = [
    (2.0, 3.0), (2, 3), (True, 2.5), (np.float32(1.5), 2.0), (1.5, 0.0), (3, 0),
    (np.arange(3.0), 2), (np.arange(4, dtype=np.float32).reshape(2, 2), 0.5),
    (np.array(2.0), np.arange(3.0)),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("x, y", ARITHMETIC_OPERANDS, ids=repr)
def test_arithmetic_ufuncs_like_numpy(x, y):
    assert_same(compiled(arithmetic)(x, y), arithmetic(x, y))


def scalar_functions(a):
    return np.copy(a), np.positive(a), np.fabs(a), np.float_power(a, 2), np.fmax(a, np.nan), \
        np.fmin(a, 0.5), np.nansum(a), np.nanmean(a), np.heaviside(a, 0.5), np.heaviside(a, 1)


@pytest.mark.parametrize("a", [1.5, -2, np.float32(0.25), np.nan, True], ids=repr)
def test_numpy_functions_of_scalars_like_numpy(a):
    """numpy's scalar results: 0-d arrays from np.copy, numpy scalars from the ufuncs."""
    if a is True:   # np.positive of a bool raises, as numpy does
        with pytest.raises(TypeError):
            compiled(scalar_functions)(a)
        return
    with np.errstate(all="ignore"):
        assert_same(compiled(scalar_functions)(a), scalar_functions(a))


def bool_arithmetic(x, y):
    return np.add(x, y), np.multiply(x, y)


def test_arithmetic_ufuncs_of_bools_are_logical():
    assert_same(compiled(bool_arithmetic)(True, True), (np.True_, np.True_))
    assert_same(compiled(bool_arithmetic)(True, False), (np.True_, np.False_))


def arithmetic_loss(x, y):
    return np.sum(np.multiply(np.add(x, y), np.subtract(x, 2.0 * y)) + np.divide(x, y * y + 1.0))


@pytest.mark.parametrize("x, y", [(0.7, -1.3), (np.linspace(-1.0, 1.0, 6).reshape(2, 3), 0.4),
                                  (1.5, np.array([0.5, -2.0, 1.0]))], ids=["floats", "array-float",
                                                                          "float-array"])
def test_arithmetic_ufuncs_gradient(x, y):
    got = myir.grad(arithmetic_loss, 0, 1, backend=BACKEND)(x, y)
    want = tuple(numerical_grad(arithmetic_loss, (x, y), i) for i in (0, 1))
    assert_grads_close(got, want)
    assert all(type(g) is type(a) for g, a in zip(got, (x, y)))


def divide_by_zero_gradient(x, y):
    return np.divide(x, y)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_divide_by_zero_gradient_is_numpys_inf():
    dx, dy = myir.grad(divide_by_zero_gradient, 0, 1, backend=BACKEND)(1.0, 0.0)
    assert dx == np.inf and dy == -np.inf


# ------------------------------------------------------------------ numpy's keywords
# Fixed operands: the 1-d vector has ties (argsort's kinds differ there), the period's knots
# are unsorted, the indices fall outside the axis (take's modes map them).

VEC = np.array([0.5, -1.25, 2.0, 0.5, 1.5, -0.75, 0.5, 3.0, -2.0, 1.0] * 4)
MAT = np.arange(12.0).reshape(3, 4) / 7.0 - 0.6


def cumsum_dtype(x): return np.cumsum(x, dtype=np.float32), x.cumprod(0, np.float32)
def cumsum_of_bools(x): return np.cumsum(x > 0, axis=0, dtype=np.int32)
def sort_kinds(x): return np.sort(x, kind="stable") + np.sort(x, 0, "heapsort") * np.sin(x)
def argsort_stable(x): return np.argsort(x, kind="stable"), np.argsort(x, kind="mergesort")
def take_modes(x): return np.take(x, np.array([0, 45, -47]), mode="wrap") * \
    x.take(np.array([-2, 1, 99]), mode="clip")
def take_axis_mode(x): return np.take(x, np.array([[1, 5], [-4, 2]]), axis=-1, mode="wrap")
def interp_period(x): return np.interp(x * 3.0, np.array([170.0, 10.0, -175.0, 95.0]),
                                       np.sin(x[:4]), period=360.0)
def cross_2d(x): return np.cross(x[:3, :2], x[:3, 1:]), np.cross(x[0, :2], x[1, 2:]), \
    np.cross(x[:2, :3], x[1:, 2:], axisc=0) * np.cross(x[:, :2].T, x[:, 1:].T, axis=0)[:, :2]
def stacks_and_nan_extrema(x):
    y = np.where(x > 0.5, np.nan, x)
    return np.column_stack((x[0], x[1:].T, x[2])), np.dstack((x, 2.0 * x)), np.nanmax(y), \
        np.nanmin(y, axis=0, keepdims=True), np.nanmax(np.where(x > -5, np.nan, x), axis=1), \
        np.vstack((x, x[0]))
def statistics(x):
    """Quantiles, covariances and correlations, NaN-aware spread (two numbers a column)."""
    y = np.concatenate((x[:1], np.where(x > 0.5, np.nan, x), x[-1:]))
    return np.percentile(x, 30, axis=0, method="midpoint") \
        * np.quantile(x, [0.1, 0.5, 1.0], axis=-1, keepdims=True) \
        + np.percentile(x, (10, 75), method="nearest")[0] + np.sum(np.cov(x) @ np.corrcoef(x)) \
        + np.sum(np.cov(x, rowvar=False, ddof=0) * np.corrcoef(x, rowvar=False)) \
        + np.cov(x[0], x[-1], bias=True)[0, 1] + np.nanvar(y, axis=0) \
        + np.nanstd(y, ddof=1, keepdims=True)
def reduction_keywords(x):
    kept = np.reshape(np.arange(np.size(x)), np.shape(x)) % 2 == 0
    a, b = np.meshgrid(x[0], x[1, :2])
    return np.sum(x, axis=0, where=kept) + np.mean(x, where=kept) + np.add.reduce(x) + \
        np.maximum.reduce(x, axis=-1, keepdims=True) * np.multiply.reduce(x, axis=None) + \
        x.mean(axis=0, dtype=np.float64) + np.sum(x, 0, None, initial=1.0), \
        np.sum(a * b) + np.meshgrid(x[0], x[1], x[2], indexing="ij")[2]
def nan_statistics(x):
    """NaN-aware medians and quantiles: rows with a few NaNs, and a row of NaNs alone."""
    y = np.where(x > 0.5, np.nan, x)
    return np.nanmedian(y, axis=0), np.nanmedian(y) + np.nanmedian(y, axis=1, keepdims=True) \
        + np.nanpercentile(y, 30, axis=1, keepdims=True, method="midpoint") \
        + np.nanquantile(y, 0.4, axis=1, keepdims=True, method="nearest"), \
        np.nanquantile(y, [0.25, 0.9], axis=1) + np.nanpercentile(y[:, :2], 80, axis=1) \
        + np.nanquantile(y[:, :2], 0.5, axis=1, method="lower") \
        + np.nanquantile(y[:, :2], 0.5, axis=1, method="higher")
def ufunc_methods(x):
    """Methods of ufuncs reached as np.NAME or by names imported from numpy; reductions
    and scans without a numpy function of their own fold the ufunc in numpy's order."""
    return add.reduce(x) + multiply.reduce(x, 0), \
        np.logaddexp.reduce(x, axis=1, keepdims=True) + np.subtract.outer(x[0], x[1, :3]).T \
        + np.minimum.reduce(x, axis=None) * np.add.accumulate(x, axis=1), \
        multiply.outer(x[0, :2], x) + np.maximum.outer(x[1, :2], x) \
        + maximum.accumulate(x)
def shapes_and_signs(x):
    """Constructors with numpy's positional M and k, quarter turns, sign bits (of a zero
    too), products of three in numpy's order, and the swapaxes method."""
    return np.rot90(x) @ np.eye(3, 4, 1) + np.tri(4, k=-1, dtype=np.float32), \
        np.rot90(x, -1) * np.rot90(x.T, 2, axes=(1, 0)), \
        np.copysign(x, 0.3 - x) + np.signbit(x - x[0]), \
        np.linalg.multi_dot([x, x.T, x]) + np.linalg.multi_dot([x[0], x.T, x]), \
        np.linalg.multi_dot([x[0], x.T, x[:, 1]]), \
        x[None].swapaxes(0, 2)
def extremum_keywords(x):
    """numpy's keywords of max/min (initial, where), argmax (keepdims), clip (a_min, a_max,
    min, max, a None bound), var/std (out's place), repeat (a count per element)
    and concatenate (axis=None)."""
    return np.max(x, axis=0, initial=0.5) + np.min(x, initial=-0.1) \
        + x.max(axis=0, where=x > 0, initial=-1.0), \
        np.argmax(x, axis=1, keepdims=True) + x.argmin(keepdims=True), \
        np.clip(x, a_min=-0.5, a_max=None) + np.clip(x, min=0.0, max=0.5) + x.clip(max=0.3), \
        np.std(x) + np.var(x, 0, None, None, 1, True), \
        np.repeat(x, [1, 0, 2], axis=0) * np.repeat(x[0], (2, 1, 0, 1)), \
        np.concatenate((x, x[0]), axis=None)
def calculus(x):
    """Integrals and differences along axes, a pad that mirrors."""
    return np.trapezoid(x) + np.trapezoid(x, x=np.array([0.0, 0.5, 2.0, 2.5]))[0] \
        + np.trapezoid(x, dx=0.5, axis=0)[:3], \
        np.gradient(x, axis=1) * np.gradient(x, 0.5)[0] + np.gradient(x, edge_order=2)[1] \
        + np.pad(x, ((0, 0), (3, 1)), mode="reflect")[:, 1:5]
def lookups(x):
    """Pads that copy elements, bins and look-ups (values only)."""
    v = x[1]
    return np.pad(x, 2, mode="edge") * np.pad(x, ((3, 1), (1, 3)), mode="symmetric") \
        + np.pad(x, (2, 2), mode="wrap"), \
        np.correlate(v, x[0, :2]) + np.correlate(v, x[2, :2], "full")[:3] \
        + x[np.triu_indices(3, 1, 4)][:3] + x[np.tril_indices(3)][3:] \
        + np.digitize(v, np.array([-1.0, 0.0, 1.0]))[:3] \
        + np.isin(x[0, :3], x[0, 1:2]) + np.array_equal(x, x), \
        np.digitize(v, np.array([1.0, 0.0, -1.0]), right=True), \
        np.fix(3.0 * x) + x * np.logspace(0, 1, 4) + x * x[1, 2].item()
def splits(x): return np.array_split(x, 3), np.split(x, 4, axis=1), np.hsplit(x, (1,)), \
    np.vsplit(x, (2,))


KEYWORD_SUBJECTS = [(cross_2d, MAT), (stacks_and_nan_extrema, MAT), (cumsum_dtype, MAT), (cumsum_of_bools, MAT), (sort_kinds, VEC),
                    (argsort_stable, VEC), (take_modes, VEC), (take_axis_mode, MAT),
                    (interp_period, VEC), (splits, MAT), (statistics, MAT),
                    (reduction_keywords, MAT), (nan_statistics, MAT), (ufunc_methods, MAT),
                    (shapes_and_signs, MAT), (extremum_keywords, MAT),
                    (calculus, MAT), (lookups, MAT)]

def loss_sort_kinds(x): return weighted(np.sin(sort_kinds(x)))
def loss_take_modes(x): return weighted(np.sin(take_modes(x)))
def loss_take_axis_mode(x): return weighted(np.sin(take_axis_mode(x)))
def loss_interp_period(x): return weighted(np.sin(interp_period(x)))
def loss_statistics(x): return weighted(np.sin(statistics(x)))
def loss_reduction_keywords(x):
    reductions, grid = reduction_keywords(x)
    return weighted(np.sin(reductions)) + weighted(np.cos(grid))
def loss_cross_2d(x):
    three, one, two = cross_2d(x)
    return weighted(np.sin(three)) + one * np.sum(two * two)
def loss_stacks_and_nan_extrema(x):
    columns, layers, largest, smallest, _, rows = stacks_and_nan_extrema(x)
    return weighted(np.sin(columns)) + weighted(np.cos(layers)) + largest * np.sum(smallest) \
        + weighted(np.sin(rows))
def loss_nan_statistics(x):
    columns, rows, pairs = nan_statistics(x)
    return weighted(np.sin(np.nan_to_num(columns))) + weighted(np.cos(np.nan_to_num(rows))) \
        + weighted(np.sin(np.nan_to_num(pairs)))
def loss_ufunc_methods(x):
    first, second, third = ufunc_methods(x)
    return weighted(np.sin(first)) + weighted(np.cos(second)) + weighted(np.sin(third))
def loss_extremum_keywords(x):
    return sum(weighted(np.sin(y)) for y in extremum_keywords(x) if y.dtype != np.int64)
def loss_calculus(x):
    return sum(weighted(np.sin(y)) for y in calculus(x))
def loss_splits(x):
    thirds, quarters, halves, rows = splits(x)
    return weighted(np.sin(np.concatenate(thirds) + np.concatenate(quarters, axis=1)
                           * np.concatenate(halves, axis=1) - rows[1][0]))


KEYWORD_LOSSES = {sort_kinds: loss_sort_kinds, take_modes: loss_take_modes,
                  take_axis_mode: loss_take_axis_mode, interp_period: loss_interp_period,
                  splits: loss_splits, cross_2d: loss_cross_2d,
                  stacks_and_nan_extrema: loss_stacks_and_nan_extrema,
                  statistics: loss_statistics, reduction_keywords: loss_reduction_keywords,
                  nan_statistics: loss_nan_statistics, ufunc_methods: loss_ufunc_methods,
                  extremum_keywords: loss_extremum_keywords,
                  calculus: loss_calculus}


@pytest.mark.parametrize("f, x", KEYWORD_SUBJECTS, ids=lambda v: getattr(v, "__name__", ""))
def test_keywords_like_numpy(f, x):
    """Values (a list where numpy gives one), and gradients of the differentiable ones
    (away from ties, where sorting has kinks)."""
    assert_same(compiled(f)(x), f(x))
    loss = KEYWORD_LOSSES.get(f)
    if loss is not None:
        x = x + np.linspace(0.0, 0.01, x.size).reshape(x.shape)
        assert_grads_close(gradient(loss)(x), numerical_grad(loss, (x,), 0), rtol=1e-5,
                           atol=1e-6)


def spread_where(x):
    return np.std(x, where=x > -0.5), np.var(x, 0, None, None, 1, True, where=x < 0.9), \
        x.var(axis=1, where=x > -0.3)


def loss_spread_where(x):
    return sum(weighted(np.sin(y)) for y in spread_where(x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_spread_with_where_like_numpy_to_rounding(dtype):
    """np.var and np.std of the elements `where` keeps: numpy's steps, its masked sums in
    an order of their own (equal to rounding)."""
    x = MAT.astype(dtype)
    for got, want in zip(compiled(spread_where)(x), spread_where(x)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=TVM_TOLERANCE[want.dtype])
    if dtype == np.float64:
        assert_grads_close(gradient(loss_spread_where)(MAT),
                           numerical_grad(loss_spread_where, (MAT,), 0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call, message", [
    (lambda x: np.sort(x, kind="bubble"), "sort kind must be one of"),
    (lambda x: np.take(x, np.array([0]), mode="wrapped"), "Use one of 'clip', 'raise', or 'wrap'"),
    (lambda x: np.interp(x, x, x, period=0.0), "period must be a non-zero value")])
def test_keyword_values_numpy_refuses(call, message):
    with pytest.raises(ValueError, match=message):
        call(VEC)
    with pytest.raises(ValueError, match=message):
        compiled(call)(VEC)
