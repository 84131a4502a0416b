"""``cond`` and ``switch``: choose one of several branches, each carried as a jaxpr.

``cond_p`` operands are ``index, *operands``; ``branches`` is a tuple of ClosedJaxprs with equal input and
output types. ``cond(pred, t, f)`` is ``switch(int(pred), (f, t))``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from funclib import dtypes
from funclib import tree as tree_util
from funclib.checks import check_callable, describe
from funclib.core import Primitive, Zero, _wrap, aval_of, is_undefined, set_trace
from funclib.errors import DTypeError, ShapeError
from funclib.jaxpr import ClosedJaxpr, Jaxpr, Var
from funclib.primitives.elementwise import convert, equal, maximum, minimum, not_equal
from funclib.primitives.shape import broadcast_in_dim, instantiate, select, zeros

from .._api_util import as_tensor_leaf
from ._common import (
    CarryTypeError,
    as_leaves,
    batch_jaxpr,
    batch_size,
    call,
    carry_mismatch,
    closed,
    jvp_jaxpr,
    pe_jaxpr,
    same_types,
    tangent_aval,
    to_front,
    trace_user_body,
    transpose_call,
)

cond_p = Primitive("cond", multiple_results=True, linear=True)  # linear where its branches are
cond_p.runs_on_devices = True  # its impl evaluates funclib operations
cond_p.family = "control"
cond_p.batch_named = True


def _clamp(i: int, n: int) -> int:
    return min(max(i, 0), n - 1)


@cond_p.def_impl
def _cond_impl(index, *ops, branches):
    b = branches[_clamp(int(_wrap(index).item()), len(branches))]  # on a device: the one value read back
    with set_trace(None):
        out = call(b, *[_wrap(o) for o in ops])
    return [o._value for o in out]


@cond_p.def_abstract_eval
def _cond_abstract(index, *avals, branches):
    if index.shape != () or index.dtype not in dtypes.INTEGER:
        raise DTypeError(f"cond: the branch index must be an integer scalar, got {index.str_short()}")
    outs = branches[0].out_avals
    for k, b in enumerate(branches):
        if not same_types(avals, b.in_avals):
            raise ShapeError(
                f"cond: operands [{', '.join(a.str_short() for a in avals)}] do not match the inputs of "
                f"branch {k} "
                f"[{', '.join(a.str_short() for a in b.in_avals)}]"
            )
        if not same_types(outs, b.out_avals):
            raise CarryTypeError(f"cond: branch {k} returns different types than branch 0")
    return list(outs)


@cond_p.def_jvp
def _cond_jvp(primals, tangents, *, branches):
    index, ops = primals[0], primals[1:]
    n_out = len(branches[0].out_avals)
    nz = [type(t) is not Zero for t in tangents[1:]]
    out_nz = [False] * n_out
    for b in branches:
        out_nz = [x or y for x, y in zip(out_nz, jvp_jaxpr(b, nz, [False] * n_out)[1])]
    jbs = tuple(jvp_jaxpr(b, nz, out_nz)[0] for b in branches)
    outs = cond_p.bind(index, *ops, *[t for t, m in zip(tangents[1:], nz) if m], branches=jbs)
    prim, tans = outs[:n_out], iter(outs[n_out:])
    return prim, [next(tans) if m else Zero(tangent_aval(aval_of(o))) for o, m in zip(prim, out_nz)]


@cond_p.def_vmap
def _cond_vmap(args, dims, *, branches, axis=None, lanes=None):
    size = batch_size(args, dims, lanes)
    n_out = len(branches[0].out_avals)
    ops = [to_front(a, d) for a, d in zip(args[1:], dims[1:])]
    ops_b = [d is not None for d in dims[1:]]
    if dims[0] is not None:
        # a per-lane choice: every branch runs on every lane and the results are selected
        idx = to_front(args[0], dims[0])
        idx = minimum(maximum(idx, 0), len(branches) - 1)
        results = [call(batch_jaxpr(b, size, ops_b, [True] * n_out, axis)[0], *ops) for b in branches]
        out = results[0]
        for k in range(1, len(branches)):
            pick = equal(idx, k)
            out = [
                select(broadcast_in_dim(pick, aval_of(r).shape, (0,)), o, r) for o, r in zip(results[k], out)
            ]
        return out, [0] * n_out
    out_b = [False] * n_out
    for b in branches:
        out_b = [x or y for x, y in zip(out_b, batch_jaxpr(b, size, ops_b, [False] * n_out, axis)[1])]
    bjs = tuple(batch_jaxpr(b, size, ops_b, out_b, axis)[0] for b in branches)
    outs = cond_p.bind(args[0], *ops, branches=bjs)
    return outs, [0 if m else None for m in out_b]


@cond_p.def_partial_eval
def _cond_partial_eval(trace, args, params):
    branches = params["branches"]
    index, ops = args[0], args[1:]
    n_out = len(branches[0].out_avals)
    if not trace.is_known(index):
        return trace.stage(cond_p, args, params, branches[0].out_avals)
    uk = [not trace.is_known(o) for o in ops]
    out_uk = [False] * n_out
    for b in branches:
        out_uk = [x or y for x, y in zip(out_uk, pe_jaxpr(b, uk, [False] * n_out).out_unknowns)]
    splits = [pe_jaxpr(b, uk, out_uk) for b in branches]
    n_known = out_uk.count(False)
    # branches have different residuals: each known branch fills every branch's slots (zeros but its own)
    res_avals = [sp.known.out_avals[n_known:] for sp in splits]
    k_avals = [a for a, u in zip(branches[0].in_avals, uk) if not u]

    def known_branch(k):
        def f(*kops):
            outs = call(splits[k].known, *kops)
            res = []
            for j, avs in enumerate(res_avals):
                res += outs[n_known:] if j == k else [zeros(a) for a in avs]
            return outs[:n_known] + res

        return closed(f, k_avals, "cond branch (known part)")

    def unknown_branch(k):
        sp = splits[k]
        uj = sp.unknown.jaxpr
        invars = []
        for j, avs in enumerate(res_avals):
            invars += uj.invars[: sp.num_res] if j == k else [Var(a) for a in avs]
        j = Jaxpr(uj.constvars, invars + uj.invars[sp.num_res :], uj.eqns, uj.outvars)
        return ClosedJaxpr(j, sp.unknown.consts)

    kops = [o for o, u in zip(ops, uk) if not u]
    if n_known or any(res_avals):
        with set_trace(trace.parent):
            kouts = cond_p.bind(index, *kops, branches=tuple(known_branch(k) for k in range(len(branches))))
    else:
        kouts = []
    known, res = kouts[:n_known], kouts[n_known:]
    u_avals = [a for a, u in zip(branches[0].out_avals, out_uk) if u]
    ubranches = tuple(unknown_branch(k) for k in range(len(branches)))
    uouts = trace.stage(
        cond_p, [index, *res, *[o for o, u in zip(ops, uk) if u]], dict(branches=ubranches), u_avals
    )
    ui, ki = iter(uouts), iter(known)
    return [next(ui) if u else next(ki) for u in out_uk]


@cond_p.def_transpose
def _cond_transpose(cts, index, *ops, branches):
    if is_undefined(index):
        raise TypeError("cond: the branch index is an integer and cannot be a linear input")
    lin = [is_undefined(o) for o in ops]
    res = [o for o, m in zip(ops, lin) if not m]
    ins = branches[0].in_avals
    res_avals = [a for a, m in zip(ins, lin) if not m]
    ct_avals = [tangent_aval(a) for a in branches[0].out_avals]
    cts = [zeros(a) if c is None else instantiate(c) for c, a in zip(cts, ct_avals)]
    nres = len(res)

    def make(b):
        return closed(
            lambda *a: transpose_call(b, lin, a[:nres], a[nres:]), res_avals + ct_avals, "transpose of cond"
        )

    outs = cond_p.bind(index, *res, *cts, branches=tuple(make(b) for b in branches))
    it = iter(outs)
    return [None] + [next(it) if m else None for m in lin]


# ------------------------------------------------------------------------------------------------------------
# the public functions


def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
    """Apply ``branches[index](*operands)``; ``index`` is clamped to ``[0, len(branches) - 1]``.

    Every branch must return the same structure, shapes and dtypes. Under ``vmap`` with a batched ``index``
    every branch runs on every lane and the results are selected (so all branches must be safe to evaluate).

    Args:
      index: an integer scalar (tensor or Python int).
      branches: a sequence of functions of ``*operands``.
      *operands: pytrees of tensors passed to the chosen branch.

    >>> fl.switch(1, [lambda x: x + 1.0, lambda x: x * 10.0], fl.tensor(2.0))
    Tensor(20., dtype=float32)
    """
    if callable(branches) or not isinstance(branches, (list, tuple)):
        raise TypeError(f"switch: branches must be a list or tuple of functions, got {describe(branches)}")
    branches = list(branches)
    if not branches:
        raise ValueError("switch: need at least one branch")
    for i, b in enumerate(branches):
        check_callable(b, "switch", f"branches[{i}] (one of the functions)")
    idx = as_tensor_leaf(index, "switch (index)")
    if idx.shape != ():
        raise ShapeError(f"switch: the index must be a scalar, got shape {tuple(idx.shape)}")
    if idx.dtype not in dtypes.INTEGER and idx.dtype != dtypes.bool_:
        raise DTypeError(
            f"switch: the index must be an integer, got {idx.dtype.name}; convert it with .astype(fl.int32)"
        )
    return _bind_cond(convert(idx, np.int32), branches, operands, "switch")


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, traceable under every transform.

    Both branches are traced and must return the same structure, shapes and dtypes. Under ``vmap`` with a
    batched ``pred`` the cond becomes a select: **both branches run** on every lane and each lane keeps the
    result of its own branch (so both must be safe to evaluate, e.g. no out-of-range gathers you rely on the
    predicate to avoid). Reverse mode differentiates only the branch taken.

    Args:
      pred: a scalar; a non-boolean value counts as true when non-zero.
      true_fun, false_fun: functions of ``*operands``.
      *operands: pytrees of tensors.

    >>> fl.cond(fl.tensor(3.0) > 0, lambda x: x * 2.0, lambda x: -x, fl.tensor(3.0))
    Tensor(6., dtype=float32)
    """
    check_callable(true_fun, "cond", "true_fun")
    check_callable(false_fun, "cond", "false_fun")
    p = as_tensor_leaf(pred, "cond (pred)")
    if p.shape != ():
        raise ShapeError(
            f"cond: the predicate must be a scalar, got shape {tuple(p.shape)}; reduce it (fl.any/fl.all) "
            "or use fl.where for elementwise choices"
        )
    if p.dtype != dtypes.bool_:
        p = not_equal(p, _wrap(np.zeros((), p.dtype)))
    return _bind_cond(convert(p, np.int32), [false_fun, true_fun], operands, "cond")


def _bind_cond(index, funs, operands, op):
    leaves, tree, _ = as_leaves(tuple(operands), f"{op} (operands)")
    avals = [aval_of(x) for x in leaves]
    traced = [_trace_branch(f, tree, avals, op, None) for f in funs]
    if all(
        tr.tree == traced[0].tree and [a.shape for a in tr.avals] == [a.shape for a in traced[0].avals]
        for tr in traced
    ):
        # a leaf some branch returns as a Python scalar takes the dtype the other branches give it
        target = []
        for i, a in enumerate(traced[0].avals):
            strong = [tr.avals[i].dtype for tr in traced if not tr.weak[i]]
            target.append(strong[0] if strong else a.dtype)
        for k, tr in enumerate(traced):
            casts = {i: d for i, d in enumerate(target) if tr.weak[i] and tr.avals[i].dtype != d}
            if casts:
                traced[k] = _trace_branch(funs[k], tree, avals, op, casts)
    first = traced[0]
    for k, tr in enumerate(traced[1:], 1):
        if tr.tree != first.tree or not same_types(tr.avals, first.avals):
            names = ("false_fun", "true_fun") if op == "cond" else ("branch 0", f"branch {k}")
            raise CarryTypeError(
                carry_mismatch(
                    op,
                    f"the outputs of {names[0]} and {names[1]}",
                    first.tree,
                    first.avals,
                    tr.tree,
                    tr.avals,
                    fix="Fix: make every branch return the same structure; cast with .astype(...) where "
                    "dtypes differ.",
                    labels=names,
                )
            )
    hoisted = [h for tr in traced for h in tr.hoisted]
    branches = []
    for k, tr in enumerate(traced):
        j = tr.jaxpr.jaxpr
        own = len(tr.hoisted)
        invars = []
        for m, other in enumerate(traced):
            invars += j.invars[:own] if m == k else [Var(aval_of(h)) for h in other.hoisted]
        branches.append(
            ClosedJaxpr(Jaxpr(j.constvars, invars + j.invars[own:], j.eqns, j.outvars), tr.jaxpr.consts)
        )
    outs = cond_p.bind(index, *hoisted, *leaves, branches=tuple(branches))
    return tree_util.unflatten(first.tree, outs)


class _Branch(NamedTuple):
    jaxpr: ClosedJaxpr
    hoisted: list
    tree: Any
    avals: list
    weak: list


def _trace_branch(fun, tree, avals, op, casts) -> _Branch:
    store = {}

    def flat(*xs):
        res = fun(*tree_util.unflatten(tree, list(xs)))
        leaves, t, weak = as_leaves(res, f"{op} (branch output)")
        if casts:
            leaves = [convert(x, casts[i]) if i in casts else x for i, x in enumerate(leaves)]
            weak = [w and i not in casts for i, w in enumerate(weak)]
        store["out"] = (t, [aval_of(x) for x in leaves], weak)
        return leaves

    cj, hoisted, _ = trace_user_body(flat, avals, f"{op} branch")
    return _Branch(cj, hoisted, *store["out"])


__all__ = ["cond", "switch", "cond_p"]
