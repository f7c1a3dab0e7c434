"""The one binder of call arguments (myir/ir/signature.py) against CPython's own binding:
the same arguments where CPython accepts a call, and CPython's words where it refuses one."""

import inspect

import pytest

from myir.ir.signature import bind_arguments, shown_parameters

SIGNATURES = [((), {}), (("x",), {}), (("x", "y"), {}), (("x", "y"), {"y": 2.0}),
              (("x", "y", "z"), {"y": None, "z": False}), (("a",), {"a": 0})]
CALLS = [((), {}), ((1,), {}), ((1, 2), {}), ((1, 2, 3), {}), ((1, 2, 3, 4), {}),
         ((), {"x": 1}), ((1,), {"x": 1}), ((1,), {"y": 5}), ((), {"y": 5}),
         ((1,), {"w": 5}), ((), {"a": 3}), ((1,), {"z": True, "y": 0})]


def python_function(params, defaults):
    """def f(params with defaults): return the arguments as bound."""
    text = shown_parameters(params, defaults)
    namespace = {}
    exec(f"def f({text}):\n    return [{', '.join(params)}]", namespace)
    return namespace["f"]


class Refused(Exception):
    pass


def refuse(message):
    raise Refused(message)


@pytest.mark.parametrize("params, defaults", SIGNATURES)
@pytest.mark.parametrize("args, kwargs", CALLS)
def test_binds_as_cpython_does(params, defaults, args, kwargs):
    f = python_function(params, defaults)
    try:
        expected = f(*args, **kwargs)
    except TypeError as e:
        with pytest.raises(Refused) as refused:
            bind_arguments("f", params, defaults, list(args), kwargs, refuse)
        message = str(refused.value)
        if "missing" in str(e):     # CPython counts them: "missing 1 required positional..."
            assert message.startswith("f() missing required argument '") \
                and message.split("'")[1] in str(e)
        else:
            assert message == str(e)
        return
    assert bind_arguments("f", params, defaults, list(args), kwargs, refuse) == expected


def test_shown_parameters_is_a_signature_python_reads():
    for params, defaults in SIGNATURES:
        shown = shown_parameters(params, defaults)
        assert str(inspect.signature(python_function(params, defaults))) == f"({shown})"
