"""``scan`` and ``map``: a loop over the leading axis of its inputs, carrying state, with its body as a jaxpr.

``scan_p`` operands are ``consts + init carry + xs`` (``num_consts``, ``num_carry``); outputs are the final
carry followed by the stacked per-iteration outputs. The body is traced once per call, whatever the length.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from funclib import tree as tree_util
from funclib.checks import check_callable
from funclib.core import Primitive, ShapedArray, Zero, _wrap, aval_of, is_undefined, set_trace
from funclib.errors import ShapeError
from funclib.jaxpr import ClosedJaxpr, Eqn, Jaxpr, Var, eval_jaxpr
from funclib.primitives.elementwise import add, convert
from funclib.primitives.shape import concatenate, instantiate, moveaxis, reshape, slice_, zeros

from ..batching import vmap
from ._common import (
    CarryTypeError,
    as_leaves,
    as_tensors,
    batch_jaxpr,
    batch_size,
    call,
    carry_mismatch,
    closed,
    dce,
    interleave_order,
    invariant_vars,
    jvp_jaxpr,
    pe_jaxpr,
    permute,
    same_types,
    tangent_aval,
    to_front,
    trace_user_body,
    transpose_call,
)

scan_p = Primitive("scan", multiple_results=True, linear=True)  # linear in operands its body is linear in
scan_p.runs_on_devices = True  # its impl evaluates funclib operations
scan_p.family = "control"
scan_p.batch_named = True


def _stacked(a: ShapedArray, length: int) -> ShapedArray:
    return ShapedArray((length,) + a.shape, a.dtype)


@scan_p.def_impl
def _scan_impl(*args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    n = num_consts + num_carry
    consts = [_wrap(a) for a in args[:num_consts]]
    carry = [_wrap(a) for a in args[num_consts:n]]
    if any(type(a) is not np.ndarray and getattr(a, "device", "cpu") != "cpu" for a in args):
        return _scan_on_device(args, jaxpr, num_consts, num_carry, length, reverse)
    xs = [np.asarray(a) for a in args[n:]]
    ys = [np.empty((length,) + a.shape, a.dtype) for a in jaxpr.out_avals[num_carry:]]
    j, c = jaxpr.jaxpr, jaxpr.consts
    with set_trace(None):
        for i in range(length - 1, -1, -1) if reverse else range(length):
            out = as_tensors(j, eval_jaxpr(j, c, *consts, *carry, *[_wrap(np.asarray(x[i])) for x in xs]))
            carry = out[:num_carry]
            for buf, y in zip(ys, out[num_carry:]):
                buf[i] = y._value
    return [x._value for x in carry] + ys


def _scan_on_device(args, jaxpr, num_consts, num_carry, length, reverse):
    """The scan loop over tensors on a CUDA device: slices of ``xs`` and the stacked ``ys`` stay there."""
    n = num_consts + num_carry
    device = next(a.device for a in args if type(a) is not np.ndarray and getattr(a, "device", "cpu") != "cpu")
    vals = [_wrap(a).to_device(device) if getattr(a, "ndim", 0) else _wrap(a) for a in args]
    consts, carry, xs = vals[:num_consts], vals[num_consts:n], vals[n:]
    steps: list[list] = [[] for _ in jaxpr.out_avals[num_carry:]]
    with set_trace(None):
        for i in range(length - 1, -1, -1) if reverse else range(length):
            out = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *consts, *carry,
                             *[reshape(slice_(x, (i,) + (0,) * (x.ndim - 1), (i + 1,) + x.shape[1:]), x.shape[1:])
                               for x in xs])
            out = as_tensors(jaxpr.jaxpr, out)
            carry = out[:num_carry]
            for acc, y in zip(steps, out[num_carry:]):
                acc.append(y.to_device(device))
        ys = []
        for acc, a in zip(steps, jaxpr.out_avals[num_carry:]):
            if reverse:
                acc.reverse()
            ys.append(concatenate([reshape(y, (1,) + a.shape) for y in acc], 0) if acc
                      else _wrap(np.empty((0,) + a.shape, a.dtype)).to_device(device))
    return [x.to_device(device)._value for x in carry] + [y._value for y in ys]


@scan_p.def_abstract_eval
def _scan_abstract(*avals, jaxpr, num_consts, num_carry, length, reverse, unroll):
    n = num_consts + num_carry
    ins = jaxpr.in_avals
    expected = list(ins[:n]) + [_stacked(a, length) for a in ins[n:]]
    if not same_types(avals, expected):
        raise ShapeError(
            "scan: operands do not match the body: got "
            f"[{', '.join(a.str_short() for a in avals)}], "
            f"body expects [{', '.join(a.str_short() for a in expected)}]"
        )
    outs = jaxpr.out_avals
    if not same_types(outs[:num_carry], ins[num_consts:n]):
        raise CarryTypeError("scan: the body's carry output types differ from its carry input types")
    return list(outs[:num_carry]) + [_stacked(a, length) for a in outs[num_carry:]]


# ------------------------------------------------------------------------------------------------------------
# forward mode


@scan_p.def_jvp
def _scan_jvp(primals, tangents, *, jaxpr, num_consts, num_carry, length, reverse, unroll):
    nc, ncar = num_consts, num_carry
    n_ys = len(jaxpr.out_avals) - ncar
    nz = [type(t) is not Zero for t in tangents]
    const_nz, carry_nz, xs_nz = nz[:nc], nz[nc : nc + ncar], nz[nc + ncar :]
    while True:  # a carry has a tangent if its initial value or any iteration gives it one
        jj, out_nz = jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz, carry_nz + [False] * n_ys)
        new = [a or b for a, b in zip(carry_nz, out_nz[:ncar])]
        if new == carry_nz:
            break
        carry_nz = new
    ys_nz = out_nz[ncar:]
    body = permute(
        jj,
        interleave_order(len(primals), [const_nz, carry_nz, xs_nz]),
        interleave_order(ncar + n_ys, [carry_nz, ys_nz]),
    )
    consts, init, xs = primals[:nc], primals[nc : nc + ncar], primals[nc + ncar :]
    tc, ti, tx = tangents[:nc], tangents[nc : nc + ncar], tangents[nc + ncar :]
    ops = (
        list(consts)
        + [t for t, m in zip(tc, const_nz) if m]
        + list(init)
        + [instantiate(t) for t, m in zip(ti, carry_nz) if m]
        + list(xs)
        + [t for t, m in zip(tx, xs_nz) if m]
    )
    k_carry = sum(carry_nz)
    outs = scan_p.bind(
        *ops,
        jaxpr=body,
        num_consts=nc + sum(const_nz),
        num_carry=ncar + k_carry,
        length=length,
        reverse=reverse,
        unroll=unroll,
    )
    carry_out, carry_t = outs[:ncar], iter(outs[ncar : ncar + k_carry])
    rest = outs[ncar + k_carry :]
    ys, ys_t = rest[:n_ys], iter(rest[n_ys:])
    t_out = [next(carry_t) if m else Zero(tangent_aval(aval_of(o))) for o, m in zip(carry_out, carry_nz)]
    t_out += [next(ys_t) if m else Zero(tangent_aval(aval_of(o))) for o, m in zip(ys, ys_nz)]
    return list(carry_out) + list(ys), t_out


# ------------------------------------------------------------------------------------------------------------
# vmap


@scan_p.def_vmap
def _scan_vmap(args, dims, *, jaxpr, num_consts, num_carry, length, reverse, unroll, axis=None, lanes=None):
    nc, ncar = num_consts, num_carry
    n_ys = len(jaxpr.out_avals) - ncar
    size = batch_size(args, dims, lanes)
    b = [d is not None for d in dims]
    const_b, carry_b, xs_b = b[:nc], b[nc : nc + ncar], b[nc + ncar :]
    while True:  # a carry is batched if its initial value or any iteration makes it so
        bj, out_b = batch_jaxpr(jaxpr, size, const_b + carry_b + xs_b, carry_b + [False] * n_ys, axis)
        new = [x or y for x, y in zip(carry_b, out_b[:ncar])]
        if new == carry_b:
            break
        carry_b = new
    consts = [to_front(a, d) for a, d in zip(args[:nc], dims[:nc])]
    init = [
        to_front(a, d, size) if m else a
        for a, d, m in zip(args[nc : nc + ncar], dims[nc : nc + ncar], carry_b)
    ]
    xs = [a if d is None else moveaxis(a, d, 1) for a, d in zip(args[nc + ncar :], dims[nc + ncar :])]
    outs = scan_p.bind(
        *consts,
        *init,
        *xs,
        jaxpr=bj,
        num_consts=nc,
        num_carry=ncar,
        length=length,
        reverse=reverse,
        unroll=unroll,
    )
    out_dims = [0 if m else None for m in carry_b] + [1 if m else None for m in out_b[ncar:]]
    return outs, out_dims


def _scan_dce(eqn, used: list) -> Eqn | None:
    """The scan without the stacked outputs nobody reads, and without the constants and inputs its body then no
    longer needs (a forward pass stops storing per-step values the loss ignores; their zero cotangents stop being
    read in the backward pass)."""
    p = eqn.params
    nc, ncar = p["num_consts"], p["num_carry"]
    keep_y = used[ncar:]
    if all(keep_y):
        return None
    body = p["jaxpr"].jaxpr
    pruned = dce(body, [True] * ncar + list(keep_y))
    read = {a for e in pruned.eqns for a in e.inputs if type(a) is Var} | set(pruned.outvars)
    keep_in = [i for i, v in enumerate(body.invars) if nc <= i < nc + ncar or v in read]
    new_body = Jaxpr(pruned.constvars, [body.invars[i] for i in keep_in], pruned.eqns, pruned.outvars)
    params = dict(p, jaxpr=ClosedJaxpr(new_body, p["jaxpr"].consts), num_consts=sum(i < nc for i in keep_in))
    outputs = eqn.outputs[:ncar] + [v for v, k in zip(eqn.outputs[ncar:], keep_y) if k]
    return Eqn(eqn.prim, [eqn.inputs[i] for i in keep_in], params, outputs)


scan_p.dce = _scan_dce


# ------------------------------------------------------------------------------------------------------------
# partial evaluation: the known iterations run now; only the unknown (tangent) part is staged


class ScanSplit:
    """A scan split into a known scan and an unknown scan.

    ``known``: ``[kconsts, kcarry, kxs] -> [kcarry, kys, per-iteration residuals]``; ``inv``: ``kconsts ->
    loop-invariant residuals`` (computed once, outside the loop); ``fwd``: indices of known xs that are
    residuals themselves (passed through, not copied); ``unknown``: ``[invariant res, uconsts, ucarry,
    forwarded xs, per-iteration res, uxs] -> [ucarry, uys]``.
    """

    __slots__ = ("const_uk", "carry_uk", "xs_uk", "ys_uk", "known", "inv", "fwd", "unknown")


def scan_split(jaxpr: ClosedJaxpr, nc: int, ncar: int, const_uk, carry_uk, xs_uk) -> ScanSplit:
    n_ys = len(jaxpr.out_avals) - ncar
    carry_uk = list(carry_uk)
    while True:
        sp = pe_jaxpr(jaxpr, list(const_uk) + carry_uk + list(xs_uk), carry_uk + [False] * n_ys)
        new = [a or b for a, b in zip(carry_uk, sp.out_unknowns[:ncar])]
        if new == carry_uk:
            break
        carry_uk = new
    kj = sp.known.jaxpr
    nkc, nkcar = list(const_uk).count(False), carry_uk.count(False)
    n_kout = len(kj.outvars) - sp.num_res
    res_vars = kj.outvars[n_kout:]
    kx_vars = kj.invars[nkc + nkcar :]
    inv = invariant_vars(kj, kj.invars[:nkc])
    kinds = []
    for v in res_vars:
        if type(v) is not Var or v in inv:
            kinds.append("inv")
        elif any(v is x for x in kx_vars):
            kinds.append("fwd")
        else:
            kinds.append("var")
    inv_out = [v for v, k in zip(res_vars, kinds) if k == "inv"]
    var_out = [v for v, k in zip(res_vars, kinds) if k == "var"]
    out = ScanSplit()
    out.const_uk, out.carry_uk, out.xs_uk = list(const_uk), carry_uk, list(xs_uk)
    out.ys_uk = sp.out_unknowns[ncar:]
    inv_j = Jaxpr(kj.constvars, kj.invars[:nkc], kj.eqns, inv_out)
    # the invariant part runs once, outside the loop: effects stay in the loop, which runs them every iteration
    out.inv = ClosedJaxpr(dce(inv_j, [True] * len(inv_out), keep_effects=False), sp.known.consts)
    loop_j = Jaxpr(kj.constvars, kj.invars, kj.eqns, list(kj.outvars[:n_kout]) + var_out)
    out.known = ClosedJaxpr(dce(loop_j, [True] * len(loop_j.outvars)), sp.known.consts)
    out.fwd = [
        next(i for i, x in enumerate(kx_vars) if x is v) for v, k in zip(res_vars, kinds) if k == "fwd"
    ]
    uj = sp.unknown.jaxpr
    res_in, rest = uj.invars[: sp.num_res], uj.invars[sp.num_res :]
    nuc, nucar = sum(const_uk), sum(carry_uk)
    pick = {k: [v for v, kk in zip(res_in, kinds) if kk == k] for k in ("inv", "fwd", "var")}
    invars = (
        pick["inv"] + rest[:nuc] + rest[nuc : nuc + nucar] + pick["fwd"] + pick["var"] + rest[nuc + nucar :]
    )
    out.unknown = ClosedJaxpr(Jaxpr(uj.constvars, invars, uj.eqns, uj.outvars), sp.unknown.consts)
    return out


def _pick(xs, mask, want):
    return [x for x, m in zip(xs, mask) if bool(m) == want]


def run_known(sp: ScanSplit, consts, init, xs, length, reverse, unroll):
    """Run the known scan at the current trace: ``(kcarry, kys, residual consts, residual xs)``."""
    kconsts, kinit, kxs = (
        _pick(consts, sp.const_uk, False),
        _pick(init, sp.carry_uk, False),
        _pick(xs, sp.xs_uk, False),
    )
    inv_res = call(sp.inv, *kconsts)
    if sp.known.jaxpr.outvars:
        outs = scan_p.bind(
            *kconsts,
            *kinit,
            *kxs,
            jaxpr=sp.known,
            num_consts=len(kconsts),
            num_carry=len(kinit),
            length=length,
            reverse=reverse,
            unroll=unroll,
        )
    else:
        outs = []
    nkcar, nkys = len(kinit), sp.ys_uk.count(False)
    kcarry, kys, var_res = outs[:nkcar], outs[nkcar : nkcar + nkys], outs[nkcar + nkys :]
    return kcarry, kys, inv_res, [kxs[i] for i in sp.fwd] + list(var_res)


def _merge(mask, unknown_vals, known_vals):
    u, k = iter(unknown_vals), iter(known_vals)
    return [next(u) if m else next(k) for m in mask]


@scan_p.def_partial_eval
def _scan_partial_eval(trace, args, params):
    jaxpr, nc, ncar = params["jaxpr"], params["num_consts"], params["num_carry"]
    length = params["length"]
    uk = [not trace.is_known(a) for a in args]
    sp = scan_split(jaxpr, nc, ncar, uk[:nc], uk[nc : nc + ncar], uk[nc + ncar :])
    consts, init, xs = args[:nc], args[nc : nc + ncar], args[nc + ncar :]
    with set_trace(trace.parent):
        kcarry, kys, inv_res, x_res = run_known(
            sp, consts, init, xs, length, params["reverse"], params["unroll"]
        )
    uconsts, uinit, uxs = (
        _pick(consts, sp.const_uk, True),
        _pick(init, sp.carry_uk, True),
        _pick(xs, sp.xs_uk, True),
    )
    out_avals = jaxpr.out_avals
    u_avals = [a for a, m in zip(out_avals[:ncar], sp.carry_uk) if m]
    u_avals += [_stacked(a, length) for a, m in zip(out_avals[ncar:], sp.ys_uk) if m]
    uparams = dict(params, jaxpr=sp.unknown, num_consts=len(inv_res) + len(uconsts), num_carry=len(uinit))
    uouts = trace.stage(scan_p, [*inv_res, *uconsts, *uinit, *x_res, *uxs], uparams, u_avals)
    nucar = len(uinit)
    return _merge(sp.carry_uk, uouts[:nucar], kcarry) + _merge(sp.ys_uk, uouts[nucar:], kys)


# ------------------------------------------------------------------------------------------------------------
# transposition: a scan linear in its linear operands transposes to a reverse scan over the transposed body


@scan_p.def_transpose
def _scan_transpose(cts, *args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    nc, ncar = num_consts, num_carry
    lin = [is_undefined(a) for a in args]
    const_lin, carry_lin, xs_lin = lin[:nc], lin[nc : nc + ncar], lin[nc + ncar :]
    params = dict(length=length, reverse=reverse, unroll=unroll)
    # a carry whose update reads linear values is linear (a constant initial value is only an offset); the
    # split below finds them, looking through nested loops and branches
    sp = scan_split(jaxpr, nc, ncar, const_lin, carry_lin, xs_lin)
    if all(sp.carry_uk):
        return _transpose_linear(list(cts), list(args), const_lin, xs_lin, jaxpr, nc, ncar, **params)
    # some carries are non-linear (recomputed state, e.g. a checkpointed segment): run them forward first
    consts, init, xs = args[:nc], args[nc : nc + ncar], args[nc + ncar :]
    _, _, inv_res, x_res = run_known(sp, consts, init, xs, **params)
    uconsts, uinit, uxs = (
        _pick(consts, sp.const_uk, True),
        _pick(init, sp.carry_uk, True),
        _pick(xs, sp.xs_uk, True),
    )
    u_args = [*inv_res, *uconsts, *uinit, *x_res, *uxs]
    u_cts = _pick(cts[:ncar], sp.carry_uk, True) + _pick(cts[ncar:], sp.ys_uk, True)
    u_const_lin = [False] * len(inv_res) + [True] * len(uconsts)
    u_xs_lin = [False] * len(x_res) + [True] * len(uxs)
    u_in = _transpose_linear(
        u_cts, u_args, u_const_lin, u_xs_lin, sp.unknown, len(u_const_lin), len(uinit), **params
    )
    it_c = iter(u_in[len(inv_res) : len(inv_res) + len(uconsts)])
    it_i = iter(u_in[len(u_const_lin) : len(u_const_lin) + len(uinit)])
    it_x = iter(u_in[len(u_const_lin) + len(uinit) + len(x_res) :])
    out = [next(it_c) if m else None for m in sp.const_uk]
    out += [next(it_i) if m else None for m in sp.carry_uk]
    out += [next(it_x) if m else None for m in sp.xs_uk]
    return [c if is_undefined(a) else None for c, a in zip(out, args)]


def _transpose_linear(cts, args, const_lin, xs_lin, jaxpr, nc, ncar, *, length, reverse, unroll):
    """Transpose a scan all of whose carries are linear; non-linear consts and xs are residuals."""
    consts, init, xs = args[:nc], args[nc : nc + ncar], args[nc + ncar :]
    res_c, res_x = _pick(consts, const_lin, False), _pick(xs, xs_lin, False)
    ins = jaxpr.in_avals
    lc_avals = [tangent_aval(a) for a, m in zip(ins[:nc], const_lin) if m]
    carry_avals = [tangent_aval(a) for a in ins[nc : nc + ncar]]
    rc_avals = [a for a, m in zip(ins[:nc], const_lin) if not m]
    rx_avals = [a for a, m in zip(ins[nc + ncar :], xs_lin) if not m]
    y_avals = [tangent_aval(a) for a in jaxpr.out_avals[ncar:]]
    # stacked outputs without a cotangent get none in the body, rather than a (length, ...) array of zeros to read
    y_zero = [c is None or type(c) is Zero for c in cts[ncar:]]
    lin_mask = list(const_lin) + [True] * ncar + list(xs_lin)
    n_rc, n_lc, n_rx = len(rc_avals), len(lc_avals), len(rx_avals)

    def body(*a):
        rc, acc = a[:n_rc], a[n_rc : n_rc + n_lc]
        ctc = a[n_rc + n_lc : n_rc + n_lc + ncar]
        rx, given = a[n_rc + n_lc + ncar : n_rc + n_lc + ncar + n_rx], iter(a[n_rc + n_lc + ncar + n_rx :])
        cty = [None if z else next(given) for z in y_zero]
        out = transpose_call(jaxpr, lin_mask, list(rc) + list(rx), list(ctc) + cty)
        return [add(x, y) for x, y in zip(acc, out[:n_lc])] + out[n_lc:]

    yin_avals = [a for a, z in zip(y_avals, y_zero) if not z]
    tj = closed(body, rc_avals + lc_avals + carry_avals + rx_avals + yin_avals, "transpose of scan")
    ct_carry = [instantiate(c) if c is not None else zeros(a) for c, a in zip(cts[:ncar], carry_avals)]
    ct_ys = [instantiate(c) for c, z in zip(cts[ncar:], y_zero) if not z]
    outs = scan_p.bind(
        *res_c,
        *[zeros(a) for a in lc_avals],
        *ct_carry,
        *res_x,
        *ct_ys,
        jaxpr=tj,
        num_consts=n_rc,
        num_carry=n_lc + ncar,
        length=length,
        reverse=not reverse,
        unroll=unroll,
    )
    it_c, it_x = iter(outs[:n_lc]), iter(outs[n_lc + ncar :])
    res = [next(it_c) if m else None for m in const_lin]
    res += [c if is_undefined(a) else None for c, a in zip(outs[n_lc : n_lc + ncar], init)]
    res += [next(it_x) if m else None for m in xs_lin]
    return res


# ------------------------------------------------------------------------------------------------------------
# the public functions


def _check_unroll(unroll, length):
    if isinstance(unroll, bool):
        return max(length, 1) if unroll else 1
    if not isinstance(unroll, int) or unroll < 1:
        raise ValueError(f"scan: unroll must be a positive int or a bool, got {unroll!r}")
    return unroll


def scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    length: int | None = None,
    reverse: bool = False,
    unroll: int | bool = 1,
) -> tuple[Any, Any]:
    """Loop ``f`` over the leading axis of ``xs``, carrying state; the body is traced once, not unrolled.

    Semantics (with ``reverse=True`` the loop runs from the last slice to the first)::

        carry = init
        for i in range(length):
            carry, y = f(carry, xs[i])      # xs[i]: every leaf sliced at i
            ys.append(y)
        return carry, stack(ys)

    Args:
      f: ``f(carry, x) -> (carry, y)``; the new carry must match ``init`` in structure, shapes and dtypes.
      init: a pytree of tensors (Python scalars become tensors; their dtype follows the body's output).
      xs: a pytree of tensors sharing a leading axis, or None (then give ``length``).
      length: the trip count; required when ``xs`` is None, checked against ``xs`` otherwise.
      reverse: iterate from the end; ``ys`` keep their positions.
      unroll: iterations per loop step in compiled code (a hint; results are identical). ``True``: all.

    Returns:
      ``(final carry, stacked ys)``.

    Differentiable in forward and reverse mode and vectorizable; reverse mode stores one set of residuals per
    iteration (wrap the body in ``fl.checkpoint`` to trade memory for recomputation).

    >>> fl.scan(lambda c, x: (c + x, c * x), 0.0, fl.arange(4.0))
    (Tensor(6., dtype=float32), Tensor([0., 0., 2., 9.], dtype=float32))
    """
    check_callable(f, "scan", "f")
    init_leaves, init_tree, weak = as_leaves(init, "scan (init)")
    xs_leaves, xs_tree, _ = as_leaves(xs, "scan (xs)")
    sizes = {int(x.shape[0]) if x.ndim else None for x in xs_leaves}
    if None in sizes:
        raise ShapeError("scan: every leaf of xs needs a leading axis to scan over; got a 0-d tensor")
    if len(sizes) > 1:
        detail = ", ".join(f"{tuple(x.shape)}" for x in xs_leaves)
        raise ShapeError(f"scan: the leaves of xs have different leading sizes: {detail}")
    if sizes:
        n = sizes.pop()
        if length is not None and int(length) != n:
            raise ShapeError(f"scan: length={length} but xs has leading size {n}")
        length = n
    elif length is None:
        raise ValueError("scan: pass length= when xs is None (there is nothing to infer the trip count from)")
    length = int(length)
    if length < 0:
        raise ValueError(f"scan: length must be >= 0, got {length}")
    unroll = _check_unroll(unroll, length)
    x_avals = [ShapedArray(tuple(x.shape[1:]), x.dtype) for x in xs_leaves]
    store: dict = {}

    def flat(*args):
        carry = tree_util.unflatten(init_tree, list(args[: len(init_leaves)]))
        x = tree_util.unflatten(xs_tree, list(args[len(init_leaves) :]))
        res = f(carry, x)
        if not (isinstance(res, tuple) and len(res) == 2):
            raise TypeError(f"scan: the body must return a pair (new_carry, y), got {type(res).__name__}")
        c_leaves, c_tree, _ = as_leaves(res[0], "scan (body carry output)")
        y_leaves, y_tree, _ = as_leaves(res[1], "scan (body output y)")
        store["carry"] = (c_tree, [aval_of(c) for c in c_leaves])
        store["y_tree"] = y_tree
        return c_leaves + y_leaves

    for attempt in range(2):
        in_avals = [aval_of(x) for x in init_leaves]
        body, hoisted, _ = trace_user_body(flat, in_avals + x_avals, "scan body")
        c_tree, c_avals = store["carry"]
        if c_tree == init_tree and same_types(in_avals, c_avals):
            break
        if attempt == 0 and c_tree == init_tree and _promote_weak(init_leaves, weak, in_avals, c_avals):
            continue
        raise CarryTypeError(
            carry_mismatch(
                "scan",
                "the carry returned by the body and the initial carry",
                init_tree,
                in_avals,
                c_tree,
                c_avals,
                "Fix: return a carry with the same structure as init; cast with .astype(...) or build init "
                "with the dtype the body produces.",
            )
        )
    outs = scan_p.bind(
        *hoisted,
        *init_leaves,
        *xs_leaves,
        jaxpr=body,
        num_consts=len(hoisted),
        num_carry=len(init_leaves),
        length=length,
        reverse=bool(reverse),
        unroll=unroll,
    )
    carry = tree_util.unflatten(init_tree, outs[: len(init_leaves)])
    ys = tree_util.unflatten(store["y_tree"], outs[len(init_leaves) :])
    return carry, ys


def _promote_weak(leaves, weak, in_avals, out_avals) -> bool:
    """Cast initial values born from Python scalars to the dtype the body gives them; True if any changed."""
    changed = False
    for i, (w, a, b) in enumerate(zip(weak, in_avals, out_avals)):
        if a.shape != b.shape:
            return False
        if a.dtype != b.dtype:
            if not w:
                return False
            leaves[i] = convert(leaves[i], b.dtype)
            changed = True
    return changed


def map(f: Callable[[Any], Any], xs: Any, batch_size: int | None = None) -> Any:  # noqa: A001
    """Apply ``f`` to each slice of ``xs`` along its leading axis, sequentially (a scan without carry).

    Args:
      f: a function of one slice (a pytree like ``xs`` without the leading axis).
      xs: a pytree of tensors sharing a leading axis.
      batch_size: if given, ``f`` is vectorized with ``vmap`` over chunks of this many slices, trading memory
        for speed; a remainder chunk is handled separately.

    Returns:
      The stacked outputs of ``f``.

    >>> fl.map(lambda x: x * x, fl.arange(3.0))
    Tensor([0., 1., 4.], dtype=float32)
    """
    check_callable(f, "map", "f")
    if batch_size is None:
        return scan(lambda c, x: (c, f(x)), (), xs)[1]

    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"map: batch_size must be a positive int, got {batch_size!r}")
    leaves, tree, _ = as_leaves(xs, "map (xs)")
    if not leaves:
        raise ValueError("map: xs has no leaves to map over")
    n = int(leaves[0].shape[0])
    nb, rem = divmod(n, batch_size)

    def part(x, lo, hi):
        return slice_(x, [lo] + [0] * (x.ndim - 1), [hi] + list(x.shape[1:]))

    pieces = []
    if nb:
        main = [reshape(part(x, 0, nb * batch_size), (nb, batch_size) + tuple(x.shape[1:])) for x in leaves]
        ys = scan(lambda c, x: (c, vmap(f)(x)), (), tree_util.unflatten(tree, main))[1]
        y_leaves, y_tree = tree_util.flatten(ys)
        pieces.append([reshape(y, (nb * batch_size,) + tuple(y.shape[2:])) for y in y_leaves])
    if rem:
        tail = tree_util.unflatten(tree, [part(x, nb * batch_size, n) for x in leaves])
        y_leaves, y_tree = tree_util.flatten(vmap(f)(tail))
        pieces.append(list(y_leaves))
    if len(pieces) == 1:
        return tree_util.unflatten(y_tree, pieces[0])
    return tree_util.unflatten(y_tree, [concatenate([a, b], 0) for a, b in zip(*pieces)])


__all__ = ["scan", "map", "scan_p", "scan_split", "run_known", "ScanSplit"]
