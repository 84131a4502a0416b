"""``while_loop`` and ``fori_loop``.

``while_p`` operands are ``cond_consts + body_consts + init``; ``cond_jaxpr`` maps ``cond_consts + carry`` to
a bool scalar and ``body_jaxpr`` maps ``body_consts + carry`` to the new carry. ``max_steps`` (or None) bounds
the number of iterations: the loop stops after that many even if the predicate still holds.

Reverse mode needs ``max_steps``: the partial-eval rule runs the primal loop forward saving the carry every
``ceil(sqrt(max_steps))`` steps, and stages the tangent computation as a scan over those segments that
recomputes each segment from its checkpoint. Transposing that scan recomputes one segment at a time, so memory
grows like ``sqrt(max_steps)`` instead of linearly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from funclib import dtypes
from funclib import tree as tree_util
from funclib.checks import check_callable, describe
from funclib.core import (
    Primitive,
    ShapedArray,
    Zero,
    _wrap,
    aval_of,
    concrete_or_none,
    is_undefined,
    set_trace,
)
from funclib.errors import DTypeError, FunclibError, ShapeError
from funclib.jaxpr import ClosedJaxpr, Jaxpr, Var, strip_effects
from funclib.primitives.elementwise import bitwise_and, convert, floor_divide, less
from funclib.primitives.indexing import dynamic_update_slice
from funclib.primitives.reduce import reduce_or
from funclib.primitives.shape import broadcast_in_dim, instantiate, iota, select

from .._api_util import as_tensor_leaf
from ._common import (
    CarryTypeError,
    as_leaves,
    batch_jaxpr,
    batch_size,
    call,
    carry_mismatch,
    closed,
    dce,
    drop_unused_inputs,
    interleave_order,
    jvp_jaxpr,
    pe_jaxpr,
    permute,
    same_types,
    tangent_aval,
    to_front,
    trace_user_body,
)
from .cond import cond
from .scan import _promote_weak, _scan_transpose, scan, scan_p

while_p = Primitive("while", multiple_results=True, linear=True)  # transposable with max_steps
while_p.runs_on_devices = True  # its impl evaluates funclib operations
while_p.family = "control"
while_p.batch_named = True


class WhileGradientError(FunclibError, TypeError):
    """Reverse-mode differentiation of a while_loop without a bound on its trip count."""


@while_p.def_impl
def _while_impl(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, max_steps):
    cc = [_wrap(a) for a in args[:cond_nconsts]]
    bc = [_wrap(a) for a in args[cond_nconsts : cond_nconsts + body_nconsts]]
    carry = [_wrap(a) for a in args[cond_nconsts + body_nconsts :]]
    k = 0
    with set_trace(None):
        while max_steps is None or k < max_steps:
            if not bool(call(cond_jaxpr, *cc, *carry)[0]):  # on a device: the predicate read back
                break
            carry = call(body_jaxpr, *bc, *carry)
            k += 1
    return [c._value for c in carry]


@while_p.def_abstract_eval
def _while_abstract(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, max_steps):
    cc, bc, carry = (
        avals[:cond_nconsts],
        avals[cond_nconsts : cond_nconsts + body_nconsts],
        avals[cond_nconsts + body_nconsts :],
    )
    if not same_types(list(cc) + list(carry), cond_jaxpr.in_avals):
        raise ShapeError("while_loop: operands do not match the cond function's inputs")
    if not same_types(list(bc) + list(carry), body_jaxpr.in_avals):
        raise ShapeError("while_loop: operands do not match the body function's inputs")
    (p,) = cond_jaxpr.out_avals
    if p.shape != () or p.dtype != dtypes.bool_:
        raise DTypeError(f"while_loop: the cond function must return a bool scalar, got {p.str_short()}")
    if not same_types(body_jaxpr.out_avals, carry):
        raise CarryTypeError("while_loop: the body's output types differ from the carry types")
    return list(carry)


# ------------------------------------------------------------------------------------------------------------
# forward mode


def _with_ignored_inputs(cj: ClosedJaxpr, avals) -> ClosedJaxpr:
    j = cj.jaxpr
    return ClosedJaxpr(
        Jaxpr(j.constvars, list(j.invars) + [Var(a) for a in avals], j.eqns, j.outvars), cj.consts
    )


@while_p.def_jvp
def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, max_steps):
    cnc, bnc = cond_nconsts, body_nconsts
    nz = [type(t) is not Zero for t in tangents]
    bc_nz, carry_nz = nz[cnc : cnc + bnc], nz[cnc + bnc :]
    while True:
        jb, out_nz = jvp_jaxpr(body_jaxpr, bc_nz + carry_nz, carry_nz)
        new = [a or b for a, b in zip(carry_nz, out_nz)]
        if new == carry_nz:
            break
        carry_nz = new
    body = permute(jb, interleave_order(bnc + len(carry_nz), [bc_nz, carry_nz]))
    carry = primals[cnc + bnc :]
    t_avals = [tangent_aval(aval_of(c)) for c, m in zip(carry, carry_nz) if m]
    cond_j = _with_ignored_inputs(cond_jaxpr, t_avals)
    tb = [t for t, m in zip(tangents[cnc : cnc + bnc], bc_nz) if m]
    ti = [instantiate(t) for t, m in zip(tangents[cnc + bnc :], carry_nz) if m]
    outs = while_p.bind(
        *primals[: cnc + bnc],
        *tb,
        *carry,
        *ti,
        cond_jaxpr=cond_j,
        body_jaxpr=body,
        cond_nconsts=cnc,
        body_nconsts=bnc + len(tb),
        max_steps=max_steps,
    )
    n = len(carry)
    prim, tans = outs[:n], iter(outs[n:])
    return prim, [next(tans) if m else Zero(tangent_aval(aval_of(o))) for o, m in zip(prim, carry_nz)]


# ------------------------------------------------------------------------------------------------------------
# vmap


@while_p.def_vmap
def _while_vmap(args, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, max_steps, axis=None, lanes=None):
    cnc, bnc = cond_nconsts, body_nconsts
    size = batch_size(args, dims, lanes)
    b = [d is not None for d in dims]
    cc_b, bc_b, carry_b = b[:cnc], b[cnc : cnc + bnc], b[cnc + bnc :]
    while True:
        carry_b = _batched_carry(body_jaxpr, size, bc_b, carry_b, axis)
        pred_b = batch_jaxpr(cond_jaxpr, size, cc_b + carry_b, [False], axis)[1][0]
        if pred_b and not all(carry_b):
            carry_b = [True] * len(carry_b)  # lanes finish at different times, so every carry is per lane
            continue
        break
    cc = [to_front(a, d) for a, d in zip(args[:cnc], dims[:cnc])]
    bc = [to_front(a, d) for a, d in zip(args[cnc : cnc + bnc], dims[cnc : cnc + bnc])]
    init = [
        to_front(a, d, size) if m else a for a, d, m in zip(args[cnc + bnc :], dims[cnc + bnc :], carry_b)
    ]
    bcond = batch_jaxpr(cond_jaxpr, size, cc_b + carry_b, [pred_b], axis)[0]
    bbody = batch_jaxpr(body_jaxpr, size, bc_b + carry_b, carry_b, axis)[0]
    out_dims = [0 if m else None for m in carry_b]
    if not pred_b:
        outs = while_p.bind(
            *cc,
            *bc,
            *init,
            cond_jaxpr=bcond,
            body_jaxpr=bbody,
            cond_nconsts=cnc,
            body_nconsts=bnc,
            max_steps=max_steps,
        )
        return outs, out_dims
    # the loop runs while any lane is active; finished lanes keep their carry
    cc_avals, carry_avals = bcond.in_avals[:cnc], bcond.in_avals[cnc:]
    bc_avals = bbody.in_avals[:bnc]

    def masked_body(*a):
        c_cc, c_bc, c = a[:cnc], a[cnc : cnc + bnc], a[cnc + bnc :]
        (active,) = call(bcond, *c_cc, *c)
        new = call(bbody, *c_bc, *c)
        return [select(broadcast_in_dim(active, aval_of(x).shape, (0,)), n, x) for n, x in zip(new, c)]

    def any_active(*a):
        return [reduce_or(call(bcond, *a)[0], (0,))]

    outs = while_p.bind(
        *cc,
        *cc,
        *bc,
        *init,
        cond_jaxpr=closed(any_active, cc_avals + carry_avals, "vmap of while_loop cond"),
        body_jaxpr=closed(masked_body, cc_avals + bc_avals + carry_avals, "vmap of while_loop body"),
        cond_nconsts=cnc,
        body_nconsts=cnc + bnc,
        max_steps=max_steps,
    )
    return outs, out_dims


def _batched_carry(body, size, bc_b, carry_b, axis=None):
    while True:
        out_b = batch_jaxpr(body, size, bc_b + carry_b, carry_b, axis)[1]
        new = [x or y for x, y in zip(carry_b, out_b)]
        if new == carry_b:
            return carry_b
        carry_b = new


# ------------------------------------------------------------------------------------------------------------
# partial evaluation and reverse mode


_NEEDS_MAX_STEPS = (
    "while_loop: reverse-mode differentiation (grad, vjp, jacrev) needs a bound on the number of "
    "iterations. Pass max_steps=N to fl.while_loop (the loop then stops after at most N steps; reverse "
    "mode recomputes from checkpoints, using memory that grows like sqrt(N)), or use fl.scan / "
    "fl.fori_loop with static bounds."
)


def _split_loop(cj, bj, cnc, bc_uk, carry_uk):
    """Split the body into its known and unknown parts; None when the predicate reads an unknown carry.

    Returns ``(split, carry_uk, known body, known cond)``; the known body and cond see only known carries.
    """
    carry_uk = list(carry_uk)
    while True:
        sp = pe_jaxpr(bj, list(bc_uk) + carry_uk, carry_uk)
        new = [a or b for a, b in zip(carry_uk, sp.out_unknowns)]
        if new == carry_uk:
            break
        carry_uk = new
    if pe_jaxpr(cj, [False] * cnc + carry_uk, [False]).out_unknowns[0]:
        return None
    nk = carry_uk.count(False)
    kbody = ClosedJaxpr(dce(sp.known.jaxpr, [True] * nk + [False] * sp.num_res), sp.known.consts)
    kcond = drop_unused_inputs(
        ClosedJaxpr(dce(cj.jaxpr, [True]), cj.consts), [True] * cnc + [not u for u in carry_uk]
    )
    return sp, carry_uk, kbody, kcond


def _segments(max_steps: int) -> tuple[int, int]:
    seg_len = math.isqrt(max_steps - 1) + 1 if max_steps > 1 else 1
    return seg_len, -(-max_steps // seg_len)


def _checkpointed(sp, kbody, kcond, cc, kbc, kinit, ubc_avals, uinit_avals, max_steps):
    """At the current trace, run the known loop saving checkpoints; return ``(known final carry, operands and
    params of the segment scan)``. The scan's operands hold ``None`` where the unknown values go."""
    seg_len, n_seg = _segments(max_steps)
    kfinal, ckpts, n = _forward_sweep(kcond, kbody, cc, kbc, kinit, seg_len, n_seg, max_steps)
    seg = _segment_jaxpr(
        sp, [aval_of(x) for x in kbc], ubc_avals, uinit_avals, [aval_of(x) for x in kinit], seg_len
    )
    ops = [*kbc, *[None] * len(ubc_avals), n, *[None] * len(uinit_avals)]
    ops += [iota(np.int64, (n_seg,)), *ckpts]
    params = dict(
        jaxpr=seg,
        num_consts=len(kbc) + len(ubc_avals) + 1,
        num_carry=len(uinit_avals),
        length=n_seg,
        reverse=False,
        unroll=1,
    )
    return kfinal, ops, params


def _fill(ops, values):
    it = iter(values)
    return [next(it) if o is None else o for o in ops]


@while_p.def_partial_eval
def _while_partial_eval(trace, args, params):
    cj, bj = params["cond_jaxpr"], params["body_jaxpr"]
    cnc, bnc, max_steps = params["cond_nconsts"], params["body_nconsts"], params["max_steps"]
    uk = [not trace.is_known(a) for a in args]
    split = None if any(uk[:cnc]) else _split_loop(cj, bj, cnc, uk[cnc : cnc + bnc], uk[cnc + bnc :])
    if split is None:
        return trace.stage(while_p, args, params, bj.out_avals)
    sp, carry_uk, kbody, kcond = split
    bc_uk = uk[cnc : cnc + bnc]
    cc, bc, init = args[:cnc], args[cnc : cnc + bnc], args[cnc + bnc :]
    kbc = [x for x, u in zip(bc, bc_uk) if not u]
    kinit = [x for x, u in zip(init, carry_uk) if not u]
    if max_steps is None or not any(carry_uk):
        with set_trace(trace.parent):
            kouts = while_p.bind(
                *cc,
                *kbc,
                *kinit,
                cond_jaxpr=kcond,
                body_jaxpr=kbody,
                cond_nconsts=cnc,
                body_nconsts=len(kbc),
                max_steps=max_steps,
            )
        if not any(carry_uk):
            return kouts
        # unbounded: the staged loop recomputes the known part (without its effects, which ran above); it evaluates
        # forwards, its transpose raises
        stripped = dict(
            params,
            cond_jaxpr=ClosedJaxpr(strip_effects(cj.jaxpr), cj.consts),
            body_jaxpr=ClosedJaxpr(strip_effects(bj.jaxpr), bj.consts),
        )
        uouts = trace.stage(while_p, args, stripped, bj.out_avals)
        ki = iter(kouts)
        return [o if u else next(ki) for o, u in zip(uouts, carry_uk)]
    ubc = [x for x, u in zip(bc, bc_uk) if u]
    uinit = [x for x, u in zip(init, carry_uk) if u]
    u_avals = [tangent_aval(aval_of(x)) for x in uinit]
    with set_trace(trace.parent):
        kfinal, ops, sparams = _checkpointed(
            sp, kbody, kcond, cc, kbc, kinit, [aval_of(x) for x in ubc], u_avals, max_steps
        )
    uouts = trace.stage(scan_p, _fill(ops, ubc + uinit), sparams, u_avals)
    ui, ki = iter(uouts), iter(kfinal)
    return [next(ui) if u else next(ki) for u in carry_uk]


@while_p.def_transpose
def _while_transpose(cts, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, max_steps):
    # a loop linear in its undefined operands, with non-linear state alongside (as staged by a partial
    # evaluation that could not split it): checkpoint the non-linear part now, then transpose the segment scan
    if max_steps is None:
        raise WhileGradientError(_NEEDS_MAX_STEPS)
    cnc, bnc = cond_nconsts, body_nconsts
    lin = [is_undefined(a) for a in args]
    split = (
        None
        if any(lin[:cnc])
        else _split_loop(cond_jaxpr, body_jaxpr, cnc, lin[cnc : cnc + bnc], lin[cnc + bnc :])
    )
    if split is None:
        raise TypeError("while_loop: the loop predicate depends on a linear input, so the loop is not linear")
    sp, carry_uk, kbody, kcond = split
    bc_lin = lin[cnc : cnc + bnc]
    cc, bc, init = args[:cnc], args[cnc : cnc + bnc], args[cnc + bnc :]
    kbc = [x for x, u in zip(bc, bc_lin) if not u]
    kinit = [x for x, u in zip(init, carry_uk) if not u]
    ubc = [x for x, u in zip(bc, bc_lin) if u]
    uinit = [x for x, u in zip(init, carry_uk) if u]
    u_avals = [x.aval if is_undefined(x) else tangent_aval(aval_of(x)) for x in uinit]
    _, ops, sparams = _checkpointed(
        sp, kbody, kcond, cc, kbc, kinit, [x.aval for x in ubc], u_avals, max_steps
    )
    u_cts = [c for c, u in zip(cts, carry_uk) if u]
    in_cts = _scan_transpose(u_cts, *_fill(ops, ubc + uinit), **sparams)
    it_c = iter(in_cts[len(kbc) : len(kbc) + len(ubc)])
    it_i = iter(in_cts[sparams["num_consts"] : sparams["num_consts"] + len(uinit)])
    out = [None] * cnc + [next(it_c) if u else None for u in bc_lin]
    out += [next(it_i) if u else None for u in carry_uk]
    return [c if is_undefined(a) else None for c, a in zip(out, args)]


def _i64(v: int):
    return _wrap(np.asarray(v, np.int64))


def _forward_sweep(kcond, kbody, cc, kbc, kinit, seg_len, n_seg, max_steps):
    """Run the known loop, saving its carry at the start of every segment of ``seg_len`` steps.

    Returns ``(final carry, checkpoints stacked over n_seg, steps taken)``. Unused checkpoint slots hold the
    initial carry, so recomputing from any slot evaluates the body only on states the loop can reach.
    """
    ck0 = [broadcast_in_dim(x, (n_seg,) + tuple(x.shape), tuple(range(1, x.ndim + 1))) for x in kinit]

    def pred(k, kc):
        return bitwise_and(less(k, _i64(max_steps)), call(kcond, *cc, *kc)[0])

    def outer_body(state):
        k, kc, ck = state
        seg = floor_divide(k, _i64(seg_len))
        ck = [
            dynamic_update_slice(
                c,
                broadcast_in_dim(x, (1,) + tuple(x.shape), tuple(range(1, x.ndim + 1))),
                [seg] + [_i64(0)] * x.ndim,
            )
            for c, x in zip(ck, kc)
        ]

        def inner_cond(s):
            return bitwise_and(less(s[0], _i64(seg_len)), pred(s[1], s[2]))

        def inner_body(s):
            return s[0] + 1, s[1] + 1, call(kbody, *kbc, *s[2])

        _, k, kc = while_loop(inner_cond, inner_body, (_i64(0), k, list(kc)), max_steps=seg_len)
        return k, kc, ck

    # bounded loops, so that differentiating this sweep again (reverse over reverse) is possible
    init = (_i64(0), list(kinit), ck0)
    k, kc, ck = while_loop(lambda s: pred(s[0], s[1]), outer_body, init, max_steps=n_seg)
    return kc, ck, k


def _segment_jaxpr(sp, kbc_avals, ubc_avals, uinit_avals, kinit_avals, seg_len) -> ClosedJaxpr:
    """The tangent computation of one segment: re-run the known body from the checkpoint step by step, feeding
    its residuals to the unknown body; steps past the trip count are skipped."""
    nkb, nub, nu, nk = len(kbc_avals), len(ubc_avals), len(uinit_avals), len(kinit_avals)
    i64 = ShapedArray((), np.dtype(np.int64))
    avals = [*kbc_avals, *ubc_avals, i64, *uinit_avals, i64, *kinit_avals]
    steps = _wrap(np.arange(seg_len, dtype=np.int64))
    # the forward sweep ran the known body's effects (prints, checks) once; recomputation must not repeat them
    known = ClosedJaxpr(strip_effects(sp.known.jaxpr), sp.known.consts)

    def segment(*a):
        kb, ub, n = a[:nkb], a[nkb : nkb + nub], a[nkb + nub]
        uc0 = a[nkb + nub + 1 : nkb + nub + 1 + nu]
        seg, kc0 = a[nkb + nub + 1 + nu], a[nkb + nub + 2 + nu :]

        def run(kc, uc):
            outs = call(known, *kb, *kc)
            return list(outs[:nk]), list(call(sp.unknown, *outs[nk:], *ub, *uc))

        def skip(kc, uc):
            return list(kc), list(uc)

        def step(carry, j):
            active = less(seg * seg_len + j, n)
            return list(cond(active, run, skip, *carry)), None

        (_, uc), _ = scan(step, [list(kc0), list(uc0)], steps)
        return uc

    return closed(segment, avals, "checkpointed while_loop segment")


# ------------------------------------------------------------------------------------------------------------
# the public functions


def while_loop(
    cond_fun: Callable[[Any], Any],
    body_fun: Callable[[Any], Any],
    init_val: Any,
    *,
    max_steps: int | None = None,
) -> Any:
    """Repeat ``val = body_fun(val)`` while ``cond_fun(val)`` is true; traced once, not unrolled.

    Semantics::

        val, k = init_val, 0
        while cond_fun(val) and (max_steps is None or k < max_steps):
            val, k = body_fun(val), k + 1
        return val

    Args:
      cond_fun: ``cond_fun(val) -> bool scalar``.
      body_fun: ``body_fun(val) -> val``, with the structure, shapes and dtypes of ``init_val``.
      init_val: a pytree of tensors (Python scalars take the dtype the body gives them).
      max_steps: an upper bound on the iterations. Needed for reverse mode (``grad``/``vjp``), which then
        recomputes from ``~sqrt(max_steps)`` checkpoints instead of storing every step.

    Forward mode and ``vmap`` work without ``max_steps``. Under ``vmap`` with a batched predicate the loop
    runs until every lane is done; finished lanes keep their values.

    >>> fl.while_loop(lambda x: x < 10.0, lambda x: x * 2.0, fl.tensor(1.0))
    Tensor(16., dtype=float32)
    """
    check_callable(cond_fun, "while_loop", "cond_fun")
    check_callable(body_fun, "while_loop", "body_fun")
    if max_steps is not None and (
        isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1
    ):
        raise ValueError(f"while_loop: max_steps must be a positive int or None, got {max_steps!r}")
    leaves, tree, weak = as_leaves(init_val, "while_loop (init_val)")
    store: dict = {}

    def flat_body(*xs):
        out = body_fun(tree_util.unflatten(tree, list(xs)))
        o, t, _ = as_leaves(out, "while_loop (body output)")
        store["out"] = (t, [aval_of(x) for x in o])
        return o

    for attempt in range(2):
        avals = [aval_of(x) for x in leaves]
        body, b_hoisted, _ = trace_user_body(flat_body, avals, "while_loop body")
        t, out_avals = store["out"]
        if t == tree and same_types(avals, out_avals):
            break
        if attempt == 0 and t == tree and _promote_weak(leaves, weak, avals, out_avals):
            continue
        raise CarryTypeError(
            carry_mismatch(
                "while_loop",
                "the value returned by body_fun and init_val",
                tree,
                avals,
                t,
                out_avals,
                "Fix: return a value with the structure of init_val; cast with .astype(...) where dtypes "
                "differ.",
            )
        )

    def flat_cond(*xs):
        p = as_tensor_leaf(cond_fun(tree_util.unflatten(tree, list(xs))), "while_loop (cond output)")
        if p.shape != () or p.dtype != dtypes.bool_:
            raise DTypeError(
                f"while_loop: cond_fun must return a bool scalar, got {p.dtype.name}{list(p.shape)}; "
                "compare explicitly (e.g. x < 10) and reduce arrays with fl.any / fl.all"
            )
        return [p]

    cj, c_hoisted, _ = trace_user_body(flat_cond, avals, "while_loop cond")
    outs = while_p.bind(
        *c_hoisted,
        *b_hoisted,
        *leaves,
        cond_jaxpr=cj,
        body_jaxpr=body,
        cond_nconsts=len(c_hoisted),
        body_nconsts=len(b_hoisted),
        max_steps=max_steps,
    )
    return tree_util.unflatten(tree, outs)


def _static_int(x):
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    c = concrete_or_none(x)
    if c is not None and c.shape == () and c.dtype in dtypes.INTEGER:
        return int(c)
    return None


def fori_loop(
    lower: Any,
    upper: Any,
    body_fun: Callable[[Any, Any], Any],
    init_val: Any,
    *,
    unroll: int | bool = 1,
    max_steps: int | None = None,
) -> Any:
    """``for i in range(lower, upper): val = body_fun(i, val)``; returns ``val``.

    With concrete bounds (Python ints or concrete tensors) this is a ``scan`` of ``upper - lower`` steps, so
    every transform, reverse mode included, applies. With traced bounds it is a ``while_loop``; pass
    ``max_steps`` to differentiate it in reverse mode.

    Args:
      lower, upper: integer scalars.
      body_fun: ``body_fun(i, val) -> val``.
      init_val: a pytree of tensors.
      unroll: passed to ``scan`` when the bounds are static.
      max_steps: passed to ``while_loop`` when they are not.

    >>> fl.fori_loop(0, 4, lambda i, x: x + i, fl.tensor(0))
    Tensor(6, dtype=int64)
    """
    check_callable(body_fun, "fori_loop", "body_fun")
    for name, v in (("lower", lower), ("upper", upper)):
        d = getattr(v, "dtype", None)
        if isinstance(v, (bool, float, complex)) or (d is not None and np.dtype(d) not in dtypes.INTEGER):
            raise TypeError(f"fori_loop: {name} must be an integer (a Python int or an integer scalar tensor), "
                            f"got {describe(v)}")
    lo, hi = _static_int(lower), _static_int(upper)
    idt = _index_dtype(lower, upper)
    if lo is not None and hi is not None:

        def step(c, _):
            i, x = c
            return (i + 1, body_fun(i, x)), None

        (_, val), _ = scan(
            step, (_wrap(np.asarray(lo, idt)), init_val), None, length=max(hi - lo, 0), unroll=unroll
        )
        return val
    lower = convert(as_tensor_leaf(lower, "fori_loop (lower)"), idt)
    upper = convert(as_tensor_leaf(upper, "fori_loop (upper)"), idt)
    _, _, val = while_loop(
        lambda s: less(s[0], s[1]),
        lambda s: (s[0] + 1, s[1], body_fun(s[0], s[2])),
        (lower, upper, init_val),
        max_steps=max_steps,
    )
    return val


def _index_dtype(lower, upper):
    ds = [x.dtype for x in (lower, upper) if hasattr(x, "dtype") and x.dtype in dtypes.INTEGER]
    if not ds:
        return np.dtype(np.int64)
    return np.dtype(dtypes.result_type(*ds)) if len(ds) > 1 else np.dtype(ds[0])


__all__ = ["while_loop", "fori_loop", "while_p", "WhileGradientError"]
