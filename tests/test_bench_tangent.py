"""`bench.tangent` on a functions.py of its own, written in the style of Tangent's (which is
not part of this repository): which functions it selects, and how it classifies results."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from bench import tangent

FUNCTIONS = textwrap.dedent('''
    import numpy as np

    import tangent
    from tangent import insert_grad_of

    try:
      import tensorflow as tf
    except ImportError:
      tf = None


    def _helper(a, b):
      return a * b


    def saxpy(a, b, c):
      return _helper(a, b) + c


    def vector_norm(x):
      return np.sqrt(np.sum(x * x))


    def power_loop(a, n):
      for i in range(n):
        a = a * a
      return a


    def writes_its_argument(x):
      x[0] = 2.0
      return np.sum(x)


    def pair(a):
      return a, 2.0 * a


    def with_runtime(a):
      with insert_grad_of(a) as g:
        g = g * 0.5
      return a * a


    def tfe_exp(t):
      return tf.exp(t)
''')


@pytest.fixture
def chosen(tmp_path):
    path = tmp_path / "functions.py"
    path.write_text(FUNCTIONS)
    return {fn.__name__: (fn, points) for fn, points in tangent.select(tangent.load(path))}


def test_selects_the_scalar_test_functions_that_need_neither_tensorflow_nor_tangent(chosen):
    assert sorted(chosen) == ["power_loop", "saxpy", "vector_norm", "writes_its_argument"]
    fn, points = chosen["saxpy"]
    assert len(points) == len(tangent.SCALARS) ** 3
    assert {n for _, n in chosen["power_loop"][1]} == set(tangent.INTS)


def test_classifies_passes_and_refusals(chosen):
    for name in ("saxpy", "vector_norm", "power_loop"):
        assert tangent.measure(*chosen[name], "python") == ("pass", "")
    category, detail = tangent.measure(*chosen["writes_its_argument"], "python")
    assert category == "refused" and "functions.py:" in detail


def test_a_value_of_another_type_is_wrong(chosen):
    fn, points = chosen["vector_norm"]
    with pytest.raises(tangent.Failure) as e:
        tangent.check_value(fn, lambda x: float(fn(x)), points[0])   # CPython: np.float64
    assert e.value.category == "wrong value"


def test_a_gradient_off_by_a_little_is_wrong(chosen):
    fn, points = chosen["vector_norm"]
    x = points[0][0]
    with pytest.raises(tangent.Failure) as e:
        tangent.check_gradient(fn, lambda x: x / np.linalg.norm(x) * (1 + 1e-3), (x,), (0,))
    assert e.value.category == "wrong gradient"
    tangent.check_gradient(fn, lambda x: x / np.linalg.norm(x), (x,), (0,))


def test_an_internal_exception_is_a_crash(chosen):
    fn, points = chosen["saxpy"]

    def broken(*args):
        raise KeyError("internal")
    with pytest.raises(tangent.Failure) as e:
        tangent.check_value(fn, broken, points[0])
    assert e.value.category == "crash" and "KeyError" in e.value.detail
