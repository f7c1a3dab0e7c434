"""Python lists in compiled code: values against CPython, gradients against finite
differences in the list's own structure, inference's types and located errors, and the
updates (`append`, `extend`, `pop`) compiled code refuses because CPython would change a list
another name or the caller sees.  Subjects are in tests/programs_lists.py."""

import re

import numpy as np
import pytest

import myir
from passes.abstract import AList, AScalar, join
from tests import programs_lists as L
from tests.programs_check import check, compile_fresh, jit  # noqa: F401
from tests.test_errors import raise_error
from tests.test_infer import output_type
from tests.test_grad_primitives import BACKEND, check_gradient, gradient, numerical_grad, \
    assert_grads_close

V = np.array([0.5, -1.5, 2.0])
W = np.array([0.3, -0.7])

VALUE_CASES = [
    (L.literal_index, (1.5, 2.0)),
    (L.literal_returned, (1.5,)),
    (L.empty_list, ()),
    (L.slices, ([1.0, 2.0, 3.0, 4.0],)),
    (L.concat_repeat, ([1.0, 2.0], 2)),
    (L.concat_repeat, ([1.0], 0)),
    (L.iterate, ([1.0, 2.0, 3.0],)),
    (L.iterate, ([],)),
    (L.zip_enumerate, ([1.0, 2.0, 3.0], [4.0, 5.0])),
    (L.append_loop, (1.5, 4)),
    (L.append_loop, (1.5, 0)),
    (L.append_extend_pop, (1.5,)),
    (L.copy_then_append, ([1.0, 2.0],)),
    (L.argument_copied_then_appended, ([1.0, 2.0],)),
    (L.comprehension, ([1.0, 2.0, 3.0], 0.5)),
    (L.comprehension, ((1, 2), 3)),
    (L.comprehension_if_nested, ([1.0, -2.0, 3.0], [1.0, 2.0])),
    (L.comprehension_scope, (7.0, [1.0, 2.0])),
    (L.nested_comprehension, (4,)),
    (L.sums, ([1.0, 2.0, 3.5], 0.25)),
    (L.sums, ((1, 2, 3), 1)),
    (L.int_sum, (5,)),
    (L.extrema, ([2.0, -1.0, 3.0, -1.0],)),
    (L.extrema, ((1, 5, 2),)),
    (L.conversions, ((1.0, 2.0), [3.0, 4.0])),
    (L.unpack, ([1.0, 2.0],)),
    (L.stack_of_list, ([V, V * 2.0], 0.5)),
    (L.atleast, (1.5, V)),
    (L.list_of_arrays_param, ([np.eye(3) * 0.5, np.ones((3, 3))], V)),
    (L.nested_param, ([(W, 1.0), (W * 2.0, 2.0)],)),
    (L.read_in_an_exclusive_branch, (1.5, 0)),
    (L.read_in_an_exclusive_branch, (1.5, 1)),
    (L.read_in_an_exclusive_branch, (1.5, 2)),
    (L.shared_in_an_exclusive_branch, (1.5, 0)),
    (L.shared_in_an_exclusive_branch, (1.5, 1)),
    (L.loss_slice_repeat_and_array, (0.7,)),
    (L.set_items, (1.5,)),
    (L.set_items_of_unknown_length, (1.5, 4)),
    (L.loss_slice_assignment, (0.7,)),
    (L.shape_list, (V,)),
    (L.sum_of_comprehension, ([1.0, -2.0, 3.0],)),
    (L.sum_of_comprehension, ([-1.0],)),
    (L.iterators_materialised, ([1.0, 2.0], (3.0, 4.5))),
    (L.comprehension_lengths, ([1.0, -2.0, 3.0], 0.5)),
    (L.comprehension_lengths, ([], 0.5)),
    (L.stacks_of_comprehensions, (V,)),
    (L.list_carried_by_a_loop, (V, 3)),
    (L.list_carried_by_a_loop, (V, 0)),
    (L.sorts, ([3.0, -1.0, 2.0, -3.0, 1.0, 0.0, -0.0],)),
    (L.sorts, ([2, -2, 1, True, -1],)),
    (L.sorts, ([float("nan"), 1.0, -0.5, float("nan"), 0.25],)),
    (L.sorts, ([],)),
    (L.sort_records, ([(1, 2.0), (0, 3.0), (1, 1.0), (0, 2.0)],)),
    (L.list_methods, ([3.0, -1.0, 2.0], 0.5)),
    (L.list_methods, ([], -0.5)),
    (L.atleast_many, (1.5, V, np.ones((2, 3)))),
    (L.sorted_of_iterators, ([2.0, -3.0, 1.0], [1.0, 0.0, 1.0])),
    (L.rows_appended, (V, [1.0, -2.0, 3.0])),
    (L.rows_appended, (V, [])),
]


@pytest.mark.parametrize("f, args", VALUE_CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_values_are_cpythons(jit, f, args):
    check(jit, f, *args)


@pytest.mark.parametrize("f, args, error", [
    (L.pop_empty, (0,), IndexError),
    (L.index_out_of_range, ([1.0, 2.0], 2), IndexError),
    (L.index_out_of_range, ([1.0, 2.0], -3), IndexError),
    (L.empty_min, (0,), ValueError),
    (L.remove_missing, ([1.0, 2.0],), ValueError),
    (L.sort_incomparable, (1.0,), TypeError),
], ids=lambda v: getattr(v, "__name__", ""))
def test_exceptions_are_cpythons(jit, f, args, error):
    check(jit, f, *args, raises=error)


def test_generated_code_is_natural():
    source = myir.compile(L.literal_returned, backend="python").lower(1.5).source
    assert "[a, a * a, [a, 1]]" in source, source
    source = myir.compile(L.append_loop, backend="python").lower(1.5, 3).source
    # in place: nothing else sees xs (the list the loop carries)
    assert re.search(r"^\s*xs\w*\.append\(a \* i\)$", source, re.M), source


def test_comprehension_over_a_long_list_is_a_loop():
    """A comprehension is a `while` loop appending in place (its variables are not carried
    out of it), so a long list neither recurses nor copies at each step."""
    xs = [float(i) for i in range(20000)]
    compiled = myir.compile(L.comprehension, backend="python")
    assert compiled(xs, 0.5) == L.comprehension(xs, 0.5)
    source = compiled.lower([1.0, 2.0], 0.5).source
    assert re.search(r"^\s*while .*:$", source, re.M) and ".append(" in source and "def " not in \
        source.split("\n", 1)[1], source


def test_types():
    assert repr(output_type(L.literal_returned, 1.5)) == "[float, float, [float, int=1]]"
    assert output_type(L.append_loop, 1.5, 4) == AList(None, AScalar(float))
    assert repr(output_type(L.append_loop, 1.5, 4)) == "list[float]"
    assert repr(output_type(L.append_extend_pop, 1.5)) == \
        "([float, float, float=3.0, float], float=4.0, float)"
    assert join(AList((AScalar(float),)), AList(())) == AList(None, AScalar(float))
    # updates of items keep the list's type: its items where the length is known
    assert repr(output_type(L.set_items, 1.5)) == "([float, float, float], int=3)"
    assert repr(output_type(L.set_items_of_unknown_length, 1.5, 4)) == "list[float]"
    assert repr(output_type(L.shape_list, V)) == "(f64[3,1], f64[2,2])"
    assert repr(output_type(L.sum_of_comprehension, [1.0, 2.0])) == "float | int=0"


def test_comprehensions_have_known_lengths():
    """A comprehension without `if` over values of a known number (a list or tuple of known
    length, `range` of a constant, `zip` of those) is a list of that length, and so is a
    list a loop over such values appends to at every step, so numpy's stacks of it have
    known shapes, and a loop that rebuilds a list with one keeps its length; not where an
    append is under an `if` or a step may `break`."""
    assert repr(output_type(L.comprehension_lengths, [1.0, -2.0, 3.0], 0.5)) == \
        "([float, float, float], [float, float, float], [float, float], list[float])"
    assert repr(output_type(L.comprehension_lengths, [], 0.5)) == \
        "([], [float, float, float], [], [])"
    assert repr(output_type(L.stacks_of_comprehensions, V)) == \
        "(f64[3,3], f64[3,3], f64[9], f64[3,3], f64[1,3,3], f64[9], f64[3,3])"
    assert repr(output_type(L.list_carried_by_a_loop, V, 3)) == "[f64[3], f64[3]]"
    assert repr(output_type(L.rows_appended, V, [1.0, -2.0])) == \
        "(f64[3,3], f64[3,3], list[float], list[float])"
    assert repr(output_type(L.atleast_many, 1.5, V, np.ones((2, 3)))) == \
        "(f64[1], f64[3], f64[2,3], (f64[1,1], f64[1,3]), (f64[1,3,1], f64[2,3,1], " \
        "f64[1,1,1]), f64[3])"


def test_sorted_lists_keep_their_length():
    assert repr(output_type(L.list_methods, [3.0, -1.0, 2.0], 0.5)) == \
        "[float, float, float, float, float, float]"
    assert repr(output_type(L.sorts, [3.0, 1.0]).items[-1]) == "[float, float]"


@pytest.mark.parametrize("xs, reverse, expected", [
    ([2.0, -1.0, 0.5], False, [100.0, 1.0, 10.0]),
    ([2.0, -1.0, 0.5], True, [1.0, 100.0, 10.0]),
    # ties keep their order, so each tied item has its own weight
    ([1.0, 1.0, 3.0], False, [1.0, 10.0, 100.0]),
    ([1.0, 1.0, 3.0], True, [10.0, 100.0, 1.0]),
])
def test_gradient_of_sorted_goes_back_through_the_permutation(xs, reverse, expected):
    """d/dxs of sum(w[k] * sorted(xs)[k]) is w at each item's place in the sorted list."""
    assert gradient(L.weighted_sorted, "xs")(xs, reverse) == expected


@pytest.mark.parametrize("f, args, needle", [
    (L.add_list_tuple, ([1.0], (2.0,)), "xs + t"),
    (L.add_tuple_list, ((2.0,), [1.0]), "t + xs"),
    (L.add_float_list, (2.0, [1.0]), "a + xs"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_concatenating_a_list_with_another_type_is_a_located_error(f, args, needle):
    """CPython's TypeError and message, reported before anything runs."""
    try:
        f(*args)
    except TypeError as e:
        message = str(e)
    err = raise_error(lambda: myir.compile(f, backend="python")(*args))
    assert message in str(err) and needle in str(err) and "programs_lists.py" in str(err)


# ------------------------------------------------------------------ gradients

GRADIENT_CASES = [
    (L.loss_of_list, ([0.5, -1.5, 2.0],)),
    (L.loss_comprehension, (0.7,)),
    (L.loss_append_pop, (0.7, 1.3)),
    (L.loss_stack, ([V, V * 2.0], np.array([0.2, 0.4, -0.3]))),
    (L.loss_layers, ([np.eye(3) * 0.5, np.full((3, 3), 0.2)], V)),
    (L.loss_conversions, ((0.5, 1.5), 2.0)),
    (L.loss_slices, ([0.5, -1.5, 2.0],)),
    (L.loss_grad_inside, ([0.5, -1.5, 2.0], 0.3)),
    (L.loss_numpy_of_lists, (0.7, V)),
    (L.loss_repeat, (0.7,)),
    (L.loss_slice_repeat_and_array, (0.7,)),
    (L.read_in_an_exclusive_branch, (0.7, 1)),
    (L.loss_slice_assignment, (0.7,)),
    (L.loss_set_items_of_unknown_length, (0.7, 3)),
    (L.loss_of_iterators, (0.7,)),
    (L.loss_stacks_of_comprehensions, (V,)),
    (L.loss_sorted, ([0.5, -1.5, 2.0],)),
    (L.loss_list_methods, (0.7,)),
    (L.loss_atleast_many, (1.5, V)),
    (L.loss_repeat_sorted_and_appended, ([0.5, -1.5, 2.0],)),
]


@pytest.mark.parametrize("f, args", GRADIENT_CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_gradients_are_finite_differences(f, args):
    check_gradient(f, args)


def test_gradient_of_a_list_is_a_list():
    got = gradient(L.loss_of_list)([0.5, -1.5, 2.0])
    assert type(got) is list and all(type(g) is float for g in got)
    inside = myir.compile(L.grad_of_list_inside, backend=BACKEND)([0.5, -1.5, 2.0])
    assert type(inside) is list
    assert_grads_close(inside, numerical_grad(L.loss_of_list, ([0.5, -1.5, 2.0],), 0))


def test_second_order_through_a_list():
    # loss_comprehension(a) = 8 a**2 + 3 a: its gradient inside compiled code, and that
    # gradient's own gradient
    a = 0.7
    assert myir.compile(L.second_order, backend=BACKEND)(a) == pytest.approx(16 * a + 3)
    assert gradient(L.second_order)(a) == pytest.approx(16.0)


# ------------------------------------------------------------------ refused updates

@pytest.mark.parametrize("f, args, needle, words", [
    (L.append_to_argument, ([1.0],), "xs.append(1.0)", ("argument", "xs = xs.copy()")),
    (L.append_to_alias, (1.0,), "xs.append(2.0)", ("the variable `ys`", "xs = xs.copy()")),
    (L.append_shared_in_tuple, (1.0,), "xs.append(2.0)", ("the tuple `t`",)),
    (L.pop_shared_by_a_function, (1.0,), "xs.pop()", ("the result of `identity()`",)),
    (L.append_to_element, (1.0,), "xs[0].append(1.0)", ("local variable",)),
    (L.append_in_branch_copy, ([1.0], True), "xs.append(1.0)", ("argument",)),
    (L.append_value_used, (1.0,), "ys.append(2.0)", ("statement",)),
    (L.sort_argument, ([1.0, 0.0],), "xs.sort()", ("argument `xs`", "xs = list(xs)")),
    (L.reverse_argument, ([1.0, 0.0],), "xs.reverse()", ("argument `xs`", "xs = list(xs)")),
    (L.insert_shared, (1.0,), "xs.insert(0, 1.0)", ("the variable `ys`", "xs = list(xs)")),
    (L.remove_in_a_tuple, (1.0,), "xs.remove(a)", ("the tuple `t`",)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_refused_updates_are_located(compile_fresh, f, args, needle, words):
    err = raise_error(lambda: compile_fresh(f)(*args))
    text = str(err)
    assert "programs_lists.py" in text and needle in text, text
    for word in words:
        assert word in text, (word, text)


def test_gradient_of_repeating_an_argument_is_a_located_error():
    """`xs * n` of a list argument: `mul` at parse time, whose gradient would not sum the
    copies' sensitivities; refused where it is, with the fix."""
    err = raise_error(lambda: myir.grad(L.repeat_argument, backend=BACKEND)([1.0, 2.0], 0.5))
    assert "xs * 2" in str(err) and "list(xs) * n" in str(err)
    assert myir.compile(L.repeat_argument, backend=BACKEND)([1.0, 2.0], 0.5) == 2.5


def test_sort_of_a_local_array_is_a_located_type_error():
    """numpy's `x.sort()` sorts in place; compiled code refuses it at the call, before
    running, with numpy's functional form."""
    err = raise_error(lambda: myir.compile(L.sort_local_array, backend=BACKEND)(V))
    assert isinstance(err, myir.MyirTypeError)
    assert "x.sort()" in str(err) and "programs_lists.py" in str(err)
    assert "x = np.sort(x)" in err.hint
