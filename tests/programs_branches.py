"""Subjects for tests/test_branches.py: np.shape and friends on any value, variables whose type
depends on the branch taken, and errors in branches that may not run.

A line marked `# error` is where an error before running points; a line marked `# branches`
is the `if` its note points at.
"""

import math

import numpy as np

# --------------------------------------------------------------------------------------------
# np.shape, np.ndim, np.size: numpy's functions, not the attributes


def shape_ndim_size(x):
    return np.shape(x), np.ndim(x), np.size(x)


def shape_of_a_sum(x, y):
    return np.shape(x + y)


def apply(f, x):
    return f(x)


def shape_functions_as_values(x):
    return apply(np.shape, x), apply(np.ndim, x), apply(np.size, 2.0)


def scale_by_shape(x):
    return x * np.size(x) + np.ndim(x)


# --------------------------------------------------------------------------------------------
# Branches giving a variable different types, used where both types work (legal)


def array_or_pair(x, flag):
    if flag:
        y = x
    else:
        y = (x, x)
    return y


def array_or_pair_through_a_helper(x, flag):
    y = x if flag else (x, x)
    return apply(len, y), pass_on(y)


def pass_on(v):
    return v


def int_or_float(x, flag):
    y = 3 if flag else 2.5
    return y * x, y > 1, -y


def maybe_none(x, flag):
    y = None
    if flag:
        y = x * 2.0
    if y is None:
        return 0.0
    return y + 1.0


def none_until_the_loop_runs(x, n):
    best = None
    for i in range(n):
        best = x * i
    return best + 1.0  # TypeError for n == 0, as in CPython: None is not an error before


def used_only_where_it_is_an_array(x, flag):
    y = x if flag else (x, x)
    if flag:
        return y * 2.0  # only runs when y is the array
    return y[0]


# --------------------------------------------------------------------------------------------
# Branches giving a variable types that disagree where it is used: errors before running


def array_or_pair_scaled(x, flag):
    if flag:  # branches
        y = x
    else:
        y = (x, x)
    return y * 2.0  # error


def function_or_number(x, flag):
    f = np.sin if flag else 3  # branches
    return f(x)  # error


def array_or_number_indexed(x, flag):
    y = x if flag else 1.5  # branches
    return y[0]  # error


def array_or_pair_in_a_helper(x, flag):
    y = x if flag else (x, x)  # branches
    return double_first_row(y)


def double_first_row(v):
    return v.shape  # error


# --------------------------------------------------------------------------------------------
# Operations certain to fail, in branches that may not run: CPython's error when they run


def matmul_mismatch_in_a_branch(a, b, flag):
    if flag:
        return np.sum(a @ b)  # (3,4) @ (5,6): ValueError only if the branch runs
    return np.sum(a) + np.sum(b)


def reshape_in_a_callee_of_a_branch(x, flag):
    return bad_reshape(x) if flag else x * 2.0


def bad_reshape(x):
    return np.reshape(x, (5, 7))


def broadcast_mismatch_in_a_loop(x, y, n):
    total = np.sum(x)
    for _ in range(n):
        total = total + np.sum(x + y)  # (3,) + (4,): only if the loop runs
    return total


def tuple_plus_number_in_a_branch(t, flag):
    if flag:
        return t + 1  # TypeError only if the branch runs
    return t


# --------------------------------------------------------------------------------------------
# A function with an early `return` and code after its `if`, inlined where its result is
# assigned: the branches that return must skip the code after the `if`


def early_return(x, a, b):
    if a > 0:
        if b > 0:
            return x * 2.0
        elif b < -5:
            y = x + 1.0
        else:
            return x - 7.0
    else:
        y = x - 1.0
    y = math.sin(y) * y + math.cos(y)   # long enough not to be copied into the branches
    y = math.sin(y) * y + math.cos(y)
    y = math.sin(y) * y + math.cos(y)
    y = math.sin(y) * y + math.cos(y)
    y = math.sin(y) * y + math.cos(y)
    y = math.sin(y) * y + math.cos(y)
    y = math.sin(y) * y + math.cos(y)
    y = math.sin(y) * y + math.cos(y)
    return y * 3.0


def early_return_inlined(x, a, b):
    if x > 100.0:
        z = x * 5.0
    else:
        z = early_return(x + 1.0, b, a)
    return z * 2.0


def early_return_inlined_in_a_loop(x, signs):
    total = 0.0
    for a, b in signs:   # `y` of an earlier iteration must not leak into a later one
        total = total + early_return(x, a, b) * 0.5
    return total


def unused_comprehension_in_a_loop_branch(k):
    """The unused list is kept for what it may raise, so the `elif`'s call of the code after
    the `if` is not in tail position: that code must not be written as a fall-through."""
    scale = 2.5
    rest = 2.5
    while rest > 1.0:
        rest = rest * 0.5
        if k > 5:
            scale += 1.0
        elif k > 0:
            values = [rest for elem in range(4)]
        else:
            continue
    return scale
