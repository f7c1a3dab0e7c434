"""Errors: every construct outside the subset raises a located `MyirSyntaxError` with a hint.

For each case in CASES (subjects in tests/programs_errors.py) the tests check that compiling
the function — at its first call, or at `.lower(...)` — raises the expected `MyirError`
subclass (never an internal KeyError/AttributeError/...), that `err.location` points at the
construct (file, 1-based line and column), that `str(err)` renders
`file:line:col: message`, the source line and a caret under the column, and `hint: ...`,
and that the message names the construct.  `test_case_is_well_formed` checks the expected
locations against Python's own parser and needs no compiler (`-k well_formed`).

LENIENT lists programs the design does not settle (closures over reassigned variables,
aliasing, big ints, builtins, ...): myir must behave exactly as CPython or raise a located
`MyirError` — a silent difference fails.
"""

import ast
import inspect
import linecache
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import numpy as np
import pytest

from tests import programs_errors as E
from tests.programs_check import Raised, assert_same, compile_fresh, compiled, run  # noqa: F401


@dataclass(frozen=True)
class Case:
    name: str
    func: object
    args: tuple
    needles: tuple  # text whose first occurrence in the function is an accepted location
    node: type  # the ast node the construct is (for the self-check)
    words: tuple  # the message names the construct: one of these occurs in it
    syntax: bool = True  # MyirSyntaxError (True) or any MyirError (False)

    def __str__(self):
        return self.name


MUTATION_WORDS = ("assign", "mutat", "item", "subscript", "setitem", "update", "in-place", "in place")
DROPPED_WORDS = ("drop", "discard", "result", "unused", "effect", "statement", "ignored")

CASES = [
    Case("try", E.try_stmt, (1.0,), ("try:",), ast.Try, ("try",)),
    Case("with", E.with_stmt, (1.0,), ("with np",), ast.With, ("with",)),
    Case("yield", E.yield_expr, (1.0,), ("yield x",), ast.Yield, ("yield", "generator")),
    Case("async_def", E.async_def, (1.0,), ("async def",), ast.AsyncFunctionDef, ("async", "coroutine")),
    Case("nested_async_def", E.nested_async_def, (1.0,), ("async def",), ast.AsyncFunctionDef, ("async", "coroutine")),
    Case("global", E.global_stmt, (1,), ("global COUNTER",), ast.Global, ("global",)),
    Case("nonlocal", E.nonlocal_stmt, (1,), ("nonlocal y",), ast.Nonlocal, ("nonlocal",)),
    Case("class_inside", E.class_inside, (1,), ("class Point",), ast.ClassDef, ("class",)),
    Case("setitem_param", E.setitem_param, (np.zeros(3),), ("x[0] = 1.0",), ast.Assign, MUTATION_WORDS),
    Case("augassign_item_param", E.augassign_item_param, (np.zeros(3),), ("x[0] += 1.0",), ast.AugAssign,
         MUTATION_WORDS),
    Case("append_param", E.append_param, ((1.0, 2.0),), ("t.append(1.0)",), ast.Call,
         ("append", "mutat", "method") + DROPPED_WORDS),
    Case("sort_param", E.sort_param, (np.array([3.0, 1.0, 2.0]),), ("x.sort()",), ast.Call,
         ("sort", "mutat", "method") + DROPPED_WORDS),
    Case("clear_local", E.clear_local, (1.0,), ("xs.clear()",), ast.Call, ("clear",)),
    Case("update_local", E.update_local, (1.0,), ("d.update(",), ast.Call, ("update",)),
    Case("linalg_eig", E.linalg_eig, (np.eye(2),), ("np.linalg.eig",), ast.Attribute,
         ("numpy.linalg.eig",)),
    Case("np_add_four_arguments", E.np_add_four_arguments, (np.ones(2),), ("np.add(",), ast.Call,
         ("np.add() takes 2 positional arguments but 4 were given",)),
    Case("fft_of", E.fft_of, (np.ones(2),), ("np.fft.fft",), ast.Attribute, ("numpy.fft.fft",)),
    Case("imported_eigen", E.imported_eigen, (np.eye(2),), ("eig(a)",), ast.Name,
         ("numpy.linalg.eig",)),
    Case("print_flush", E.print_flush, (1.0,), ("print(x, flush=True)",), ast.Call,
         ("print", "flush")),
    Case("dropped_call", E.dropped_call, (1.0,), ("np.sin(x)",), ast.Call, DROPPED_WORDS),
    Case("undefined_name", E.undefined_name, (1,), ("not_defined_anywhere",), ast.Name,
         ("not_defined_anywhere",)),
    Case("undefined_in_nested", E.undefined_in_nested, (1,), ("also_not_defined",), ast.Name,
         ("also_not_defined",)),
    Case("del", E.del_stmt, (1,), ("del y",), ast.Delete, ("del",)),
    Case("import", E.import_stmt, (1.0,), ("import math",), ast.Import, ("import",)),
    Case("import_from", E.import_from, (1.0,), ("from math",), ast.ImportFrom, ("import",)),
    Case("star_args", E.star_args, (1, 2), ("*args", "args)"), ast.arg,
         ("*args", "star", "variadic", "vararg", "args")),
    Case("star_kwargs", E.star_kwargs, (1,), ("**kwargs", "kwargs)"), ast.arg,
         ("**kwargs", "kwargs", "keyword", "variadic", "star")),
    Case("walrus", E.walrus, (1,), ("y := x",), ast.NamedExpr,
         (":=", "walrus", "assignment expression", "named expression")),
    Case("dict_comprehension", E.dict_comp, ((1, 2),), ("{v: w",), ast.DictComp, ("comprehension",)),
    Case("set_comprehension", E.set_comp, ((1, 2),), ("{v * 2",), ast.SetComp, ("comprehension",)),
    Case("dict_literal", E.dict_literal, ({"x": 1.0},), ('{"a": 1.0, **x}',), ast.Dict,
         ("dict",)),
    Case("set_literal", E.set_literal, (1.0,), ("{x, 1.0}",), ast.Set, ("set",)),
    Case("str_format_method", E.str_format_method, (1.0,), ('"x = {}".format',), ast.Call,
         ("str", "string", "format"), syntax=False),
]


def expected_locations(case):
    """(line, column) of each needle's first occurrence in the function, 1-based."""
    lines, start = inspect.getsourcelines(case.func)
    locations = []
    for needle in case.needles:
        for i, text in enumerate(lines):
            col = text.find(needle)
            if col >= 0:
                locations.append((start + i, col + 1))
                break
        else:
            raise AssertionError(f"{needle!r} is not in {case.func.__name__}")
    return locations


def source_file(func):
    return os.path.realpath(inspect.getsourcefile(func))


def raise_error(make):
    """Run `make()`; return the MyirError it raises.  Anything else fails the test."""
    import myir

    try:
        make()
    except myir.MyirError as err:
        return err
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"internal error escaped instead of a MyirError: {type(exc).__name__}: {exc}") from exc
    raise AssertionError("no error raised")


def assert_located(err, case):
    loc = err.location
    assert loc is not None, f"error has no location: {err}"
    assert os.path.realpath(loc.filename) == source_file(case.func), f"location in {loc.filename}"
    accepted = expected_locations(case)
    got = (loc.line, loc.column)
    assert got in accepted, (
        f"location {got} {linecache.getline(loc.filename, loc.line).rstrip()!r}; "
        f"expected one of {accepted}"
    )


def assert_rendered(err):
    """`file:line:col: message`, the source line, a caret under the column, `hint: ...`."""
    loc = err.location
    text = str(err)
    lines = text.splitlines()
    assert lines[0].startswith(f"{loc.filename}:{loc.line}:{loc.column}: "), lines[0]
    src = linecache.getline(loc.filename, loc.line).rstrip("\n")
    shown = [i for i, line in enumerate(lines[:-1]) if i > 0 and line.endswith(src)]
    assert shown, f"source line {src!r} not shown in:\n{text}"
    i = shown[0]
    at = len(lines[i]) - len(src) + loc.column - 1
    caret = lines[i + 1]
    assert caret[:at].strip() == "" and caret[at:at + 1] == "^", f"caret not under column {loc.column}:\n{text}"
    assert set(caret.strip()) == {"^"}, caret
    assert isinstance(err.hint, str) and err.hint.strip(), f"no hint: {text}"
    assert f"hint: {err.hint}" in text, text


def assert_kind(err, case):
    import myir

    if case.syntax:
        assert isinstance(err, myir.MyirSyntaxError), f"{type(err).__name__}, expected MyirSyntaxError: {err}"
    else:
        assert isinstance(err, myir.MyirError)


# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=str)
def test_case_is_well_formed(case):
    """The expected locations are where Python's parser puts the construct (no compiler)."""
    lines, start = inspect.getsourcelines(case.func)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    found = {
        (start + node.lineno - 1, node.col_offset + 1)
        for node in ast.walk(tree)
        if isinstance(node, case.node)
    }
    accepted = expected_locations(case)
    assert found & set(accepted), (found, accepted)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_error_at_call(compile_fresh, case):
    err = raise_error(lambda: compile_fresh(case.func)(*case.args))
    assert_kind(err, case)
    assert_located(err, case)
    assert_rendered(err)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_error_at_lower(compile_fresh, case):
    err = raise_error(lambda: compile_fresh(case.func).lower(*case.args))
    assert_kind(err, case)
    assert_located(err, case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_error_names_construct(compile_fresh, case):
    err = raise_error(lambda: compile_fresh(case.func)(*case.args))
    message = (getattr(err, "message", None) or str(err).splitlines()[0]).lower()
    assert any(w.lower() in message for w in case.words), f"{err.message!r} names none of {case.words}"


@pytest.mark.parametrize("func, args, message, hint", [
    (E.clear_local, (1.0,), "`.clear()` changes `xs` in place", "`xs = []`"),
    (E.update_local, (1.0,), "`.update()` changes `d` in place",
     "for k, v in dict(b=2.0 * a).items(): d[k] = v"),
    (E.sort_param, (np.ones(2),), "`x.sort()` would change the argument `x` in place",
     "x = np.sort(x)"),
], ids=["clear", "update", "sort"])
def test_methods_changing_their_object_say_what_to_write(compile_fresh, func, args, message,
                                                        hint):
    """Not "the result of this call is dropped": the call does something, in place."""
    err = raise_error(lambda: compile_fresh(func)(*args))
    assert message in err.message and hint in err.hint, (err.message, err.hint)


@pytest.mark.parametrize("func, message", [
    (E.class_inside, "class definitions are not supported in compiled functions"),
    (E.walrus, "assignment expressions (`:=`) are not supported in compiled functions"),
    (E.import_stmt, "imports are not supported in compiled functions"),
    (E.yield_expr, "generator functions are not supported"),
    (E.del_stmt, "`del` statements are not supported in compiled functions"),
], ids=["class", "walrus", "import", "yield", "del"])
def test_unsupported_construct_message_reads_as_a_sentence(compile_fresh, func, message):
    """Each message says its construct once, with a verb agreeing in number."""
    err = raise_error(lambda: compile_fresh(func)(1))
    assert err.message == message


def test_unsupported_numpy_function_is_named_in_full_with_a_hint(compile_fresh):
    err = raise_error(lambda: compile_fresh(E.linalg_eig)(np.eye(2)))
    assert err.message == "numpy.linalg.eig is not supported in compiled code"
    assert "np.linalg.eigh" in err.hint and "docs/numpy.md" in err.hint
    err = raise_error(lambda: compile_fresh(E.fft_of)(np.ones(2)))
    assert "unknown method" not in err.message
    err = raise_error(lambda: compile_fresh(E.imported_ufunc_reduceat)(np.ones(2)))
    assert err.message == "numpy.add.reduceat is not supported in compiled code"
    assert "np.add.reduce" in err.hint and ".outer" in err.hint
    err = raise_error(lambda: compile_fresh(E.where_of_condition_alone)(np.ones(2)))
    assert err.message.startswith("np.where(condition) with one argument (np.nonzero) is not")
    assert "np.where(condition, x, y)" in err.hint
    err = raise_error(lambda: compile_fresh(E.nonzero_of)(np.ones(2)))
    assert err.message == "numpy.nonzero is not supported in compiled code"
    assert "a mask in arithmetic" in err.hint


def test_every_unsupported_construct_message_says_compiled_functions_once(compile_fresh):
    for case in CASES:
        err = raise_error(lambda: compile_fresh(case.func)(*case.args))
        assert err.message.count("compiled function") <= 1, err.message
        assert " is not supported in compiled functions" not in err.message, err.message


def test_a_function_whose_source_changed_since_import_is_refused(compile_fresh, tmp_path):
    """Its code no longer matches the file's text: refused, located at the function, rather
    than compiled from whatever the file holds now."""
    path = tmp_path / "changed_source.py"
    path.write_text("def f(x):\n    return x + 1.0\n")
    module = {}
    exec(compile(path.read_text(), str(path), "exec"), module)
    path.write_text("def g(y):\n    return y\n\n\ndef f(x):\n    return x * 100.0\n")
    linecache.checkcache(str(path))
    err = raise_error(lambda: compile_fresh(module["f"])(2.0))
    assert "cannot find the source of 'f' exactly" in err.message
    assert (err.location.filename, err.location.line) == (str(path), 1)
    assert "import it again" in err.hint


def test_lambdas_on_one_line_without_column_positions_are_refused(tmp_path):
    """Without column positions (PYTHONNODEBUGRANGES) nothing tells two lambdas on one line
    apart: refused, while a function alone on its line still compiles."""
    path = tmp_path / "no_ranges.py"
    path.write_text(textwrap.dedent("""
        import myir
        fs = (lambda x: x + 1.0, lambda x: x * 10.0)
        def alone(x):
            return x * 2.0
        print(myir.compile(alone, backend="python")(2.0))
        try:
            myir.compile(fs[1], backend="python")(2.0)
        except myir.MyirError as e:
            print(e.location.line, e.message)
    """))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONNODEBUGRANGES": "1", "MYIR_CACHE_DIR": "off",
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "4.0", "3 cannot tell which of 2 definitions on this line is '<lambda>': Python runs "
        "without column positions"]


def test_undefined_name_raised_before_running(compile_fresh):
    """The undefined name is on a path the call does not take: still a compile-time error."""
    err = raise_error(lambda: compile_fresh(E.undefined_name).lower(1))
    assert "not_defined_anywhere" in str(err)


def test_error_for_every_call_not_only_the_first(compile_fresh):
    cf = compile_fresh(E.try_stmt)
    first = raise_error(lambda: cf(1.0))
    second = raise_error(lambda: cf(1.0))
    assert (first.location.line, first.location.column) == (second.location.line, second.location.column)


def test_a_closure_reading_a_function_defined_after_it_says_so(compile_fresh):
    """Nested functions that call each other: the first reads the second before it is
    defined, which Python allows (it reads the variable when it runs); myir captures at
    definition, so it refuses, at the later definition, and says what to write."""
    import inspect
    err = raise_error(lambda: compile_fresh(E.nested_mutual_recursion)(0.5, 3))
    lines, first = inspect.getsourcelines(E.nested_mutual_recursion)
    assert err.location.line == first + lines.index("    def odd(y, k):\n"), err
    assert "`even` (line" in str(err) and "first assigned here, after it" in str(err), err
    assert "top level" in err.hint


# --------------------------------------------------------------------------------------------
# Either CPython's behaviour exactly, or a located MyirError

LENIENT = [
    (E.closure_reassigned, [(1,), (2.5,)]),
    (E.closure_reassigned_def, [(1,)]),
    (E.closure_reassigned_in_loop, [(0,), (3,)]),
    (E.closure_reassigned_in_branch, [(1,), (-1,)]),
    (E.nested_mutual_recursion, [(0.5, 3), (0.5, 0)]),
    (E.augassign_aliased_array, [(np.array([1.0, 2.0]),)]),
    (E.loop_variable_after_empty_loop, [(3,), (0,)]),
    (E.big_int_power, [(10,), (70,)]),
    (E.big_int_factorial, [(25,)]),
    (E.int_overflow_in_loop, [(10,)]),
    (E.is_none, [(None,), (1,)]),
    (E.in_tuple, [(2,), (5,)]),
    (E.star_unpack, [((1, 2, 3),)]),
    (E.starred_call, [((1, 2, 3),)]),
    (E.keyword_only, [(1,), ((1,), {"b": 3})]),
    (E.string_constant, [(1,), (-1,)]),
    (E.generator_sum, [((1, 2, 3),)]),
    (E.np_array_of_list, [(2.0,)]),
    (E.boolean_mask, [(np.array([-1.0, 2.0, 3.0]),)]),
    (E.setitem_local_array, [(2.0,)]),
    (E.dropped_expression, [(1,)]),
    (E.match_stmt, [(0,), (1,)]),
    (E.builtins_len_abs_min_max, [((-3, 2),)]),
    (E.builtins_int_float, [(2.7,), (3,)]),
    (E.lambda_default_capture, [(2,)]),
    (E.shadowed_builtin, [(2,)]),
    (E.tuple_concat, [((5,),)]),
    (E.tuple_repeat, [((1, 2),)]),
    # strings are values of the subset (f-strings, % formatting): exact CPython results
    (E.fstring_value, [(1.0,), (-2,)]),
    (E.percent_format, [(1.0,)]),
]


def _calls(arg_sets):
    for item in arg_sets:
        if len(item) == 2 and isinstance(item[1], dict):
            yield item[0], item[1]
        else:
            yield item, {}


@pytest.mark.parametrize("func,arg_sets", LENIENT, ids=[f.__name__ for f, _ in LENIENT])
def test_no_silent_difference(compiled, func, arg_sets):
    import myir

    for args, kwargs in _calls(arg_sets):
        expected = run(func, args, kwargs)
        actual = run(compiled(func), args, kwargs)
        if isinstance(actual.result, Raised) and isinstance(actual.result.exc, myir.MyirError):
            err = actual.result.exc
            assert err.location is not None, f"MyirError without a location: {err}"
            assert os.path.realpath(err.location.filename) == source_file(func), str(err)
            if isinstance(err, myir.MyirSyntaxError):
                assert_rendered(err)
            return  # refused, with a located error: acceptable
        assert_same(actual.result, expected.result, f"{func.__name__}{args}")
        for i, (a, e) in enumerate(zip(actual.args, expected.args)):
            assert_same(a, e, f"argument {i} after the call")
