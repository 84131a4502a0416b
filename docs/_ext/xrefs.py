"""Resolve references to funclib objects by what they are, not by where they are defined.

A docstring or page may name an object the way users write it (``fl.grad``, ``nn.Linear``, ``F.relu``), by its
defining module (``funclib.core.Tensor``, as annotations do), or unqualified inside a namespace's page (``Tensor``
in a signature on the ``funclib.random`` page). Each is mapped to the one name the reference documents it under
(its first namespace in ``apiref.NAMESPACES``); a ``funclib`` reference that still resolves to nothing is reported
by Sphinx's nitpicky mode, which fails the build.
"""

from __future__ import annotations

import apiref

ALIASES = {
    "fl.": "funclib.",
    "nn.": "funclib.nn.",
    "F.": "funclib.nn.functional.",
    "optim.": "funclib.optim.",
    "fnp.": "funclib.numpy.",
}


def canonical_names() -> dict[int, str]:
    """id(object) -> the documented name of that object (the first namespace that exports it)."""
    out: dict[int, str] = {}
    for spec, ns in apiref.namespaces():
        out.setdefault(id(ns), spec.name)
        for name in apiref.public_names(ns):
            obj = getattr(ns, name)
            if apiref.kind(obj) != "autodata":  # constants are shared values (True, 0.0), not identities
                out.setdefault(id(obj), f"{spec.name}.{name}")
    return out


def lookup(target: str, module: str | None = None):
    """The object ``target`` names (alias prefixes expanded, relative to ``module`` when unqualified), or None."""
    for short, full in ALIASES.items():
        if target.startswith(short):
            target = full + target[len(short) :]
            break
    candidates = [target] if target.startswith("funclib.") or not module else [f"{module}.{target}", target]
    for cand in candidates:
        if not cand.startswith("funclib"):
            continue
        parts = cand.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = apiref.resolve(".".join(parts[:i]))
            except (ImportError, AttributeError):
                continue
            try:
                for attr in parts[i:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                break
            return obj
    return None


def _missing_reference(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    domain = env.get_domain("py")
    target = node["reftarget"].lstrip("~.")
    obj = lookup(target, node.get("py:module"))
    if obj is None:
        return None
    names = app.env._funclib_canonical if hasattr(app.env, "_funclib_canonical") else None
    if names is None:
        names = app.env._funclib_canonical = canonical_names()
    name = names.get(id(obj))
    if name is None:
        owner, _, attr = target.rpartition(".")
        parent = lookup(owner, node.get("py:module")) if owner else None
        if parent is None or id(parent) not in names:
            return contnode  # it exists but is not public (a return type, a TypeVar): name it without a link
        name = f"{names[id(parent)]}.{attr}"  # a method or attribute of a documented class
    return domain.resolve_xref(env, node["refdoc"], app.builder, "obj", name, node, contnode) or contnode


def setup(app):
    app.connect("missing-reference", _missing_reference)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
