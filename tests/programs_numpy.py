"""Subjects for tests/test_constructs.py: math, numpy functions, array methods, indexing."""

import math

import numpy as np

WEIGHTS = np.array([1.0, -2.0, 0.5])

# --------------------------------------------------------------------------------------------
# math.*


def math_sin(x):
    return math.sin(x)


def math_cos(x):
    return math.cos(x)


def math_tan(x):
    return math.tan(x)


def math_tanh(x):
    return math.tanh(x)


def math_exp(x):
    return math.exp(x)


def math_log(x):
    return math.log(x)


def math_sqrt(x):
    return math.sqrt(x)


def math_floor(x):
    return math.floor(x)


def math_ceil(x):
    return math.ceil(x)


def math_fabs(x):
    return math.fabs(x)


def math_more(x):
    """Python floats from the float functions, an int from trunc, bools from the tests."""
    return math.log2(x), math.log10(x), math.cbrt(x), math.exp2(x / 100.0), math.asinh(x), \
        math.acosh(x + 1.0), math.atanh(x / 2000.0), math.erf(x), math.erfc(x), \
        math.degrees(x), math.radians(x), math.trunc(x), math.isnan(x), math.isinf(x), \
        math.isfinite(x)


def math_pow(x, y):
    return math.pow(x, y)


def math_atan2(y, x):
    return math.atan2(y, x)


def math_combined(x):
    return math.exp(-x * x / 2) / math.sqrt(2 * math.pi) + math.log(1 + x * x)


# --------------------------------------------------------------------------------------------
# numpy functions


def np_sin(x):
    return np.sin(x)


def np_cos(x):
    return np.cos(x)


def np_exp(x):
    return np.exp(x)


def np_log(x):
    return np.log(x)


def np_sqrt(x):
    return np.sqrt(x)


def np_tanh(x):
    return np.tanh(x)


def np_abs(x):
    return np.abs(x)


def np_sum(x):
    return np.sum(x)


def np_sum_axis0(x):
    return np.sum(x, axis=0)


def np_sum_axis1(x):
    return np.sum(x, axis=1)


def np_mean(x):
    return np.mean(x)


def np_mean_axis0(x):
    return np.mean(x, axis=0)


def np_max(x):
    return np.max(x)


def np_max_axis1(x):
    return np.max(x, axis=1)


def np_min(x):
    return np.min(x)


def np_where(x):
    return np.where(x > 0, x, 0.0)


def np_where_two_arrays(x, y):
    return np.where(x < y, y - x, x * y)


def np_maximum(x):
    return np.maximum(x, 0.0)


def np_dot_vectors(x, y):
    return np.dot(x, y)


def np_dot_matrix_vector(a, v):
    return np.dot(a, v)


def np_dot_matrices(a, b):
    return np.dot(a, b)


def np_zeros(n):
    return np.zeros((n, 3))


def np_zeros_int_shape(n):
    return np.zeros(n)


def np_ones():
    return np.ones(3)


def python_types_as_dtypes(n, x):
    """`bool`, `int` and `float` as values are Python's types, so numpy takes them as dtypes."""
    return np.zeros(n, dtype=bool), np.ones((n, 2), int), np.full(n, 2, float), x.astype(int)


def np_ones_shape(x):
    return np.ones(x.shape) * 2.0


def np_zeros_like(x):
    return np.zeros_like(x) + 1.0


def np_ones_like(x):
    return np.ones_like(x) - x


def np_transpose(x):
    return np.transpose(x)


def np_exp_scalar(x):
    return np.exp(x)


def np_combined(w, x, y):
    pred = np.tanh(np.dot(x, w))
    return np.mean((pred - y) ** 2)


def uses_array_constant(x):
    return np.dot(WEIGHTS, x)


def np_pi(r):
    return np.pi * r


# --------------------------------------------------------------------------------------------
# Array arithmetic


def array_scale(x):
    return x * 2.0 + 1.0


def array_broadcast(x, v):
    return x * v - v


def scalar_minus_array(x):
    return 1.0 - x


def array_compare(x, y):
    return x < y


def array_matmul(a, b):
    return a @ b


# --------------------------------------------------------------------------------------------
# Array methods and attributes


def attr_T(x):
    return x.T


def attr_shape(x):
    return x.shape


def attr_shape_index(x):
    return x.shape[0] * 10 + x.shape[1]


def attr_ndim(x):
    return x.ndim


def attr_size(x):
    return x.size


def attr_dtype(x):
    return x.dtype


def method_sum(x):
    return x.sum()


def method_sum_axis0(x):
    return x.sum(axis=0)


def method_mean(x):
    return x.mean()


def method_max_axis1(x):
    return x.max(axis=1)


def method_reshape_flat(x):
    return x.reshape(-1)


def method_reshape_tuple(x):
    return x.reshape((3, 2))


def method_reshape_args(x):
    return x.reshape(3, 2)


def zeros_of_shape(x):
    return np.zeros(x.shape[0]) + x[:, 0]


# --------------------------------------------------------------------------------------------
# Indexing and slicing: tuples


def tuple_first(t):
    return t[0]


def tuple_last(t):
    return t[-1]


def tuple_tail(t):
    return t[1:]


def tuple_init(t):
    return t[:-1]


def tuple_reversed(t):
    return t[::-1]


def tuple_every_other(t):
    return t[::2]


def tuple_middle(t):
    return t[1:3]


def tuple_negative_slice_step(t):
    return t[-1:0:-2]


def tuple_nested_index(t):
    return t[1][0]


def tuple_runtime_index(t, i):
    return t[i]


def tuple_mixed_index(x):
    t = (1, 2.5, x, None)
    return t[2], t[-3], t[3]


# --------------------------------------------------------------------------------------------
# Indexing and slicing: arrays


def array_first(x):
    return x[0]


def array_last(x):
    return x[-1]


def array_tail(x):
    return x[1:]


def array_reversed(x):
    return x[::-1]


def array_every_other(x):
    return x[::2]


def array_middle(x):
    return x[1:-1]


def array_runtime_index(x, i):
    return x[i]


def array_runtime_slice(x, a, b):
    return x[a:b]


def matrix_element(x):
    return x[1, 2]


def matrix_negative_element(x):
    return x[-1, -2]


def matrix_row(x):
    return x[1]


def matrix_column(x):
    return x[:, 0]


def matrix_last_column(x):
    return x[:, -1]


def matrix_slice_step(x):
    return x[1:, ::2]


def matrix_reverse_rows(x):
    return x[::-1, 1:]


def matrix_runtime_element(x, i, j):
    return x[i, j]


def matrix_row_then_element(x):
    return x[1][2]
