"""Jaxpr-to-jaxpr transforms shared by the control-flow rules.

A loop or branch body is a ``ClosedJaxpr``; each rule of a higher-order primitive transforms its bodies once
per call (never per iteration): ``jvp_jaxpr`` (forward mode), ``batch_jaxpr`` (vmap), ``pe_jaxpr`` (split into
the part computable now and the part that depends on unknown inputs), ``transpose_call`` (reverse mode of a
linear body), plus ``dce`` and loop-invariance analysis. Bodies are re-traced under the transform, so a body
that itself contains a loop is handled by that loop's rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from funclib import tree as tree_util
from funclib.core import ShapedArray, Tensor, Tracer, _state, _wrap, aval_of, set_trace
from funclib.errors import FunclibError
from funclib.jaxpr import (
    ClosedJaxpr,
    Jaxpr,
    Literal,
    Var,
    eqn_has_effects,
    eval_jaxpr,
    partial_eval_jaxpr,
    trace_to_jaxpr,
)
from funclib.primitives.shape import broadcast_in_dim, moveaxis, zeros

from .._api_util import as_tensor_leaf
from ..autodiff import JVPTrace, JVPTracer, backward_pass
from ..batching import BatchTrace, BatchTracer


class CarryTypeError(FunclibError, TypeError):
    """A loop body or branch returned values whose structure, shape or dtype differ from what is required."""


def tangent_aval(a: ShapedArray) -> ShapedArray:
    return ShapedArray(a.shape, a.dtype)


def closed(fun: Callable, avals: Sequence[ShapedArray], name: str) -> ClosedJaxpr:
    """Trace ``fun(*tracers) -> list`` into a ClosedJaxpr whose consts are concrete values.

    Only internal functions of explicit inputs are traced here, so a traced const would mean a leaked tracer.
    """
    jaxpr, consts, _ = trace_to_jaxpr(fun, list(avals), name=name)
    fixed = []
    for c in consts:
        if isinstance(c, Tracer):
            raise AssertionError(f"{name}: an internal body captured a traced value {c.aval.str_short()}")
        fixed.append(_wrap(c) if isinstance(c, np.ndarray) else c)
    return ClosedJaxpr(jaxpr, fixed)


def trace_user_body(fun: Callable, avals: Sequence[ShapedArray], name: str):
    """Trace a user function; captured values (maybe tracers of enclosing transforms) become leading inputs.

    Returns ``(closed_jaxpr, hoisted_values, outputs)``; the jaxpr takes ``hoisted_values + inputs``.
    """
    jaxpr, consts, outs = trace_to_jaxpr(fun, list(avals), name=name)
    hoisted = [_wrap(c) if isinstance(c, np.ndarray) else c for c in consts]
    body = Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.eqns, jaxpr.outvars)
    return ClosedJaxpr(body, []), hoisted, outs


def call(cj: ClosedJaxpr, *args) -> list:
    """Evaluate a closed jaxpr at the current trace; every output a Tensor (or tracer)."""
    return as_tensors(cj.jaxpr, eval_jaxpr(cj.jaxpr, cj.consts, *args))


def as_tensors(jaxpr: Jaxpr, outs: list) -> list:
    """``outs`` of ``jaxpr`` as Tensors: an output that is one of its constants or a literal comes back from
    ``eval_jaxpr`` as the raw value (an optimized body's constants are NumPy arrays)."""
    if all(isinstance(o, Tensor) for o in outs):
        return outs
    return [o if isinstance(o, Tensor) else _wrap(np.asarray(getattr(o, "_value", o), v.aval.dtype))
            for o, v in zip(outs, jaxpr.outvars)]


def permute(cj: ClosedJaxpr, in_order: Sequence[int] | None = None, out_order: Sequence[int] | None = None):
    """The same jaxpr with its inputs/outputs listed in the given order (indices into the old lists)."""
    j = cj.jaxpr
    ins = j.invars if in_order is None else [j.invars[i] for i in in_order]
    outs = j.outvars if out_order is None else [j.outvars[i] for i in out_order]
    return ClosedJaxpr(Jaxpr(j.constvars, ins, j.eqns, outs), cj.consts)


def interleave_order(n: int, groups: Sequence[Sequence[bool]]) -> list[int]:
    """Order for a jaxpr laid out as ``[all n primals, extras for mask]``: primal group k then its extras.

    ``groups`` splits the n primals into consecutive groups by their masks; extras follow the same masks.
    """
    order, p, e = [], 0, n
    for mask in groups:
        order.extend(range(p, p + len(mask)))
        k = sum(mask)
        order.extend(range(e, e + k))
        p += len(mask)
        e += k
    return order


# ------------------------------------------------------------------------------------------------------------
# forward mode


def jvp_jaxpr(cj: ClosedJaxpr, nonzeros: Sequence[bool], instantiate: Sequence[bool]):
    """``(jaxpr, out_nonzeros)``: the jaxpr maps ``[primals..., tangents of nonzero inputs...]`` to
    ``[primal outs..., tangents of nonzero outs...]``; ``instantiate`` forces an output tangent to exist."""

    n = len(cj.in_avals)
    avals = list(cj.in_avals) + [tangent_aval(a) for a, nz in zip(cj.in_avals, nonzeros) if nz]
    out_nz: list[bool] = []

    def f(*args):
        tangents = iter(args[n:])
        jt = JVPTrace(_state.trace, name="jvp of a loop body")
        ins = [jt.new(p, next(tangents)) if nz else p for p, nz in zip(args[:n], nonzeros)]
        with set_trace(jt):
            outs = call(cj, *ins)
        prim_outs, tan_outs = [], []
        for o, inst in zip(outs, instantiate):
            if type(o) is JVPTracer and o._trace is jt:
                p, t = o.primal, o.tangent
            else:
                p, t = o, None
            prim_outs.append(p)
            if t is None and inst:
                t = zeros(tangent_aval(aval_of(p)))
            out_nz.append(t is not None)
            if t is not None:
                tan_outs.append(t)
        return prim_outs + tan_outs

    return closed(f, avals, "jvp"), out_nz


# ------------------------------------------------------------------------------------------------------------
# batching


def batch_jaxpr(cj: ClosedJaxpr, size: int, batched: Sequence[bool], instantiate: Sequence[bool], axis=None):
    """``(jaxpr, out_batched)``: batched inputs and outputs carry the batch as their leading axis. Inside a named
    ``axis`` (a ``batching.NamedAxis``), collectives in the body reduce over it."""

    avals = [ShapedArray((size,) + a.shape, a.dtype) if b else a for a, b in zip(cj.in_avals, batched)]
    out_b: list[bool] = []

    def f(*args):
        bt = BatchTrace(_state.trace, size, axis)
        ins = [bt.new(x, 0) if b else x for x, b in zip(args, batched)]
        with set_trace(bt):
            outs = call(cj, *ins)
        res = []
        for o, inst in zip(outs, instantiate):
            if type(o) is BatchTracer and o._trace is bt:
                res.append(moveaxis(o.val, o.bdim, 0))
                out_b.append(True)
            elif inst:
                a = aval_of(o)
                res.append(broadcast_in_dim(o, (size,) + a.shape, tuple(range(1, len(a.shape) + 1))))
                out_b.append(True)
            else:
                res.append(o)
                out_b.append(False)
        return res

    return closed(f, avals, "vmap"), out_b


def to_front(x, d, size: int | None = None):
    """Move batch axis ``d`` to the front; given ``size``, broadcast an unbatched ``x`` (``d is None``)."""
    if d is None:
        if size is None:
            return x
        a = aval_of(x)
        return broadcast_in_dim(x, (size,) + a.shape, tuple(range(1, len(a.shape) + 1)))
    return moveaxis(x, d, 0)


def batch_size(args, dims, lanes=None) -> int:
    """The batch size of the batched operands (``lanes`` when none is batched)."""
    return next((aval_of(a).shape[d] for a, d in zip(args, dims) if d is not None), lanes)


# ------------------------------------------------------------------------------------------------------------
# partial evaluation


class Split:
    """The result of ``pe_jaxpr``: ``known`` maps known inputs to ``known outs + residuals``; ``unknown`` maps
    ``residuals + unknown inputs`` to the unknown outputs."""

    __slots__ = ("known", "unknown", "out_unknowns", "num_res")

    def __init__(self, known, unknown, out_unknowns, num_res):
        self.known = known
        self.unknown = unknown
        self.out_unknowns = out_unknowns
        self.num_res = num_res


def pe_jaxpr(cj: ClosedJaxpr, in_unknowns: Sequence[bool], instantiate: Sequence[bool]) -> Split:
    """Split ``cj`` with ``partial_eval_jaxpr``; nested loops and branches are split by their own rules, so
    the non-linear work of an inner loop stays on the known side."""
    known, unknown, out_uk, num_res = partial_eval_jaxpr(cj.jaxpr, list(in_unknowns), list(instantiate))
    return Split(ClosedJaxpr(known, cj.consts), ClosedJaxpr(unknown, []), out_uk, num_res)


def dce(j: Jaxpr, used_outputs: Sequence[bool], keep_effects: bool = True) -> Jaxpr:
    """Drop the unused outputs and every equation that only they needed (inputs are kept). Effects stay unless
    ``keep_effects`` is False (for a jaxpr that recomputes values whose effects happen elsewhere)."""
    outvars = [v for v, u in zip(j.outvars, used_outputs) if u]
    live = {v for v in outvars if type(v) is Var}
    eqns = []
    for eqn in reversed(j.eqns):
        if any(o in live for o in eqn.outputs) or (keep_effects and eqn_has_effects(eqn)):
            eqns.append(eqn)
            live.update(a for a in eqn.inputs if type(a) is Var)
    eqns.reverse()
    return Jaxpr(j.constvars, j.invars, eqns, outvars)


def invariant_vars(j: Jaxpr, invariant_inputs) -> set:
    """Variables computed only from ``invariant_inputs``, constvars and literals (loop invariants)."""
    inv = set(invariant_inputs) | set(j.constvars)
    for eqn in j.eqns:
        # an effect runs every iteration, so what it computes is not hoisted out of the loop
        if all(type(a) is Literal or a in inv for a in eqn.inputs) and not eqn_has_effects(eqn):
            inv.update(eqn.outputs)
    return inv


def drop_unused_inputs(cj: ClosedJaxpr, keep: Sequence[bool]) -> ClosedJaxpr:
    """Remove inputs not in ``keep``; they must be unused (after ``dce``)."""
    j = cj.jaxpr
    dropped = {v for v, k in zip(j.invars, keep) if not k}
    for eqn in j.eqns:
        if any(type(a) is Var and a in dropped for a in eqn.inputs):
            raise AssertionError("drop_unused_inputs: a dropped input is used")
    if any(type(v) is Var and v in dropped for v in j.outvars):
        raise AssertionError("drop_unused_inputs: a dropped input is an output")
    return ClosedJaxpr(
        Jaxpr(j.constvars, [v for v, k in zip(j.invars, keep) if k], j.eqns, j.outvars), cj.consts
    )


# ------------------------------------------------------------------------------------------------------------
# transposition


def transpose_call(cj: ClosedJaxpr, linear: Sequence[bool], nonlinear_vals: Sequence, cts: Sequence) -> list:
    """Cotangents of the linear inputs of ``cj`` (zeros where none flow), at the current trace."""

    j = cj.jaxpr
    nonlin_vars = [v for v, m in zip(j.invars, linear) if not m]
    lin_vars = [v for v, m in zip(j.invars, linear) if m]
    lj = Jaxpr(list(j.constvars) + nonlin_vars, lin_vars, j.eqns, j.outvars)
    res = backward_pass(lj, list(cj.consts) + list(nonlinear_vals), list(cts))
    return [zeros(tangent_aval(v.aval)) if c is None else c for v, c in zip(lin_vars, res)]


# ------------------------------------------------------------------------------------------------------------
# pytree helpers and carry checks


def as_leaves(tree, op: str):
    leaves, treedef = tree_util.flatten(tree)
    weak = [type(x) in (bool, int, float, complex) for x in leaves]
    return [as_tensor_leaf(x, op) for x in leaves], treedef, weak


def describe(treedef, avals) -> str:
    try:
        return str(tree_util.unflatten(treedef, [a.str_short() for a in avals]))
    except ValueError:
        return str(treedef)


def carry_mismatch(
    op: str, what: str, in_tree, in_avals, out_tree, out_avals, fix: str = "", labels=("input", "output")
) -> str:
    """An error message that prints both trees and names the first differing leaf."""
    w = max(len(x) for x in labels)
    lines = [
        f"{op}: {what} must have the same structure, shapes and dtypes.",
        f"  {labels[0] + ':':<{w + 1}} {describe(in_tree, in_avals)}",
        f"  {labels[1] + ':':<{w + 1}} {describe(out_tree, out_avals)}",
    ]
    if in_tree != out_tree:
        lines.append(f"  the tree structures differ: {in_tree} vs {out_tree}")
    else:
        pairs, _ = tree_util.flatten_with_path(tree_util.unflatten(in_tree, [0] * len(in_avals)))
        for (path, _), a, b in zip(pairs, in_avals, out_avals):
            if a.shape != b.shape or a.dtype != b.dtype:
                kind = "shape" if a.shape != b.shape else "dtype"
                where = tree_util.keystr(path) or "(the root)"
                lines.append(f"  leaf {where} differs in {kind}: {a.str_short()} vs {b.str_short()}")
                break
    if fix:
        lines.append(f"  {fix}")
    return "\n".join(lines)


def same_types(a: Sequence[ShapedArray], b: Sequence[ShapedArray]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype for x, y in zip(a, b))
