"""Helpers shared by the ONNX rules: dtypes of an equation's values and running a rule in the dtype ONNX Runtime
computes in."""

from __future__ import annotations

import numpy as np

from funclib import dtypes as D

from .._lower import Lowering, compute_dtype, elem_type

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def _dt(a):
    return np.dtype(a.aval.dtype)


def _out_dt(eqn, i: int = 0):
    return np.dtype(eqn.outputs[i].aval.dtype)


def _is_float(dtype) -> bool:
    return np.dtype(dtype) in D.REAL_FLOATING


def _zero(ctx: Lowering, dtype):
    return ctx.scalar(0, dtype)


def _computed(kind: str = "value"):
    """Run a rule ``f(ctx, eqn, ins, d)`` on inputs widened to the dtype ONNX Runtime computes in (float16 and
    bfloat16 in float32, narrow integers in int32, see ``compute_dtype``), casting results back: a composed
    formula then rounds once, as NumPy's float16 does, and every node has a kernel."""

    def deco(f):
        def rule(ctx, eqn, ins):
            d = _dt(eqn.inputs[0])
            w = compute_dtype(d, kind)
            if w != d:
                ins = [ctx.cast(i, w) if _dt(a) == d else i for i, a in zip(ins, eqn.inputs)]
            outs = f(ctx, eqn, ins, w)
            if w != d:
                outs = [ctx.cast(o, d) if _out_dt(eqn, k) == d else o for k, o in enumerate(outs)]
            return outs

        return rule

    return deco


_BITS = {np.dtype(np.float64): np.int64, np.dtype(np.float32): np.int32, np.dtype(np.float16): np.int16}


def _signbit(ctx, x, d):
    """The sign bit: read with BitCast from opset 26; before, x < 0 or x is -0.0 (1 / -0.0 is -inf), where a
    NaN's sign is invisible (NaN gives False)."""
    d = np.dtype(d)
    if ctx.opset >= 26 and d in _BITS:
        bits = ctx.node("BitCast", [x], to=elem_type(_BITS[d]))
        return ctx.node("Less", [bits, ctx.scalar(0, _BITS[d])])
    z = _zero(ctx, d)
    neg = ctx.math("Less", [x, z], d, out="keep")
    negzero = ctx.node(
        "And",
        [
            ctx.math("Equal", [x, z], d, out="keep"),
            ctx.math("Less", [ctx.math("Reciprocal", [x], d), z], d, out="keep"),
        ],
    )
    return ctx.node("Or", [neg, negzero])


def _signed(ctx, r, neg, d):
    """``|r|`` with the sign ``neg`` (True: negative), by an exact multiplication. ONNX Runtime's Where may turn
    a selected -0.0 into +0.0 (and its optimizer removes ``x + 0``), so rules whose zeros carry a sign (trunc,
    copysign, rem, ...) set the sign of every result, which they know, at the end."""
    return ctx.node("Mul", [ctx.node("Abs", [r]), ctx.node("Where", [neg, ctx.scalar(-1, d), ctx.scalar(1, d)])])
