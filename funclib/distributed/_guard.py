"""What every rank must agree on before a compiled program's first collective: a canonical text of the program.

The text must be the same in every process for the same program, so it holds no object addresses: variables are
numbered in order, Python callables in parameters (custom rules) appear by qualified name, arrays by type and a
digest of their bytes, process axes by name.
"""

from __future__ import annotations

import hashlib

import numpy as np

from funclib.jaxpr import ClosedJaxpr, Jaxpr, Literal
from funclib.primitives.collectives import ExternalAxis


def _param(v) -> str:
    if isinstance(v, ExternalAxis):
        return f"axis:{v.name!r}"
    if isinstance(v, (Jaxpr, ClosedJaxpr)):
        return "{" + "\n".join(_lines(v.jaxpr if isinstance(v, ClosedJaxpr) else v)) + "}"
    if isinstance(v, (tuple, list)):
        return "(" + ",".join(_param(x) for x in v) + ")"
    if isinstance(v, np.ndarray):
        digest = hashlib.blake2b(np.ascontiguousarray(v).tobytes(), digest_size=8).hexdigest()
        return f"array:{v.dtype.str}{v.shape}:{digest}"
    if callable(v) and not isinstance(v, type):
        return f"fn:{getattr(v, '__qualname__', type(v).__name__)}"
    if isinstance(v, dict):
        return "dict"  # stores filled by custom rules at run time, not part of the program
    return repr(v)


def _lines(jaxpr: Jaxpr) -> list[str]:
    names: dict = {}

    def name(a):
        if type(a) is Literal:
            return f"lit:{np.asarray(a.val).dtype.str}:{np.asarray(a.val).tolist()!r}"
        if a not in names:
            names[a] = f"v{len(names)}"
        return names[a]

    lines = [" ".join(f"{name(v)}:{v.aval.str_short()}" for v in list(jaxpr.constvars) + list(jaxpr.invars))]
    for e in jaxpr.eqns:
        ps = ",".join(f"{k}={_param(v)}" for k, v in sorted(e.params.items()))
        outs = " ".join(f"{name(v)}:{v.aval.str_short()}" for v in e.outputs)
        lines.append(f"{outs} = {e.prim.name}[{ps}] {' '.join(name(a) for a in e.inputs)}")
    lines.append("out " + " ".join(name(a) for a in jaxpr.outvars))
    return lines


def program_key(jaxpr: Jaxpr) -> bytes:
    return "\n".join(_lines(jaxpr)).encode()


def describe_program(jaxpr: Jaxpr, name: str):
    """``(what, [(label, value), ...])`` for a mismatch message: the arguments by name, then the equations."""
    arg_names = jaxpr.cache.get("arg_names") or []
    items = []
    for i, v in enumerate(jaxpr.invars):
        label = f"argument {arg_names[i]!r}" if i < len(arg_names) else f"input {i}"
        items.append((label, v.aval.str_short()))
    for i, line in enumerate(_lines(jaxpr)[1:-1]):
        items.append((f"operation {i}", line.split(" = ", 1)[1].split("[", 1)[0]))
    return (f"the jitted function {name!r}", items)


def _binds_external(v) -> bool:
    if isinstance(v, ClosedJaxpr):
        v = v.jaxpr
    if isinstance(v, Jaxpr):
        return any(_is_external(e) or any(_binds_external(p) for p in e.params.values()) for e in v.eqns)
    if isinstance(v, (tuple, list)):
        return any(_binds_external(x) for x in v)
    return False


def _is_external(e) -> bool:
    return getattr(e.prim, "collective", False) and any(isinstance(a, ExternalAxis) for a in e.params["axes"])


def first_collective(jaxpr: Jaxpr):
    """The first equation of ``jaxpr`` that is, or holds in a body, a collective over a process axis; or None."""
    return next((e for e in jaxpr.eqns if _is_external(e) or any(_binds_external(v) for v in e.params.values())),
                None)
