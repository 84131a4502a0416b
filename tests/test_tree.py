"""Pytree utilities in funclib.tree (leaves are plain Python numbers and NumPy arrays)."""

import collections
import dataclasses
import operator

import numpy as np
import optree
import pytest
from hypothesis import given
from hypothesis import strategies as st

from funclib import tree

Point = collections.namedtuple("Point", ["x", "y"])


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __eq__(self, other):
        return type(other) is Pair and (self.a, self.b) == (other.a, other.b)


tree.register_pytree_node(Pair, lambda p: ((p.a, p.b), None, ("a", "b")), lambda aux, ch: Pair(*ch))


class Box:
    """A node without child keys: paths index it by position."""

    def __init__(self, items, tag):
        self.items, self.tag = list(items), tag

    def __eq__(self, other):
        return type(other) is Box and (self.items, self.tag) == (other.items, other.tag)


tree.register_pytree_node(Box, lambda b: (b.items, b.tag), lambda tag, ch: Box(ch, tag))


@tree.register_dataclass
@dataclasses.dataclass
class Linear:
    w: object
    b: object


@tree.register_dataclass(meta_fields=["name"])
@dataclasses.dataclass(frozen=True)
class Named:
    value: object
    name: str
    checked: bool = dataclasses.field(default=False)

    def __post_init__(self):
        object.__setattr__(self, "checked", True)


NESTED = {
    "b": [1.0, (2.0, None)],
    "a": Point(3.0, 4.0),
    "c": collections.OrderedDict([("z", 5.0), ("y", 6.0)]),
    "d": collections.defaultdict(list, {"k": 7.0}),
    "e": collections.deque([8.0]),
    "f": None,
}


def test_flatten_order_and_roundtrip():
    leaves, treedef = tree.flatten(NESTED)
    # dict keys sorted; OrderedDict keeps insertion order
    assert leaves == [3.0, 4.0, 1.0, 2.0, 5.0, 6.0, 7.0, 8.0]
    assert treedef.num_leaves == 8
    back = tree.unflatten(treedef, leaves)
    assert back == NESTED
    assert type(back["a"]) is Point and type(back["c"]) is collections.OrderedDict
    assert back["d"].default_factory is list and type(back["e"]) is collections.deque
    assert tree.leaves(NESTED) == leaves
    assert tree.structure(NESTED) == treedef


def test_none_is_an_empty_node():
    assert tree.leaves([None, 1, (None,)]) == [1]
    assert tree.map(lambda x: x + 1, {"a": None, "b": 1}) == {"a": None, "b": 2}
    assert tree.structure(None).num_leaves == 0


def test_arrays_and_unknown_objects_are_leaves():
    a, obj = np.ones(3), object()
    leaves, _ = tree.flatten({"a": a, "o": obj})
    assert leaves[0] is a and leaves[1] is obj


def test_map_several_trees_and_prefix():
    assert tree.map(operator.add, (1, [2, 3]), (10, [20, 30])) == (11, [22, 33])
    # a leaf of the first tree lines up with a whole subtree of the others
    out = tree.map(lambda x, y: (x, y), {"a": 1, "b": 2}, {"a": [1, 2], "b": (3,)})
    assert out == {"a": (1, [1, 2]), "b": (2, (3,))}


def test_map_structure_mismatch_names_both_structures():
    with pytest.raises(ValueError, match="argument 1 does not have the structure of argument 0") as info:
        tree.map(operator.add, {"a": 1, "b": (1, 2)}, {"a": 1, "b": [1, 2]})
    msg = str(info.value)
    assert "(*, *)" in msg and "[*, *]" in msg
    with pytest.raises(ValueError, match="argument 2"):
        tree.map(lambda x, y, z: x, [1, 2], [1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="argument 1"):
        tree.map_with_path(lambda p, x, y: x, {"a": 1}, {"b": 1})


def test_errors_raised_by_f_pass_through():
    def f(x, y):
        raise ValueError("from f")

    with pytest.raises(ValueError, match="^from f$"):
        tree.map(f, [1], [2])
    with pytest.raises(TypeError, match="^boom$"):
        tree.map(lambda x: (_ for _ in ()).throw(TypeError("boom")), [1])


def test_is_leaf():
    t = {"a": (1, 2), "b": [3, (4, 5)]}
    assert tree.leaves(t, is_leaf=lambda x: isinstance(x, tuple)) == [(1, 2), 3, (4, 5)]
    out = tree.map(lambda x: sum(x) if isinstance(x, tuple) else x, t, is_leaf=lambda x: isinstance(x, tuple))
    assert out == {"a": 3, "b": [3, 9]}


def test_unflatten_wrong_count():
    treedef = tree.structure([1, (2, 3)])
    with pytest.raises(ValueError, match="takes 3 leaves, got 2"):
        tree.unflatten(treedef, [1, 2])


def test_paths_and_keystr():
    t = {
        "layers": [Linear(1.0, 2.0)],
        "p": Point(3.0, 4.0),
        "pair": Pair(5.0, {"k": 6.0}),
        "box": Box([7.0], "t"),
    }
    pairs, treedef = tree.flatten_with_path(t)
    assert [x for _, x in pairs] == tree.leaves(t)
    full = [tree.keystr(p) for p, _ in pairs]
    simple = [tree.keystr(p, simple=True) for p, _ in pairs]
    assert full == [
        "['box'][0]",
        "['layers'][0].w",
        "['layers'][0].b",
        "['p'].x",
        "['p'].y",
        "['pair'].a",
        "['pair'].b['k']",
    ]
    assert simple == ["box.0", "layers.0.w", "layers.0.b", "p.x", "p.y", "pair.a", "pair.b.k"]
    assert tree.keystr(pairs[1][0], simple=True, separator="/") == "layers/0/w"
    assert tree.keystr(("a", 0)) == "['a'][0]"
    # a path is an accessor: applying it to the tree fetches the leaf
    for path, leaf in pairs:
        assert path(t) == leaf


def test_map_with_path():
    out = tree.map_with_path(
        lambda p, x, y: (tree.keystr(p, simple=True), x + y), {"a": [1, 2]}, {"a": [10, 20]}
    )
    assert out == {"a": [("a.0", 11), ("a.1", 22)]}


def test_register_pytree_node_custom_class():
    p = Pair(1, [2, 3])
    leaves, treedef = tree.flatten(p)
    assert leaves == [1, 2, 3]
    assert tree.unflatten(treedef, [4, 5, 6]) == Pair(4, [5, 6])
    assert tree.map(lambda x: x * 2, Box([1, 2], "t")) == Box([2, 4], "t")
    # aux data is part of the structure
    assert tree.structure(Box([1], "t")) != tree.structure(Box([1], "u"))


def test_registration_stays_in_the_funclib_namespace():
    assert optree.tree_leaves(Pair(1, 2)) != [1, 2]
    assert tree.leaves(Pair(1, 2)) == [1, 2]


def test_register_dataclass():
    lin = Linear(np.ones(2), 3.0)
    leaves, treedef = tree.flatten(lin)
    assert leaves[1] == 3.0 and leaves[0] is lin.w
    assert tree.map(lambda x: x * 0, Linear(1.0, 2.0)) == Linear(0.0, 0.0)

    n = Named(1.0, "first")
    leaves, treedef = tree.flatten(n)
    assert leaves == [1.0, True]  # name is static; checked is not listed, so it is data
    assert tree.structure(Named(1.0, "first")) != tree.structure(Named(1.0, "second"))
    # unflattening sets fields directly: __post_init__ does not run, frozen classes work
    rebuilt = tree.unflatten(treedef, ["placeholder", False])
    assert rebuilt.value == "placeholder" and rebuilt.name == "first" and rebuilt.checked is False


def test_register_dataclass_data_fields_and_errors():
    @dataclasses.dataclass
    class Cfg:
        a: float
        size: int

    tree.register_dataclass(Cfg, data_fields=["a"])
    assert tree.leaves(Cfg(1.0, 3)) == [1.0]
    assert tree.map(lambda x: x + 1, Cfg(1.0, 3)) == Cfg(2.0, 3)

    @dataclasses.dataclass
    class Bad:
        a: float
        b: float

    with pytest.raises(ValueError, match="must split the fields"):
        tree.register_dataclass(Bad, data_fields=["a"], meta_fields=["a", "b"])
    with pytest.raises(ValueError, match="must split the fields"):
        tree.register_dataclass(Bad, data_fields=["a", "c"])
    with pytest.raises(TypeError, match="dataclass"):
        tree.register_dataclass(Pair)


def test_all_and_reduce():
    assert tree.all({"a": True, "b": [1, (2.0,)]})
    assert not tree.all([True, (0,)])
    assert tree.all([None, ()])
    assert tree.reduce(operator.add, {"a": 1, "b": (2, 3)}, 10) == 16
    assert tree.reduce(operator.add, [1, 2, 3]) == 6
    assert tree.reduce(lambda acc, x: acc + [x], {"b": 2, "a": 1}, []) == [1, 2]
    with pytest.raises(TypeError):
        tree.reduce(operator.add, [])


def test_transpose():
    outer = tree.structure([0, 0, 0])
    inner = tree.structure({"x": 0, "y": (0, 0)})
    t = [{"x": i, "y": (10 * i, 100 * i)} for i in range(3)]
    out = tree.transpose(outer, inner, t)
    assert out == {"x": [0, 1, 2], "y": ([0, 10, 20], [0, 100, 200])}
    back = tree.transpose(inner, outer, out)
    assert back == t
    with pytest.raises(ValueError, match="outer"):
        tree.transpose(outer, inner, [{"x": 0}, {"x": 1}, {"x": 2}])


_leaf = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False), st.none())
_trees = st.recursive(
    _leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3),
        st.lists(kids, max_size=3).map(tuple),
        st.dictionaries(st.text("abc", min_size=1, max_size=2), kids, max_size=3),
        st.tuples(kids, kids).map(lambda t: Point(*t)),
        st.tuples(kids, kids).map(lambda t: Pair(*t)),
    ),
    max_leaves=12,
)


@given(_trees)
def test_roundtrip_property(t):
    leaves, treedef = tree.flatten(t)
    assert tree.unflatten(treedef, leaves) == t
    assert tree.map(lambda x: x, t) == t
    assert [tree.keystr(p) for p, _ in tree.flatten_with_path(t)[0]] == [
        tree.keystr(p) for p, _ in tree.flatten_with_path(tree.map(lambda x: 0, t))[0]
    ]
    assert len(leaves) == treedef.num_leaves
    doubled = tree.map(lambda x: [x, x], t)
    assert tree.transpose(treedef, tree.structure([0, 0]), doubled) == [t, t]


def test_tensors_are_leaves():
    import funclib as fl

    x = fl.asarray(np.arange(3.0))
    leaves, treedef = tree.flatten({"x": x, "y": [x]})
    assert len(leaves) == 2 and all(a is x for a in leaves)
    out = tree.map(lambda t: t, {"x": x, "n": None})
    assert out["x"] is x and out["n"] is None
