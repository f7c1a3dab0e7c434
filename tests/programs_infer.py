"""Subjects for tests/test_infer.py: type errors found before running, recursion and loops
whose types need a fixpoint."""

import numpy as np

# --------------------------------------------------------------------------------------------
# Errors before running (each line marked `# error` is where the error points)


def matmul_mismatch(a, b):
    c = a * 2.0
    return c @ b  # error


def broadcast_mismatch(x, y):
    return np.sin(x) + y  # error


def helper_with_bad_reshape(x):
    return np.reshape(x, (5, 2))  # error


def error_in_callee(x):
    y = x + 1.0
    return helper_with_bad_reshape(y)


def make_adder():
    return lambda a, b: a + b


def wrong_argument_count(x):
    g = make_adder()
    return g(x)  # error


def call_a_number(x):
    y = x * 2
    return y(3)  # error


def shape_of_a_float(x):
    return x.shape  # error


def bitand_on_float(x):
    return x & 1  # error


def float_range(x):
    total = 0
    for i in range(x):  # error
        total = total + i
    return total


def float_tuple_index(t, x):
    return t[x]  # error


def sum_axis_out_of_bounds(x):
    return np.sum(x, axis=2)  # error


def error_only_on_one_branch(x, flag):
    if flag:
        return x @ x  # a (3,) @ (3,) is fine, a (2,3) @ (2,3) is not: only if taken
    return x


def error_after_a_raise(x):
    if x.shape[0] > 100:
        raise ValueError("too big")
    return x @ x


# --------------------------------------------------------------------------------------------
# Recursion and loops


def loop_keeps_shape(x, n):
    acc = np.zeros_like(x)
    for i in range(n):
        acc = acc + x * i
    return acc


def loop_grows_array(x, n):
    for _ in range(n):
        x = np.concatenate((x, x))
    return x


def loop_counts(n):
    i = 0
    total = 0.0
    while i < n:
        total = total + i * 0.5
        i = i + 1
    return total, i


def recursion_on_arrays(x, n):
    if n == 0:
        return x
    return recursion_on_arrays(np.tanh(x) @ np.eye(3), n - 1)


def apply_twice(f, x):
    return f(f(x))


def polymorphic_helper(x, y):
    square = lambda v: v * v  # noqa: E731
    return apply_twice(square, x), apply_twice(square, y)


def constant_branch(x):
    n = x.shape[0]
    if n == 3:
        return x * 2.0
    return (x, x)


def scalar_vs_array(x):
    return np.sum(x), np.sum(x, axis=0), np.sum(x, axis=0, keepdims=True), x[0, 0], x[0], \
        x[:, 1:], x.T, np.where(x > 0, x, 0.0), np.float32(2.0) * x, x.mean() + 1


def two_matmuls(W1, W2, x):
    return np.sum(np.tanh(x @ W1) @ W2)


def proven_checks(x, n):
    total = 0.0
    for i in range(n):
        total += x * i
    a, b = _pair(total, n)
    return a + b


def _pair(a, b):
    return (a, b) if a > -1e300 else (b, a)


def unbound_on_one_branch(x, flag):
    if flag:
        y = x + 1.0
    return y


def reshape_to_a_partly_unknown_shape(y, dout):
    """np.moveaxis's result has a shape inference does not know, so the second reshape's
    target is (unknown, -1): not a certain error, and the moveaxis after it is typed for its
    own arguments."""
    columns = np.moveaxis(y, -2, 0)
    d2 = np.reshape(dout, (np.shape(columns)[0] * 4, -1))
    return np.moveaxis(np.reshape(d2, np.shape(columns)), 0, -2)


def stack_of_comprehension_mismatch(v, W):
    rows = [v * i for i in range(4)]
    return np.stack(rows) @ W  # error


def stack_of_appended_rows_mismatch(v, W):
    rows = []
    for i in range(4):
        rows.append(v * i)
    return np.stack(rows) @ W  # error
