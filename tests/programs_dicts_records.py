"""Test programs with dicts, NamedTuples and dataclasses: the containers a model's parameters
come in (tests/test_dicts_records.py compiles them and compares with CPython)."""

import dataclasses
from typing import NamedTuple

import numpy as np

import myir


class Layer(NamedTuple):
    W: np.ndarray
    b: np.ndarray


class Point(NamedTuple):
    x: float
    y: float = 0.5


@dataclasses.dataclass
class Dense:
    W: np.ndarray
    b: np.ndarray
    scale: float = 1.0


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: float
    b: float


# ------------------------------------------------------------------ dicts


def dict_literal(a, b):
    return {"W": a * 2.0, "b": b, 3: a - b}


def dict_keywords(a):
    return dict(x=a, y=a + 1.0)


def dict_index(d):
    return d["W"] * d["b"] + d[3]


def dict_contains(d):
    return "W" in d, "z" in d, "z" not in d, 2 in (1, 2, 3), 5 not in (1, 2)


def dict_views(d):
    ks, vs = d.keys(), d.values()
    return len(d), len(ks), "a" in ks, d.items()


def dict_get(d):
    return d.get("a") + d.get("z", 5.0), d.get("z")


def dict_copy_update(d):
    e = dict(d)
    e["c"] = e["a"] * 2.0
    e["a"] += 1.0
    f = d.copy()
    f["a"] = 0.0
    return e, f


def dict_update_in_loop(d):
    """A dict that gains a key each step of a loop of known length, then read."""
    e = {}
    for i in range(3):
        e[i] = d["a"] * i
    for k in ("u", "v"):
        if k != "v":
            e[k] = e[1] + d["a"]
        e[len(k)] += 1.0
    for k, v in d.items():
        e[k + "2"] = v * e[2]
    return e, e[2] * e["u"]


def dict_iterate(d):
    total = 0.0
    for k in d:
        total = total + d[k]
    names = ""
    for k, v in d.items():
        names = names + k
        total = total * v
    for v in d.values():
        total = total - v
    return total, names


def dict_comprehension(d):
    return {k: v * 2.0 for k, v in d.items()}


def dict_comprehension_if(d):
    return {k: d[k] + 1.0 for k in d if k != "b"}


def dict_comprehension_range(x):
    return {i: x * i for i in range(3)}


def dict_comprehension_zip(x, y):
    return {name: a * b for name, a, b in zip(("u", "v"), (x, y), (y, x))}


def dict_comprehension_enumerate(x):
    return {k: x ** i for i, k in enumerate(("a", "b", "c"))}


def dict_nested(p):
    return p["enc"]["W"] @ p["dec"][1] + p["dec"][0]


def dict_of_tuples_returned(x):
    return {"pair": (x, x + 1.0), "inner": {"z": x * x}}


# ------------------------------------------------------------------ records


def namedtuple_fields(layer, x):
    return x @ layer.W + layer.b, layer[0].shape, len(layer)


def namedtuple_unpack(layer):
    W, b = layer
    return np.sum(W) + np.sum(b)


def namedtuple_build(w, b):
    return Layer(w * 2.0, b=b), Point(3.0), Point(1.0, y=2.0)


def namedtuple_replace(p):
    return p._replace(y=p.x * 10.0)


def dataclass_fields(d, x):
    return (x @ d.W + d.b) * d.scale


def dataclass_build(w, b):
    return Dense(w, b), Dense(w, b, scale=3.0), Frozen(1.0, b=2.0)


def dataclass_replace(d):
    return dataclasses.replace(d, W=d.W * 2.0, scale=0.5)


def frozen_replace(f):
    return dataclasses.replace(f, a=f.a + f.b)


def records_nested(model, x):
    h = np.tanh(x @ model["hidden"].W + model["hidden"].b)
    return h @ model["out"]["W"]


# ------------------------------------------------------------------ gradients


def loss_dict(params, x):
    h = np.tanh(x @ params["W"] + params["b"])
    return np.sum(h * h) * params["scale"]


def loss_layer(layer, x):
    return np.sum(np.tanh(x @ layer.W + layer.b) ** 2)


def loss_dense(d, x):
    return np.sum(np.sin(x @ d.W + d.b)) * d.scale


def loss_frozen(f):
    return f.a * f.a * f.b


def loss_nested(model, x):
    h = np.tanh(x @ model["hidden"].W + model["hidden"].b)
    return np.sum((h @ model["out"]["W"]) ** 2) + model["out"]["c"][0] * model["out"]["c"][1]


def loss_built_inside(w, b, x):
    params = {"W": w, "b": b}
    layer = Layer(params["W"] * 2.0, params["b"])
    return np.sum(np.tanh(x @ layer.W + layer.b))


def loss_comprehension(params, x):
    scaled = {k: v * 2.0 for k, v in params.items()}
    e = dict(scaled)
    e["b"] = e["b"] + 1.0
    return np.sum(np.tanh(x @ e["W"] + e["b"]))


def loss_iterate(params):
    total = 0.0
    for k in params:
        total = total + np.sum(params[k] ** 2)
    for k, v in params.items():
        total = total + np.sum(v)
    return total + params.get("b")[0] * params.get("none", 1.0)


def grad_in_compiled(params, x):
    return myir.grad(loss_dict)(params, x)


def value_and_grad_in_compiled(layer, x):
    return myir.value_and_grad(loss_layer, "layer")(layer, x)


def grad_dict_and_array(params, x):
    return myir.grad(loss_dict, "params", "x")(params, x)


# ------------------------------------------------------------------ training loops


def mlp_loss(params, x, y):
    h = np.tanh(x @ params["W1"] + params["b1"])
    out = h @ params["W2"] + params["b2"]
    return np.mean((out - y) ** 2)


def mlp_grad_by_hand(params, x, y):
    """mlp_loss's gradient, derived by hand (the reference for the training loops)."""
    h = np.tanh(x @ params["W1"] + params["b1"])
    out = h @ params["W2"] + params["b2"]
    dout = 2.0 * (out - y) / out.size
    dh = (dout @ params["W2"].T) * (1.0 - h * h)
    return {"W1": x.T @ dh, "b1": np.sum(dh, axis=0), "W2": h.T @ dout,
            "b2": np.sum(dout, axis=0)}


def sgd_train(params, x, y, lr, steps):
    for _ in range(steps):
        g = myir.grad(mlp_loss)(params, x, y)
        params = {k: params[k] - lr * g[k] for k in params}
    return params


def sgd_train_reference(params, x, y, lr, steps):
    for _ in range(steps):
        g = mlp_grad_by_hand(params, x, y)
        params = {k: params[k] - lr * g[k] for k in params}
    return params


def adam_train(params, x, y, lr, steps):
    b1, b2, eps = 0.9, 0.999, 1e-8
    m = {k: v * 0.0 for k, v in params.items()}
    v = {k: p * 0.0 for k, p in params.items()}
    for t in range(1, steps + 1):
        loss, g = myir.value_and_grad(mlp_loss)(params, x, y)
        m = {k: b1 * m[k] + (1.0 - b1) * g[k] for k in params}
        v = {k: b2 * v[k] + (1.0 - b2) * g[k] ** 2 for k in params}
        params = {k: params[k] - lr * (m[k] / (1.0 - b1 ** t))
                  / (np.sqrt(v[k] / (1.0 - b2 ** t)) + eps) for k in params}
    return params, loss


def adam_train_reference(params, x, y, lr, steps):
    b1, b2, eps = 0.9, 0.999, 1e-8
    m = {k: v * 0.0 for k, v in params.items()}
    v = {k: p * 0.0 for k, p in params.items()}
    for t in range(1, steps + 1):
        loss, g = mlp_loss(params, x, y), mlp_grad_by_hand(params, x, y)
        m = {k: b1 * m[k] + (1.0 - b1) * g[k] for k in params}
        v = {k: b2 * v[k] + (1.0 - b2) * g[k] ** 2 for k in params}
        params = {k: params[k] - lr * (m[k] / (1.0 - b1 ** t))
                  / (np.sqrt(v[k] / (1.0 - b2 ** t)) + eps) for k in params}
    return params, loss


# ------------------------------------------------------------------ errors


def missing_key(d):
    return d["W"] + d["missing"]


def update_argument(d):
    d["W"] = 0.0
    return d


def update_alias(d):
    e = dict(d)
    f = (e,)
    e["W"] = 0.0
    return f


def comprehension_unknown_length(x, n):
    return {i: x for i in range(n)}


def dict_grown_in_unknown_loop(x, n):
    e = {}
    for i in range(n):
        e[i] = x * i
    return e


def key_not_constant(x, name):
    return {name: x}


def missing_field(layer):
    return layer.V


def method_of_user_class(layer, x):
    return layer.forward(x)


def dataclass_indexed(d):
    return d[0]


def update_a_copy(p, x):
    """`.copy()` of a dict argument, one of its keys updated."""
    d = p.copy()
    d["W"] = d["W"] * 2.0
    return np.sum(d["W"] * x) + d["b"]


def add_a_key_to_a_copy(p, x):
    d = p.copy()
    d["c"] = x * d["W"]
    return d["c"] * d["b"]


def loss_dict_grown_in_loop(p, x):
    """A dict built key by key in a loop over another dict's keys, differentiated."""
    scaled = {}
    for k in p:
        if k != "b":
            scaled[k] = p[k] * x
    total = 0.0
    for k, v in scaled.items():
        total = total + np.sum(v * v)
    return total + np.sum(p["b"]) * x


def dict_second_order(x):
    """`d[k] = v`, a dict comprehension and `.items()`, twice differentiable."""
    d = {"a": x, "b": x * x}
    d["a"] = d["a"] * d["b"]
    e = {k: v * x for k, v in d.items()}
    return e["a"] + e["b"] * e["a"]


def update_in_loop_over_items(x):
    """CPython's `d.items()` is a live view: the second iteration sees the update."""
    d = {"a": x, "b": 2.0 * x}
    for k, v in d.items():
        d["b"] = d["b"] - v
    return d["b"]


def update_in_loop_over_values(x):
    d = {"a": x, "b": 2.0 * x}
    for v in d.values():
        d["b"] += v
    return d["b"]


def dict_grown_in_while_loop(x):
    """A dict gaining a key each step of a `while` loop whose condition is known at each
    step: followed step by step, as a `for` loop over `range` of a constant is."""
    d = {}
    i = 0
    while i < 4:
        d[i] = x * i
        i += 1
    return sum(d.values()) + d[3], list(d)


def dict_grown_in_unknown_while_loop(x, n):
    d = {}
    i = 0
    while i < n:
        d[i] = x * i
        i += 1
    return d[2]


def key_not_constant_in_a_branch(x, name):
    """A key chosen at run time, in a branch that may not run: still an error before
    running (the dict's keys after the `if` would be wrong)."""
    d = {"a": x}
    if x > 0:
        d[name] = x
    return len(d)


def read_in_an_exclusive_branch(x, k):
    d = {"a": x}
    e = d
    if k == 0:
        d["b"] = 2.0 * x
    elif k == 1:
        return e["a"] * x
    return d["a"] * len(d)


def adam_in_place_train(params, x, y, lr, steps):
    """Adam written with updates in place of dicts the function owns (a copy of the
    parameters), the gradient taken inside the loop."""
    params = dict(params)
    m = {k: v * 0.0 for k, v in params.items()}
    v = {k: p * 0.0 for k, p in params.items()}
    for t in range(1, steps + 1):
        g = myir.grad(mlp_loss)(params, x, y)
        for k in params:
            m[k] = 0.9 * m[k] + 0.1 * g[k]
            v[k] = 0.999 * v[k] + 0.001 * g[k] ** 2
            params[k] = params[k] - lr * (m[k] / (1.0 - 0.9 ** t)) \
                / (np.sqrt(v[k] / (1.0 - 0.999 ** t)) + 1e-8)
    return params


def loss_sum_of_values(p, x):
    """sum() over a dict's values (a view at run time), differentiated."""
    d = {"u": p["W"] * x, "v": p["b"] * p["b"]}
    i = 0
    while i < 2:
        d[i] = p["W"] * i
        i += 1
    return np.sum(sum(d.values()))


def moments_updated_in_place(params, g):
    """A dict made by a comprehension (moments zeroed like the parameters) updated at the
    keys of another dict, in a loop over them: `m` is the function's own dict."""
    m = {k: np.zeros_like(p) for k, p in params.items()}
    for k in params:
        m[k] = 0.9 * m[k] + 0.1 * g[k]
        m[k] += g[k] * g[k]
    return m


def loss_moments(params, g):
    m = moments_updated_in_place(params, g)
    return sum(np.sum(v * v) for v in m.values())


def loss_sum_of_sums(p):
    """A float parameter whose gradient comes out of a loop over the dict's values as a
    numpy scalar: the gradient is a float, as the parameter is."""
    return sum(np.sum(v * 2.0) for v in p.values())


def update_under_a_keys_view(p):
    """`ks` is a live view: CPython's `list(ks)` has the key added after it was made."""
    d = dict(p)
    ks = d.keys()
    d["new"] = 2.0
    return list(ks)


def update_under_a_values_view(p):
    d = dict(p)
    vs = d.values()
    d["a"] = 5.0
    return sum(vs)


def update_after_a_copied_view(p):
    """A view copied (list()) or iterated before the update: the snapshot is CPython's."""
    d = dict(p)
    ks = list(d.keys())
    for k in d.keys():
        d[k] = d[k] * 2.0
    d["new"] = 1.0
    return ks, d


def dict_extrema(d):
    """min() and max() of a dict are of its keys (the first item is no `d[0]`), of a view
    of its items."""
    return min(d), max(d), min(d.values()), max(d.values()), min(d.keys())


def dict_spread(p, w):
    """`{**p, k: v}`: a copy of p with keys set (an existing key keeps its place)."""
    q = {**p, "W": w * 2.0, "c": 1.0}
    q["c"] += 1.0
    return q, p


def loss_spread(p, w):
    q = {**p, "W": p["W"] * w}
    return np.sum(q["W"] ** 2) * q["b"]


def dict_update_method(a):
    """`d.update({...})` and `d.update(k=v)` on the function's own dict."""
    e = {"a": a}
    e.update({"b": 2.0 * a})
    e.update(c=3.0, a=a * a)
    return e


def loss_extrema_of_values(p):
    """min() and max() of a dict's values (through list(d.values())), differentiated: a
    float parameter's gradient is a float."""
    return min(p.values()) * max(p.values()) + sum(list(p.values())) * p["a"]
