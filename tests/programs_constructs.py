"""Subjects for tests/test_constructs.py: small functions, one per construct of the subset.

They live in a real file because myir reads source with `inspect.getsource`.  Everything
here is inside the compiled subset (see docs in /work/shared/design/ARCHITECTURE.md,
"Frontend"); the tests check that the compiled function behaves exactly as CPython.
Array, math and numpy subjects are in programs_numpy.py.
"""

import math

import numpy as np

# --------------------------------------------------------------------------------------------
# Arithmetic


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def truediv(a, b):
    return a / b


def floordiv(a, b):
    return a // b


def mod(a, b):
    return a % b


def power(a, b):
    return a ** b


def matmul(a, b):
    return a @ b


def neg(a):
    return -a


def pos(a):
    return +a


def not_(a):
    return not a


def invert(a):
    return ~a


def polynomial(x, y):
    return 3 * x * x - 2 * x * y + y / 4 - 7


def precedence(a, b, c):
    return -a ** 2 + b * c % 7 - (a - b) // 3


# --------------------------------------------------------------------------------------------
# Comparisons


def lt(a, b):
    return a < b


def le(a, b):
    return a <= b


def gt(a, b):
    return a > b


def ge(a, b):
    return a >= b


def eq(a, b):
    return a == b


def ne(a, b):
    return a != b


def chained_lt(a, b, c):
    return a < b < c


def chained_mixed(a, b, c):
    return a <= b > c


def chained_eq(a, b, c):
    return a == b == c


def chained_four(a, b, c, d):
    return a < b <= c < d


def chained_short_circuit(a, b, c):
    # 10 // c is only evaluated when a < b
    return a < b < 10 // c


# --------------------------------------------------------------------------------------------
# and / or / not


def and_value(a, b):
    return a and b


def or_value(a, b):
    return a or b


def zero_or_five():
    return 0 or 5


def three_and_zero():
    return 3 and 0


def and_or_chain(a, b, c):
    return a and b or c


def and_guard(a, b):
    # b == 0: the division must not run
    return b != 0 and a // b > 1


def or_guard(a, b):
    return b == 0 or a // b > 1


def fail_if_called(x):
    raise RuntimeError("right operand evaluated")


def or_guard_call(x):
    return x > 0 or fail_if_called(x)


def and_guard_call(x):
    return x > 0 and fail_if_called(x)


def none_or_default(x):
    return x or 3


def not_and_or(a, b):
    return not a or not b


# --------------------------------------------------------------------------------------------
# if / elif / else, ternary


def if_elif_else(x):
    if x < 0:
        y = -1
    elif x == 0:
        y = 0
    elif x < 10:
        y = 1
    else:
        y = 2
    return y


def if_without_else(x):
    y = 1
    if x > 0:
        y = 2
    return y


def if_truthiness(x):
    if x:
        return 1
    return 0


def nested_if(a, b):
    if a > 0:
        if b > 0:
            r = a + b
        else:
            r = a - b
    else:
        r = 0
    return r


def ternary(x):
    return x if x > 0 else -x


def nested_ternary(x):
    return -1 if x < 0 else (0 if x == 0 else 1)


def ternary_guard(a, b):
    return a // b if b != 0 else 0


def with_pass(x):
    if x > 0:
        pass
    else:
        x = -x
    return x


def with_docstring(x):
    """A docstring is an expression statement that is allowed."""
    return x + 1


# --------------------------------------------------------------------------------------------
# while


def while_sum(n):
    i = 0
    total = 0
    while i < n:
        total += i
        i += 1
    return total


def while_count(n):
    i = 0
    acc = 0
    while i < n:
        acc = acc + i % 7
        i = i + 1
    return acc


def while_true_break(n):
    i = 0
    while True:
        if i * i >= n:
            break
        i += 1
    return i


def while_continue(n):
    i = 0
    total = 0
    while i < n:
        i += 1
        if i % 3 == 0:
            continue
        total += i
    return total


def while_return(n):
    i = 1
    while i < n:
        if n % i == 0 and i > 1:
            return i
        i += 1
    return n


def while_float(x):
    steps = 0
    while x > 1.0:
        x = x / 2.0
        steps += 1
    return x, steps


# --------------------------------------------------------------------------------------------
# for


def for_range_n(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def for_range_ab(a, b):
    total = 0
    for i in range(a, b):
        total = total * 2 + i
    return total


def for_range_step(a, b, step):
    total = 0
    for i in range(a, b, step):
        total = total * 2 + i
    return total


def for_range_negative_step(n):
    total = 0
    for i in range(n, -1, -2):
        total = total * 2 + i
    return total


def for_range_count(n):
    acc = 0
    for i in range(n):
        acc = acc + 1
    return acc


def for_loop_var_after(n):
    for i in range(n):
        pass
    return i


def for_tuple(t):
    total = 0
    for v in t:
        total = total + v
    return total


def for_tuple_mixed(x):
    total = 0
    for v in (1, 2.5, x, True):
        total = total + v
    return total


def for_zip(t, u):
    total = 0
    for a, b in zip(t, u):
        total = total + a * b
    return total


def for_zip_range(t):
    total = 0
    for i, v in zip(range(10, 0, -1), t):
        total = total + i * v
    return total


def for_enumerate(t):
    total = 0
    for i, v in enumerate(t):
        total = total + i * v
    return total


def for_enumerate_start(t):
    total = 0
    for i, v in enumerate(t, 1):
        total = total + i * v
    return total


def for_array_rows(x):
    total = np.zeros(x.shape[1])
    for row in x:
        total = total + row * row
    return total


def for_array_elements(x):
    s = 0.0
    for v in x:
        s += v * v
    return s


def for_zip_arrays(x, y):
    s = 0.0
    for a, b in zip(x, y):
        s = s + a * b
    return s


def for_enumerate_array(x):
    s = 0.0
    for i, v in enumerate(x):
        s = s + i * v
    return s


def for_break(n):
    total = 0
    for i in range(n):
        if i * i > n:
            break
        total += i
    return total


def for_continue(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        total += i
    return total


def for_return(n):
    for i in range(n):
        if i * i >= n:
            return i
    return -1


def nested_loops_break(n):
    count = 0
    for i in range(n):
        for j in range(n):
            if j > i:
                break
            if (i + j) % 2 == 1:
                continue
            count += 1
    return count


def nested_loops_return(n, target):
    for i in range(n):
        for j in range(n):
            if i * j == target:
                return i, j
    return -1, -1


def for_in_while(n):
    total = 0
    k = 0
    while k < n:
        for i in range(k):
            total += i
        k += 1
    return total


def return_in_branches(x):
    if x > 0:
        return 1
    else:
        return -1


def return_in_elif(x):
    if x > 10:
        return x - 10
    elif x > 0:
        y = x * 2
    else:
        return 0
    return y


# --------------------------------------------------------------------------------------------
# Assignment, unpacking, augmented assignment


def assign_chain(x):
    a = b = x + 1
    return a * b


def tuple_pack(a, b):
    t = a, b, a + b
    return t


def tuple_unpack(t):
    a, b = t
    return b, a


def nested_unpack(t):
    (a, (b, c)), d = t
    return a + b * c - d


def swap(a, b):
    a, b = b, a
    return a, b


def unpack_call_result(x):
    q, r = divide_with_remainder(x, 7)
    return q * 10 + r


def divide_with_remainder(a, b):
    return a // b, a % b


def augmented(x):
    y = x
    y += 3
    y -= 1
    y *= 2
    y //= 3
    y %= 11
    y **= 2
    return y


def augmented_float(x):
    y = x
    y += 1.5
    y *= 2.0
    y /= 3.0
    y -= 0.25
    return y


def augmented_array(x):
    y = x * 1.0
    y += 2.0
    y *= 3.0
    return y


def reassign_type(x):
    y = x
    y = y > 0
    return y


# --------------------------------------------------------------------------------------------
# Functions: nested def, lambda, closures, higher order, recursion, defaults and keywords


def nested_def(x):
    k = x * 2

    def inner(y):
        return y + k

    return inner(1) + inner(x)


def lambda_capture(x, y):
    f = lambda z: z * x + y  # noqa: E731
    return f(2) + f(y)


def two_level_closure(x):
    def outer(y):
        def inner(z):
            return x + y + z

        return inner(y * 2)

    return outer(3)


def make_adder(n):
    def add_n(m):
        return m + n

    return add_n


def closure_called_later(x):
    add3 = make_adder(3)
    addx = make_adder(x)
    y = add3(x)
    return y * addx(2)


def returns_closure(x):
    return lambda y: x * y + 1


def returns_nested_def(x):
    def scale(y):
        return y * x

    return scale


def square(v):
    return v * v


def increment(v):
    return v + 1


def compose(f, g):
    return lambda v: f(g(v))


def apply_twice(f, x):
    return f(f(x))


def use_apply_twice(x):
    return apply_twice(square, x) + apply_twice(lambda v: v - 1, x)


def use_compose(x):
    h = compose(square, increment)
    return h(x) + compose(increment, square)(x)


def call_function_argument(f, x):
    return f(x) + f(x + 1)


def closure_in_branch(x):
    if x > 0:
        f = lambda v: v + x  # noqa: E731
    else:
        f = lambda v: v - x  # noqa: E731
    return f(10)


def closure_in_loop(n):
    total = 0
    for i in range(n):
        g = lambda v: v * i  # noqa: E731
        total = total + g(2)
    return total


# Lambdas sharing a line: each is found by its own code, not by its line.
LINE_LAMBDAS = (lambda x: x + 1.0, lambda x: x * 10.0, lambda x: x + 2.0)  # noqa: E731
inc, tenfold = (lambda x: x + 1.0), (lambda x: x * 10.0)  # noqa: E731
nest = lambda x: (lambda y: y * 3.0)(x) + (lambda y: y - 5.0)(x)  # noqa: E731
curried = lambda x: lambda y: x * 10.0 + y  # noqa: E731
SHIFTS = tuple(lambda x, k=k: x + k for k in range(3))


def uses_line_lambdas(x):
    return inc(x) + tenfold(x)


def lambdas_inside_on_one_line(x):
    f, g = (lambda y: y + 1.0), (lambda y: y * 10.0)  # noqa: E731
    return f(x), g(x), (lambda y: y - 3.0)(x) * (lambda y: y / 2.0)(x)


def recursive_lambda(x):
    fact = lambda n: 1.0 if n <= 0 else n * fact(n - 1)  # noqa: E731
    return fact(x)


def recursive_lambda_capturing(x, n):
    power: object = lambda k: 1.0 if k <= 0 else x * power(k - 1)  # noqa: E731
    return power(n)


def recursive_lambda_default(n):
    count = lambda k, step=2: 0 if k <= 0 else 1 + count(k - step)  # noqa: E731
    return count(n)


def nested_def_defaults(x):
    def inner(y, k=2):
        return y * k + x

    return inner(1) + inner(1, 5) + inner(k=-1, y=3)


def factorial(n):
    return 1 if n <= 1 else n * factorial(n - 1)


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def power_rec(x, n):
    if n == 0:
        return 1.0
    half = power_rec(x, n // 2)
    if n % 2 == 0:
        return half * half
    return half * half * x


def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)


def with_defaults(a, b=2, c=0.5):
    return a * b + c



def with_function_defaults(x, g=lambda y: y * 2.0, h=abs):
    """Defaults that are functions: a lambda (its `def` must run before this one's) and a
    builtin."""
    return g(x) + h(x)

def calls_with_keywords(x):
    return (
        with_defaults(x)
        + with_defaults(x, 3)
        + with_defaults(x, c=1.5)
        + with_defaults(c=2.0, a=x, b=-1)
    )


def calls_later_defined(x):
    return defined_after_caller(x) * 2


# --------------------------------------------------------------------------------------------
# Module constants


SCALE = 2.5
OFFSET = 3
TABLE = (1, 2, 3)
NESTED = ((1, 2.0), (3, 4.0))
FLAG = True
NOTHING = None


def uses_constants(x):
    return x * SCALE + OFFSET + TABLE[1] if FLAG else 0.0


def uses_nested_constant(i):
    return NESTED[i][1] * NESTED[1 - i][0]


def uses_none_constant(x):
    return NOTHING if x < 0 else x


def uses_math_pi(r):
    return math.pi * r * r + math.e


# --------------------------------------------------------------------------------------------
# assert / raise / values


def assert_positive(x):
    assert x > 0, "x must be positive"
    return x * 2


def assert_no_message(x):
    assert x != 0
    return 10 // x


def assert_fstring(x):
    assert x > 0, f"x must be positive, got {x}"
    return x


def raise_value_error(x):
    if x < 0:
        raise ValueError("negative input")
    return math.sqrt(x)


def raise_fstring(x):
    if x > 10:
        raise ValueError(f"too large: {x}")
    return x


def raise_runtime_error(n):
    if n % 2 == 1:
        raise RuntimeError("odd")
    return n // 2


def return_none(x):
    return None


def implicit_none(x):
    if x > 0:
        return
    y = x + 1


def return_true():
    return True


def return_bool(x):
    return x > 0


def return_int(x):
    return x // 2


def return_float(x):
    return x / 2


def return_values(x):
    return (x, x > 0, None, 1.5, -3, (True, False))


def optional_result(x):
    return None if x < 0 else x


def int_float_promotion(n):
    x = n
    x = x + 0.5
    return x


# --------------------------------------------------------------------------------------------
# Tracebacks: the tests look for the lines containing `raise ValueError("boom")` and
# `q = 10 // x` in this file.


def raises_in_callee(x):
    y = x + 1
    return helper_that_raises(y)


def helper_that_raises(y):
    if y > 0:
        raise ValueError("boom")
    return y


def divides_by_argument(x):
    q = 10 // x
    return q + 1


def asserts_in_loop(n):
    total = 0
    for i in range(n):
        assert i < 3, "i too large"
        total += i
    return total


# Defined after its caller `calls_later_defined`, on purpose.
def defined_after_caller(x):
    return x + 1


# ------------------------------------------------------------------ pow, round, divmod, reversed


def builtin_pow(x, y):
    return pow(x, y)


def builtin_round(x):
    return round(x), round(x, 2), round(x, -1)


def builtin_divmod(x, y):
    q, r = divmod(x, y)
    return q, r


def for_reversed_range(n):
    order = ()
    for i in reversed(range(1, n, 2)):
        order = order + (i,)
    return order


def for_reversed_tuple(t):
    s = 0
    for i, v in enumerate(reversed(t)):
        s = 3 * s + i * v
    return s


def for_reversed_array(x):
    s = 0.0
    for v in reversed(x):
        s = s * 0.5 + v
    return s


def for_reversed_zip(t, u):
    s = 0
    for a, b in reversed(zip(t, u)):    # TypeError: 'zip' object is not reversible
        s = 2 * s + a * b
    return s


def reversed_outside_for(t):
    return reversed(t)


def _takes_a_pair(x, pair=(-1, 2)):
    values = [1.0 / 2.0, 1.0]
    values[0] = 1.0
    for item in pair:       # (loops and a list: the optimizer leaves the call a call)
        for i, elem in enumerate((1.0, 1.0, 0.5)):
            values[1] = values[1] * elem + item
    return x * values[1]


def negative_first_tuple_constant(x):
    """A constant tuple whose first item is negative, passed as an argument: generated code
    writes it `(-1, 2)`, not `-1, 2` (taken for a negative number, it lost its
    parentheses and became two arguments)."""
    return _takes_a_pair(x), _takes_a_pair(x, (-3, 4))
