"""Subjects for tests/test_opt.py (the optimizer, passes/opt.py).

They live in a real file because myir reads source with `inspect.getsource`.

* Before/after pairs, one group per rewrite of `passes.opt.REWRITES` (and prune of
  `PRUNES`): `<rewrite>_before` optimizes to the same graph (up to isomorphism) as
  `<rewrite>_after`; programs where the rewrite must not fire say why.
* Programs in which each rewrite fires, run with and without the optimizer.
* Golden collapse programs (straight-line code whose optimized gradient should look
  hand-written) and, for each, `hand_<name>`: the gradient as one would write it by hand, in
  the compiled subset, returning what `myir.grad(f, *wrt)` returns (one gradient, or a tuple).
"""

import math

import numpy as np

from bench.workloads import programs as W

# --------------------------------------------------------------------------------------------
# getitem_of_tuple


def getitem_before(a, b, c):
    t = (a, b, c)
    return t[1] * t[-1] - t[0]


def getitem_after(a, b, c):
    return b * c - a


def getitem_nested_before(a, b):
    t = ((a, b), (b, a))
    return t[1][0] / t[0][0]


def getitem_nested_after(a, b):
    return b / a


def getitem_out_of_range(a, b):
    t = (a, b)
    return t[2]  # IndexError at run time: the getitem must stay


def _pair(a, b):
    return a, b


def unpack_before(a, b):
    p, q = _pair(a, b)
    r, s = b, a
    return p * s - q * r


def unpack_after(a, b):
    return a * a - b * b


# --------------------------------------------------------------------------------------------
# switch_on_constant


def switch_before(x):
    if True:
        y = x + 1.0
    else:
        y = x - 1.0
    return y


def switch_after(x):
    return x + 1.0


def switch_ifexp_before(x):
    return x * 2.0 if 0 else x - 3.0


def switch_ifexp_after(x):
    return x - 3.0


def _scaled(x, flag):
    if flag:
        return x * 2.0
    return -x


def switch_specialised_before(x):
    return _scaled(x, True) + _scaled(x, False)


def switch_specialised_after(x):
    return x * 2.0 + -x


# --------------------------------------------------------------------------------------------
# switch_equal_branches


def switch_equal_before(x, c):
    return (np.sin if c > 0.0 else np.sin)(x)


def switch_equal_after(x, c):
    return np.sin(x)


def switch_equal_keeps_check(x, c):
    if c > 0.0:
        y = 1.0
    return np.sin if y else np.sin  # UnboundLocalError for c <= 0.0: the switch stays


# --------------------------------------------------------------------------------------------
# neg_neg


def neg_neg_before(x):
    return -(-np.exp(x)) + -(-(x / 2.0))


def neg_neg_after(x):
    return np.exp(x) + x / 2.0


def neg_neg_bool(x, y):
    return -(-(x < y))  # 1 or 0, not True or False: stays


def add_zero_unknown_type(x):
    values = [x]
    values[0] += x
    # inference does not type the comparison of an updated list's element: bool + 0 is
    # an int, and an unknown type beside an unknown type is not the same type
    return (1.0 < values[0]) + 0


# --------------------------------------------------------------------------------------------
# specialize_call


def _apply_n(f, x, n):
    if n <= 0:
        return x
    return _apply_n(f, f(x), n - 1)


def specialize_before(x):
    return _apply_n(np.sin, x, 3) + _apply_n(np.sin, x, 2)


def _sin_n(x, n):
    if n <= 0:
        return x
    return _sin_n(np.sin(x), n - 1)


def specialize_after(x):
    return _sin_n(x, 3) + _sin_n(x, 2)


def _map_tuple(f, t):
    if len(t) == 0:
        return ()
    return (f(t[0]),) + _map_tuple(f, t[1:])


def specialize_map(x, y):
    a, b = _map_tuple(np.tanh, (x, y))
    return a * b


# --------------------------------------------------------------------------------------------
# drop_unused_parameters


def _count_down(n, unused):
    if n <= 0:
        return n
    return _count_down(n - 1, unused)


def unused_parameter_before(x, n):
    return _count_down(n, x * 2.0)


def _count_down_1(n):
    if n <= 0:
        return n
    return _count_down_1(n - 1)


def unused_parameter_after(x, n):
    return _count_down_1(n)


def _count_down_checked(n, unused):
    if n <= 0:
        return n
    return _count_down_checked(n - 1, unused)


def unused_parameter_effect(x, n):
    if x > 0.0:
        y = x
    return _count_down_checked(n, y)  # UnboundLocalError for x <= 0.0: y stays


# --------------------------------------------------------------------------------------------
# drop_unused_outputs and drop_unused_parameters through a loop: the loop returns its tuple
# from its exit, after its iterations; a value carried only for an unread element goes


def _count_and_double(x, n):
    i = 0
    while i < n:
        x = x * 2.0
        i = i + 1
    return i, x


def loop_carried_before(x, n):
    return _count_and_double(x, n)[0]


def _count(n):
    i = 0
    while i < n:
        i = i + 1
    return i


def loop_carried_after(x, n):
    return _count(n)


# --------------------------------------------------------------------------------------------
# constant_fold


def fold_before(x):
    return x * (2 + 3) + math.sqrt(4.0) - (7 // 2) * (1.5 < 2)


def fold_after(x):
    return x * 5 + 2.0 - 3


def fold_raises(x):
    return x + 1 / 0  # ZeroDivisionError at run time: not folded


def fold_math_domain(x):
    return x + math.log(0.0)  # ValueError at run time: not folded


# --------------------------------------------------------------------------------------------
# call_inline


def _double(a):
    return a * 2.0


def inline_before(x):
    return _double(x) + _double(x + 1.0)


def inline_after(x):
    return x * 2.0 + (x + 1.0) * 2.0


def inline_lambda_before(x):
    return (lambda y: y * y)(x + 1.0)


def inline_lambda_after(x):
    z = x + 1.0
    return z * z


def _fact(n):
    if n <= 1:
        return 1
    return n * _fact(n - 1)


def inline_recursive(x):
    return _fact(3) * x  # recursion is never inlined


def _reciprocal(a):
    return 1.0 / a


def inline_keeps_order(x):
    # CPython raises ZeroDivisionError for x = 0.0 (the call comes first), never ValueError
    y = _reciprocal(x)
    z = math.sqrt(x - 10.0)
    return y + z


# --------------------------------------------------------------------------------------------
# Common subexpression elimination


def cse_signed_zeros(x):
    return x * 0.0, x * -0.0  # (0.0, -0.0) for x = 1.0


def cse_before(x, y):
    a = np.sin(x) * y
    b = np.sin(x) * y
    return a + b


def cse_after(x, y):
    a = np.sin(x) * y
    return a + a


def cse_commuted_before(x, y):
    return np.sin(x) * y + y * np.sin(x)


def cse_commuted_after(x, y):
    a = np.sin(x) * y
    return a + a


def cse_add_does_not_commute(s, t):
    return (s + t, t + s)  # strings and tuples: two different values


# --------------------------------------------------------------------------------------------
# Programs whose optimization fires each rewrite (run with and without the optimizer)


def recursion_chain(x, n):
    """Its gradient's backpropagators are records on stacks (defunctionalise).  Two calls
    of itself: one would make it a linear recursion, which runs as loops
    (passes/linear_recursion.py)."""
    if n <= 0:
        return x
    y = recursion_chain(x, n - 1)
    return y * y * 0.5 + x * recursion_chain(x, n - 2)


def _too_big_to_inline(x):
    a = math.sin(x) * math.cos(x) + x * x
    b = math.exp(-a * a) + math.sin(a * x) * 0.5
    c = a * b + math.cos(b * b) - math.sin(a + b)
    d = c * c + a * b * c + math.tanh(c - a)
    e = d * a - b * c + math.sin(d) * math.cos(d * 0.5)
    return e * e + d


def tail_call_in_branch(x):
    """The backpropagator of the branch forwards to the one of the function it calls in
    tail position, which is called twice and too big to inline (closure_eta), once the
    branch returns its callee's pair (tuple_rebuilt)."""
    if x > 0.0:
        return _too_big_to_inline(x)
    return _too_big_to_inline(-x) * 2.0


def _applied(f, v):
    return f(v)


def env_closure(x, y):
    def inner(z):
        return z * x + y

    return _applied(inner, x * y)  # a closure passed as a value keeps its free variables


def gadd_compare(x):
    return x * x + (x > 0.0)


def scaled_first(a, b):
    return a * 2.0


def gadd_unused_operand(x):
    """x's gradient adds the zeros of b, which scaled_first does not read."""
    return scaled_first(x, x) + x * x


def fold_and_switch(x, n):
    if 2 > 1:
        return x * (n + (3 - 1))
    return x


def negations(x, y):
    """negation_absorbed (typed): x * -0.5, y + x, y - x (twice), -x, y * -2.0."""
    return -x * 0.5, y - -x, y + -x, -x + y, x * -1.0, 2.0 * -y


def negations_scalar(x, y):
    return -x * 0.5 + (y - -x) * (y + -x) + x * -1.0


def spread_rows(x, y):
    """spread_out (typed), in the gradient: the mask is a row, the ones its sum's
    gradient spreads are a matrix; where(mask, 0.0, ones) runs on the row."""
    mask = np.arange(4.0) < y
    return np.sum(np.where(mask, 0.0, np.ones((3, 4)) * x))


# --------------------------------------------------------------------------------------------
# Golden collapse programs (subjects) and their hand-written gradients


def poly_xy(x, y):
    return x ** 3 * y ** 4


def hand_poly_xy(x, y):
    return 3.0 * x ** 2 * y ** 4


def tuple_pair(x, y):
    a, b = x * y, x + y
    return a * b


def hand_tuple_pair(x, y):
    a, b = x * y, x + y
    return b * y + a, b * x + a


def hand_sincos(x):
    return -np.cos(np.cos(x)) * np.sin(x)


def hand_logsumexp(x):
    e = np.exp(x - np.max(x))
    return e / np.sum(e)


def hand_logreg(X, y, w, b):
    z = X @ w + b
    dz = -y / (1.0 + np.exp(y * z)) / z.shape[0]
    return X.T @ dz, np.sum(dz)


def hand_mlp(x, W1, b1, W2, b2, onehot):
    h = np.tanh(x @ W1 + b1)
    logits = h @ W2 + b2
    e = np.exp(logits - np.max(logits, axis=1, keepdims=True))
    p = e / np.sum(e, axis=1, keepdims=True)
    # rows of onehot need not sum to 1: d loss / d logits in general
    dlogits = (p * np.sum(onehot, axis=1, keepdims=True) - onehot) / x.shape[0]
    da = (dlogits @ W2.T) * (1.0 - h * h)
    return x.T @ da, np.sum(da, axis=0), h.T @ dlogits, np.sum(dlogits, axis=0)


def dict_item_before(x, y):
    return {"a": x, "b": y}["b"] * x


def dict_item_after(x, y):
    return y * x


def dict_update_before(x, y):
    d = {"a": x}
    d["b"] = y
    d["a"] = y * x
    return d


def dict_update_after(x, y):
    return {"a": y * x, "b": y}


def mlp_dict(params, x, onehot):
    """The benchmark's mlp with its parameters in a dict."""
    return W.mlp(x, params["W1"], params["b1"], params["W2"], params["b2"], onehot)


def hand_mlp_dict(params, x, onehot):
    dW1, db1, dW2, db2 = hand_mlp(x, params["W1"], params["b1"], params["W2"], params["b2"],
                                  onehot)
    return {"W1": dW1, "b1": db1, "W2": dW2, "b2": db2}


_C = 0.7978845608028654  # sqrt(2 / pi), as in norm_cdf
_K = 0.044715


def _cdf_and_pdf(x):
    t = np.tanh(_C * (x + _K * x * x * x))
    return 0.5 * (1.0 + t), 0.5 * (1.0 - t * t) * _C * (1.0 + 3.0 * _K * x * x)


def hand_blackscholes(S, K, T, r, sigma):
    sqT = np.sqrt(T)
    vs = sigma * sqT
    d1 = (np.log(S / K) + (r + 0.5 * sigma * sigma) * T) / vs
    # (indexing, not `P1, p1 = ...`: the optimizer does not simplify unpacking yet, and
    # the baseline should be the best a hand-written gradient can be)
    c1 = _cdf_and_pdf(d1)
    P1 = c1[0]
    p1 = c1[1]
    p2 = _cdf_and_pdf(d1 - vs)[1]
    disc = K * np.exp(-r * T)
    u = d1 / sigma
    return P1 + (S * p1 - disc * p2) / (S * vs), S * p1 * (sqT - u) + disc * p2 * u


def compose(f, g):
    return lambda x: f(g(x))


def compose_sincos(x):
    return compose(np.sin, np.cos)(x)


def hand_compose_sincos(x):
    return -np.cos(np.cos(x)) * np.sin(x)


def sigmoid_xent(z, t):
    s = W.sigmoid(z)
    return np.mean(-(t * np.log(s) + (1.0 - t) * np.log(1.0 - s)))


def hand_sigmoid_xent(z, t):
    return (W.sigmoid(z) - t) / z.size


def _sq(a):
    return a * a


def _cube(a):
    return _sq(a) * a


def nested_poly(x):
    return 3.0 * _cube(x) + 2.0 * _sq(x) + x


def hand_nested_poly(x):
    return 9.0 * _sq(x) + 4.0 * x + 1.0


def tanh_layer(w, b, x):
    return np.sum(np.tanh(w * x + b))


def hand_tanh_layer(w, b, x):
    t = np.tanh(w * x + b)
    d = 1.0 - t * t
    return d * x, d


def hand_hmlstm(c_prev, f, i, g, z1, z2):
    sf = W.sigmoid(f)
    si = W.sigmoid(i)
    tg = np.tanh(g)
    flush = z1 == 1.0
    update = (~flush) & (z2 == 1.0)
    live = flush | update
    dc_prev = np.where(update, sf, np.where(live, 0.0, 1.0))
    df = np.where(update, c_prev * sf * (1.0 - sf), 0.0)
    di = np.where(live, tg * si * (1.0 - si), 0.0)
    dg = np.where(live, si * (1.0 - tg * tg), 0.0)
    return dc_prev, df, di, dg


def _triple_plus_one(v):
    return v * 3.0 + 1.0


def called_through_a_tuple(x):
    pair = (_triple_plus_one, 1)
    return pair[0](x) + pair[0](2.0 * x)


def _chain_2(x):
    return x * x + 1.0


def _chain_1(x):
    return _chain_2(x * 0.5) * 2.0


def chain_called_once(x):
    return _chain_1(x) - x


# --------------------------------------------------------------------------------------------
# defunctionalise: a recursion written the way J writes its gradient, each call returning
# its value and its backpropagator, a closure calling its callees' backpropagators


def _walk_with_bprop(x, n):
    if n <= 0:
        def leaf_bprop(d):
            return d * x

        return x * x, leaf_bprop
    left = _walk_with_bprop(x, n - 1)
    right = _walk_with_bprop(x * 0.5, n - 2)
    left_bprop = left[1]
    right_bprop = right[1]

    def node_bprop(d):
        return left_bprop(d) + right_bprop(d) * 0.5

    return left[0] + right[0], node_bprop


def defunctionalise_before(x, n):
    return _walk_with_bprop(x, n)[1](1.0)


def _walk_calling_twice(x, n):
    if n <= 0:
        def leaf_bprop(d):
            return d * x

        return x * x, leaf_bprop
    left = _walk_calling_twice(x, n - 1)
    right = _walk_calling_twice(x * 0.5, n - 2)
    left_bprop = left[1]
    right_bprop = right[1]

    def node_bprop(d):
        return left_bprop(d) + left_bprop(d * 2.0) + right_bprop(d) * 0.5

    return left[0] + right[0], node_bprop


def defunctionalise_calling_twice(x, n):
    return _walk_calling_twice(x, n)[1](1.0)
