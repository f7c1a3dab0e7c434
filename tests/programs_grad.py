"""Subjects for tests/test_grad.py and tests/test_grad_primitives.py.

They live in a real file because myir reads source with `inspect.getsource`.  Each
primitive subject returns a float (usually `np.sum` of the operation, often after a `sin`
so that the sensitivity reaching the operation is not uniform), so `grad` applies to it.
"""

import math

import numpy as np

from myir import grad, value_and_grad, vectorize

# --------------------------------------------------------------------------------------------
# Binary arithmetic (the operands may be arrays of broadcastable shapes, or floats)


def add(x, y):
    return np.sum(np.sin(x + y))


def sub(x, y):
    return np.sum(np.sin(x - y))


def mul(x, y):
    return np.sum(np.sin(x * y))


def truediv(x, y):
    return np.sum(np.sin(x / y))


def quotient(x, y):
    return x / y


def pow_(x, y):
    return np.sum(x ** y)


def np_power(x, y):
    return np.sum(np.power(x, y))


def pow_const_exponent(x):
    return np.sum(x ** 3.0)


def pow_int_exponent(x):
    return np.sum(x ** 2)


def pow_const_base(x):
    return np.sum(2.0 ** x)


def mod(x, y):
    return np.sum(np.sin(x % y))


def maximum(x, y):
    return np.sum(np.sin(np.maximum(x, y)))


def minimum(x, y):
    return np.sum(np.sin(np.minimum(x, y)))


def arctan2(x, y):
    return np.sum(np.arctan2(x, y))


def np_add(x, y):
    return np.sum(np.sin(np.add(x, y)))


def np_subtract(x, y):
    return np.sum(np.sin(np.subtract(x, y)))


def np_multiply(x, y):
    return np.sum(np.sin(np.multiply(x, y)))


def np_divide(x, y):
    return np.sum(np.sin(np.divide(x, y)))


def aug_ops(x, y):
    z = x * 1.0
    z += y
    z *= x
    z -= y
    z /= 1.5 + y * y
    z **= 2
    return np.sum(z)


def where(x, y):
    return np.sum(np.sin(np.where(x > y, x * y, y - x)))


def where_mask_constant(x):
    return np.sum(np.where(x > 0.0, np.sin(x), 0.0))


# --------------------------------------------------------------------------------------------
# Unary elementwise


def neg(x):
    return np.sum(np.sin(-x))


def pos(x):
    return np.sum(np.sin(+x))


def exp(x):
    return np.sum(np.exp(x))


def log(x):
    return np.sum(np.log(x))


def log1p(x):
    return np.sum(np.log1p(x))


def expm1(x):
    return np.sum(np.expm1(x))


def sqrt(x):
    return np.sum(np.sqrt(x))


def sin(x):
    return np.sum(np.sin(x))


def cos(x):
    return np.sum(np.cos(x))


def tan(x):
    return np.sum(np.tan(x))


def tanh(x):
    return np.sum(np.tanh(x))


def sinh(x):
    return np.sum(np.sinh(x))


def cosh(x):
    return np.sum(np.cosh(x))


def arcsin(x):
    return np.sum(np.arcsin(x))


def arccos(x):
    return np.sum(np.arccos(x))


def arctan(x):
    return np.sum(np.arctan(x))


def np_abs(x):
    return np.sum(np.sin(np.abs(x)))


def np_absolute(x):
    return np.sum(np.sin(np.absolute(x)))


def builtin_abs(x):
    return np.sum(np.sin(abs(x)))


def square(x):
    return np.sum(np.square(x))


def negative(x):
    return np.sum(np.sin(np.negative(x)))


def reciprocal(x):
    return np.sum(np.reciprocal(x))


def clip(x):
    return np.sum(np.sin(np.clip(x, -1.0, 2.0)))


def clip_method(x):
    return np.sum(np.sin(x.clip(-1.0, 2.0)))


def sign_times(x):
    return np.sum(np.sign(x) * x * x)


def floor_plus(x):
    return np.sum(np.floor(x) + np.ceil(x) * x)


# --------------------------------------------------------------------------------------------
# math module (float arguments)


def math_exp(x):
    return math.exp(x)


def math_log(x):
    return math.log(x)


def math_log1p(x):
    return math.log1p(x)


def math_expm1(x):
    return math.expm1(x)


def math_sqrt(x):
    return math.sqrt(x)


def math_sin(x):
    return math.sin(x)


def math_cos(x):
    return math.cos(x)


def math_tan(x):
    return math.tan(x)


def math_asin(x):
    return math.asin(x)


def math_acos(x):
    return math.acos(x)


def math_atan(x):
    return math.atan(x)


def math_sinh(x):
    return math.sinh(x)


def math_cosh(x):
    return math.cosh(x)


def math_tanh(x):
    return math.tanh(x)


def math_fabs(x):
    return math.sin(math.fabs(x))


def math_more(x):
    """math.log2 ... math.radians: the rest of math's differentiable functions."""
    y = math.log2(x) + math.log10(x) + math.cbrt(x) + math.exp2(x) + math.asinh(x)
    return y + math.acosh(x + 1.0) + math.atanh(x / 6.0) + math.erf(x) * math.erfc(x) \
        + math.degrees(x) * math.radians(x)


def math_pow(x, y):
    return math.pow(x, y)


def math_atan2(x, y):
    return math.atan2(x, y)


def math_hypot(x, y):
    return math.hypot(x, y)


def to_float(x):
    return float(x) * x


def scalar_floor(x):
    return math.floor(x) * x + math.ceil(x)


# --------------------------------------------------------------------------------------------
# Reductions


def sum_all(x):
    return np.sin(np.sum(x))


def sum_0(x):
    return np.sum(np.sin(np.sum(x, axis=0)))


def sum_1(x):
    return np.sum(np.sin(np.sum(x, axis=1)))


def sum_m1(x):
    return np.sum(np.sin(np.sum(x, axis=-1)))


def sum_0_keep(x):
    return np.sum(np.sin(np.sum(x, axis=0, keepdims=True)))


def sum_m1_keep(x):
    return np.sum(np.sin(np.sum(x, axis=-1, keepdims=True)))


def sum_all_keep(x):
    return np.sum(np.sin(np.sum(x, keepdims=True)))


def sum_method(x):
    return np.sum(np.sin(x.sum(axis=1)))


def mean_all(x):
    return np.sin(np.mean(x))


def mean_0(x):
    return np.sum(np.sin(np.mean(x, axis=0)))


def mean_1(x):
    return np.sum(np.sin(np.mean(x, axis=1)))


def mean_m1_keep(x):
    return np.sum(np.sin(np.mean(x, axis=-1, keepdims=True)))


def max_all(x):
    return np.sin(np.max(x))


def max_0(x):
    return np.sum(np.sin(np.max(x, axis=0)))


def max_1(x):
    return np.sum(np.sin(np.max(x, axis=1)))


def max_m1_keep(x):
    return np.sum(np.sin(np.max(x, axis=-1, keepdims=True)))


def amax_0_keep(x):
    return np.sum(np.sin(np.amax(x, axis=0, keepdims=True)))


def max_method(x):
    return np.sum(np.sin(x.max(axis=0)))


def min_all(x):
    return np.sin(np.min(x))


def min_0(x):
    return np.sum(np.sin(np.min(x, axis=0)))


def min_1_keep(x):
    return np.sum(np.sin(np.min(x, axis=1, keepdims=True)))


def min_m1(x):
    return np.sum(np.sin(np.min(x, axis=-1)))


def prod_all(x):
    return np.prod(x)


def d_prod_first(x):
    return grad(prod_all)(x)[0]


def prod_0(x):
    return np.sum(np.sin(np.prod(x, axis=0)))


def prod_1(x):
    return np.sum(np.sin(np.prod(x, axis=1)))


def prod_m1_keep(x):
    return np.sum(np.sin(np.prod(x, axis=-1, keepdims=True)))


def builtin_max2(x, y):
    return max(x, y) * 2.0


def builtin_min2(x, y):
    return min(x, y) * 2.0


def builtin_max3(x, y, z):
    return max(x, y, z)


def builtin_min3(x, y, z):
    return min(x, y, z)


# --------------------------------------------------------------------------------------------
# Linear algebra


def matmul_op(x, y):
    return np.sum(np.sin(x @ y))


def np_matmul(x, y):
    return np.sum(np.sin(np.matmul(x, y)))


def np_dot(x, y):
    return np.sum(np.sin(np.dot(x, y)))


def dot_method(x, y):
    return np.sum(np.sin(x.dot(y)))


def aug_matmul(x, y):
    z = x * 1.0
    z @= y
    return np.sum(np.sin(z))


# --------------------------------------------------------------------------------------------
# Shapes


def reshape_fn(x):
    return np.sum(np.sin(np.reshape(x, (4, 6))) * np.arange(24.0).reshape((4, 6)))


def reshape_method(x):
    return np.sum(np.sin(x.reshape((2, 12))) * np.arange(24.0).reshape((2, 12)))


def reshape_minus_one(x):
    return np.sum(np.sin(x.reshape((-1,))) * np.arange(24.0))


def transpose_fn(x):
    return np.sum(np.sin(np.transpose(x)) * np.arange(24.0).reshape((4, 3, 2)))


def transpose_axes(x):
    return np.sum(np.sin(np.transpose(x, (1, 2, 0))) * np.arange(24.0).reshape((3, 4, 2)))


def transpose_method_axes(x):
    return np.sum(np.sin(x.transpose((2, 0, 1))) * np.arange(24.0).reshape((4, 2, 3)))


def dot_t(x):
    return np.sum(np.sin(x.T) * np.arange(24.0).reshape((4, 3, 2)))


def broadcast_to(x):
    return np.sum(np.sin(np.broadcast_to(x, (2, 3, 4))) * np.arange(24.0).reshape((2, 3, 4)))


def expand_dims_0(x):
    return np.sum(np.sin(np.expand_dims(x, 0)) * np.arange(24.0).reshape((1, 2, 3, 4)))


def expand_dims_m1(x):
    return np.sum(np.sin(np.expand_dims(x, -1)) * np.arange(24.0).reshape((2, 3, 4, 1)))


def expand_dims_two_axes(x):
    """A tuple of axes counts each new axis: (0, 4) of a 3-d array gives a 5-d one."""
    return np.sum(np.sin(np.expand_dims(x, (0, 4))) * np.arange(24.0).reshape((1, 2, 3, 4, 1)))


def times_eye_float32(x):
    """np.eye's dtype keyword (its second positional parameter is M, the columns)."""
    return np.sum(np.sin(x) @ np.eye(4, dtype=np.float32))


def squeeze_axis(x):
    return np.sum(np.sin(np.squeeze(x, 1)) * np.arange(8.0).reshape((2, 4)))


def squeeze_all(x):
    return np.sum(np.sin(np.squeeze(x)) * np.arange(8.0).reshape((2, 4)))


def concatenate_0(x, y):
    return np.sum(np.sin(np.concatenate((x, y, x), 0)) * np.arange(1.0, 37.0).reshape((9, 4)))


def concatenate_1(x, y):
    return np.sum(np.sin(np.concatenate((x, y), axis=1)) * np.arange(1.0, 25.0).reshape((3, 8)))


def stack_0(x, y):
    return np.sum(np.sin(np.stack((x, y), 0)) * np.arange(24.0).reshape((2, 3, 4)))


def stack_1(x, y):
    return np.sum(np.sin(np.stack((x, y, x), axis=1)) * np.arange(36.0).reshape((3, 3, 4)))


def stack_m1(x, y):
    return np.sum(np.sin(np.stack((x, y), axis=-1)) * np.arange(24.0).reshape((3, 4, 2)))


def swapaxes(x):
    return np.sum(np.sin(np.swapaxes(x, 0, 2)) * np.arange(24.0).reshape((4, 3, 2)))


def astype_f64(x):
    return np.sum(np.sin(x.astype(np.float64)))


def np_array_copy(x):
    return np.sum(np.sin(np.array(x)) * np.array(x))


def np_array_of_tuple(x, y):
    return np.sum(np.array(((x, x * y), (y, 2.0))) * np.array(((1.0, 2.0), (3.0, 4.0))))


def astype_f32_sum(x):
    return float(np.sum(x.astype(np.float32) * 3.0))


# --------------------------------------------------------------------------------------------
# Indexing and slicing (x has shape (4, 5))


def index_int(x):
    return np.sum(np.sin(x[1]) * x[1])


def index_negative(x):
    return np.sum(np.sin(x[-1]) * x[-2])


def index_two_ints(x):
    return x[1, 2] * x[-1, -3] + x[0, 0]


def index_slice(x):
    return np.sum(np.sin(x[1:3]))


def index_slice_step(x):
    return np.sum(np.sin(x[::2]) * x[1::2])


def index_slice_reverse(x):
    return np.sum(np.sin(x[::-1]) * x)


def index_column(x):
    return np.sum(np.sin(x[:, 0]) * x[:, -1])


def index_slice_2d(x):
    return np.sum(np.sin(x[1:, ::2]))


def index_mixed(x):
    return np.sum(np.sin(x[2, 1:4]) + x[:-1, 3] * x[1:, 2])


def index_chain(x):
    return np.sum(x[1][3:] * x[3][::-2][1:])


def index_numpy_scalar(x):
    """A numpy scalar indexed as the 0-d array it stands for."""
    s = np.sum(np.sin(x))
    return s[()] * 2.0 + np.sum(s[None] * s[...])


def tuple_index(t):
    return t[0] * t[2] ** 2 + np.sum(np.sin(t[1]))


def tuple_index_negative(t):
    return t[-1] * t[-3]


def tuple_slice(t):
    u = t[1:]
    return u[0] * u[1] + t[0]


def tuple_unpack(t):
    a, b, c = t
    return a * b * np.sin(c)


# --------------------------------------------------------------------------------------------
# Control flow


def piecewise(x):
    if x > 1.0:
        return x ** 3
    elif x > -1.0:
        return 2.0 * x * x + x
    else:
        return -x ** 4


def branch_on_array(x, y):
    if np.sum(x) > 0.0:
        z = x * y
    else:
        z = x - y * y
    return np.sum(np.sin(z))


def ternary(x):
    return x * x if x > 0.0 else -x * x * x


def and_or(x, y):
    if x > 0.0 and y > 0.0:
        return x * y
    if x < 0.0 or y < 0.0:
        return x + y * y
    return x - y


def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


def power_while(x, n):
    r = 1.0
    i = 0
    while i < n:
        r = r * x
        i = i + 1
    return r


def poly_for(x, n):
    s = 0.0
    for k in range(n):
        s = s + (k + 1) * x ** k
    return s


def for_over_array(x):
    s = 0.0
    for row in x:
        s = s + np.sum(row * row) * np.max(row)
    return s


def for_zip_enumerate(x, w):
    s = 0.0
    for i, (a, b) in enumerate(zip(x, w)):
        s = s + i * a * b
    return s


def for_break(x):
    s = 0.0
    for k in range(100):
        if s > 10.0:
            break
        s = s + x * k
    return s


def while_continue(x):
    s = 0.0
    k = 0
    while k < 10:
        k = k + 1
        if k % 3 == 0:
            continue
        s = s + x ** k / k
    return s


def return_in_loop(x):
    y = x
    for k in range(50):
        y = y * 1.5 + 0.1
        if y > 20.0:
            return y * k
    return -y


def euler_growth(x, h):
    t = 0.0
    y = x
    while t < 1.0:
        y = y + h * y
        t = t + h
    return y


# --------------------------------------------------------------------------------------------
# Recursion


def rpow(x, n):
    if n == 0:
        return 1.0
    return x * rpow(x, n - 1)


def is_even_sum(x, n):
    if n == 0:
        return x
    return is_odd_sum(x * x, n - 1)


def is_odd_sum(x, n):
    if n == 0:
        return -x
    return is_even_sum(np.sin(x), n - 1) + x


def fib_like(x, n):
    if n < 2:
        return x
    return fib_like(x, n - 1) * 0.5 + np.sin(fib_like(x, n - 2))


# --------------------------------------------------------------------------------------------
# Closures and higher-order functions


def closure_capture(x, y):
    def inner(z):
        return x * z + np.sin(x * y)
    return inner(y) * inner(2.0)


def lambda_capture(x):
    f = lambda z: z * x * x  # noqa: E731
    return f(3.0) + f(x)


def make_scaler(a):
    def scale(z):
        return a * z * z
    return scale


def returned_closure(a, x):
    s = make_scaler(a)
    return s(x) + make_scaler(x)(a)


def make_counter_fn(a):
    def step(z):
        return z * a + 1.0
    return step


def returned_closure_loop(a, x):
    f = make_counter_fn(a)
    for _ in range(3):
        x = f(x)
    return x


def compose(f, g):
    return lambda z: f(g(z))


def square_fn(z):
    return z * z


def composed(x):
    h = compose(np.sin, compose(square_fn, np.exp))
    return h(x)


def composed_closures(x, y):
    h = compose(lambda z: z * y, lambda z: z + x * y)
    return h(x)


def tmap(f, t):
    if len(t) == 0:
        return ()
    return (f(t[0]),) + tmap(f, t[1:])


def tsum(t):
    if len(t) == 0:
        return 0.0
    return t[0] + tsum(t[1:])


def map_sum(x, y):
    return tsum(tmap(lambda z: z * x, (x, y, 2.0)))


def tmap_index(f, t, i):
    if i == len(t):
        return 0.0
    return f(t[i]) + tmap_index(f, t, i + 1)


def map_sum_index(x, y):
    return tmap_index(lambda z: z * x, (x, y, 2.0), 0)


def apply_twice(f, x):
    return f(f(x))


def twice_sin(x):
    return apply_twice(np.sin, x) + apply_twice(lambda z: z * x, 1.0)


# --------------------------------------------------------------------------------------------
# Several arguments and tuple arguments


def three_args(x, y, z):
    return x * y * y + np.sin(z) * x


def mixed_args(w, x, n):
    s = 0.0
    for i in range(n):
        s = s + np.sum(np.tanh(x * w) * (i + 1.0))
    return s


def tuple_arg(p, x):
    w, b = p
    return np.sum((x @ w + b) ** 2)


def nested_tuple_arg(p):
    a, (b, c) = p
    return a * b + c * c * a


def with_default(x, y=2.0):
    return x ** y


# --------------------------------------------------------------------------------------------
# Higher derivatives (hand-derived formulas in tests/test_grad.py)


def poly_xy(x, y):
    return x ** 3 * y ** 4


def sin_cos(x):
    return np.sin(np.cos(x))


def d_poly_dx(x, y):
    return grad(poly_xy)(x, y)


def d_poly_dy(x, y):
    return grad(poly_xy, 'y')(x, y)


def dd_poly_dxdx(x, y):
    return grad(grad(poly_xy))(x, y)


def dd_poly_dxdy(x, y):
    return grad(grad(poly_xy), 'y')(x, y)


def dd_poly_dydy(x, y):
    return grad(grad(poly_xy, 'y'), 'y')(x, y)


def d_sin_cos(x):
    return grad(sin_cos)(x)


def dd_sin_cos(x):
    return grad(grad(sin_cos))(x)


def ddd_sin_cos(x):
    return grad(grad(grad(sin_cos)))(x)


def two_branches(x):
    if x > 0.0:
        y = x * x * x
    else:
        y = -x * x * x * x
    return y


def ddd_two_branches(x):
    return grad(grad(grad(two_branches)))(x)


def cube_pow(x):
    return x ** 3


def ddd_cube_pow(x):
    return grad(grad(grad(cube_pow)))(x)


def dd_piecewise(x):
    return grad(grad(piecewise))(x)


def dd_power_while(x, n):
    return grad(grad(power_while))(x, n)


def ddd_power_while(x, n):
    return grad(grad(grad(power_while)))(x, n)


def dd_rpow(x, n):
    return grad(grad(rpow))(x, n)


def ddd_rpow(x, n):
    return grad(grad(grad(rpow)))(x, n)


def dd_newton_sqrt(a):
    return grad(grad(newton_sqrt))(a)


def dd_fib_like(x, n):
    return grad(grad(fib_like))(x, n)


def dd_closure(x):
    def inner(y):
        return x * y * y
    return grad(inner)(x)


# --------------------------------------------------------------------------------------------
# grad inside compiled code


def cube(x):
    return x * x * x


def calls_grad(x):
    return grad(cube)(x) * x


def calls_value_and_grad(x):
    v, g = value_and_grad(cube)(x)
    return v + g * 2.0


def gd_loss(w):
    return (w - 3.0) ** 2 + np.sin(w)


def descend(w, lr, steps):
    for _ in range(steps):
        w = w - lr * grad(gd_loss)(w)
    return w


def quad_loss(w, A, b):
    r = A @ w - b
    return 0.5 * np.sum(r * r) + 0.1 * np.sum(w * w)


def descend_array(w, A, b, lr, steps):
    i = 0
    while i < steps:
        w = w - lr * grad(quad_loss)(w, A, b)
        i = i + 1
    return w


def descend_loss(w, A, b):
    # differentiate through the gradient descent steps themselves
    w2 = descend_array(w, A, b, 0.05, 3)
    return quad_loss(w2, A, b)


def grad_of_lambda(x):
    return grad(lambda z: z * z * x)(3.0)


# --------------------------------------------------------------------------------------------
# Errors


def plain_scalar(x, n):
    return x * n


def returns_array(x):
    return x * 2.0


def cubed(t):
    return t * t * t


def uses_vectorize(x, scale):
    return np.sum(vectorize(cubed)(x)) * scale


def grad_of_vectorize(x):
    return np.sum(grad(uses_vectorize)(x, 1.0))


def grad_of_parameter(f, x):
    return grad(f)(x)


def grad_of_runtime_choice(c, x):
    f = np.sin if c else np.cos
    return grad(f)(x)


def grad_of_branch_fn(c, x):
    if c:
        f = cube
    else:
        f = square_fn
    return grad(f)(x)


def returns_int(x):
    return 3


def grad_wrt_int_inside(x, n):
    return grad(plain_scalar, 'n')(x, n)


def make_closure_loss(a):
    def loss(x):
        return a * x * x
    return loss


def long_chain(x):
    a = np.sin(x)
    b = np.cos(a)
    c = np.exp(b)
    d = np.tanh(c)
    e = np.sin(d)
    f = np.cos(e)
    g = np.exp(f)
    h = np.tanh(g)
    return np.sum(h)


def lambda_factorial(x):
    fact = lambda n: 1.0 if n <= 0 else n * fact(n - 1)  # noqa: E731
    return fact(x)


def lambda_power(x, n):
    power = lambda k: 1.0 if k <= 0 else x * power(k - 1)  # noqa: E731
    return power(n)


def asserts(x, y):
    assert x > 0, "x must be positive"
    z = x * y
    assert z < 10.0
    return z + math.sin(x)


def raises_in_branch(x):
    if x < -5.0:
        raise ValueError("x is too small")
    return x * x * x


# --------------------------------------------------------------------------------------------
# Outputs of one element, gradients' types, slopes at 0 and errors in gradient code
# (tests/test_grad.py, tests/test_grad_primitives.py)


def sum_keepdims(x):
    return np.sum(x * x, keepdims=True)


def zero_d_output(x):
    return np.reshape(np.sum(x * x, keepdims=True), ())


def grad_of_keepdims_inside(x):
    return grad(sum_keepdims)(x)


def tanh_scaled(x, w):
    return np.sum(np.tanh(x * w))


def grad_tanh_scaled_inside(x, w):
    d = grad(tanh_scaled)(x, w)
    return d, d * 2.0


def tuple_param_loss(t, s):
    a, b = t
    return np.sum(a * s) * b


def pow_half(x):
    return x ** 0.5


def pow_neg_half(x):
    return x ** -0.5


def pow_int(x, n):
    return x ** n


def pow_float(x, y):
    return x ** y


def pow_const_exponent_n(x, n):
    return np.sum(x ** n)


def math_atan2_xy(x, y):
    return math.atan2(x, y)


def math_hypot_xy(x, y):
    return math.hypot(x, y)


def sum_pow_half(x):
    return np.sum(x ** 0.5)


def zero_times_pow_half(x):
    return 0.0 * x ** 0.5 + x


def unused_infinite_slopes(x, w):
    """Every operation with an infinite or nan slope at x = 0, each finite there, scaled by
    w: with w = 0 the sensitivity reaching each is a computed 0."""
    s = np.sqrt(x) + np.cbrt(x) + x ** 0.5 + np.arcsin(1.0 - x) + np.arccos(1.0 - x) \
        + np.arccosh(1.0 + x) + np.arctan2(x, x) + np.hypot(x, x)
    return np.sum(w * s + x)


def unused_math_slopes(x, w):
    s = math.sqrt(x) + math.asin(1.0 - x) + math.acos(1.0 - x) + math.acosh(1.0 + x) \
        + math.atan2(x, x) + math.hypot(x, x) + x ** 0.5 + math.pow(x, 0.5)
    return w * s + x


def pow_half_of_product(x, y):
    return (x * y) ** 0.5 + x


def divides_by_zero(x):
    y = x * 2.0
    z = 1.0 / (x - x)
    return z + y


def tuple_concatenated(x):
    parts = (x,) + (x * 2.0,)
    return parts[0] + parts[1] * 3.0


def tuple_grown_in_a_loop(x):
    parts = ()
    i = 0
    while i < 3:
        parts = parts + (x * (i + 1.0),)
        i += 1
    return parts[0] + parts[2]


def tuple_grown_after_a_check(x, scale=2.0, axes=(1,)):
    """A raise before a loop over a tuple that grows one: inference also types the tuple
    the loop has not grown yet (empty), where `parts[0]` never runs."""
    if np.ndim(scale) != 0:
        raise ValueError("scale must be a number")
    parts = ()
    for k in axes:
        parts = parts + (np.sin(x) * (scale + k),)
    return np.sum(parts[0])



def builtin_pow_divmod(x, y):
    q, r = divmod(x, 0.75)
    return pow(x, y) + r * y + q


def reversed_loop(x):
    s = 0.0
    for v in reversed(x):
        s = s * 0.5 + v * v
    return s


def tuple_concatenated_unequally(x):
    parts = (x * x, 1.0) + (x * 3.0,)
    return parts[0] * parts[2] * parts[1]


def tuple_repeated(x):
    parts = (x, x * 2.0) * 3
    return parts[0] + parts[3] * parts[5]


def tuple_argument_repeated(t, a):
    u = t * 2
    return u[0] * a + u[3] * a * a


def tuple_argument_copied_then_repeated(t, a):
    u = tuple(t) * 2
    return u[0] * a + u[3] * a * a


def tuple_arguments_concatenated(x, y):
    both = x + y + ()
    return both[0] * np.sum(both[1] * both[2]) + both[3] * 2.0



# An accumulator started at an int: an int where the loop does not run, a float where it does.

def int_accumulator(a, n):
    total = 0
    for i in range(n):
        total = total + a * i
    return total


def int_product(a, n):
    p = 1
    for i in range(n):
        p = p * (a + i)
    return p


def int_accumulator_augmented(a, n):
    total = 0
    i = 0
    while i < n:
        total += a * a
        i += 1
    return total


def int_or_float_in_between(a, n):
    s = 0
    for i in range(n):
        s = s + a
    return np.sin(s) * a + math.cos(s) + s ** 2 + max(s, 0.5)


def int_accumulator_of_arrays(v, n):
    total = 0
    for i in range(n):
        total = total + v * i
    return np.sum(total)


def int_or_float_index(a, v):
    u = max(a, 3)
    return a * v[u]


def grad_of_int_accumulator(a, n):
    return grad(int_accumulator)(a, n)


def value_and_grad_of_int_product(a, n):
    return value_and_grad(int_product)(a, n)


# The grad macro binds a call as a call of the function it differentiates: keywords, defaults.

def scaled_norm(v, scale=2.0, power=2):
    return scale * np.sum(v ** power)


def grad_using_defaults(v):
    return grad(scaled_norm)(v)


def grad_with_a_keyword(v):
    return grad(scaled_norm)(v, power=3)


def grad_wrt_a_defaulted_parameter(v):
    return grad(scaled_norm, 'scale')(v)


def value_and_grad_with_keywords(v):
    return value_and_grad(scaled_norm, 'v', 'scale')(scale=0.5, v=v)


def grad_held_in_a_variable(v):
    df = grad(scaled_norm, 'scale')
    return df(v, power=1)


def grad_of_grad_with_defaults(x):
    def cube(x, k=3.0):
        return x * x * x / k
    return grad(grad(cube))(x)


def layers_loss(params, x, act=np.tanh):
    """A model whose activation is a parameter with a function default."""
    for p in params:
        x = act(x @ p["W"] + p["b"])
    return np.sum(x * x)


def grad_with_a_default_function(params, x):
    return grad(layers_loss)(params, x)


def grad_with_a_function_passed(params, x):
    """np.sin by keyword, a function of the program positionally: each call its own
    gradient."""
    return grad(layers_loss, "x")(params, x, act=np.sin), grad(layers_loss)(params, x, softsign)


def softsign(z):
    return z / (1.0 + np.abs(z))


def grad_with_a_closure_passed(params, x, scale):
    def act(z):
        return np.tanh(z) * scale
    return grad(layers_loss)(params, x, act)


def forward(params, x, act=np.tanh, reduce=True):
    """A flag choosing what the function returns: an array, or (by default) its sum."""
    h = layers_loss(params, x, act) * x
    return np.sum(h) if reduce else h


def grad_with_a_flag_default(params, x):
    return grad(forward, "x")(params, x), grad(forward, "x")(params, x, np.sin, reduce=True)


def grad_missing_an_argument(v):
    return grad(scaled_norm)(scale=1.0)


def squares_or_their_sum(x, reduce=True):
    """A flag default choosing between a scalar and an array."""
    y = x * x
    if reduce:
        return np.sum(y)
    return y


def loss_with_flags(x, w, mean=False, scale=2.0, mode="tanh"):
    y = (np.tanh(x * w) if mode == "tanh" else np.sin(x * w)) * scale
    return np.mean(y) if mean else np.sum(y)


# Outputs that are no float on every path, where the check of the output's type reaches
# only a backpropagator that ignores its argument (the gradient of a string is no value).
def recursion_to_a_string(x, n):
    if n == 0:
        return "done"
    return recursion_to_a_string(x, n - 1)


def while_loop_to_a_string(x, n):
    r = "a"
    while n > 0:
        r = r + "b"
        n = n - 1
    return r


def recursion_to_none_on_one_path(x, n):
    if n == 0:
        return None
    if n < 0:
        return x
    return recursion_to_none_on_one_path(x * 2.0, n - 1)
