"""ONNX rules of the elementwise binary primitives, select and convert_element_type."""

from __future__ import annotations

import numpy as np

from funclib import dtypes as D

from .._errors import ExportError, where
from .._lower import elem_type, onnx_rule
from ._common import _BITS, _computed, _dt, _is_float, _signbit, _signed, _zero

# ---------------------------------------------------------------------------------------------------------------
# Elementwise binary

_BINARY = {"add": ("Add", "wrap"), "sub": ("Sub", "wrap"), "mul": ("Mul", "wrap"), "div": ("Div", "order")}


def _binary_rule(op, kind):
    def rule(ctx, eqn, ins):
        return [ctx.math(op, ins, _dt(eqn.inputs[0]), kind=kind)]

    return rule


for _name, (_op, _kind) in _BINARY.items():
    onnx_rule(_name)(_binary_rule(_op, _kind))


@onnx_rule("max", "min")
def _maxmin(ctx, eqn, ins):
    d = _dt(eqn.inputs[0])
    # ONNX Runtime's Max and Min propagate NaN as NumPy does (its ReduceMax does not: see _reduce_rule)
    return [ctx.math("Max" if eqn.prim.name == "max" else "Min", ins, d)]


_COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}


def _compare_rule(op):
    def rule(ctx, eqn, ins):
        d = _dt(eqn.inputs[0])
        if d == D.bool_ and op == "Equal":
            return [ctx.node("Equal", ins)]
        return [ctx.math(op, ins, d, out="keep")]

    return rule


for _name, _op in _COMPARE.items():
    onnx_rule(_name)(_compare_rule(_op))


@onnx_rule("ne")
def _ne(ctx, eqn, ins):
    return [ctx.node("Not", [_compare_rule("Equal")(ctx, eqn, ins)[0]])]


@onnx_rule("and", "or", "xor")
def _logic(ctx, eqn, ins):
    d = _dt(eqn.inputs[0])
    name = eqn.prim.name
    if d == D.bool_:
        return [ctx.node(name.capitalize(), ins)]
    return [ctx.math("Bitwise" + name.capitalize(), ins, d, kind="wrap")]


@onnx_rule("pow")
def _pow(ctx, eqn, ins):
    d = _dt(eqn.inputs[0])
    if d.kind in "iu":
        # NumPy's integer power wraps; square-and-multiply over the bits of a non-negative exponent does too
        x, y = ins
        wide = np.dtype(np.int64) if d != D.uint64 else d
        xw, yw = ctx.cast(x, wide), ctx.cast(y, wide)
        acc = ctx.node("Expand", [ctx.scalar(1, wide), ctx.node("Shape", [ctx.node("Add", [xw, yw])])])
        base, e = xw, yw
        for _ in range(d.itemsize * 8):
            bit = ctx.node("Equal", [ctx.node("BitwiseAnd", [e, ctx.scalar(1, wide)]), ctx.scalar(1, wide)])
            acc = ctx.where(bit, ctx.node("Mul", [acc, base]), acc, wide)
            base = ctx.node("Mul", [base, base])
            e = ctx.node("BitShift", [ctx.cast(e, np.uint64), ctx.scalar(1, np.uint64)], direction="RIGHT")
            e = ctx.cast(e, wide)
        return [ctx.cast(acc, d)]
    return [ctx.math("Pow", ins, d)]


def _fmod_float(ctx, x, y, d):
    return ctx.math("Mod", [x, y], d, fmod=1)


@onnx_rule("rem")
@_computed()
def _rem(ctx, eqn, ins, d):
    x, y = ins
    if not _is_float(d):
        return [ctx.math("Mod", ins, d, fmod=0)]  # integer Mod takes the divisor's sign, as NumPy
    # NumPy: fmod, moved into the divisor's sign; a zero remainder takes the divisor's sign
    m = _fmod_float(ctx, x, y, d)
    z = _zero(ctx, d)
    m_neg, y_neg = ctx.math("Less", [m, z], d, out="keep"), _signbit(ctx, y, d)
    nonzero = ctx.node("Not", [ctx.math("Equal", [m, z], d, out="keep")])
    fix = ctx.node("And", [nonzero, ctx.node("Xor", [m_neg, y_neg])])
    m = ctx.node("Where", [fix, ctx.math("Add", [m, y], d), m])
    return [_signed(ctx, m, y_neg, d)]


@onnx_rule("floor_divide")
@_computed()
def _floor_divide(ctx, eqn, ins, d):
    x, y = ins
    z = _zero(ctx, d)
    if not _is_float(d):
        q = ctx.math("Div", ins, d)  # truncates toward zero
        r = ctx.math("Sub", [x, ctx.math("Mul", [q, y], d, kind="wrap")], d, kind="wrap")
        if d.kind == "u":
            return [q]
        adjust = ctx.node(
            "And",
            [
                ctx.node("Not", [ctx.math("Equal", [r, z], d, out="keep")]),
                ctx.node("Xor", [ctx.math("Less", [r, z], d, out="keep"), ctx.math("Less", [y, z], d, out="keep")]),
            ],
        )
        return [ctx.node("Where", [adjust, ctx.math("Sub", [q, ctx.scalar(1, d)], d, kind="wrap"), q])]
    # NumPy's float floor division: (x - fmod(x, y)) / y, corrected by one, then rounded to the nearest integer
    mod = _fmod_float(ctx, x, y, d)
    div = ctx.math("Div", [ctx.math("Sub", [x, mod], d), y], d)
    fix = ctx.node(
        "And",
        [
            ctx.node("Not", [ctx.math("Equal", [mod, z], d, out="keep")]),
            ctx.node("Xor", [ctx.math("Less", [y, z], d, out="keep"), ctx.math("Less", [mod, z], d, out="keep")]),
        ],
    )
    div = ctx.node("Where", [fix, ctx.math("Sub", [div, ctx.scalar(1, d)], d), div])
    fl = ctx.math("Floor", [div], d)
    up = ctx.math("Greater", [ctx.math("Sub", [div, fl], d), ctx.scalar(0.5, d)], d, out="keep")
    fl = ctx.node("Where", [up, ctx.math("Add", [fl, ctx.scalar(1, d)], d), fl])
    q = ctx.math("Div", [x, y], d)
    fl = ctx.node("Where", [ctx.math("Equal", [div, z], d, out="keep"), z, fl])
    # y == 0: x / y (inf or nan); exactly one infinite operand: floor(x / y) is x / y (the Array API)
    y0 = ctx.math("Equal", [y, z], d, out="keep")
    one_inf = ctx.node("Xor", [ctx.math("IsInf", [x], d, out="keep"), ctx.math("IsInf", [y], d, out="keep")])
    r = ctx.node("Where", [ctx.node("Or", [y0, one_inf]), q, fl])
    # a zero quotient takes the sign of x / y
    return [_signed(ctx, r, _signbit(ctx, q, d), d)]


@onnx_rule("atan2")
@_computed()
def _atan2(ctx, eqn, ins, d):
    y, x = ins
    z = _zero(ctx, d)
    pi = ctx.scalar(np.pi, d)
    half = ctx.scalar(np.pi / 2, d)
    base = ctx.math("Atan", [ctx.math("Div", [y, x], d)], d)
    y_neg = _signbit(ctx, y, d)
    x_neg = _signbit(ctx, x, d)
    # left half-plane: shift by pi toward y's side
    shifted = ctx.node("Where", [y_neg, ctx.math("Sub", [base, pi], d), ctx.math("Add", [base, pi], d)])
    r = ctx.node("Where", [x_neg, shifted, base])
    # x == 0 with y != 0: +-pi/2; both zero: +-0 or +-pi by the signs
    x0 = ctx.math("Equal", [x, z], d, out="keep")
    y0 = ctx.math("Equal", [y, z], d, out="keep")
    signed_half = ctx.node("Where", [y_neg, ctx.math("Neg", [half], d), half])
    r = ctx.node("Where", [ctx.node("And", [x0, ctx.node("Not", [y0])]), signed_half, r])
    zero_case = ctx.node("Where", [x_neg, ctx.node("Where", [y_neg, ctx.math("Neg", [pi], d), pi]), y])
    r = ctx.node("Where", [ctx.node("And", [x0, y0]), zero_case, r])
    # both infinite: +-pi/4 or +-3pi/4
    both_inf = ctx.node("And", [ctx.math("IsInf", [x], d, out="keep"), ctx.math("IsInf", [y], d, out="keep")])
    q = ctx.node("Where", [x_neg, ctx.scalar(3 * np.pi / 4, d), ctx.scalar(np.pi / 4, d)])
    q = ctx.node("Where", [y_neg, ctx.math("Neg", [q], d), q])
    r = ctx.node("Where", [both_inf, q, r])
    # the result has y's sign, zeros included (Where drops the sign of a zero)
    r = ctx.node("Mul", [ctx.math("Abs", [r], d), ctx.node("Where", [y_neg, ctx.scalar(-1, d), ctx.scalar(1, d)])])
    nan = ctx.node("Or", [ctx.math("IsNaN", [x], d, out="keep"), ctx.math("IsNaN", [y], d, out="keep")])
    return [ctx.node("Where", [nan, ctx.math("Add", [x, y], d), r])]


@onnx_rule("copysign")
@_computed()
def _copysign(ctx, eqn, ins, d):
    x, y = ins
    mag = ctx.math("Abs", [x], d)
    return [ctx.node("Mul", [mag, ctx.node("Where", [_signbit(ctx, y, d), ctx.scalar(-1, d), ctx.scalar(1, d)])])]


@onnx_rule("nextafter", min_opset=26)
@_computed()
def _nextafter(ctx, eqn, ins, d):
    # the adjacent float is one step of the bit pattern, read as an integer, toward y
    x, y = ins
    d = np.dtype(d)
    if d not in _BITS:
        raise ExportError(f"fl.onnx.export: nextafter{where(eqn)} on {d.name} is not supported; use float32 or float64")
    it = np.dtype(_BITS[d])
    bits = ctx.node("BitCast", [x], to=elem_type(it))
    up = ctx.node("Equal", [ctx.node("Less", [x, y]), ctx.node("Greater", [x, _zero(ctx, d)])])
    one = ctx.scalar(1, it)
    out = ctx.node("Where", [up, ctx.node("Add", [bits, one]), ctx.node("Sub", [bits, one])])
    # selections on the bits, since a float Where drops the sign of zero: from zero, the smallest subnormal with
    # y's sign; equal operands give y; a NaN gives NaN
    tiny = ctx.node("Where", [_signbit(ctx, y, d), ctx.scalar(np.iinfo(it).min + 1, it), one])
    out = ctx.node("Where", [ctx.node("Equal", [x, _zero(ctx, d)]), tiny, out])
    out = ctx.node("Where", [ctx.node("Equal", [x, y]), ctx.node("BitCast", [y], to=elem_type(it)), out])
    nan = ctx.node("Or", [ctx.node("IsNaN", [x]), ctx.node("IsNaN", [y])])
    out = ctx.node("Where", [nan, ctx.node("BitCast", [ctx.node("Add", [x, y])], to=elem_type(it)), out])
    return [ctx.node("BitCast", [out], to=elem_type(d))]


@onnx_rule("safe_mul")
@_computed()
def _safe_mul(ctx, eqn, ins, d):
    x, y = ins
    m = ctx.math("Mul", ins, d)
    z = _zero(ctx, d)
    bad = ctx.node("Or", [ctx.math("IsNaN", [m], d, out="keep"), ctx.math("IsInf", [m], d, out="keep")])
    zero = ctx.node("Or", [ctx.math("Equal", [x, z], d, out="keep"), ctx.math("Equal", [y, z], d, out="keep")])
    repl = ctx.node("And", [bad, zero])
    r = ctx.node("Where", [repl, z, m])
    return [_signed(ctx, r, ctx.node("And", [ctx.node("Not", [repl]), _signbit(ctx, m, d)]), d)]


@onnx_rule("safe_div")
@_computed()
def _safe_div(ctx, eqn, ins, d):
    x, y = ins
    z = _zero(ctx, d)
    x0 = ctx.math("Equal", [x, z], d, out="keep")
    q = ctx.math("Div", [x, ctx.node("Where", [x0, ctx.scalar(1, d), y])], d)
    r = ctx.node("Where", [x0, z, q])
    return [_signed(ctx, r, ctx.node("And", [ctx.node("Not", [x0]), _signbit(ctx, q, d)]), d)]


def _shift(ctx, eqn, ins, left: bool):
    d = _dt(eqn.inputs[0])
    x, y = ins
    bits = d.itemsize * 8
    u = np.dtype(f"uint{bits}")
    # ONNX shifts unsigned integers only: shift the bits as unsigned, with the amount clipped to the width
    amount = ctx.cast(ctx.math("Clip", [y, ctx.scalar(0, d), ctx.scalar(bits - 1, d)], d), u)
    xu = ctx.cast(x, u) if d != u else x
    shifted = ctx.node("BitShift", [xu, amount], direction="LEFT" if left else "RIGHT")
    big = ctx.math("GreaterOrEqual", [y, ctx.scalar(bits, d)], d, out="keep")
    if left or d.kind == "u":
        out = ctx.cast(shifted, d) if d != u else shifted
        return [ctx.where(big, _zero(ctx, d), out, d)]
    # arithmetic right shift of a negative number: fill the vacated high bits with ones
    ones = ctx.scalar(np.iinfo(u).max, u)
    fill = ctx.node("BitwiseNot", [ctx.node("BitShift", [ones, amount], direction="RIGHT")])
    neg = ctx.math("Less", [x, _zero(ctx, d)], d, out="keep")
    out = ctx.where(neg, ctx.node("BitwiseOr", [shifted, fill]), shifted, u)
    return [ctx.cast(out, d)]


onnx_rule("shift_left")(lambda ctx, eqn, ins: _shift(ctx, eqn, ins, True))
onnx_rule("shift_right")(lambda ctx, eqn, ins: _shift(ctx, eqn, ins, False))


@onnx_rule("select")
def _select(ctx, eqn, ins):
    # onnxruntime's Where may return +0.0 for a selected -0.0 (equal values; rules whose zeros carry a sign by
    # definition set it themselves, see _signed)
    return [ctx.where(*ins, _dt(eqn.inputs[1]))]


@onnx_rule("convert_element_type")
def _convert(ctx, eqn, ins):
    src, dst = _dt(eqn.inputs[0]), np.dtype(eqn.params["new_dtype"])
    elem_type(dst, f"the result of 'convert_element_type'{where(eqn)}")
    if src == dst:
        return [ctx.node("Identity", ins)]
    return [ctx.cast(ins[0], dst)]


