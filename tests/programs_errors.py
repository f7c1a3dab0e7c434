"""Subjects for tests/test_errors.py.

The first part holds constructs outside the compiled subset: compiling each must raise a
`MyirSyntaxError` (or, where noted in the tests, another `MyirError`) located at the construct.
The second part holds programs where the design does not settle whether they are in the
subset: myir must either behave exactly as CPython or raise a `MyirError`, never differ
silently.  Undefined names below are undefined on purpose.
"""

# ruff: noqa
# flake8: noqa

import numpy as np
from numpy import add
from numpy.linalg import eig

COUNTER = 0

# --------------------------------------------------------------------------------------------
# Outside the subset


def try_stmt(x):
    try:
        y = 1.0 / x
    except ZeroDivisionError:
        y = 0.0
    return y


def with_stmt(x):
    with np.errstate(all="ignore"):
        y = x / 2.0
    return y


def yield_expr(x):
    y = yield x
    return y


async def async_def(x):
    return x


def nested_async_def(x):
    async def inner():
        return x

    return x


def global_stmt(x):
    global COUNTER
    COUNTER = x
    return x


def nonlocal_stmt(x):
    y = x

    def bump():
        nonlocal y
        y = y + 1
        return y

    return bump()


def class_inside(x):
    class Point:
        pass

    return x


def setitem_param(x):
    x[0] = 1.0
    return x


def augassign_item_param(x):
    x[0] += 1.0
    return x


def append_param(t):
    t.append(1.0)
    return t


def clear_local(a):
    xs = [a, 2.0 * a]
    xs.clear()
    return xs


def update_local(a):
    d = {"a": a}
    d.update(dict(b=2.0 * a))
    return d


def sort_param(x):
    x.sort()
    return x


def np_add_four_arguments(x):
    return np.add(x, 1.0, 2.0, 3.0)


def linalg_eig(a):
    return np.linalg.eig(a)


def fft_of(a):
    return np.fft.fft(a)


def nonzero_of(a):
    return np.nonzero(a)


def where_of_condition_alone(a):
    return np.where(a > 0)[0]


def imported_ufunc_reduceat(a):
    return add.reduceat(a, [0, 1])


def imported_eigen(a):
    return eig(a)


def print_flush(x):
    print(x, flush=True)
    return x


def dropped_call(x):
    np.sin(x)
    return x


def undefined_name(x):
    if x > 1000000:
        return x + not_defined_anywhere
    return x


def undefined_in_nested(x):
    def never_called(y):
        return y * also_not_defined

    return x


def del_stmt(x):
    y = x + 1
    del y
    return x


def import_stmt(x):
    import math as m

    return m.sin(x)


def import_from(x):
    from math import cos

    return cos(x)


def star_args(*args):
    return args[0]


def star_kwargs(x, **kwargs):
    return x


def walrus(x):
    if (y := x + 1) > 2:
        return y
    return x


def dict_comp(t):
    return {v: w * 2 for v in t for w in t}


def set_comp(t):
    return {v * 2 for v in t}


def dict_literal(x):
    return {"a": 1.0, **x}


def set_literal(x):
    return {x, 1.0}


def fstring_value(x):
    return f"x = {x}"


def percent_format(x):
    return "x = %s" % x


def str_format_method(x):
    return "x = {}".format(x)




# --------------------------------------------------------------------------------------------
# Either exactly CPython's behaviour or a MyirError


def closure_reassigned(x):
    y = x
    g = lambda: y
    y = x + 1
    return g()


def closure_reassigned_def(x):
    y = x

    def g():
        return y * 2

    y = y + 10
    return g()


def closure_reassigned_in_loop(n):
    f = lambda: -1
    for i in range(n):
        if i == 0:
            f = lambda: i
    return f()


def closure_reassigned_in_branch(x):
    k = 1
    f = lambda v: v * k
    if x > 0:
        k = 2
    return f(x)


def nested_mutual_recursion(x, n):
    def even(y, k):
        if k == 0:
            return y
        return odd(y * x, k - 1)

    def odd(y, k):
        if k == 0:
            return -y
        return even(y + x, k - 1)

    return even(x, n)


def augassign_aliased_array(x):
    y = x
    y += 1.0
    return x


def loop_variable_after_empty_loop(n):
    for i in range(n):
        pass
    return i


def big_int_power(n):
    return 2 ** n


def big_int_factorial(n):
    r = 1
    for i in range(2, n + 1):
        r = r * i
    return r


def is_none(x):
    return x is None


def in_tuple(x):
    return x in (1, 2, 3)


def star_unpack(t):
    a, *b = t
    return a


def starred_call(t):
    return three(*t)


def three(a, b, c):
    return a * 100 + b * 10 + c


def keyword_only(a, *, b=2):
    return a * b


def string_constant(x):
    return "pos" if x > 0 else "neg"


def generator_sum(t):
    return sum(v * v for v in t)


def np_array_of_list(x):
    return np.array([x, 1.0])


def boolean_mask(x):
    return x[x > 0]


def setitem_local_array(x):
    h = np.zeros(3)
    h[0] = x
    return h


def dropped_expression(x):
    x + 1
    return x


def match_stmt(x):
    match x:
        case 0:
            return 1
        case _:
            return 2


def builtins_len_abs_min_max(t):
    return len(t), abs(t[0]), min(t[0], t[1]), max(t[0], t[1])


def builtins_int_float(x):
    return int(x), float(x)


def lambda_default_capture(x):
    f = lambda v, k=x: v + k
    return f(1)


def shadowed_builtin(x):
    range = 3
    return x * range


def int_overflow_in_loop(n):
    r = 1
    for i in range(n):
        r = r * 1000
    return r


def tuple_concat(t):
    return t + (1, 2)


def tuple_repeat(t):
    return t * 2
