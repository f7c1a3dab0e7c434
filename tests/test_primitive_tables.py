"""Every concern that gives primitives a meaning is one table keyed by primitive name, and
every table covers every primitive of `myir.ir.primitives.PRIMITIVES` — or says why not.

To add a concern (gradient rules, type rules, TVM lowering, ...), add one entry to `TABLES`:

    "gradient rule": (set(passes.grad.RULES), {"raise_": "an effect: no gradient", ...}),

the parametrized tests then check it.
"""

import math

import numpy as np
import pytest

import myir
import passes.ad
import passes.forward
import passes.raising
import passes.type_rules
from backends.python import impls
from backends.tvm import lowering
from myir.ir.primitives import PRIMITIVES

# concern -> (names of the primitives the table implements,
#             {primitive: why the table does not need it})
TABLES: dict[str, tuple[set, dict[str, str]]] = {
    "python impl": (set(impls.SYNTAX) | set(impls.VARIADIC_SYNTAX) | set(impls.IMPLS), {}),
    "gradient rule": ({p for p in PRIMITIVES if passes.ad.has_gradient_rule(p)},
                      dict(passes.ad.NO_RULE)),
    "tangent rule": ({p for p in PRIMITIVES if passes.forward.has_tangent_rule(p)},
                     dict(passes.forward.NO_TANGENT_RULE)),
    "TVM lowering": (set(lowering.LOWERINGS), dict(lowering.KEPT_IN_NUMPY)),
    "type rule": (set(passes.type_rules.TYPE_RULES), {}),
    "raise rule": (set(passes.raising.RAISES), dict(passes.raising.CANNOT_RAISE)),
}


@pytest.mark.parametrize("concern", sorted(TABLES))
def test_table_covers_every_primitive(concern):
    names, exempt = TABLES[concern]
    missing = sorted(set(PRIMITIVES) - names - set(exempt))
    assert not missing, f"{concern}: no entry for {missing} (add one, or say why not)"


@pytest.mark.parametrize("concern", sorted(TABLES))
def test_table_names_no_unknown_primitive(concern):
    names, exempt = TABLES[concern]
    unknown = sorted(names - set(PRIMITIVES))
    assert not unknown, f"{concern}: entries for primitives that do not exist: {unknown}"


@pytest.mark.parametrize("concern", sorted(TABLES))
def test_table_exemptions_are_real_and_explained(concern):
    names, exempt = TABLES[concern]
    assert not sorted(set(exempt) - set(PRIMITIVES)), "exempts an unknown primitive"
    assert not sorted(set(exempt) & names), "exempts a primitive the table implements"
    for name, why in exempt.items():
        assert isinstance(why, str) and why.strip(), f"{concern}: no reason given for {name}"


def test_tables_check_something():
    # guards the parametrized tests above against an empty registry or table
    assert len(PRIMITIVES) > 50
    for concern, (names, _) in TABLES.items():
        assert names, concern


# --------------------------------------------------------------------------------------------
# The python backend's tables, in more detail


def test_python_tables_are_disjoint():
    """One implementation per primitive: as syntax, as variadic syntax, or as a callable."""
    syntax, variadic, calls = set(impls.SYNTAX), set(impls.VARIADIC_SYNTAX), set(impls.IMPLS)
    assert not syntax & variadic
    assert not syntax & calls
    assert not variadic & calls


def test_python_syntax_templates_match_arity():
    for name, template in impls.SYNTAX.items():
        prim = PRIMITIVES[name]
        assert not prim.varargs, name
        assert template.count("{}") == len(prim.params), (name, template, prim.params)


def test_python_variadic_syntax_is_for_variadic_primitives():
    for name, (open_, close) in impls.VARIADIC_SYNTAX.items():
        assert PRIMITIVES[name].varargs, name
        assert isinstance(open_, str) and isinstance(close, str)


def test_python_impls_are_callable_with_the_primitives_arity():
    for name, fn in impls.IMPLS.items():
        assert callable(fn), name
        prim = PRIMITIVES[name]
        if isinstance(fn, np.ufunc):
            assert fn.nin == len(prim.params), (name, fn.nin, prim.params)


# --------------------------------------------------------------------------------------------
# A primitive the user can name may be used as a value, not only called


def apply_to(f, x):
    return f(x)


def pass_len(x):
    return apply_to(len, x)


def pass_abs(x):
    return apply_to(abs, x)


def pass_float(x):
    return apply_to(float, x)


def pass_max(x):
    return apply_to(max, x)


def pass_np_shape(x):
    return apply_to(np.shape, x)


def pass_np_exp(x):
    return apply_to(np.exp, x)


def pass_math_sqrt(x):
    return apply_to(math.sqrt, x)


@pytest.mark.parametrize("fn, arg", [
    pytest.param(pass_len, (1, 2, 3)),
    pytest.param(pass_abs, -3),
    pytest.param(pass_float, 2),
    pytest.param(pass_max, (3, 9, 4)),
    pytest.param(pass_np_shape, np.zeros((2, 3))),
    (pass_np_exp, 0.5),
    (pass_math_sqrt, 2.0),
], ids=lambda v: getattr(v, "__name__", None))
def test_primitive_as_value(fn, arg):
    got = myir.compile(fn)(arg)
    want = fn(arg)
    assert type(got) is type(want) and got == want
