"""Element and slice assignment on local values (`y[i] = v`, `y[a:b] = v`, `y[i, j] = v`,
`y[i] op= v`) and `op=` on fresh local arrays: compiled == CPython (tests/programs_check.py:
on every backend of MYIR_TEST_BACKENDS, and the arguments are never changed), gradients ==
finite differences, and every update CPython would make visible through another reference
is a located error naming the variable (frontend/ownership.py).  Subjects are in
tests/programs_element_updates.py."""

import inspect

import numpy as np
import pytest

import myir
from tests import programs_element_updates as U
from tests.programs_check import check, jit  # noqa: F401
from tests.test_errors import assert_rendered
from tests.test_grad_primitives import check_gradient, gradient, numerical_grad

x4 = np.array([0.5, -1.25, 2.0, 3.5])


@pytest.mark.parametrize("f, args", [
    (U.fill_loop, (7,)),
    (U.fill_loop, (0,)),
    (U.from_copy, (x4,)),
    (U.from_np_copy, (x4,)),
    (U.slices, (x4,)),
    (U.two_d, (3, 4)),
    (U.rows_and_columns, (x4,)),
    (U.element_ops, (x4,)),
    (U.int_array, (6,)),
    (U.recurrence, (x4,)),
    (U.running_total, (x4, 5)),
    (U.running_total, (2.5, 3)),
    (U.total_of_products_round_a_loop, (2.0,)),
    (U.total_of_products_round_a_loop, (0.0,)),
    (U.owned_name_ops, (x4,)),
    (U.in_branches, (x4, 2.0)),
    (U.in_branches, (x4, -2.0)),
    (U.read_before_update, (x4,)),
    (U.conditional_in_loop, (x4,)),
    (U.returns_old_and_new, (x4,)),
    (U.swap, (x4, 0, 3)),
    (U.tuple_swap, (x4,)),
    (U.overlapping, (x4,)),
    (U.until_negative, (x4,)),
    (U.until_negative, (np.array([1.0, 2.0, -1.0, 4.0]),)),
    (U.local_of_closure, (x4,)),
    (U.swap_in_loop, (x4[::-1].copy(),)),
    (U.rows_swap, (np.arange(6.0).reshape(2, 3),)),
    (U.extremum_read_after, (1.5,)),
    (U.read_in_the_other_branch, (x4, 0)),
    (U.read_in_the_other_branch, (x4, 1)),
    (U.view_made_in_the_other_branch, (x4, 0)),
    (U.view_made_in_the_other_branch, (x4, 1)),
    (U.fancy_updates, (x4,)),
    (U.nested_list_updates, (1.5,)),
    (U.grid_filled_in_loops, (1.5, 3)),
    (U.grid_filled_in_loops, (1.5, 0)),
    (U.list_of_arrays_updates, (np.array([0.5, -1.5, 2.0]),)),
    (U.dict_of_arrays_updates, (1.5,)),
    (U.array_row_updates, (1.5,)),
    (U.element_passed_on_then_updated, (0.5,)),
    (U.element_of_a_dict_bound_then_updated, (1.5, 0.25)),
    (U.element_of_a_dict_bound_then_updated, (0.0, 0.0)),
    (U.elements_kept_after_replacing, (1.5,)),
    (U.own_list_element_extended, (1.5,)),
    (U.concatenated_lists_updated, (1.5,)),
    (U.nested_update_of_a_dead_copy, (1.5,)),
    (U.nested_update_of_rows_added, (1.5,)),
], ids=lambda v: getattr(v, "__name__", None))
def test_values_match_cpython(jit, f, args):
    check(jit, f, *args)


def test_an_update_keeps_the_arrays_type():
    """Whatever the index and value inference knows of (an index list, a mask)."""
    from tests.test_infer import output_type
    assert repr(output_type(U.fancy_updates, x4)) == "f64[4]"


def test_index_out_of_range_raises_cpythons_error(jit):
    check(jit, U.out_of_range, 3, raises=IndexError)


@pytest.mark.parametrize("f, v, raises", [
    (U.int_slice_in_place, 2.5, np._core._exceptions.UFuncTypeError),
    (U.int_element_in_place, 2.5, None),
    (U.int_slice_assigned, 2.5, None),
    (U.int_slice_divided, 2, np._core._exceptions.UFuncTypeError),
    (U.float32_slice_in_place, x4, None),
    (U.bool_slice_in_place, 1, np._core._exceptions.UFuncTypeError),
], ids=lambda v: getattr(v, "__name__", None))
def test_in_place_update_of_an_indexed_part_keeps_its_dtype(jit, f, v, raises):
    """numpy's own casting: `y[a:b] op= v` is numpy's in-place operator on the part
    (its error, with its message, where the result does not fit the dtype), `y[i] op= v`
    and `y[a:b] = v` cast on assignment."""
    check(jit, f, v, raises=raises)


@pytest.mark.parametrize("f, args", [
    (U.fill_loop, (5,)),
    (U.two_d, (3, 4)),
    (U.conditional_in_loop, (x4,)),
    (U.rows_and_columns, (x4,)),
], ids=lambda v: getattr(v, "__name__", None))
def test_updates_of_dead_arrays_are_written_in_place(f, args):
    """Each update writes into the array it replaces, which nothing else sees: in loops,
    under an `if`, in nested loops (no copy per iteration: O(n), not O(n^2))."""
    source = myir.compile(f).lower(*args).source
    assert "_setitem(" not in source and "] = " in source, source


def test_appends_to_a_dead_list_are_made_in_place():
    """`xs.append(v)` and `xs.extend(ys)` on a list nothing else sees write into it (O(n)
    for a loop of n appends, not O(n^2)); values are CPython's."""
    source = myir.compile(U.append_loop, backend="python").lower(7).source
    assert ".append(" in source and ".extend(" in source and "+ [" not in source, source
    assert myir.compile(U.append_loop, backend="python")(7) == U.append_loop(7)


def test_update_of_a_value_read_later_copies():
    """`y` is read after `z = y.copy(); z[1] = 4.0`: that update is no write into y."""
    x = x4.copy()
    y, z = myir.compile(U.returns_old_and_new)(x)
    assert y[1] == x4[1] and z[1] == 4.0 and np.array_equal(x, x4)


@pytest.mark.parametrize("f, args", [
    (U.squares_sum, (x4,)),
    (U.slice_from_scalar, (x4, 0.75)),
    (U.element_aug, (x4,)),
    (U.recurrence_loss, (x4,)),
    (U.np_copy_loss, (x4,)),
    (U.running_total_loss, (x4, 4)),
    (U.running_total_loss, (1.5, 3)),
    (U.powers, (1.3,)),
    (U.matrix_fill, (np.array([0.3, -0.7, 1.1]),)),
    (U.loss_nested_updates, (0.7, np.array([0.5, -1.5, 2.0]))),
    (U.element_passed_on_then_updated, (0.5,)),
    (U.element_of_a_dict_bound_then_updated, (1.5, 0.25)),
], ids=lambda v: getattr(v, "__name__", None))
def test_gradients_match_finite_differences(f, args):
    check_gradient(f, args)


def test_second_order_of_array_updates():
    check_gradient(U.squares_hvp, (x4, np.array([0.2, -0.4, 1.0, 0.5])), wrt=(0,))


@pytest.mark.parametrize("a", [0.7, -1.3])
def test_second_order(a):
    d2 = myir.grad(myir.grad(U.powers))
    assert d2(a) == pytest.approx(2.0 + 6.0 * a, rel=1e-12)
    d1 = gradient(U.powers)
    assert d2(a) == pytest.approx(numerical_grad(d1, (a,), 0), rel=1e-6)


def _error_line(f) -> int:
    lines, first = inspect.getsourcelines(f)
    return first + next(i for i, line in enumerate(lines) if line.rstrip().endswith("# error"))


def _located_error(f, args, words):
    """The MyirError compiling f for args raises: at f's `# error` line, rendered with its
    source line and caret, its message holding every one of `words`."""
    with pytest.raises(myir.MyirError) as info:
        myir.compile(f)(*args)
    err = info.value
    assert err.location.line == _error_line(f), str(err)
    assert_rendered(err)
    for word in words:
        assert word in err.message, err.message
    return err


@pytest.mark.parametrize("f, args, words", [
    (U.into_argument, (x4,), ["argument `x`", "caller's data is never changed"]),
    (U.into_alias_of_argument, (x4,), ["argument `x`"]),
    (U.view_read_after, (x4,), ["`y`", "`z` (line"]),
    (U.view_read_in_the_next_iteration, (x4,), ["`y`", "`z` (line", "next iteration"]),
    (U.other_name_read_after, (x4,), ["`y`", "`z` (line"]),
    (U.transpose_read_after, (np.ones((2, 2)),), ["`y`", "`z` (line"]),
    (U.tuple_read_after, (x4,), ["`y`", "the tuple `t`"]),
    (U.function_result_read_after, (x4,), ["`y`", "the result of `ident()`"]),
    (U.nested_element, (x4,), ["`y[i][j][k] = v`"]),
    (U.into_global, (1.0,), ["`GLOBAL`", "not a local variable"]),
    (U.loop_alias, (x4, 2), ["`y`", "`z` (line"]),
    (U.view_carried_round_a_loop, (x4,), ["`y`", "`w` (line"]),
    (U.stored_in_a_list, (1.0,), ["`y`", "the container it was stored in (line"]),
    (U.stored_in_a_dict, (1.0,), ["`y`", "the container it was stored in (line"]),
    (U.appended_to_a_list, (1.0,), ["`y`", "the container it was stored in (line"]),
    (U.view_made_in_a_branch_read_in_the_next_iteration, (x4,), ["`y`", "`z` (line"]),
    (U.view_read_in_the_other_branch_of_a_later_iteration, (x4,), ["`y`", "`z` (line"]),
    (U.view_made_in_the_loop_returned_after_it, (x4,), ["`y`", "`z` (line"]),
    (U.list_read_through_another_name, (1.0,), ["`y`", "`z` (line"]),
    (U.list_stored_in_a_list, (1.0,), ["`y`", "the container it was stored in (line"]),
], ids=lambda v: getattr(v, "__name__", None))
def test_shared_update_is_a_located_error(f, args, words):
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    err = _located_error(f, args, words)
    hint = "x = x.copy()" if "argument" in err.message else \
        "y[i, j, k] = v" if f is U.nested_element else "GLOBAL" if f is U.into_global \
        else "y = y.copy()"
    assert hint in err.hint, err.hint
    for a, b in zip(args, before):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("f, offset, held", [
    (U.row_view_read_after, -1, "`t`"),
    (U.rows_tuple_swap, 0, "this element"),
], ids=lambda v: getattr(v, "__name__", None))
def test_row_view_used_after_an_update_is_a_located_error(f, offset, held):
    """`t = y[0]` is a row of a 2-D array: a view that sees `y[0] = ...` (for a 1-D array
    it is a number, tuple_swap and swap above); inference knows."""
    with pytest.raises(myir.MyirError) as info:
        myir.compile(f)(np.arange(6.0).reshape(2, 3))
    err = info.value
    assert err.location.line == _error_line(f) + offset, str(err)
    assert_rendered(err)
    assert f"{held} is a view into `y`" in err.message and "y[...].copy()" in err.hint


@pytest.mark.parametrize("f, args, words", [
    (U.shape_mismatch, (np.ones(3),), ["could not broadcast", "(3,)", "(2,)"]),
    (U.into_tuple, (1.0,), ["'tuple' object does not support item assignment"]),
], ids=lambda v: getattr(v, "__name__", None))
def test_type_errors_of_updates_are_located(f, args, words):
    _located_error(f, args, words)


def test_augmented_argument_keeps_its_runtime_check():
    """`x += 1.0` on an argument: a number is fine, an array is refused when it runs."""
    def bump(x):
        x += 1.0
        return x
    assert myir.compile(bump)(2.0) == 3.0
    with pytest.raises(myir.MyirError, match="shared"):
        myir.compile(bump)(x4.copy())


def test_an_array_stored_in_a_list_after_its_update():
    assert myir.compile(U.stored_after_the_update)(3.0) == 3.0


def test_updates_of_list_elements_and_dict_keys():
    assert myir.compile(U.list_updates)(1.5, 3) == U.list_updates(1.5, 3)
    d = gradient(U.list_updates)(1.5, 3)
    assert d == pytest.approx(numerical_grad(U.list_updates, (1.5, 3), 0), rel=1e-7)


@pytest.mark.parametrize("f, args, words", [
    (U.nested_update_aliased_rows, (1.0,), ["element of `y`", "`r` (line"]),
    (U.nested_update_repeated_rows, (1.0,), ["element of `y`", "`xs * n` (line"]),
    (U.nested_update_element_read_after, (1.0,), ["element of `y`", "`r`, an element of `y`"]),
    (U.nested_update_copied_argument, ([[1.0, 2.0]], 1.0), ["element of `y`", "argument `xs`"]),
    (U.nested_update_row_used_twice, (1.0,), ["element of `y`", "`row` (line"]),
    (U.nested_update_one_array_appended, (1.0, 2), ["element of `y`", "`row` (line"]),
    (U.nested_update_of_a_concatenation, (1.0,), ["element of `y`", "`r` (line"]),
    (U.nested_update_of_a_copy_read_after, (1.0,), [
        "element of `g`", "copied from",
        f"`d` (line {inspect.getsourcelines(U.nested_update_of_a_copy_read_after)[1] + 1})"]),
], ids=lambda v: getattr(v, "__name__", None))
def test_update_of_a_shared_element_is_a_located_error(f, args, words):
    """`y[i][j] = v` changes the element y[i] in CPython: where that element may be seen
    other than through y, compiled code (which makes new values) would differ: refused."""
    err = _located_error(f, args, words)
    assert "give each element its own copy" in err.hint, err.hint


def test_nested_update_of_an_argument_is_a_located_error():
    xs = [[1.0, 2.0]]
    err = _located_error(U.nested_update_argument, (xs, 1.0), ["argument `xs`"])
    assert "xs = [row.copy() for row in xs]" in err.hint, err.hint
    assert xs == [[1.0, 2.0]]


@pytest.mark.parametrize("f, words", [
    (U.list_element_extended_read_after, ["`xs[0]`", "`a`, an element of `xs`"]),
    (U.one_array_twice_in_a_list, ["`rows[0]`", "`arr` (line"]),
    (U.rows_of_an_array_in_a_list, ["`rows[0]`", "`reshape` may return a view"]),
    (U.concatenation_element_extended, ["`y[0]`", "`xs` (line"]),
], ids=lambda v: getattr(v, "__name__", None))
def test_augmented_update_of_a_shared_mutable_element_is_a_located_error(f, words):
    """`y[i] op= v` changes y[i] itself where it is a list or an array: where that element
    may be seen other than through y, compiled code (which makes a new value) would differ:
    inference refuses it (a number element gets the plain operator)."""
    err = _located_error(f, (1.0,), words + ["in place", "augmented assignment"])
    item = words[0].strip("`")
    assert f"{item} = {item} <op> v" in err.hint, err.hint
