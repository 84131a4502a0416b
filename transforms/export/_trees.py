"""Argument and result trees of a saved program, described as JSON.

Classes (modules, dataclasses, namedtuples, registered nodes) are described by qualified name and entries, never
stored: a loaded program matches them against the caller's arguments, and rebuilds a result class from the argument
of the same structure (a train step returns the model it was given).
"""

from __future__ import annotations

import collections
from typing import Any

import optree

from ._codec import ExportError, encode_float

_SIMPLE = {
    optree.PyTreeKind.TUPLE: "tuple",
    optree.PyTreeKind.LIST: "list",
    optree.PyTreeKind.DICT: "dict",
    optree.PyTreeKind.ORDEREDDICT: "odict",
}


def _key(k, where: str):
    if k is None or type(k) in (bool, int, str):
        return k
    if type(k) is float:
        return encode_float(k)
    if type(k) is tuple:
        return {"t": [_key(w, where) for w in k]}
    raise ExportError(
        f"fl.export: {where} has a dict key of type {type(k).__name__} ({k!r:.40}), which cannot be saved"
    )


def _unkey(k):
    if type(k) is dict:
        return float.fromhex(k["f"]) if "f" in k else tuple(_unkey(w) for w in k["t"])
    return k


def describe_tree(spec, where: str) -> Any:
    """A JSON description of a tree structure. Classes (modules, dataclasses, namedtuples, registered nodes) are
    described by their qualified name and entries, not stored: they are matched, never rebuilt from the file."""
    kind = spec.kind
    children = [describe_tree(c, where) for c in spec.children()]
    if kind == optree.PyTreeKind.LEAF:
        return "*"
    if kind == optree.PyTreeKind.NONE:
        return None
    if kind in _SIMPLE:
        out = {_SIMPLE[kind]: children}
        if kind in (optree.PyTreeKind.DICT, optree.PyTreeKind.ORDEREDDICT):
            out["keys"] = [_key(k, where) for k in spec.entries()]
        return out
    t = spec.type
    out = {"node": f"{t.__module__}.{t.__qualname__}", "keys": [_key(k, where) for k in spec.entries()],
           "children": children}
    if kind == optree.PyTreeKind.NAMEDTUPLE:
        out["fields"] = list(t._fields)
    return out


def _subtrees(spec, path=()):
    yield path, spec
    for i, c in enumerate(spec.children()):
        yield from _subtrees(c, path + (i,))


def mark_sources(out_desc, out_spec, in_spec, where: str):
    """For each class node of the result, the path of an argument subtree with the same structure, from which a
    call rebuilds it (a train step returns the model it was given)."""
    ins = [(p, s) for p, s in _subtrees(in_spec) if s.kind not in (optree.PyTreeKind.LEAF, optree.PyTreeKind.NONE)]

    def go(desc, spec, path):
        if isinstance(desc, dict) and "node" in desc:
            for p, s in ins:
                if s == spec:
                    desc["from_arg"] = list(p)
                    return
            if "fields" not in desc:
                raise ExportError(
                    f"fl.export: {where} returns a {desc['node']} (at result path {list(path)}) that is not shaped "
                    "like any argument, so a loaded program could not rebuild it without its class; return plain "
                    "containers (dicts, lists, tuples) or the object it was given"
                )
            return
        for i, (d, c) in enumerate(zip(_children(desc), spec.children())):
            go(d, c, path + (i,))

    go(out_desc, out_spec, ())


def _children(desc) -> list:
    if not isinstance(desc, dict):
        return []
    for k in ("tuple", "list", "dict", "odict", "children"):
        if k in desc:
            return desc[k]
    return []


_NAMEDTUPLES: dict[tuple, type] = {}


def rebuild(desc, leaves, in_spec):
    if desc == "*":
        return next(leaves)
    if desc is None:
        return None
    if "tuple" in desc:
        return tuple(rebuild(d, leaves, in_spec) for d in desc["tuple"])
    if "list" in desc:
        return [rebuild(d, leaves, in_spec) for d in desc["list"]]
    if "dict" in desc or "odict" in desc:
        kind = "dict" if "dict" in desc else "odict"
        items = [(_unkey(k), rebuild(d, leaves, in_spec)) for k, d in zip(desc["keys"], desc[kind])]
        return dict(items) if kind == "dict" else collections.OrderedDict(items)
    if "from_arg" in desc:
        spec = in_spec
        for i in desc["from_arg"]:
            spec = spec.children()[i]
        return spec.unflatten([next(leaves) for _ in range(spec.num_leaves)])
    key = (desc["node"], tuple(desc["fields"]))
    cls = _NAMEDTUPLES.get(key)
    if cls is None:
        cls = _NAMEDTUPLES[key] = collections.namedtuple(desc["node"].rsplit(".", 1)[-1], desc["fields"])
    return cls(*[rebuild(d, leaves, in_spec) for d in desc["children"]])


def show_tree(desc) -> str:
    if desc == "*":
        return "*"
    if desc is None:
        return "None"
    if "tuple" in desc:
        inner = ", ".join(show_tree(d) for d in desc["tuple"])
        return f"({inner}{',' if len(desc['tuple']) == 1 else ''})"
    if "list" in desc:
        return "[" + ", ".join(show_tree(d) for d in desc["list"]) + "]"
    if "dict" in desc or "odict" in desc:
        kids = desc.get("dict", desc.get("odict"))
        return "{" + ", ".join(f"{_unkey(k)!r}: {show_tree(d)}" for k, d in zip(desc["keys"], kids)) + "}"
    return f"{desc['node']}(" + ", ".join(show_tree(d) for d in desc["children"]) + ")"
