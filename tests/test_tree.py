"""myir.tree: taking containers apart and rebuilding them, for every kind of container."""

import dataclasses
import doctest
from typing import NamedTuple

import numpy as np
import pytest

from myir import tree


class Pair(NamedTuple):
    w: object
    b: object


@dataclasses.dataclass
class Layer:
    W: object
    b: object
    scale: float = 1.0


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: object
    n: int = dataclasses.field(default=0, init=False)


TREES = [
    1.0,
    (1.0, 2),
    [np.ones(2), (3.0, [4.0])],
    {"W": np.eye(2), "b": np.zeros(2), "nested": {"c": 5.0}},
    Pair(np.ones(3), 2.0),
    Layer(np.ones((2, 2)), np.zeros(2)),
    [{"W": 1.0, "b": 2.0}, Layer(3.0, 4.0, 5.0)],
    (),
    {},
]


def same(a, b) -> bool:
    if tree.kind(a) is tree.LEAF:
        return type(a) is type(b) and np.array_equal(a, b)
    return (tree.kind(a) is tree.kind(b) and tree.keys(a) == tree.keys(b)
            and all(same(x, y) for x, y in zip(tree.children(a), tree.children(b))))


@pytest.mark.parametrize("t", TREES, ids=repr)
def test_flatten_then_unflatten_gives_the_tree_back(t):
    leaves, s = tree.flatten(t)
    assert s.num_leaves == len(leaves)
    assert same(tree.unflatten(s, leaves), t)
    assert tree.structure(tree.unflatten(s, leaves)) == s


@pytest.mark.parametrize("t", TREES, ids=repr)
def test_map_keeps_the_structure_and_types(t):
    doubled = tree.map(lambda x: x * 2, t)
    assert tree.structure(doubled) == tree.structure(t)
    for a, b in zip(tree.leaves(doubled), tree.leaves(t)):
        np.testing.assert_array_equal(a, b * 2)


def test_map_over_several_trees_adds_leaf_by_leaf():
    a = {"W": np.ones(2), "layers": [1.0, 2.0]}
    b = {"W": np.full(2, 3.0), "layers": [10.0, 20.0]}
    total = tree.map(lambda x, y: x + y, a, b)
    np.testing.assert_array_equal(total["W"], [4.0, 4.0])
    assert total["layers"] == [11.0, 22.0]


def test_map_refuses_trees_of_different_structures():
    with pytest.raises(ValueError, match=r"different structures: \{'a': \*\} and \{'b': \*\}"):
        tree.map(lambda x, y: x + y, {"a": 1.0}, {"b": 1.0})


@pytest.mark.parametrize("t", TREES, ids=range(len(TREES)))
def test_a_detached_structure_equals_its_tree_and_holds_none_of_its_containers(t):
    s = tree.structure(t)
    d = s.detached()
    assert d == s and hash(d) == hash(s) and repr(d) == repr(s)
    pending = [d]
    while pending:
        node = pending.pop()
        assert node.like is None
        pending += node.children or ()


def test_dicts_keep_insertion_order():
    assert list(tree.map(float, {"z": 1, "a": 2})) == ["z", "a"]


def test_structures_print_as_the_tree_with_stars():
    assert repr(tree.structure([{"W": 1, "b": 2}, Pair(1, (2,))])) == \
        "[{'W': *, 'b': *}, Pair(w=*, b=(*,))]"


def test_a_frozen_dataclass_with_a_field_outside_init_is_rebuilt():
    f = Frozen(np.ones(2))
    object.__setattr__(f, "n", 7)
    g = tree.map(lambda x: x, f)
    assert g.n == 7 and g is not f


def test_unflatten_checks_the_number_of_leaves():
    with pytest.raises(ValueError, match="has 2 leaves, got 3"):
        tree.unflatten(tree.structure((1, 2)), [1, 2, 3])


def test_docstring_examples():
    assert doctest.testmod(tree).failed == 0
