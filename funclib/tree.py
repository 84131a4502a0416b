"""Pytrees: nested containers of leaves, flattened and rebuilt through optree in the "funclib" namespace.

Nodes: tuple, list, dict (flattened in sorted key order), namedtuple, OrderedDict, defaultdict, deque,
``None`` (a node with no children, so ``map`` keeps it), and any class registered with
``register_pytree_node`` or ``register_dataclass``. Everything else, a ``Tensor`` or a NumPy array
included, is a leaf.

Paths (from ``flatten_with_path`` and ``map_with_path``) are optree accessors: tuples of entries that know
whether they index a mapping, a sequence or an attribute; ``keystr`` renders them.

Example:
    >>> from funclib import tree
    >>> tree.map(lambda x: x * 2, {"w": 1.0, "b": (2.0, None)})
    {'w': 2.0, 'b': (4.0, None)}
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import optree

from .checks import check_callable, describe

__all__ = [
    "NodeEntry",
    "PyTree",
    "TreeDef",
    "all",
    "flatten",
    "flatten_with_path",
    "keystr",
    "leaves",
    "map",
    "map_with_path",
    "reduce",
    "register_dataclass",
    "register_pytree_node",
    "structure",
    "transpose",
    "unflatten",
]

PyTree = Any
TreeDef = optree.PyTreeSpec
Path = tuple[Any, ...]
T = TypeVar("T")

_NS = "funclib"
_MISSING = object()


class NodeEntry(optree.PyTreeEntry):
    """A path entry of a registered class: an identifier string is an attribute, any other key an item.

    >>> import dataclasses
    >>> @fl.tree.register_dataclass
    ... @dataclasses.dataclass
    ... class Pair:
    ...     a: fl.Tensor
    ...     b: fl.Tensor
    >>> pairs, _ = fl.tree.flatten_with_path(Pair(fl.ones(1), fl.zeros(1)))
    >>> path = pairs[0][0]
    >>> type(path[0]).__name__, fl.tree.keystr(path)
    ('NodeEntry', '.a')
    >>> path[0](Pair(fl.tensor([3.0]), fl.tensor([4.0])))  # an entry reads its child
    Tensor([3.], dtype=float32)
    """

    __slots__ = ()

    def __call__(self, obj: Any) -> Any:
        children, _, entries, _ = optree.tree_flatten_one_level(obj, none_is_leaf=False, namespace=_NS)
        return children[list(entries).index(self.entry)]

    def codify(self, node: str = "") -> str:
        if isinstance(self.entry, str) and self.entry.isidentifier():
            return f"{node}.{self.entry}"
        return f"{node}[{self.entry!r}]"


def flatten(tree: PyTree, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], TreeDef]:
    """Split a tree into its leaves (in a fixed order) and its structure.

    Args:
        tree: the pytree.
        is_leaf: optional predicate; a subtree for which it returns True is treated as a leaf.

    Returns:
        ``(leaves, treedef)``; ``unflatten(treedef, leaves)`` rebuilds the tree.

    Example:
        >>> flatten({"b": [1, 2], "a": 3})
        ([3, 1, 2], PyTreeSpec({'a': *, 'b': [*, *]}))
    """
    return optree.tree_flatten(tree, is_leaf, none_is_leaf=False, namespace=_NS)


def unflatten(treedef: TreeDef, leaves: Iterable[Any]) -> PyTree:
    """Rebuild a tree from a structure and leaves, the inverse of ``flatten``.

    Args:
        treedef: a structure from ``flatten`` or ``structure``.
        leaves: exactly ``treedef.num_leaves`` leaves, in flattening order.

    Returns:
        The tree.

    Example:
        >>> leaves, treedef = flatten((1, [2, 3]))
        >>> unflatten(treedef, [x * 10 for x in leaves])
        (10, [20, 30])
    """
    leaves = list(leaves)
    try:
        return optree.tree_unflatten(treedef, leaves)
    except ValueError as e:
        raise ValueError(
            f"tree.unflatten: {treedef} takes {treedef.num_leaves} leaves, got {len(leaves)}"
        ) from e


def leaves(tree: PyTree, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """The leaves of a tree, in flattening order.

    Example:
        >>> leaves({"a": (1, None), "b": 2})
        [1, 2]
    """
    return optree.tree_leaves(tree, is_leaf, none_is_leaf=False, namespace=_NS)


def structure(tree: PyTree, is_leaf: Callable[[Any], bool] | None = None) -> TreeDef:
    """The structure of a tree, without its leaves.

    Example:
        >>> structure([1, (2, 3)])
        PyTreeSpec([*, (*, *)])
    """
    return optree.tree_structure(tree, is_leaf, none_is_leaf=False, namespace=_NS)


def _mismatch(fn: str, treedef: TreeDef, i: int, other: PyTree, cause: Exception) -> ValueError:
    return ValueError(
        f"tree.{fn}: argument {i} does not have the structure of argument 0 ({cause})\n"
        f"  argument 0: {treedef}\n"
        f"  argument {i}: {structure(other)}"
    )


def _leaves_up_to(fn: str, treedef: TreeDef, rest: Sequence[PyTree]) -> list[list[Any]]:
    out = []
    for i, other in enumerate(rest, 1):
        try:
            out.append(treedef.flatten_up_to(other))
        except (ValueError, TypeError) as e:
            raise _mismatch(fn, treedef, i, other, e) from e
    return out


def map(
    f: Callable[..., Any], tree: PyTree, *rest: PyTree, is_leaf: Callable[[Any], bool] | None = None
) -> PyTree:
    """Apply ``f`` to every leaf, or to matching leaves of several trees.

    Args:
        f: called as ``f(leaf, *leaves_of_rest)``.
        tree: the tree that fixes the structure.
        *rest: trees with the structure of ``tree`` (a leaf of ``tree`` may match a whole subtree here).
        is_leaf: optional predicate marking extra leaves of ``tree``.

    Returns:
        A tree with the structure of ``tree`` and the results of ``f`` as leaves.

    Raises:
        ValueError: a tree in ``rest`` has another structure; the message shows both.

    Example:
        >>> map(lambda x, y: x + y, {"a": 1, "b": 2}, {"a": 10, "b": 20})
        {'a': 11, 'b': 22}
    """
    check_callable(f, "tree.map", "f")
    try:
        return optree.tree_map(f, tree, *rest, is_leaf=is_leaf, none_is_leaf=False, namespace=_NS)
    except (ValueError, TypeError):
        if rest:
            _leaves_up_to("map", structure(tree, is_leaf), rest)
        raise


def flatten_with_path(
    tree: PyTree, is_leaf: Callable[[Any], bool] | None = None
) -> tuple[list[tuple[Path, Any]], TreeDef]:
    """Like ``flatten``, with the path to each leaf.

    Returns:
        ``([(path, leaf), ...], treedef)``; render a path with ``keystr``.

    Example:
        >>> pairs, _ = flatten_with_path({"a": [1, 2]})
        >>> [(keystr(p), x) for p, x in pairs]
        [("['a'][0]", 1), ("['a'][1]", 2)]
    """
    paths, xs, treedef = optree.tree_flatten_with_accessor(tree, is_leaf, none_is_leaf=False, namespace=_NS)
    return list(zip(paths, xs)), treedef


def map_with_path(
    f: Callable[..., Any], tree: PyTree, *rest: PyTree, is_leaf: Callable[[Any], bool] | None = None
) -> PyTree:
    """Like ``map``, with ``f`` called as ``f(path, leaf, *leaves_of_rest)``.

    Example:
        >>> map_with_path(lambda p, x: keystr(p, simple=True), {"layer": [0.0, 0.0]})
        {'layer': ['layer.0', 'layer.1']}
    """
    check_callable(f, "tree.map_with_path", "f")
    paths, xs, treedef = optree.tree_flatten_with_accessor(tree, is_leaf, none_is_leaf=False, namespace=_NS)
    others = _leaves_up_to("map_with_path", treedef, rest)
    return treedef.unflatten([f(*args) for args in zip(paths, xs, *others)])


def _entry_name(entry: Any) -> Any:
    for attr in ("name", "field", "key", "index"):
        if hasattr(entry, attr):
            return getattr(entry, attr)
    return getattr(entry, "entry", entry)


def keystr(path: Path, *, simple: bool = False, separator: str = ".") -> str:
    """Render a path from ``flatten_with_path``/``map_with_path``.

    Args:
        path: a path (an optree accessor, or a plain tuple of keys).
        simple: if True, join the bare keys with ``separator`` (``"layers.0.weight"``); otherwise write Python
            access syntax (``"['layers'][0].weight"``).
        separator: the joiner for ``simple=True``; default ``"."``.

    Example:
        >>> (path, _), = flatten_with_path({"w": [0.0]})[0]
        >>> keystr(path), keystr(path, simple=True)
        ("['w'][0]", 'w.0')
    """
    if not isinstance(path, (tuple, list, optree.PyTreeAccessor)):
        raise TypeError(
            f"tree.keystr: path must be a path from flatten_with_path/map_with_path (a tuple of keys), got "
            f"{describe(path)}"
        )
    if simple:
        return separator.join(str(_entry_name(e)) for e in path)
    if isinstance(path, optree.PyTreeAccessor):
        return path.codify("")
    parts = []
    for e in path:
        if isinstance(e, optree.PyTreeEntry):
            parts.append(e.codify(""))
        else:
            parts.append(f"[{e!r}]")
    return "".join(parts)


def all(tree: PyTree, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """True when every leaf is truthy (and for a tree with no leaves).

    Example:
        >>> all({"a": True, "b": [1, 2]}), all([True, 0])
        (True, False)
    """
    return builtins.all(leaves(tree, is_leaf))


def reduce(
    fn: Callable[[T, Any], T],
    tree: PyTree,
    initial: Any = _MISSING,
    is_leaf: Callable[[Any], bool] | None = None,
) -> T:
    """Fold ``fn`` over the leaves from left to right, like ``functools.reduce``.

    Args:
        fn: ``fn(accumulated, leaf)``.
        tree: the pytree.
        initial: the starting value; without it the first leaf is (and an empty tree raises TypeError).

    Example:
        >>> import operator
        >>> reduce(operator.add, {"a": 1, "b": (2, 3)}, 0)
        6
    """
    check_callable(fn, "tree.reduce", "fn")
    if initial is _MISSING:
        return optree.tree_reduce(fn, tree, is_leaf=is_leaf, none_is_leaf=False, namespace=_NS)
    return optree.tree_reduce(fn, tree, initial, is_leaf=is_leaf, none_is_leaf=False, namespace=_NS)


def transpose(outer: TreeDef, inner: TreeDef, tree: PyTree) -> PyTree:
    """Turn an ``outer`` tree of ``inner`` trees into an ``inner`` tree of ``outer`` trees.

    Args:
        outer: the structure of the outer level, e.g. ``structure([0, 0])``.
        inner: the structure of each inner tree, e.g. ``structure({"x": 0, "y": 0})``.
        tree: a tree of structure ``outer`` whose leaves are trees of structure ``inner``.

    Example:
        >>> transpose(structure([0, 0]), structure({"x": 0, "y": 0}), [{"x": 1, "y": 2}, {"x": 3, "y": 4}])
        {'x': [1, 3], 'y': [2, 4]}
    """
    try:
        rows = [inner.flatten_up_to(sub) for sub in outer.flatten_up_to(tree)]
    except (ValueError, TypeError) as e:
        raise ValueError(
            f"tree.transpose: the tree is not an outer tree of inner trees ({e})\n"
            f"  outer: {outer}\n  inner: {inner}\n  tree:  {structure(tree)}"
        ) from e
    return inner.unflatten([outer.unflatten([row[j] for row in rows]) for j in range(inner.num_leaves)])


def register_pytree_node(
    cls: type[T],
    flatten_fn: Callable[[T], tuple[Iterable[Any], Any] | tuple[Iterable[Any], Any, Iterable[Any]]],
    unflatten_fn: Callable[[Any, Iterable[Any]], T],
) -> type[T]:
    """Make instances of ``cls`` tree nodes.

    Args:
        cls: the class.
        flatten_fn: ``obj -> (children, aux_data)`` or ``(children, aux_data, keys)``; ``aux_data`` is static
            (hashable, compared for equality); ``keys`` name the children in paths (identifier strings render
            as attributes, ``.weight``; other keys as items, ``[0]``).
        unflatten_fn: ``(aux_data, children) -> obj``.

    Returns:
        ``cls``.

    Example:
        >>> class Pair:
        ...     def __init__(self, a, b): self.a, self.b = a, b
        >>> _ = register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda aux, ch: Pair(*ch))
        >>> leaves(Pair(1, [2, 3]))
        [1, 2, 3]
    """
    if not isinstance(cls, type):
        raise TypeError(f"tree.register_pytree_node: cls must be a class, got {describe(cls)}")
    check_callable(flatten_fn, "tree.register_pytree_node", "flatten_fn")
    check_callable(unflatten_fn, "tree.register_pytree_node", "unflatten_fn")
    optree.register_pytree_node(cls, flatten_fn, unflatten_fn, path_entry_type=NodeEntry, namespace=_NS)
    return cls


def register_dataclass(
    cls: type[T] | None = None,
    data_fields: Sequence[str] | None = None,
    meta_fields: Sequence[str] | None = None,
) -> Any:
    """Make a dataclass a tree node whose children are its data fields; usable as a decorator.

    Meta fields are static: they go into the structure (so they must be hashable) instead of the leaves. By
    default every field is data. Unflattening sets the fields directly without calling ``__init__`` or
    ``__post_init__``, because transforms rebuild trees whose leaves are tracers or placeholders.

    Args:
        cls: a dataclass.
        data_fields: names of the fields that hold children; default: all fields not in ``meta_fields``.
        meta_fields: names of static fields; default: all fields not in ``data_fields``.

    Returns:
        ``cls`` (or, when called without ``cls``, a decorator).

    Example:
        >>> import dataclasses
        >>> @register_dataclass
        ... @dataclasses.dataclass
        ... class Linear:
        ...     w: float
        ...     b: float
        >>> map(lambda x: x + 1, Linear(1.0, 2.0))
        Linear(w=2.0, b=3.0)
    """
    if cls is None:
        return lambda c: register_dataclass(c, data_fields, meta_fields)
    if not dataclasses.is_dataclass(cls) or not isinstance(cls, type):
        raise TypeError(
            f"register_dataclass expects a dataclass type, got {cls!r}; decorate it with @dataclass"
        )
    names = [f.name for f in dataclasses.fields(cls)]
    meta = list(meta_fields) if meta_fields is not None else []
    data = list(data_fields) if data_fields is not None else [n for n in names if n not in meta]
    if meta_fields is None:
        meta = [n for n in names if n not in data]
    if sorted(data + meta) != sorted(names):
        raise ValueError(
            f"register_dataclass({cls.__name__}): data_fields {data} and meta_fields {meta} must split the "
            f"fields {names} with no overlap"
        )
    data_t, meta_t = tuple(data), tuple(meta)

    def flatten_fn(obj):
        return (
            tuple(getattr(obj, n) for n in data_t),
            tuple(getattr(obj, n) for n in meta_t),
            data_t,
        )

    def unflatten_fn(aux, children):
        obj = object.__new__(cls)
        for n, v in zip(data_t, children):
            object.__setattr__(obj, n, v)
        for n, v in zip(meta_t, aux):
            object.__setattr__(obj, n, v)
        return obj

    optree.register_pytree_node(cls, flatten_fn, unflatten_fn, path_entry_type=NodeEntry, namespace=_NS)
    return cls
