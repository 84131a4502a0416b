"""Sizes that depend on the dynamic axes of an export, found by tracing at several sizes.

funclib traces with concrete shapes, so a jaxpr holds the example's batch size wherever it was used: in avals, in
shape parameters (``reshape``'s ``new_sizes``, ``broadcast_in_dim``'s ``shape``, a ``scan``'s ``length``), in
literals (``sum / 32.0``) and in constants created while tracing (``fl.zeros((32, hidden))``). The exporter traces
the function again with each dynamic axis at twice its size (all subsets of the axes, so products like
``batch * seq`` are found) and once at three times the sizes to verify. Every number that changes between the
traces is a multilinear polynomial in the axis sizes (a ``Dim``); lowering rules compute those in the graph.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from funclib.core import Tensor
from funclib.jaxpr import ClosedJaxpr, Eqn, Jaxpr, Literal, Var

from ._errors import ExportError, where


class Dim:
    """A size that depends on dynamic axes: a multilinear polynomial in their sizes.

    ``terms`` maps a sorted tuple of axis names (a monomial; ``()`` is the constant) to a rational coefficient;
    ``value`` is the size in the example trace.
    """

    __slots__ = ("terms", "value")

    def __init__(self, terms: dict, value):
        self.terms = {m: c for m, c in sorted(terms.items()) if c != 0}
        self.value = value

    def evaluate(self, sizes: dict):
        total = Fraction(0)
        for m, c in self.terms.items():
            p = Fraction(c)
            for s in m:
                p *= sizes[s]
            total += p
        return total

    def affine(self, a: int, b: int) -> Dim:
        """``a * self + b``."""
        terms = {m: c * a for m, c in self.terms.items()}
        terms[()] = terms.get((), Fraction(0)) + b
        return Dim(terms, self.value * a + b)

    def __eq__(self, other):
        return type(other) is Dim and self.terms == other.terms

    def __hash__(self):
        return hash(tuple(self.terms.items()))

    def __str__(self):
        parts = []
        for m, c in self.terms.items():
            name = "*".join(m)
            if not m:
                parts.append(str(c))
            elif c == 1:
                parts.append(name)
            else:
                parts.append(f"{c}*{name}")
        return " + ".join(parts) or "0"

    __repr__ = __str__


def fit(values: list, points: list[dict], names: list[str], where_: str):
    """The multilinear polynomial through ``values`` at ``points`` (subsets of doubled axes, then a check point).

    Returns the base value when all values agree, else a ``Dim``; raises ``ExportError`` when the check fails.
    """
    base = values[0]
    if all(_same(v, base) for v in values[1:]):
        return base
    is_int = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values)
    is_num = all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in values)
    if not is_num:
        raise ExportError(
            f"{where_} changes with the size of a dynamic axis ({values[0]!r} at the example size, "
            f"{values[1]!r} at another): the traced program's structure depends on that size"
        )
    k = len(names)
    base_sizes = points[0]
    # coefficients in u-space, where an axis is at e * (1 + u): Moebius inversion over the subsets
    subset_value = {}
    for i, mask in enumerate(itertools.product((0, 1), repeat=k)):
        subset_value[mask] = Fraction(values[i]) if is_int else Fraction(float(values[i]))
    c_u = {}
    for mask in subset_value:
        total = Fraction(0)
        on = [j for j in range(k) if mask[j]]
        for r in range(len(on) + 1):
            for sub in itertools.combinations(on, r):
                m2 = tuple(1 if j in sub else 0 for j in range(k))
                total += (-1) ** (len(on) - r) * subset_value[m2]
        c_u[mask] = total
    # back to the sizes: u_j = S_j / e_j - 1
    terms: dict = {}
    for mask, c in c_u.items():
        if c == 0:
            continue
        on = [j for j in range(k) if mask[j]]
        for r in range(len(on) + 1):
            for sub in itertools.combinations(on, r):
                coef = c * (-1) ** (len(on) - r)
                for j in sub:
                    coef /= base_sizes[names[j]]
                mono = tuple(sorted(names[j] for j in sub))
                terms[mono] = terms.get(mono, Fraction(0)) + coef
    d = Dim(terms, values[0])
    check = d.evaluate(points[-1])
    ok = check == Fraction(values[-1]) if is_int else np.isclose(float(check), float(values[-1]), rtol=1e-9, atol=0)
    if not ok:
        raise ExportError(
            f"{where_} depends on the size of a dynamic axis in a way the exporter cannot express (it is not a "
            f"polynomial in the axis sizes: {values[0]!r} at the example size, {values[-1]!r} at three times it). "
            "Compute it from the input's shape with traced operations, or export with a static size."
        )
    return d


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.shape == b.shape
            and bool(np.array_equal(a, b, equal_nan=True))
        )
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - incomparable objects are different
        return a is b


# ---------------------------------------------------------------------------------------------------------------
# Aligning the traces


@dataclass
class ConstInfo:
    """A constant whose shape depends on a dynamic axis: ``kind`` is ``"fill"`` (every element ``value``),
    ``"iota"`` (``arange`` along ``axis``, broadcast) or ``"tri"`` (a matrix holding ``value[0]`` where
    ``col - row <= axis`` and ``value[1]`` elsewhere: causal masks, ``tril``/``triu`` of ones)."""

    kind: str
    shape: tuple
    value: Any = None
    axis: int = 0


class Symbolic:
    """What changes between the traces, keyed by the example trace's objects."""

    def __init__(self):
        self.var_shape: dict[Var, tuple] = {}
        self.literal: dict[int, Dim] = {}  # id(Literal) -> Dim
        self.params: dict[int, dict] = {}  # id(Eqn) -> {param: symbolic value}
        self.consts: dict[Var, ConstInfo] = {}

    def shape(self, v) -> tuple:
        if type(v) is Literal:
            return ()
        return self.var_shape.get(v, v.aval.shape)


def align(traces: list[ClosedJaxpr], points: list[dict], names: list[str]) -> Symbolic:
    """Compare the jaxprs traced at ``points`` and record every size that changes as a ``Dim``."""
    sym = Symbolic()
    _walk(sym, [t.jaxpr for t in traces], [t.consts for t in traces], points, names, "the program")
    return sym


def _walk(sym, js: list[Jaxpr], consts: list[list] | None, points, names, ctx: str):
    for attr in ("constvars", "invars", "eqns", "outvars"):
        if len({len(getattr(j, attr)) for j in js}) != 1:
            raise ExportError(
                f"{ctx} traces to a different number of {attr} when a dynamic axis changes size: the program's "
                "structure depends on that size (a Python branch on a shape?); export with a static size"
            )
    for vs in zip(*[j.constvars for j in js]):
        _var(sym, vs, points, names, ctx)
    if consts is not None:
        for i, vs in enumerate(zip(*[j.constvars for j in js])):
            vals = [np.asarray(c[i]._value if isinstance(c[i], Tensor) else c[i]) for c in consts]
            if any(v.shape != vals[0].shape for v in vals) or not all(_same(v, vals[0]) for v in vals):
                sym.consts[vs[0]] = _const_info(vals, sym.shape(vs[0]), ctx)
    for vs in zip(*[j.invars for j in js]):
        _var(sym, vs, points, names, ctx)
    for es in zip(*[j.eqns for j in js]):
        e0: Eqn = es[0]
        here = f"{ctx}: '{e0.prim.name}'{where(e0)}"
        if any(e.prim is not e0.prim for e in es):
            raise ExportError(
                f"{here} is a different primitive when a dynamic axis changes size ({es[1].prim.name}): the "
                "program's structure depends on that size; export with a static size"
            )
        for ins in zip(*[e.inputs for e in es]):
            if any(type(a) is not type(ins[0]) for a in ins):
                raise ExportError(f"{here}: an input is a constant at one size and computed at another")
            if type(ins[0]) is Literal:
                vals = [np.asarray(a.val).item() for a in ins]
                d = fit(vals, points, names, f"a literal of {here}")
                if isinstance(d, Dim):
                    sym.literal[id(ins[0])] = d
        changed = {}
        for k in e0.params:
            vals = [e.params[k] for e in es]
            r = _param(sym, vals, points, names, f"parameter '{k}' of {here}")
            if r is not _SAME:
                changed[k] = r
        if changed:
            sym.params[id(e0)] = changed
        for vs in zip(*[e.outputs for e in es]):
            _var(sym, vs, points, names, here)
    for outs in zip(*[j.outvars for j in js]):
        if type(outs[0]) is Var:
            _var(sym, outs, points, names, ctx)
        elif type(outs[0]) is Literal:
            vals = [np.asarray(a.val).item() if type(a) is Literal else None for a in outs]
            if not all(_same(v, vals[0]) for v in vals):
                raise ExportError(
                    f"{ctx} returns a constant that depends on the size of a dynamic axis; return a "
                    "value computed from the inputs, or export with a static size"
                )


_SAME = object()
_VARIES = object()  # a non-numeric parameter that differs: an error only if a rule reads it


def _param(sym, vals, points, names, ctx):
    v0 = vals[0]
    if isinstance(v0, ClosedJaxpr):
        _walk(sym, [v.jaxpr for v in vals], [v.consts for v in vals], points, names, ctx)
        return _SAME
    if isinstance(v0, Jaxpr):
        _walk(sym, vals, None, points, names, ctx)
        return _SAME
    if isinstance(v0, (tuple, list)):
        if any(not isinstance(v, (tuple, list)) or len(v) != len(v0) for v in vals):
            return _VARIES
        parts = [_param(sym, list(p), points, names, ctx) for p in zip(*vals)]
        if all(p is _SAME for p in parts):
            return _SAME
        if any(p is _VARIES for p in parts):
            return _VARIES
        return type(v0)(v0[i] if p is _SAME else p for i, p in enumerate(parts))
    if isinstance(v0, (int, np.integer)) and not isinstance(v0, bool):
        r = fit(list(vals), points, names, ctx)
        return r if isinstance(r, Dim) else _SAME
    return _SAME if all(_same(v, v0) for v in vals[1:]) else _VARIES


def _var(sym, vs, points, names, ctx):
    shapes = [v.aval.shape for v in vs]
    if len({len(s) for s in shapes}) != 1:
        raise ExportError(f"{ctx}: a value's rank changes with the size of a dynamic axis; export with a static size")
    if all(s == shapes[0] for s in shapes):
        return
    dims = tuple(
        fit([s[i] for s in shapes], points, names, f"a dimension of a value in {ctx}") for i in range(len(shapes[0]))
    )
    sym.var_shape[vs[0]] = dims


def _arange_along(v, axis):
    return np.broadcast_to(
        np.arange(v.shape[axis], dtype=v.dtype).reshape([-1 if i == axis else 1 for i in range(v.ndim)]), v.shape
    )


def _triangle(vals: list[np.ndarray]):
    """``(k, (a, b))`` when every value is a matrix of ``a`` where ``col - row <= k`` and ``b`` elsewhere, with
    one ``k`` for all sizes; else None."""
    if vals[0].ndim != 2:
        return None
    found = None
    for v in vals:
        uniq = np.unique(v)
        if uniq.size != 2:
            return None
        diff = np.arange(v.shape[1])[None, :] - np.arange(v.shape[0])[:, None]
        match = None
        for a, b in ((uniq[0], uniq[1]), (uniq[1], uniq[0])):
            for k in range(-v.shape[0], v.shape[1] + 1):
                if np.array_equal(v, np.where(diff <= k, a, b)):
                    match = (k, (a, b))
                    break
            if match:
                break
        if match is None or (
            found is not None and (match[0] != found[0] or not all(_same(p, q) for p, q in zip(match[1], found[1])))
        ):
            return None
        found = match
    return found


def _const_info(vals: list[np.ndarray], shape: tuple, ctx: str) -> ConstInfo:
    v0 = vals[0]
    flat = [v.reshape(-1) for v in vals]
    if all(f.size and np.array_equal(f, np.full_like(f, f[0]), equal_nan=True) for f in flat) and all(
        _same(f[0], flat[0][0]) for f in flat
    ):
        return ConstInfo("fill", shape, flat[0][0])
    if v0.dtype != np.bool_:
        for axis in range(v0.ndim):
            if all(np.array_equal(v, _arange_along(v, axis)) for v in vals):
                return ConstInfo("iota", shape, None, axis)
    tri = _triangle(vals)
    if tri is not None:
        return ConstInfo("tri", shape, tri[1], tri[0])
    raise ExportError(
        f"a constant of shape {v0.shape} created while tracing {ctx} depends on the size of a dynamic axis and is "
        "neither filled with one value, an arange nor a triangle; build it with traced operations from the "
        "input (e.g. fl.zeros_like, fl.broadcast_to of an input-derived value), or export with a static size"
    )
