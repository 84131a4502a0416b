"""ONNX rules of control flow (cond, scan, while_loop) and the primitives that cannot be exported, with why."""

from __future__ import annotations

import numpy as np

from .._dims import Dim
from .._lower import NOT_EXPORTABLE, elem_type, onnx_rule
from ._common import INT64_MIN, _dt

# Not exportable, and why

_COMPLEX = "it computes with complex numbers, which ONNX Runtime has no kernels for"
_RANDOM = (
    "random numbers cannot be generated inside an exported graph with funclib's keyed generator (ONNX's random "
    "operators are not reproducible); draw them outside and pass them in as inputs"
)
_COLLECTIVE = (
    "a collective only exists under fl.vmap with a named axis, which turns it into ordinary operations before "
    "export sees it, or across processes (fl.distributed), which one ONNX graph cannot express"
)
_LINALG = "ONNX has no matrix factorization or triangular solve operators"
_SPARSE = (
    "its lowering onto GatherND/ScatterND (with out-of-range indices routed to a discarded row) is not written yet; "
    "export the dense form (A.todense() @ x, or a scatter-add for a segment sum)"
)
_HOST = "it runs Python on the host, which an ONNX graph cannot call; remove it (or its fl.debug call) for export"
NOT_EXPORTABLE.update(
    {
        "spmm": _SPARSE,
        "sddmm": _SPARSE,
        "segment_sum": _SPARSE,
        "segment_max": _SPARSE,
        "segment_min": _SPARSE,
        "debug_callback": _HOST,
        "pure_callback": _HOST,
        "check": "a runtime check records or raises on the host; " + _HOST,
        "checkify": "its checks record failures on the host; export the function without fl.debug.checkify",
        "real": _COMPLEX,
        "imag": _COMPLEX,
        "conj": _COMPLEX,
        "complex": _COMPLEX,
        "fft": "ONNX's DFT works on real/imaginary pairs and ONNX Runtime has no complex tensors; " + _COMPLEX,
        "cholesky": _LINALG,
        "eigh": _LINALG,
        "lu": _LINALG,
        "qr": _LINALG,
        "svd": _LINALG,
        "triangular_solve": _LINALG,
        "eig": _LINALG + "; " + _COMPLEX,
        "psum": _COLLECTIVE,
        "pmax": _COLLECTIVE,
        "pmin": _COLLECTIVE,
        "all_gather": _COLLECTIVE,
        "psum_scatter": _COLLECTIVE,
        "ppermute": _COLLECTIVE,
        "axis_index": _COLLECTIVE,
        "threefry2x32": _RANDOM,
        "random_bits": _RANDOM,
        "random_uniform": _RANDOM,
        "random_normal": _RANDOM,
        "random_standard": _RANDOM,
        "random_gamma": _RANDOM,
        "random_gamma_grad": "it only appears in gradients of random_gamma samples; " + _RANDOM,
        "random_poisson": _RANDOM,
        "random_truncated_normal": _RANDOM,
    }
)


# ---------------------------------------------------------------------------------------------------------------
# Control flow: cond -> If, scan -> Loop (slices of xs gathered by the iteration number), while -> Loop


def _scalar_info(ctx, name, dtype):
    return ctx.helper.make_tensor_value_info(name, elem_type(dtype), [])


def _finish_body(ctx, g, outs, atoms):
    """Give a body's results names of their own (a graph output cannot be an outer name) and declare them."""
    names = [ctx.node("Identity", [o]) for o in outs]
    g.outputs.extend(ctx.value_info(n, a) for n, a in zip(names, atoms))


def _scalar_dim(ctx, d):
    if isinstance(d, Dim):
        return ctx.node("Reshape", [ctx.dim(d), ctx.i64([])], graph=ctx.main)
    return ctx.const(np.int64(d))


@onnx_rule("cond")
def _cond(ctx, eqn, ins):
    branches = eqn.params["branches"]
    index, ops = ins[0], ins[1:]
    idx_dt = _dt(eqn.inputs[0])

    def lower_from(k):
        b = branches[k]
        if k == len(branches) - 1:
            return ctx.lower_jaxpr(b.jaxpr, b.consts, ops)
        # the index is clamped into range: branch k runs for index <= k
        pred = ctx.math("LessOrEqual", [index, ctx.scalar(k, idx_dt)], idx_dt, out="keep")
        with ctx.subgraph("then") as then_g:
            _finish_body(ctx, then_g, ctx.lower_jaxpr(b.jaxpr, b.consts, ops), eqn.outputs)
        with ctx.subgraph("else") as else_g:
            _finish_body(ctx, else_g, lower_from(k + 1), eqn.outputs)
        outs = ctx.node(
            "If", [pred], len(eqn.outputs), then_branch=ctx.graph_proto(then_g), else_branch=ctx.graph_proto(else_g)
        )
        return [outs] if len(eqn.outputs) == 1 else outs

    outs = lower_from(0)
    if len(branches) == 1:
        outs = [ctx.node("Identity", [o]) for o in outs]
    return outs


@onnx_rule("scan", dynamic=("length",))
def _scan(ctx, eqn, ins):
    p = ctx.params(eqn)
    body, nc, ncar, length, reverse = p["jaxpr"], p["num_consts"], p["num_carry"], p["length"], p["reverse"]
    consts, init, xs = ins[:nc], ins[nc : nc + ncar], ins[nc + ncar :]
    bj = body.jaxpr
    if not isinstance(length, Dim) and length == 0:
        # zero iterations: the carries pass through and each ys is empty
        ys = [ctx.const(np.zeros(v.aval.shape, v.aval.dtype)) for v in eqn.outputs[ncar:]]
        return [ctx.node("Identity", [c]) for c in init] + ys
    trip = _scalar_dim(ctx, length)
    with ctx.subgraph("scan_body") as g:
        it, cond_in = ctx.fresh("iter"), ctx.fresh("cond")
        carry_in = [ctx.fresh("carry") for _ in init]
        g.inputs = [_scalar_info(ctx, it, np.int64), _scalar_info(ctx, cond_in, np.bool_)] + [
            ctx.value_info(n, v) for n, v in zip(carry_in, bj.invars[nc : nc + ncar])
        ]
        idx = it
        if reverse:
            last = ctx.node("Sub", [trip, ctx.const(np.int64(1))], graph=ctx.main)
            idx = ctx.node("Sub", [last, it])
        x_now = [ctx.node("Gather", [x, idx], axis=0) for x in xs]
        outs = ctx.lower_jaxpr(bj, body.consts, list(consts) + carry_in + x_now)
        cond_out = ctx.node("Identity", [cond_in])
        g.outputs = [_scalar_info(ctx, cond_out, np.bool_)]
        _finish_body(ctx, g, outs, bj.outvars)
    res = ctx.node("Loop", [trip, "", *init], len(eqn.outputs), body=ctx.graph_proto(g))
    res = [res] if len(eqn.outputs) == 1 else list(res)
    if reverse:  # the stacked ys are in iteration order, which runs backwards
        res[ncar:] = [
            ctx.node("Slice", [y, ctx.i64([-1]), ctx.i64([INT64_MIN]), ctx.i64([0]), ctx.i64([-1])]) for y in res[ncar:]
        ]
    return res


@onnx_rule("while")
def _while(ctx, eqn, ins):
    p = eqn.params
    cj, bj = p["cond_jaxpr"], p["body_jaxpr"]
    cnc, bnc, max_steps = p["cond_nconsts"], p["body_nconsts"], p["max_steps"]
    cc, bc, init = ins[:cnc], ins[cnc : cnc + bnc], ins[cnc + bnc :]
    (go,) = ctx.lower_jaxpr(cj.jaxpr, cj.consts, list(cc) + list(init))
    with ctx.subgraph("while_body") as g:
        it, cond_in = ctx.fresh("iter"), ctx.fresh("cond")
        carry_in = [ctx.fresh("carry") for _ in init]
        g.inputs = [_scalar_info(ctx, it, np.int64), _scalar_info(ctx, cond_in, np.bool_)] + [
            ctx.value_info(n, v) for n, v in zip(carry_in, bj.jaxpr.invars[bnc:])
        ]
        new = ctx.lower_jaxpr(bj.jaxpr, bj.consts, list(bc) + carry_in)
        (nxt,) = ctx.lower_jaxpr(cj.jaxpr, cj.consts, list(cc) + new)
        cond_out = ctx.node("Identity", [nxt])
        g.outputs = [_scalar_info(ctx, cond_out, np.bool_)]
        _finish_body(ctx, g, new, bj.jaxpr.outvars)
    trip = "" if max_steps is None else ctx.const(np.int64(max_steps))
    res = ctx.node("Loop", [trip, go, *init], len(eqn.outputs), body=ctx.graph_proto(g))
    return [res] if len(eqn.outputs) == 1 else list(res)
