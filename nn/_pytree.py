"""How a ``Module`` is a pytree: parameters, buffers and submodules are children; every other attribute is static
structure compared by value; a module rebuilt from its leaves remembers the module it came from."""

from __future__ import annotations

import weakref

import numpy as np

from funclib import tree as tree_util
from funclib.core import Tensor

_REG = ("_parameters", "_buffers", "_modules")


def _same(a, b) -> bool:
    if a is b:
        return True
    if type(a) is not type(b) or isinstance(a, (Tensor, np.ndarray)):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


class _Meta:
    """The static part of a module: its class, slot names and every non-tensor attribute (compared by value)."""

    __slots__ = ("cls", "names", "static", "origin", "_hash")

    def __init__(self, cls, names, static, origin=None):
        self.cls = cls
        self.names = names
        self.static = static
        self.origin = origin  # a weak reference to the module flattened (not compared)
        h = hash((cls, names, tuple(k for k, _ in static)))
        self._hash = h

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not _Meta or other.cls is not self.cls or other.names != self.names:
            return False
        a, b = self.static, other.static
        if len(a) != len(b):
            return False
        return all(ka == kb and _same(va, vb) for (ka, va), (kb, vb) in zip(a, b))

    def __repr__(self):
        return f"{self.cls.__name__}"


def _flatten_module(m):
    d = m.__dict__
    p, b, c = d["_parameters"], d["_buffers"], d["_modules"]
    static = tuple((k, v) for k, v in d.items() if k not in _REG and k != "_origin")
    names = (tuple(p), tuple(b), tuple(c))
    meta = _Meta(type(m), names, static, d.get("_origin") or weakref.ref(m))
    return [*p.values(), *b.values(), *c.values()], meta, [*p, *b, *c]


def _unflatten_module(meta, children):
    obj = object.__new__(meta.cls)
    d = obj.__dict__
    d.update(meta.static)
    pn, bn, cn = meta.names
    it = iter(children)
    d["_parameters"] = {n: next(it) for n in pn}
    d["_buffers"] = {n: next(it) for n in bn}
    d["_modules"] = {n: next(it) for n in cn}
    # which module this one was rebuilt from (by jit, vmap, a tree map), so that nn.value_and_grad(model, fn)
    # recognizes the copy of ``model`` a transform hands to fn
    d["_origin"] = meta.origin
    return obj


def _register(cls) -> None:
    tree_util.register_pytree_node(cls, _flatten_module, _unflatten_module)
