"""Dicts, NamedTuples and dataclasses in compiled code (programs in
tests/programs_dicts_records.py): values exactly CPython's on every backend (the `compiled`
fixture, tests/programs_check.py), gradients with respect to them equal to central finite
differences (float64) in the parameter's own structure, training loops over a dict of
parameters equal to CPython running the same loop with a gradient derived by hand, the
optimized gradient of a dict-parameter MLP as small as the positional one, and located
errors for what compiled code refuses."""

import numpy as np
import pytest

import myir
from bench.workloads import models, programs as W
from myir import tree
from myir.errors import MyirError
from passes.abstract import ADict, ARecord, abstract_of, conforms
from tests import programs_dicts_records as P
from tests.programs_check import check, compiled  # noqa: F401
from tests.test_grad_primitives import assert_grads_close

_rng = np.random.default_rng(7)


def _v(*shape):
    return _rng.normal(size=shape)


D = {"a": 2.0, "b": 3.0}

VALUE_CASES = [
    (P.dict_literal, 1.5, 0.5),
    (P.dict_keywords, 1.0),
    (P.dict_index, {"W": 2.0, "b": 3.0, 3: 1.0}),
    (P.dict_contains, {"W": 1.0}),
    (P.dict_views, D),
    (P.dict_get, D),
    (P.dict_copy_update, D),
    (P.dict_update_in_loop, D),
    (P.dict_iterate, D),
    (P.dict_comprehension, D),
    (P.dict_comprehension_if, D),
    (P.dict_comprehension_range, 2.0),
    (P.dict_comprehension_zip, 2.0, 3.0),
    (P.dict_comprehension_enumerate, 2.0),
    (P.dict_nested, {"enc": {"W": _v(2, 3)}, "dec": (_v(2), _v(3, 2))}),
    (P.dict_of_tuples_returned, 2.0),
    (P.namedtuple_fields, P.Layer(_v(3, 2), _v(2)), _v(4, 3)),
    (P.namedtuple_unpack, P.Layer(_v(3, 2), _v(2))),
    (P.namedtuple_build, _v(2), _v(2)),
    (P.namedtuple_replace, P.Point(1.0, 2.0)),
    (P.dataclass_fields, P.Dense(_v(3, 2), _v(2), 2.0), _v(4, 3)),
    (P.dataclass_build, _v(2), _v(2)),
    (P.dataclass_replace, P.Dense(_v(3, 2), _v(2), 2.0)),
    (P.frozen_replace, P.Frozen(1.0, 2.0)),
    (P.records_nested, {"hidden": P.Layer(_v(3, 2), _v(2)), "out": {"W": _v(2, 1)}}, _v(4, 3)),
    (P.dict_grown_in_while_loop, 1.5),
    (P.read_in_an_exclusive_branch, 1.5, 0),
    (P.read_in_an_exclusive_branch, 1.5, 1),
    (P.read_in_an_exclusive_branch, 1.5, 2),
    (P.update_after_a_copied_view, {"a": 1.0, "b": 2.0}),
    (P.dict_extrema, {0: -10.0, 1: 3.0, 2: 1.0}),
    (P.dict_spread, {"W": _v(2), "b": 0.5}, _v(2)),
    (P.dict_update_method, 1.5),
    (P.moments_updated_in_place, {"W": _v(2, 2), "b": 0.5}, {"W": _v(2, 2), "b": -1.5}),
]


@pytest.mark.parametrize("case", VALUE_CASES, ids=lambda c: c[0].__name__)
def test_values_are_cpythons(compiled, case):
    f, *args = case
    check(compiled, f, *args)


def test_dict_order_is_kept():
    """A dict comes back in its insertion order, which is not sorted order."""
    got = myir.compile(P.dict_copy_update, backend="python")({"b": 1.0, "a": 2.0})
    assert [list(d) for d in got] == [["b", "a", "c"], ["b", "a"]]


def test_abstract_values_describe_the_runtime_values():
    d = {"W": np.zeros((2, 3)), "n": 3}
    a = abstract_of(d, keep_values=False)
    assert isinstance(a, ADict) and a.keys == ("W", "n") and repr(a) == "{'W': f64[2,3], 'n': int}"
    assert conforms(d, a) and not conforms({"n": 3, "W": d["W"]}, a)
    r = abstract_of(P.Layer(np.zeros(2), np.ones(1)), keep_values=False)
    assert isinstance(r, ARecord) and repr(r) == "Layer(W=f64[2], b=f64[1])"


def test_a_dicts_items_are_its_keys():
    from tests.test_infer import output_type
    assert repr(output_type(P.dict_extrema, {0: -1.0, 1: 2.0})) == \
        "(int, int, float, float, int)"


def test_a_dict_of_other_keys_is_another_signature():
    f = myir.compile(P.dict_index, backend="python")
    assert f({"W": 2.0, "b": 3.0, 3: 1.0}) == 7.0
    assert f({3: 1.0, "b": 3.0, "W": 2.0}) == 7.0


# ------------------------------------------------------------------ gradients


def _fd(f, args, argnum, eps=1e-6):
    """Central differences of scalar f with respect to the float leaves of args[argnum],
    a tree: a gradient of its structure (non-float leaves get None)."""
    leaves, structure = tree.flatten(args[argnum])

    def at(i, value):
        new = list(leaves)
        new[i] = value
        a = list(args)
        a[argnum] = tree.unflatten(structure, new)
        return float(f(*a))

    grads = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, float):
            h = eps * max(1.0, abs(leaf))
            grads.append((at(i, leaf + h) - at(i, leaf - h)) / (2 * h))
        elif isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f":
            g = np.zeros_like(leaf)
            for j in np.ndindex(leaf.shape):
                h = eps * max(1.0, abs(leaf[j]))
                up, down = leaf.copy(), leaf.copy()
                up[j] += h
                down[j] -= h
                g[j] = (at(i, up) - at(i, down)) / (2 * h)
            grads.append(g)
        else:
            grads.append(None)
    return tree.unflatten(structure, grads)


def assert_tree_close(got, want):
    assert tree.structure(got) == tree.structure(want), (got, want)
    for a, b in zip(tree.leaves(got), tree.leaves(want)):
        if b is not None:
            assert type(a) is type(b) or isinstance(b, np.ndarray), (a, b)
            assert_grads_close(a, b)


GRAD_CASES = [
    (P.loss_dict, 0, {"W": _v(3, 2), "b": _v(2), "scale": 1.5}, _v(4, 3)),
    (P.loss_layer, 0, P.Layer(_v(3, 2), _v(2)), _v(4, 3)),
    (P.loss_dense, 0, P.Dense(_v(3, 2), _v(2), 0.7), _v(4, 3)),
    (P.loss_frozen, 0, P.Frozen(1.3, -0.4)),
    (P.loss_nested, 0, {"hidden": P.Layer(_v(3, 2), _v(2)),
                        "out": {"W": _v(2, 1), "c": (0.5, -1.5)}}, _v(4, 3)),
    (P.loss_built_inside, 0, _v(3, 2), _v(2), _v(4, 3)),
    (P.loss_comprehension, 0, {"W": _v(3, 2), "b": _v(2)}, _v(4, 3)),
    (P.loss_iterate, 0, {"W": _v(3, 2), "b": _v(2)}),
    (P.loss_dict_grown_in_loop, 0, {"W": _v(3, 2), "b": _v(2), "c": _v(2)}, 0.7),
    (P.loss_sum_of_values, 0, {"W": _v(2), "b": _v(2)}, 0.7),
    (P.loss_moments, 1, {"W": _v(2, 2), "b": 0.5}, {"W": _v(2, 2), "b": -1.5}),
    (P.loss_sum_of_sums, 0, {"s": 0.4, "w": _v(3)}),
    (P.loss_spread, 0, {"W": _v(2), "b": 0.5}, 1.5),
    (P.loss_extrema_of_values, 0, {"a": 0.5, "b": 1.5, "c": -0.3}),
]


@pytest.mark.parametrize("backend", ["python", "tvm"])
@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c[0].__name__)
def test_gradient_has_the_parameters_structure(case, backend):
    f, argnum, *args = case
    got = myir.grad(f, argnum, backend=backend)(*args)
    assert_tree_close(got, _fd(f, args, argnum))


def test_value_and_grad_of_a_record():
    layer, x = P.Layer(_v(3, 2), _v(2)), _v(4, 3)
    value, g = myir.value_and_grad(P.loss_layer, backend="python")(layer, x)
    assert value == pytest.approx(P.loss_layer(layer, x), rel=1e-14)
    assert type(g) is P.Layer
    assert_tree_close(g, _fd(P.loss_layer, (layer, x), 0))


@pytest.mark.parametrize("backend", ["python", "tvm"])
def test_grad_inside_compiled_code(backend):
    params, x = {"W": _v(3, 2), "b": _v(2), "scale": 1.5}, _v(4, 3)
    want = _fd(P.loss_dict, (params, x), 0)
    assert_tree_close(myir.compile(P.grad_in_compiled, backend=backend)(params, x), want)
    dp, dx = myir.compile(P.grad_dict_and_array, backend=backend)(params, x)
    assert_tree_close(dp, want)
    assert_grads_close(dx, _fd(P.loss_dict, (params, x), 1))
    layer = P.Layer(_v(3, 2), _v(2))
    value, g = myir.compile(P.value_and_grad_in_compiled, backend=backend)(layer, x)
    assert value == pytest.approx(P.loss_layer(layer, x), rel=1e-12)
    assert_tree_close(g, _fd(P.loss_layer, (layer, x), 0))


# ------------------------------------------------------------------ training loops


def _mlp_problem():
    params = {"W1": _v(3, 4), "b1": _v(4), "W2": _v(4, 2), "b2": _v(2)}
    return params, _v(6, 3), _v(6, 2)


def test_hand_derived_gradient_is_right():
    params, x, y = _mlp_problem()
    assert_tree_close(P.mlp_grad_by_hand(params, x, y), _fd(P.mlp_loss, (params, x, y), 0))


@pytest.mark.parametrize("backend", ["python", "tvm"])
def test_sgd_over_a_dict_in_a_compiled_loop(backend):
    params, x, y = _mlp_problem()
    got = myir.compile(P.sgd_train, backend=backend)(params, x, y, 0.1, 5)
    want = P.sgd_train_reference(params, x, y, 0.1, 5)
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", ["python", "tvm"])
def test_adam_over_a_dict_in_a_compiled_loop(backend):
    params, x, y = _mlp_problem()
    got, loss = myir.compile(P.adam_train, backend=backend)(params, x, y, 0.01, 4)
    want, want_loss = P.adam_train_reference(params, x, y, 0.01, 4)
    assert loss == pytest.approx(want_loss, rel=1e-10)
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-8, atol=1e-12)
    before = {k: v.copy() for k, v in params.items()}
    got = myir.compile(P.adam_in_place_train, backend=backend)(params, x, y, 0.01, 3)
    want = P.adam_in_place_train(params, x, y, 0.01, 3)    # CPython, its grad compiled alone
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-8, atol=1e-12)
        assert np.array_equal(params[k], before[k])


# ------------------------------------------------------------------ optimizer


CONTAINER_OPS = ("make_tuple", "getitem_grad", "gadd", "grad_cast", "grad_zeros", "switch",
                 "dict_setitem", "dict_cons", "children", "rebuild", "iter_keys")


def test_dict_mlp_gradient_is_as_small_as_the_positional_one():
    """The typed gradient of the MLP with a dict of parameters keeps no container operation
    but its result dict, and the applies of the positional one: the dict is taken apart on
    entry (its values are the graph's parameters, as the positional one's are)."""
    f32 = np.float32
    params = {"W1": _v(6, 5).astype(f32), "b1": _v(5).astype(f32),
              "W2": _v(5, 3).astype(f32), "b2": _v(3).astype(f32)}
    x, onehot = _v(4, 6).astype(f32), np.eye(3, dtype=f32)[[0, 2, 1, 1]]
    by_dict = myir.grad(models.mlp_dict, backend="python").lower(params, x, onehot).graph("typed")
    positional = myir.grad(W.mlp, 1, 2, 3, 4, backend="python").lower(
        x, *params.values(), onehot).graph("typed")
    stats, base = by_dict.stats(), positional.stats()
    left = {p: n for p, n in stats["primitives"].items() if p in CONTAINER_OPS}
    assert left == {} and stats["primitives"]["make_dict"] == 1, f"\n{by_dict}"
    assert "getitem" not in stats["primitives"] and len(by_dict.parameters) == 6
    assert stats["applies"] <= base["applies"]
    assert (stats["graphs"], stats["closures"]) == (1, 0)


def test_generated_code_is_natural_python():
    source = myir.grad(P.loss_built_inside, backend="python").lower(
        _v(3, 2), _v(2), _v(4, 3)).source
    assert "Layer(" not in source or "_make_record" not in source
    src = myir.compile(P.dataclass_fields, backend="python").lower(
        P.Dense(_v(3, 2), _v(2)), _v(4, 3)).source
    assert "d.W" in src and "d.scale" in src
    src = myir.compile(P.dict_literal, backend="python").lower(1.0, 2.0).source
    assert "{'W': " in src


# ------------------------------------------------------------------ errors


def _error(f, *args):
    with pytest.raises(MyirError) as info:
        myir.compile(f, backend="python")(*args)
    return str(info.value)


def test_missing_key_is_an_error_before_running():
    message = _error(P.missing_key, {"W": 1.0})
    assert "KeyError: 'missing' is not a key of `d` (its keys: 'W')" in message
    assert 'd["missing"]' in message and "programs_dicts_records.py" in message


def test_updating_an_argument_is_refused():
    d = {"W": 1.0}
    message = _error(P.update_argument, d)
    assert "`d`" in message and "d = d.copy()" in message and 'd["W"] = 0.0' in message
    assert d == {"W": 1.0}


def test_updating_a_dict_another_container_holds_is_refused():
    message = _error(P.update_alias, {"W": 1.0})
    assert "`e`" in message and "e = e.copy()" in message


@pytest.mark.parametrize("f, view", [(P.update_under_a_keys_view, "ks"),
                                     (P.update_under_a_values_view, "vs")])
def test_updating_a_dict_a_view_of_it_sees_is_refused(f, view):
    """A variable bound to `d.keys()` or `d.values()` is CPython's live view: read after
    the update it has the new keys and values, compiled code's would not."""
    message = _error(f, {"a": 1.0})
    assert f"the variable `{view}`" in message and "d = d.copy()" in message
    assert "programs_dicts_records.py" in message and 'd["' in message


@pytest.mark.parametrize("f, view", [(P.update_in_loop_over_items, "items"),
                                     (P.update_in_loop_over_values, "values")])
def test_updating_a_dict_inside_a_loop_over_its_view_is_refused(f, view):
    """CPython's later iterations see the update through the live view; compiled code
    would iterate over the old values (a silent wrong answer), so it is an error."""
    message = _error(f, 1.5)
    assert f"inside a loop over `d.{view}()`" in message and f"d.copy().{view}()" in message
    assert 'd["b"]' in message and "programs_dicts_records.py" in message


def test_comprehension_of_unknown_length_is_refused():
    message = _error(P.comprehension_unknown_length, 1.0, 3)
    assert "known when compiling" in message and "range(n)" in message


def test_dict_grown_in_a_loop_of_unknown_length_is_refused():
    message = _error(P.dict_grown_in_unknown_loop, 1.0, 3)
    assert "this loop adds keys to `e`" in message and "range(n)" in message
    assert "`range` of a constant" in message


def test_key_not_known_when_compiling_is_refused():
    message = _error(P.key_not_constant, 1.0, "k")
    assert "not known when compiling" in message and "{name: x}" in message
    message = _error(P.key_not_constant_in_a_branch, 1.0, "k")
    assert "not known when compiling" in message and "d[name] = x" in message


def test_dict_grown_in_a_while_loop_of_unknown_length_is_refused():
    message = _error(P.dict_grown_in_unknown_while_loop, 1.0, 3)
    assert "this loop adds keys to `d`" in message and "its condition is not known" in message
    assert "while i < n" in message and "`range` of a constant" in message


def test_missing_field_and_methods_of_user_classes():
    layer = P.Layer(_v(3, 2), _v(2))
    message = _error(P.missing_field, layer)
    assert "'Layer' object has no attribute 'V'" in message and "its fields: W, b" in message
    message = _error(P.method_of_user_class, layer, _v(4, 3))
    assert "`.forward()`" in message and "methods of your own classes" in message
    message = _error(P.dataclass_indexed, P.Dense(_v(3, 2), _v(2)))
    assert "'Dense' object is not subscriptable" in message and "p.W" in message


def test_a_key_of_a_copied_dict_is_updated_and_differentiated():
    p, x = {"W": np.array([1.0, -2.0]), "b": 0.5}, np.array([0.3, 0.7])
    assert myir.compile(P.update_a_copy)(p, x) == P.update_a_copy(p, x)
    g = myir.grad(P.update_a_copy)(p, x)
    assert list(g) == ["W", "b"]
    np.testing.assert_allclose(g["W"], 2.0 * x)
    assert g["b"] == 1.0 and type(g["b"]) is float


def test_a_key_added_to_a_copied_dict_is_differentiated():
    """`d = p.copy(); d["c"] = ...`: p's gradient has p's keys only."""
    p, x = {"W": 1.3, "b": -0.4}, 0.7
    assert myir.compile(P.add_a_key_to_a_copy)(p, x) == P.add_a_key_to_a_copy(p, x)
    got = myir.grad(P.add_a_key_to_a_copy, 0, 1)(p, x)
    assert_tree_close(got, (_fd(P.add_a_key_to_a_copy, (p, x), 0),
                            _fd(P.add_a_key_to_a_copy, (p, x), 1)))


def test_second_derivative_through_updates_comprehensions_and_items():
    """The gradient rules of `d[k] = v`, dict comprehensions and `.items()` are
    differentiable: grad of grad against finite differences of the gradient."""
    d1 = myir.grad(P.dict_second_order, backend="python")
    d2 = myir.grad(d1, backend="python")
    assert d2(0.7) == pytest.approx(_fd(d1, (0.7,), 0), rel=1e-6)
