"""Values whose type depends on a branch, errors in branches that may not run, and numpy's
shape functions on any value (subjects in tests/programs_branches.py).

* `np.shape(x)`, `np.ndim(x)`, `np.size(x)` are numpy's functions: on a Python scalar, a
  tuple or an array they give what CPython gives (differential: `check`, on every backend),
  also passed as values and inside differentiated code.
* A variable the branches of an `if` give different types (an array and a tuple, a function
  and a number) may be returned, passed on, or used where each of its types works: compiled
  == CPython.  Used where one of its types fails, it is an error before anything runs, at the
  use, naming both types and pointing (in a note) at the branches.  A value that may be None
  is the exception: Python programs test it (`if y is None`) in ways inference does not
  follow, so the TypeError is CPython's, at run time.
* An operation certain to fail in a branch the arguments may not take is no error before
  running: the program runs as in CPython, which raises its own exception, with its own
  message, when (and only when) the branch runs.
"""

import inspect

import numpy as np
import pytest

import myir
from myir.errors import MyirTypeError
from passes.abstract import AArray, ATuple, AUnion, conforms
from tests import programs_branches as B
from tests.programs_check import check, jit  # noqa: F401
from tests.test_infer import run_typed, typed_graph

VECTOR = np.array([1.0, -2.0, 3.0])

# --------------------------------------------------------------------------------------------
# np.shape, np.ndim, np.size


@pytest.mark.parametrize("x", [2.0, 3, True, np.float32(1.5), (1.0, 2.0), ((1, 2), (3, 4)),
                               VECTOR, np.ones((2, 3)), np.zeros((0, 4), np.int64)],
                         ids=lambda x: type(x).__name__ + str(np.shape(x)))
def test_shape_functions_on_any_value(jit, x):
    check(jit, B.shape_ndim_size, x)


def test_shape_functions_as_values(jit):
    check(jit, B.shape_functions_as_values, np.ones((2, 3)))
    check(jit, B.shape_of_a_sum, 2.0, 1)
    check(jit, B.shape_of_a_sum, VECTOR, 1.0)


def test_shape_functions_in_a_gradient():
    """The gradient of a function using np.size/np.ndim of the value it differentiates, and
    of reshape's gradient rule (np.shape(x) of a Python float)."""
    assert myir.grad(B.scale_by_shape, backend="python")(2.5) == 1.0
    np.testing.assert_array_equal(myir.grad(lambda x: np.sum(B.scale_by_shape(x)),
                                            backend="python")(VECTOR), [3.0, 3.0, 3.0])
    assert myir.grad(lambda x: np.sum(np.reshape(x, (1, 1))), backend="python")(2.0) == 1.0


# --------------------------------------------------------------------------------------------
# Values of several types, used where each type works


LEGAL = [(B.array_or_pair, (VECTOR,)), (B.array_or_pair_through_a_helper, (VECTOR,)),
         (B.int_or_float, (VECTOR,)), (B.maybe_none, (VECTOR,)),
         (B.used_only_where_it_is_an_array, (VECTOR,))]


@pytest.mark.parametrize("fn, args", LEGAL, ids=[f.__name__ for f, _ in LEGAL])
@pytest.mark.parametrize("flag", [True, False])
def test_value_of_several_types_used_where_each_works(jit, fn, args, flag):
    check(jit, fn, *args, flag)


@pytest.mark.parametrize("fn, args", LEGAL, ids=[f.__name__ for f, _ in LEGAL])
def test_types_of_several_kinds_tell_the_truth(fn, args):
    """Each node of the typed program takes only values its type (a union) describes."""
    for flag in (True, False):
        graph = typed_graph(fn, args + (flag,))
        result = run_typed(graph, args + (flag,))
        assert conforms(result, graph.output.abstract)


def test_the_type_is_the_union_of_the_branches():
    graph = typed_graph(B.array_or_pair, (VECTOR, True))
    vector = AArray(np.dtype(np.float64), (3,))
    assert graph.output.abstract == AUnion((vector, ATuple((vector, vector))))


def test_maybe_none_fails_at_run_time_as_in_cpython(jit):
    check(jit, B.none_until_the_loop_runs, VECTOR, 2)
    check(jit, B.none_until_the_loop_runs, VECTOR, 0, raises=TypeError)


# --------------------------------------------------------------------------------------------
# Values of several types, used where one of them fails: errors before running


def _marked(fn, marker):
    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, text in enumerate(lines) if marker in text)


UNION_ERRORS = [
    (B.array_or_pair_scaled, B.array_or_pair_scaled,
     ("`y` is", "an array f64[3]", "a tuple (f64[3], f64[3])",
      "fails when it is a tuple (f64[3], f64[3]): can't multiply sequence by non-int of type "
      "'float'")),
    (B.function_or_number, B.function_or_number,
     ("`f` is", "a function", "an int", "fails when it is an int: 'int' object is not "
                                        "callable")),
    (B.array_or_number_indexed, B.array_or_number_indexed,
     ("an array f64[3]", "a float", "'float' object is not subscriptable")),
    (B.array_or_pair_in_a_helper, B.double_first_row,
     ("a tuple (f64[3], f64[3])", "'tuple' object has no attribute 'shape'")),
]


@pytest.mark.parametrize("fn, at, words", UNION_ERRORS, ids=[f.__name__ for f, _, _ in UNION_ERRORS])
@pytest.mark.parametrize("flag", [True, False])
def test_types_that_disagree_where_used_are_an_error_before_running(fn, at, words, flag):
    with pytest.raises(MyirTypeError) as info:
        myir.compile(fn, backend="python").lower(VECTOR, flag)  # lower runs nothing
    e = info.value
    for w in words:
        assert w in e.message, e.message
    assert "depending on the branch taken at" in e.message
    assert (e.location.filename, e.location.line) == (B.__file__, _marked(at, "# error"))
    ((where, note),) = e.notes
    assert (where.filename, where.line) == (B.__file__, _marked(fn, "# branches"))
    assert "different types" in note
    text = str(e)
    assert text.startswith(f"{e.location}: {e.message}\n")
    assert f"{where}: note: {note}" in text and f"hint: {e.hint}" in text
    assert text.count("^") >= 2  # a caret under the use, one under the branches


def test_union_error_text():
    """The whole message, as a user sees it."""
    with pytest.raises(MyirTypeError) as info:
        myir.compile(B.function_or_number, backend="python").lower(VECTOR, True)
    use, branches = _marked(B.function_or_number, "# error"), \
        _marked(B.function_or_number, "# branches")
    assert str(info.value) == (
        f"{B.__file__}:{use}:12: `f` is a function or an int, depending on the branch taken at "
        f"line {branches}, and this fails when it is an int: 'int' object is not callable\n"
        "        return f(x)  # error\n"
        "               ^^^^\n"
        f"{B.__file__}:{branches}:9: note: the branches here give `f` different types: a "
        "function or an int\n"
        "        f = np.sin if flag else 3  # branches\n"
        "            ^^^^^^^^^^^^^^^^^^^^^\n"
        "hint: give `f` one type on every branch (convert where they differ), or use it only "
        "where each of its types works")


# --------------------------------------------------------------------------------------------
# Operations certain to fail, in branches that may not run


RUN_TIME = [
    (B.matmul_mismatch_in_a_branch, (np.ones((3, 4)), np.ones((5, 6))), ValueError),
    (B.reshape_in_a_callee_of_a_branch, (VECTOR,), ValueError),
    (B.tuple_plus_number_in_a_branch, ((1, 2),), TypeError),
]


@pytest.mark.parametrize("fn, args, error", RUN_TIME, ids=[f.__name__ for f, _, _ in RUN_TIME])
def test_error_in_a_branch_is_raised_when_the_branch_runs(jit, fn, args, error):
    """Compiling succeeds; the branch not taken runs as in CPython; taken, it raises
    CPython's exception with CPython's message (check compares type and text)."""
    if jit(fn) is not fn:  # compiled: nothing is reported before running
        jit(fn).lower(*args, True)
    check(jit, fn, *args, False)
    check(jit, fn, *args, True, raises=error)


def test_error_in_a_loop_body_is_raised_when_the_loop_runs(jit):
    args = (VECTOR, np.ones(4))
    check(jit, B.broadcast_mismatch_in_a_loop, *args, 0)
    check(jit, B.broadcast_mismatch_in_a_loop, *args, 2, raises=ValueError)


def test_the_same_error_in_code_certain_to_run_is_reported_before_running():
    """What decides is whether the code certainly runs: with the flag a constant (a
    default), the branch is certain and the error is reported at compile time."""
    def always(a, b):
        return B.matmul_mismatch_in_a_branch(a, b, True)
    with pytest.raises(MyirTypeError) as info:
        myir.compile(always, backend="python").lower(np.ones((3, 4)), np.ones((5, 6)))
    assert "(3,4) and (5,6)" in info.value.message
    assert info.value.location.line == _marked(B.matmul_mismatch_in_a_branch, "ValueError only")


SIGNS = [(a, b) for a in (-1, 1) for b in (-10, -1, 1)]


@pytest.mark.parametrize("a, b", SIGNS)
def test_early_return_of_an_inlined_function_skips_the_code_after_its_if(jit, a, b):
    check(jit, B.early_return_inlined, 1.5, a, b)
    check(jit, B.early_return_inlined, 150.0, a, b)


def test_early_return_in_a_loop_and_its_gradient(jit):
    for signs in (SIGNS, SIGNS[::-1], [(1, -10), (1, 1)]):
        check(jit, B.early_return_inlined_in_a_loop, 0.7, signs)
    grad = myir.grad(B.early_return_inlined_in_a_loop, backend="python")
    h = 1e-6
    for signs in (SIGNS, [(1, -10), (1, 1), (-1, 1)]):
        fd = (B.early_return_inlined_in_a_loop(0.7 + h, signs)
              - B.early_return_inlined_in_a_loop(0.7 - h, signs)) / (2 * h)
        assert grad(0.7, signs) == pytest.approx(fd, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("k", [-1, 2, 7])
def test_code_after_an_if_reached_from_a_statement_in_a_loop(jit, k):
    check(jit, B.unused_comprehension_in_a_loop_branch, k)
