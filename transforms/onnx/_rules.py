"""One ONNX lowering per primitive, registered by name with ``@onnx_rule``.

A rule gets the lowering context, the equation and the ONNX names of its inputs, and returns the names of its
outputs. Every rule matches the primitive's NumPy reference (``impl``): where an ONNX operator's semantics differ
(NaN handling, rounding of integer division, signed shifts) the rule composes operators that do match.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from funclib import dtypes as D

from ._dims import Dim
from ._errors import ExportError, where
from ._lower import NOT_EXPORTABLE, Lowering, compute_dtype, elem_type, onnx_rule

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


# ---------------------------------------------------------------------------------------------------------------
# Elementwise: operators ONNX has as they are

_UNARY = {
    "exp": "Exp",
    "log": "Log",
    "sin": "Sin",
    "cos": "Cos",
    "tan": "Tan",
    "asin": "Asin",
    "acos": "Acos",
    "atan": "Atan",
    "sinh": "Sinh",
    "cosh": "Cosh",
    "tanh": "Tanh",
    "asinh": "Asinh",
    "acosh": "Acosh",
    "atanh": "Atanh",
    "sqrt": "Sqrt",
    "floor": "Floor",
    "ceil": "Ceil",
    "round": "Round",  # half to even, as NumPy
    "logistic": "Sigmoid",
    "erf": "Erf",
}


def _unary_rule(op):
    def rule(ctx, eqn, ins):
        return [ctx.math(op, ins, _dt(eqn.inputs[0]))]

    return rule


for _name, _op in _UNARY.items():
    onnx_rule(_name)(_unary_rule(_op))


@onnx_rule("neg")
def _neg(ctx, eqn, ins):
    return [ctx.math("Neg", ins, _dt(eqn.inputs[0]), kind="wrap")]


@onnx_rule("abs")
def _abs(ctx, eqn, ins):
    d = _dt(eqn.inputs[0])
    if d.kind == "u" or d == D.bool_:
        return [ctx.node("Identity", ins)]
    return [ctx.math("Abs", ins, d, kind="wrap")]


@onnx_rule("sign")
def _sign(ctx, eqn, ins):
    return [ctx.math("Sign", ins, _dt(eqn.inputs[0]))]


@onnx_rule("stop_gradient")
def _identity(ctx, eqn, ins):
    return [ctx.node("Identity", ins)]


@onnx_rule("isnan")
def _isnan(ctx, eqn, ins):
    return [ctx.math("IsNaN", ins, _dt(eqn.inputs[0]), out="keep")]


@onnx_rule("isinf")
def _isinf(ctx, eqn, ins):
    return [ctx.math("IsInf", ins, _dt(eqn.inputs[0]), out="keep")]


@onnx_rule("is_finite")
def _is_finite(ctx, eqn, ins):
    d = _dt(eqn.inputs[0])
    bad = ctx.node("Or", [ctx.math("IsNaN", ins, d, out="keep"), ctx.math("IsInf", ins, d, out="keep")])
    return [ctx.node("Not", [bad])]


@onnx_rule("not")
def _not(ctx, eqn, ins):
    d = _dt(eqn.inputs[0])
    if d == D.bool_:
        return [ctx.node("Not", ins)]
    return [ctx.math("BitwiseNot", ins, d, kind="wrap")]


@onnx_rule("trunc")
@_computed()
def _trunc(ctx, eqn, ins, d):
    (x,) = ins
    neg = ctx.math("Less", [x, _zero(ctx, d)], d, out="keep")
    r = ctx.node("Where", [neg, ctx.math("Ceil", [x], d), ctx.math("Floor", [x], d)])
    return [_signed(ctx, r, _signbit(ctx, x, d), d)]


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


@onnx_rule("signbit")
@_computed()
def _signbit_rule(ctx, eqn, ins, d):
    return [_signbit(ctx, ins[0], d)]


@onnx_rule("log1p")
@_computed()
def _log1p(ctx, eqn, ins, d):
    # log(u) * x / (u - 1) with u = 1 + x: the rounding of 1 + x cancels (Goldberg), accurate for tiny x
    (x,) = ins
    one = ctx.scalar(1, d)
    u = ctx.math("Add", [x, one], d)
    um1 = ctx.math("Sub", [u, one], d)
    small = ctx.math("Equal", [um1, _zero(ctx, d)], d, out="keep")
    ratio = ctx.math("Div", [x, ctx.node("Where", [small, one, um1])], d)
    y = ctx.math("Mul", [ctx.math("Log", [u], d), ratio], d)
    y = ctx.node("Where", [small, x, y])
    # where 1 + x is infinite the ratio is inf / inf; log(u) is the answer there
    big = ctx.math("IsInf", [u], d, out="keep")
    return [_signed(ctx, ctx.node("Where", [big, ctx.math("Log", [u], d), y]), _signbit(ctx, x, d), d)]


@onnx_rule("expm1")
@_computed()
def _expm1(ctx, eqn, ins, d):
    # (u - 1) * x / log(u) with u = exp(x) (Kahan): exact cancellation of the rounding of exp for small x
    (x,) = ins
    one = ctx.scalar(1, d)
    u = ctx.math("Exp", [x], d)
    um1 = ctx.math("Sub", [u, one], d)
    logu = ctx.math("Log", [u], d)
    near = ctx.math("Equal", [um1, _zero(ctx, d)], d, out="keep")
    safe_log = ctx.node("Where", [near, one, logu])
    y = ctx.math("Mul", [um1, ctx.math("Div", [x, safe_log], d)], d)
    y = ctx.node("Where", [near, x, y])
    # exp underflowed to 0 (u - 1 = -1 exactly) or overflowed: u - 1 is the answer
    edge = ctx.node(
        "Or", [ctx.math("Equal", [um1, ctx.scalar(-1, d)], d, out="keep"), ctx.math("IsInf", [u], d, out="keep")]
    )
    return [_signed(ctx, ctx.node("Where", [edge, um1, y]), _signbit(ctx, x, d), d)]


@onnx_rule("cbrt")
@_computed()
def _cbrt(ctx, eqn, ins, d):
    (x,) = ins
    mag = ctx.math("Pow", [ctx.math("Abs", [x], d), ctx.scalar(1 / 3, d)], d)
    return [ctx.node("Mul", [mag, ctx.node("Where", [_signbit(ctx, x, d), ctx.scalar(-1, d), ctx.scalar(1, d)])])]


@onnx_rule("integer_pow")
@_computed()
def _integer_pow(ctx, eqn, ins, d):
    (x,) = ins
    y = eqn.params["y"]
    n = abs(y)
    if n == 0:
        ones = ctx.node("Expand", [ctx.scalar(1, d), ctx.node("Shape", [x])])
        return [ones]
    # square-and-multiply, as NumPy's integer powers
    acc, base = None, x
    while n:
        if n & 1:
            acc = base if acc is None else ctx.math("Mul", [acc, base], d, kind="wrap")
        n >>= 1
        if n:
            base = ctx.math("Mul", [base, base], d, kind="wrap")
    if y < 0:
        acc = ctx.math("Div", [ctx.scalar(1, d), acc], d)
    if acc is x:
        acc = ctx.node("Identity", [x])
    return [acc]


# Lanczos' approximation (g = 7, 9 terms; relative error about 1e-15 for Re z >= 0.5)
_LANCZOS_G = 7.0
_LANCZOS = (
    0.99999999999980993,
    676.5203681218851,
    -1259.1392167224028,
    771.32342877765313,
    -176.61502916214059,
    12.507343278686905,
    -0.13857109526572012,
    9.9843695780195716e-6,
    1.5056327351493116e-7,
)


@onnx_rule("lgamma")
def _lgamma(ctx, eqn, ins):
    # in float64 whatever the dtype, as funclib computes it: Lanczos for x >= 1/2, reflection below
    d = _dt(eqn.inputs[0])
    f8 = np.dtype(np.float64)
    x = ins[0] if d == f8 else ctx.cast(ins[0], f8)

    def c(v):
        return ctx.scalar(v, f8)

    def op(name, *args):
        return ctx.node(name, list(args))

    reflect = op("Less", x, c(0.5))
    zm1 = op("Sub", op("Where", reflect, op("Sub", c(1.0), x), x), c(1.0))
    series = c(_LANCZOS[0])
    for k, coef in enumerate(_LANCZOS[1:], start=1):
        series = op("Add", series, op("Div", c(coef), op("Add", zm1, c(float(k)))))
    t = op("Add", zm1, c(_LANCZOS_G + 0.5))
    lg = op("Add", c(0.5 * np.log(2 * np.pi)), op("Mul", op("Add", zm1, c(0.5)), op("Log", t)))
    lg = op("Add", op("Sub", lg, t), op("Log", series))
    # log|Gamma(x)| = log(pi / |sin(pi x)|) - log|Gamma(1 - x)|; x - round(x) is exact, so sin keeps its accuracy
    frac = op("Sub", x, op("Round", x))
    sin = op("Abs", op("Sin", op("Mul", c(np.pi), frac)))
    reflected = op("Sub", op("Sub", c(np.log(np.pi)), op("Log", sin)), lg)
    y = op("Where", reflect, reflected, lg)
    # poles at 0 and the negative integers; +inf stays +inf (and -inf gives -inf, as funclib's impl)
    pole = op("And", op("LessOrEqual", x, c(0.0)), op("Equal", op("Floor", x), x))
    y = op("Where", pole, c(np.inf), y)
    y = op("Where", ctx.node("IsInf", [x], detect_negative=0), c(np.inf), y)
    y = op("Where", ctx.node("IsInf", [x], detect_positive=0), c(-np.inf), y)
    return [y if d == f8 else ctx.cast(y, d)]


# Giles' single-precision inverse error function ("Approximating the erfinv function", 2010): polynomials in
# w = -log(1 - x^2), evaluated in float64 here; about 4e-7 relative error
_ERFINV_CENTRAL = (
    2.81022636e-08,
    3.43273939e-07,
    -3.5233877e-06,
    -4.39150654e-06,
    0.00021858087,
    -0.00125372503,
    -0.00417768164,
    0.246640727,
    1.50140941,
)
_ERFINV_TAIL = (
    -0.000200214257,
    0.000100950558,
    0.00134934322,
    -0.00367342844,
    0.00573950773,
    -0.0076224613,
    0.00943887047,
    1.00167406,
    2.83297682,
)


@onnx_rule("erf_inv")
def _erf_inv(ctx, eqn, ins):
    d = _dt(eqn.inputs[0])
    if d == D.float64:
        raise ExportError(
            f"fl.onnx.export: erf_inv{where(eqn)} on float64 is not supported: its float64 accuracy needs Newton "
            "steps on erf, which onnxruntime cannot compute in float64; export it in float32"
        )
    f8 = np.dtype(np.float64)
    x = ctx.cast(ins[0], f8)

    def c(v):
        return ctx.scalar(v, f8)

    def horner(coefs, t):
        p = c(coefs[0])
        for k in coefs[1:]:
            p = ctx.node("Add", [ctx.node("Mul", [p, t]), c(k)])
        return p

    one = c(1.0)
    w = ctx.node("Neg", [ctx.node("Log", [ctx.node("Mul", [ctx.node("Sub", [one, x]), ctx.node("Add", [one, x])])])])
    central = horner(_ERFINV_CENTRAL, ctx.node("Sub", [w, c(2.5)]))
    tail = horner(_ERFINV_TAIL, ctx.node("Sub", [ctx.node("Sqrt", [w]), c(3.0)]))
    p = ctx.node("Where", [ctx.node("Less", [w, c(5.0)]), central, tail])
    y = ctx.node("Mul", [p, x])
    # +-1 give +-inf and |x| > 1 NaN, as funclib (the polynomial would give inf * x and a log of a negative)
    edge = ctx.node("Equal", [ctx.node("Abs", [x]), one])
    y = ctx.node("Where", [edge, ctx.node("Mul", [x, c(np.inf)]), y])
    return [ctx.cast(y, d)]


@onnx_rule("polygamma")
def _polygamma(ctx, eqn, ins):
    # in float64, as funclib: psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) (digamma for n = 0: its asymptotic series),
    # with x moved up by a fixed number of recurrence steps to where the series reaches 1e-17, and the reflection
    # formula for x <= 0
    from funclib.kernels import special

    n = int(eqn.params["n"])
    d = _dt(eqn.inputs[0])
    f8 = np.dtype(np.float64)
    x = ins[0] if d == f8 else ctx.cast(ins[0], f8)

    def c(v):
        return ctx.scalar(float(v), f8)

    def op(name, *args):
        return ctx.node(name, list(args))

    positive = op("Greater", x, c(0.0))
    z = op("Where", positive, x, op("Sub", c(1.0), x))
    steps = int(math.ceil(special._PSI_SHIFT if n == 0 else special._shift_threshold(n)))
    s = n + 1
    shifted = None
    for k in range(steps):
        t = op("Add", z, c(k)) if k else z
        term = op("Reciprocal", t) if n == 0 else op("Pow", t, c(-s))
        shifted = term if shifted is None else op("Add", shifted, term)
    y = op("Add", z, c(steps))
    inv_y2 = op("Reciprocal", op("Mul", y, y))
    if n == 0:
        series = c(special._PSI_ASYMPTOTIC[-1])
        for coef in reversed(special._PSI_ASYMPTOTIC[:-1]):
            series = op("Add", op("Mul", series, inv_y2), c(coef))
        psi_y = op("Sub", op("Sub", op("Log", y), op("Div", c(0.5), y)), op("Mul", series, inv_y2))
        p = op("Sub", psi_y, shifted)
    else:
        # zeta(s, y) = y^(1-s)/(s-1) + y^-s/2 + sum_j B_2j/(2j)! (s)_(2j-1) y^(1-s-2j)
        y_s = op("Pow", y, c(-s))
        zeta = op("Add", op("Mul", op("Mul", y_s, y), c(1.0 / (s - 1))), op("Mul", y_s, c(0.5)))
        tail = None
        for j in range(special._EM_TERMS, 0, -1):
            rising = math.prod(range(s, s + 2 * j - 1))
            coef = c(special._EM_COEF[j - 1] * rising)
            tail = coef if tail is None else op("Add", op("Mul", tail, inv_y2), coef)
        zeta = op("Add", zeta, op("Mul", op("Div", y_s, y), tail))
        p = op("Mul", op("Add", zeta, shifted), c((-1) ** (n + 1) * math.factorial(n)))
    # reflection: psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) T_n(cot(pi x)); x - round(x) is exact
    frac = op("Mul", c(np.pi), op("Sub", x, op("Round", x)))
    cot = op("Div", op("Cos", frac), op("Sin", frac))
    poly = None
    for coef in reversed(special._cot_derivative(n)):
        poly = c(coef) if poly is None else op("Add", op("Mul", poly, cot), c(coef))
    reflected = op("Sub", op("Mul", p, c((-1) ** n)), op("Mul", poly, c(np.pi ** (n + 1))))
    r = op("Where", positive, p, reflected)
    # poles: +inf for odd n; for even n NaN, except at a signed zero, which picks its side
    pole = op("And", op("LessOrEqual", x, c(0.0)), op("Equal", op("Floor", x), x))
    if n % 2:
        at_pole = op("Where", ctx.node("IsInf", [x]), c(np.nan), c(np.inf))
    else:
        zero_side = op("Where", _signbit(ctx, x, f8), c(np.inf), c(-np.inf))
        at_pole = op("Where", op("Equal", x, c(0.0)), zero_side, c(np.nan))
    r = op("Where", pole, at_pole, r)
    # +inf: digamma grows without bound, the others vanish (a zero of sign (-1)^(n+1); Where may drop a -0.0)
    at_inf = c(np.inf) if n == 0 else c((-1) ** (n + 1) * 0.0)
    r = op("Where", ctx.node("IsInf", [x], detect_negative=0), at_inf, r)
    return [r if d == f8 else ctx.cast(r, d)]


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


# ---------------------------------------------------------------------------------------------------------------
# Reductions


def _axes_of(eqn):
    return tuple(int(a) for a in eqn.params["axes"])


def _reduce_rule(op, kind):
    @_computed(kind)
    def rule(ctx, eqn, ins, d):
        axes = _axes_of(eqn)
        if not axes:
            return [ctx.node("Identity", ins)]
        y = ctx.math(op, [ins[0]], d, kind=kind, extra=[ctx.i64(axes)], keepdims=0)
        if op in ("ReduceMax", "ReduceMin") and _is_float(d):
            # NumPy propagates NaN through max/min reductions; ONNX Runtime's ReduceMax may skip it
            isnan = ctx.cast(ctx.node("IsNaN", [ins[0]]), np.int32)
            has_nan = ctx.cast(ctx.node("ReduceMax", [isnan, ctx.i64(axes)], keepdims=0), D.bool_)
            # y - 0.0 keeps a -0.0 maximum, which a Where would turn into +0.0
            y = ctx.node("Sub", [y, ctx.node("Where", [has_nan, ctx.scalar(np.nan, d), _zero(ctx, d)])])
        return [y]

    return rule


onnx_rule("reduce_sum")(_reduce_rule("ReduceSum", "wrap"))
onnx_rule("reduce_prod")(_reduce_rule("ReduceProd", "wrap"))
onnx_rule("reduce_max", "reduce_or")(_reduce_rule("ReduceMax", "order"))
onnx_rule("reduce_min", "reduce_and")(_reduce_rule("ReduceMin", "order"))


@onnx_rule("argmax", "argmin")
@_computed("order")
def _argmax(ctx, eqn, ins, d):
    op = "ArgMax" if eqn.prim.name == "argmax" else "ArgMin"
    axis = int(eqn.params["axis"])
    x = ins[0]
    y = ctx.math(op, [x], d, kind="order", out="keep", axis=axis, keepdims=0)
    if _is_float(d):
        # NumPy returns the first NaN where there is one
        isnan = ctx.cast(ctx.node("IsNaN", [x]), np.int32)
        first_nan = ctx.node("ArgMax", [isnan], axis=axis, keepdims=0)
        any_nan = ctx.cast(ctx.node("ReduceMax", [isnan, ctx.i64([axis])], keepdims=0), D.bool_)
        y = ctx.node("Where", [any_nan, first_nan, y])
    return [ctx.cast(y, eqn.params["index_dtype"])]


@onnx_rule("cumsum")
def _cumsum(ctx, eqn, ins):
    d = _dt(eqn.inputs[0])
    return [
        ctx.math(
            "CumSum",
            [ins[0]],
            d,
            kind="wrap",
            extra=[ctx.const(np.int64(eqn.params["axis"]))],
            reverse=int(bool(eqn.params["reverse"])),
        )
    ]


# ---------------------------------------------------------------------------------------------------------------
# dot_general: MatMul where the layout allows, else Einsum; a convolution's im2col product becomes Conv


@onnx_rule("dot_general")
def _dot_general(ctx, eqn, ins):
    conv = _match_conv(ctx, eqn, ins)
    if conv is not None:
        return [conv]
    x, y = eqn.inputs
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = map(tuple, (lc, rc, lb, rb))
    nx, ny = x.aval.ndim, y.aval.ndim
    lf = tuple(i for i in range(nx) if i not in lc and i not in lb)
    rf = tuple(i for i in range(ny) if i not in rc and i not in rb)
    d = _dt(x)
    a, b = ins
    # MatMul: contract one axis; at most one free axis on the right; batch axes leading on both sides
    if len(lc) == 1 and len(rf) <= 1 and (not lb or len(lf) == 1):
        perm_l = lb + lf + lc
        perm_r = rb + rc + rf
        if perm_l != tuple(range(nx)):
            a = ctx.node("Transpose", [a], perm=list(perm_l))
        if perm_r != tuple(range(ny)):
            b = ctx.node("Transpose", [b], perm=list(perm_r))
        if lb and not rf:
            # (b.., M, K) @ (b.., K): give the right side a unit column and drop it after
            b = ctx.node("Unsqueeze", [b, ctx.i64([len(rb) + 1])])
            out = ctx.math("MatMul", [a, b], d, kind="wrap")
            return [ctx.node("Squeeze", [out, ctx.i64([len(lb) + 1])])]
        return [ctx.math("MatMul", [a, b], d, kind="wrap")]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    ls = [""] * nx
    rs = [""] * ny
    for i, j in zip(lb, rb):
        ls[i] = rs[j] = next(letters)
    for i, j in zip(lc, rc):
        ls[i] = rs[j] = next(letters)
    for i in lf:
        ls[i] = next(letters)
    for j in rf:
        rs[j] = next(letters)
    out = "".join(ls[i] for i in lb) + "".join(ls[i] for i in lf) + "".join(rs[j] for j in rf)
    return [ctx.math("Einsum", ins, d, kind="wrap", equation=f"{''.join(ls)},{''.join(rs)}->{out}")]


def _match_conv(ctx, eqn, ins):
    """``dot_general(broadcast(reshape(w)), reshape(conv_patches(x)))``, as ``funclib.nn.functional`` writes a
    convolution, lowered as one Conv (the patches are then dead and removed)."""
    dn = eqn.params["dimension_numbers"]
    if tuple(map(tuple, dn[0])) != ((3,), (2,)) or tuple(map(tuple, dn[1])) != ((0, 1), (0, 1)):
        return None
    wb, cols = eqn.inputs
    d = _dt(wb)
    if not _is_float(d):
        return None
    r = ctx.producer(cols)
    if r is None or r.prim.name != "reshape":
        return None
    p = ctx.producer(r.inputs[0])
    if p is None or p.prim.name != "conv_patches" or p.params.get("channels_last", True):
        return None
    b = ctx.producer(wb)
    if b is None or b.prim.name != "broadcast_in_dim" or tuple(b.params["broadcast_dimensions"]) != (0, 1, 2, 3):
        return None
    w = b.inputs[0]
    if type(w) is not type(cols) or w.aval.shape[0] != 1:
        return None
    x = p.inputs[0]
    k = tuple(p.params["kernel_shape"])
    _, g, og, cgk = w.aval.shape
    c = x.aval.shape[1]
    if c != g * (cgk // math.prod(k)):
        return None
    xs = ctx.env[x]
    ws = ctx.env[w]
    weight = ctx.reshape(ws, (g * og, cgk // math.prod(k)) + k)
    pads = [int(lo) for lo, _ in p.params["padding"]] + [int(hi) for _, hi in p.params["padding"]]
    y = ctx.math(
        "Conv",
        [xs, weight],
        d,
        kernel_shape=list(k),
        strides=list(p.params["strides"]),
        dilations=list(p.params["dilation"]),
        pads=pads,
        group=int(g),
    )
    # Conv gives (N, O, *out); the product's layout is (N, G, O / G, pixels)
    return ctx.reshape(y, ctx.shape(eqn.outputs[0]))


# ---------------------------------------------------------------------------------------------------------------
# Shapes


@onnx_rule("reshape", dynamic=("new_sizes",))
def _reshape(ctx, eqn, ins):
    return [ctx.reshape(ins[0], ctx.params(eqn)["new_sizes"])]


@onnx_rule("broadcast_in_dim", dynamic=("shape",))
def _broadcast_in_dim(ctx, eqn, ins):
    x = eqn.inputs[0]
    params = ctx.params(eqn)
    shape = tuple(params["shape"])
    bdims = tuple(params["broadcast_dimensions"])
    v = ins[0]
    new = [i for i in range(len(shape)) if i not in bdims]
    if new:
        v = ctx.node("Unsqueeze", [v, ctx.i64(new)])
    in_shape = ctx.shape(x)
    # Expand broadcasts like NumPy: a 1 in the target keeps the operand's size, so sizes it already has need no
    # computing
    target = [1] * len(shape)
    for i, s in enumerate(shape):
        if i in bdims and in_shape[bdims.index(i)] == s:
            continue
        target[i] = s
    if all(t == 1 for t in target):
        return [v if new else ctx.node("Identity", [v])]
    return [ctx.node("Expand", [v, ctx.shape_tensor(target)])]


@onnx_rule("transpose")
def _transpose(ctx, eqn, ins):
    return [ctx.node("Transpose", ins, perm=[int(p) for p in eqn.params["permutation"]])]


@onnx_rule("rev")
def _rev(ctx, eqn, ins):
    axes = [int(a) for a in eqn.params["dimensions"]]
    if not axes:
        return [ctx.node("Identity", ins)]
    n = len(axes)
    return [ctx.node("Slice", [ins[0], ctx.i64([-1] * n), ctx.i64([INT64_MIN] * n), ctx.i64(axes), ctx.i64([-1] * n)])]


@onnx_rule("concatenate")
def _concatenate(ctx, eqn, ins):
    return [ctx.node("Concat", ins, axis=int(eqn.params["dimension"]))]


@onnx_rule("slice", dynamic=("start_indices", "limit_indices"))
def _slice(ctx, eqn, ins):
    p = ctx.params(eqn)
    shape = ctx.shape(eqn.inputs[0])
    axes, starts, ends, steps = [], [], [], []
    for ax, (s, l, st, n) in enumerate(zip(p["start_indices"], p["limit_indices"], p["strides"], shape)):
        if s == 0 and l == n and st == 1:
            continue
        axes.append(ax)
        starts.append(s)
        ends.append(INT64_MAX if l == n else l)
        steps.append(int(st))
    if not axes:
        return [ctx.node("Identity", ins)]
    return [
        ctx.node("Slice", [ins[0], ctx.shape_tensor(starts), ctx.shape_tensor(ends), ctx.i64(axes), ctx.i64(steps)])
    ]


@onnx_rule("pad")
def _pad(ctx, eqn, ins):
    x, value = ins
    config = [tuple(int(v) for v in c) for c in eqn.params["padding_config"]]
    shape = list(ctx.shape(eqn.inputs[0]))
    for ax, (_, _, interior) in enumerate(config):
        if interior and (isinstance(shape[ax], Dim) or shape[ax] > 1):
            x = _interior_pad(ctx, x, value, shape, ax, interior, _dt(eqn.inputs[0]))
            shape[ax] = _affine(shape[ax], interior + 1, -interior)
    if all(lo == 0 and hi == 0 for lo, hi, _ in config):
        return [ctx.node("Identity", [x])]
    pads = [lo for lo, _, _ in config] + [hi for _, hi, _ in config]
    return [ctx.pad(x, pads, value, _dt(eqn.inputs[0]))]


def _affine(n, a: int, b: int):
    return n.affine(a, b) if isinstance(n, Dim) else n * a + b


def _interior_pad(ctx, x, value, shape, ax, interior, dtype):
    """Insert ``interior`` copies of ``value`` between the elements along ``ax``: pad a new unit axis after
    ``ax`` to ``interior + 1``, merge the two axes, and drop the trailing fill."""
    rank = len(shape)
    x = ctx.node("Unsqueeze", [x, ctx.i64([ax + 1])])
    pads = [0] * (2 * (rank + 1))
    pads[(rank + 1) + ax + 1] = interior
    x = ctx.pad(x, pads, value, dtype)
    merged = shape[:ax] + [_affine(shape[ax], interior + 1, 0)] + shape[ax + 1 :]
    x = ctx.reshape(x, merged)
    keep = ctx.dim(_affine(shape[ax], interior + 1, -interior))
    return ctx.node("Slice", [x, ctx.i64([0]), keep, ctx.i64([ax])])


def _clamped_start(ctx, start, n, size):
    """The start index clamped into [0, n - size], as int64[1]."""
    s = ctx.cast(ctx.node("Reshape", [start, ctx.i64([1])]), np.int64)
    hi = ctx.node("Sub", [ctx.dim(n), ctx.dim(size)])
    return ctx.node("Min", [ctx.node("Max", [s, ctx.i64([0])]), hi])


@onnx_rule("dynamic_slice", dynamic=("slice_sizes",))
def _dynamic_slice(ctx, eqn, ins):
    x, *starts = ins
    sizes = ctx.params(eqn)["slice_sizes"]
    shape = ctx.shape(eqn.inputs[0])
    if not shape:
        return [ctx.node("Identity", [x])]
    st = [_clamped_start(ctx, s, n, z) for s, n, z in zip(starts, shape, sizes)]
    st = ctx.node("Concat", st, axis=0)
    ends = ctx.node("Add", [st, ctx.shape_tensor(sizes)])
    return [ctx.node("Slice", [x, st, ends, ctx.i64(list(range(len(shape))))])]


def _index_grid(ctx, dims: tuple) -> str:
    """int64 (*dims, len(dims)): every index tuple of a block of shape ``dims``."""
    rank = len(dims)
    cols = []
    for ax, n in enumerate(dims):
        r = ctx.node(
            "Range", [ctx.const(np.int64(0)), ctx.node("Reshape", [ctx.dim(n), ctx.i64([])]), ctx.const(np.int64(1))]
        )
        r = ctx.node("Reshape", [r, ctx.i64([-1 if i == ax else 1 for i in range(rank)] + [1])])
        cols.append(ctx.node("Expand", [r, ctx.shape_tensor(list(dims) + [1])]))
    return ctx.node("Concat", cols, axis=-1)


@onnx_rule("dynamic_update_slice")
def _dynamic_update_slice(ctx, eqn, ins):
    x, upd, *starts = ins
    shape = ctx.shape(eqn.inputs[0])
    ushape = ctx.shape(eqn.inputs[1])
    if not shape:
        return [ctx.node("Identity", [upd])]
    st = ctx.node("Concat", [_clamped_start(ctx, s, n, z) for s, n, z in zip(starts, shape, ushape)], axis=0)
    idx = ctx.node("Add", [_index_grid(ctx, ushape), st])
    return [ctx.node("ScatterND", [x, idx, upd])]


@onnx_rule("iota", dynamic=("shape",))
def _iota(ctx, eqn, ins):
    p = ctx.params(eqn)
    shape, dim, dtype = tuple(p["shape"]), int(p["dimension"]), np.dtype(p["dtype"])
    n = ctx.node("Reshape", [ctx.dim(shape[dim]), ctx.i64([])])
    r = ctx.node("Range", [ctx.const(np.int64(0)), n, ctx.const(np.int64(1))])
    r = ctx.cast(r, dtype) if dtype != D.int64 else r
    r = ctx.node("Reshape", [r, ctx.i64([-1 if i == dim else 1 for i in range(len(shape))])])
    return [ctx.node("Expand", [r, ctx.shape_tensor(shape)])]


# ---------------------------------------------------------------------------------------------------------------
# Gather and scatter: the indexed axes move to the front, where GatherND/ScatterND address them


def _front(ctx, x, axes, rank):
    perm = list(axes) + [i for i in range(rank) if i not in axes]
    if perm == list(range(rank)):
        return x, None
    return ctx.node("Transpose", [x], perm=perm), perm


def _indices(ctx, idx, dtype):
    return ctx.cast(idx, np.int64) if np.dtype(dtype) != D.int64 else idx


@onnx_rule("gather")
def _gather(ctx, eqn, ins):
    x, idx = ins
    axes = tuple(int(a) for a in eqn.params["axes"])
    xt, _ = _front(ctx, x, axes, eqn.inputs[0].aval.ndim)
    return [ctx.node("GatherND", [xt, _indices(ctx, idx, _dt(eqn.inputs[1]))])]


@onnx_rule("scatter", "scatter_add")
def _scatter(ctx, eqn, ins):
    x, idx, upd = ins
    axes = tuple(int(a) for a in eqn.params["axes"])
    rank = eqn.inputs[0].aval.ndim
    xt, perm = _front(ctx, x, axes, rank)
    d = _dt(eqn.inputs[0])
    reduction = "add" if eqn.prim.name == "scatter_add" else None
    # with repeated indices the last update wins in funclib; ONNX leaves the order unspecified, and ONNX Runtime
    # applies updates in order, so they agree there
    idx = _indices(ctx, idx, _dt(eqn.inputs[1]))
    if reduction:
        wide = compute_dtype(d, "wrap")
        if wide != d:
            xt, upd = ctx.cast(xt, wide), ctx.cast(upd, wide)
        y = ctx.node("ScatterND", [xt, idx, upd], reduction=reduction)
        y = ctx.cast(y, d) if wide != d else y
    else:
        y = ctx.node("ScatterND", [xt, idx, upd])
    if perm is not None:
        y = ctx.node("Transpose", [y], perm=[int(i) for i in np.argsort(perm)])
    return [y]


@onnx_rule("scatter_mul", "scatter_max", "scatter_min")
def _scatter_combine(ctx, eqn, ins):
    x, idx, upd = ins
    mode = eqn.prim.name.split("_")[1]
    axes = tuple(int(a) for a in eqn.params["axes"])
    xt, perm = _front(ctx, x, axes, eqn.inputs[0].aval.ndim)
    idx = _indices(ctx, idx, _dt(eqn.inputs[1]))
    d = _dt(eqn.inputs[0])
    if d == D.uint64 and mode != "mul":
        y = ctx.unflip_u64(ctx.node("ScatterND", [ctx.flip_u64(xt), idx, ctx.flip_u64(upd)], reduction=mode))
    else:
        wide = compute_dtype(d, "wrap" if mode == "mul" else "order")
        xw, uw = (ctx.cast(xt, wide), ctx.cast(upd, wide)) if wide != d else (xt, upd)
        y = ctx.node("ScatterND", [xw, idx, uw], reduction=mode)
        if _is_float(wide) and mode != "mul":
            # NumPy's maximum.at propagates NaN, onnxruntime's max/min reductions skip it: mark where one landed
            f4 = np.dtype(np.float32)
            marks = ctx.node(
                "ScatterND",
                [ctx.cast(ctx.node("IsNaN", [xw]), f4), idx, ctx.cast(ctx.node("IsNaN", [uw]), f4)],
                reduction="max",
            )
            hit = ctx.node("Greater", [marks, ctx.scalar(0, f4)])
            y = ctx.node("Sub", [y, ctx.node("Where", [hit, ctx.scalar(np.nan, wide), ctx.scalar(0, wide)])])
        y = ctx.cast(y, d) if wide != d else y
    if perm is not None:
        y = ctx.node("Transpose", [y], perm=[int(i) for i in np.argsort(perm)])
    return [y]


# ---------------------------------------------------------------------------------------------------------------
# Convolution patches (im2col) and their adjoint, as strided slices and pads; a convolution's product is matched
# to Conv in dot_general


def _window_slices(ctx, xp, p, out_sizes):
    """For each kernel offset, the strided slice of the padded input it reads: (N, C, *out) each."""
    k, s, dil = tuple(p["kernel_shape"]), tuple(p["strides"]), tuple(p["dilation"])
    nd = len(k)
    axes = ctx.i64(list(range(2, 2 + nd)))
    steps = ctx.i64(list(s))
    slices = []
    for kk in itertools.product(*[range(n) for n in k]):
        starts = [kk[i] * dil[i] for i in range(nd)]
        ends = [starts[i] + (out_sizes[i] - 1) * s[i] + 1 for i in range(nd)]
        slices.append(ctx.node("Slice", [xp, ctx.i64(starts), ctx.i64(ends), axes, steps]))
    return slices


@onnx_rule("conv_patches")
def _conv_patches(ctx, eqn, ins):
    p = eqn.params
    x = eqn.inputs[0]
    k = tuple(p["kernel_shape"])
    nd = len(k)
    pads = [0, 0] + [int(lo) for lo, _ in p["padding"]] + [0, 0] + [int(hi) for _, hi in p["padding"]]
    xp = ins[0]
    if any(pads):
        xp = ctx.pad(xp, pads, _zero(ctx, _dt(x)), _dt(x))
    in_shape = ctx.shape(x)
    out_shape = ctx.shape(eqn.outputs[0])
    channels_last = p.get("channels_last", True)
    osz = tuple(out_shape[1 : 1 + nd]) if channels_last else tuple(out_shape[2 + nd :])
    if any(isinstance(o, Dim) for o in osz):
        raise ExportError(
            f"fl.onnx.export: conv_patches{where(eqn)} over a spatial axis of dynamic size is not supported; make "
            "only the batch axis dynamic"
        )
    parts = [ctx.node("Unsqueeze", [sl, ctx.i64([2])]) for sl in _window_slices(ctx, xp, p, osz)]
    cols = ctx.node("Concat", parts, axis=2) if len(parts) > 1 else parts[0]  # (N, C, K, *out)
    cols = ctx.reshape(cols, (in_shape[0], in_shape[1]) + k + osz)  # (N, C, *k, *out)
    if channels_last:
        perm = [0, *range(2 + nd, 2 + 2 * nd), *range(2, 2 + nd), 1]
        cols = ctx.node("Transpose", [cols], perm=perm)
    return [cols]


@onnx_rule("conv_patches_transpose")
def _conv_patches_transpose(ctx, eqn, ins):
    p = eqn.params
    c = eqn.inputs[0]
    out_shape = ctx.shape(eqn.outputs[0])  # (N, C, *spatial)
    nd = len(p["strides"])
    cshape = ctx.shape(c)
    channels_last = p.get("channels_last", True)
    v = ins[0]
    if channels_last:  # (N, *out, *k, C) -> (N, C, *k, *out)
        v = ctx.node("Transpose", [v], perm=[0, 2 * nd + 1, *range(nd + 1, 2 * nd + 1), *range(1, nd + 1)])
        k = tuple(cshape[1 + nd : 1 + 2 * nd])
        osz = tuple(cshape[1 : 1 + nd])
    else:
        k = tuple(cshape[2 : 2 + nd])
        osz = tuple(cshape[2 + nd :])
    spatial = tuple(out_shape[2:])
    if any(isinstance(s, Dim) for s in k + osz + spatial):
        raise ExportError(
            f"fl.onnx.export: conv_patches_transpose{where(eqn)} with a dynamic spatial size is not "
            "supported; make only the batch axis dynamic"
        )
    s, dil, padding = tuple(p["strides"]), tuple(p["dilation"]), tuple(tuple(q) for q in p["padding"])
    padded = tuple(spatial[i] + padding[i][0] + padding[i][1] for i in range(nd))
    n, ch = out_shape[0], out_shape[1]
    flat = ctx.reshape(v, (n, ch, math.prod(k)) + osz)
    d = _dt(c)
    zero = _zero(ctx, d)
    total = None
    for j, kk in enumerate(itertools.product(*[range(m) for m in k])):
        piece = ctx.node("Gather", [flat, ctx.const(np.int64(j))], axis=2)  # (N, C, *out)
        shape = [n, ch] + list(osz)
        for i in range(nd):
            if s[i] > 1 and osz[i] > 1:
                piece = _interior_pad(ctx, piece, zero, shape, 2 + i, s[i] - 1, d)
                shape[2 + i] = osz[i] + (osz[i] - 1) * (s[i] - 1)
        lo = [kk[i] * dil[i] for i in range(nd)]
        hi = [padded[i] - lo[i] - shape[2 + i] for i in range(nd)]
        piece = ctx.pad(piece, [0, 0] + lo + [0, 0] + hi, zero, d)
        total = piece if total is None else ctx.math("Add", [total, piece], d, kind="wrap")
    crop_lo = [padding[i][0] for i in range(nd)]
    return [
        ctx.node(
            "Slice",
            [
                total,
                ctx.i64(crop_lo),
                ctx.i64([crop_lo[i] + spatial[i] for i in range(nd)]),
                ctx.i64(list(range(2, 2 + nd))),
            ],
        )
    ]


# ---------------------------------------------------------------------------------------------------------------
# Sorting: TopK is stable (ties keep the lower index first), so a multi-key sort is one stable pass per key, least
# significant first


def _sort_key(ctx, key, d):
    """The keys of one operand, most significant first, in types TopK orders: a float key sorts by (isnan, value
    with NaN as +inf), so NaN comes last as in NumPy; booleans and narrow integers are widened."""
    d = np.dtype(d)
    if _is_float(d):
        wide = np.dtype(np.float32) if d in (D.float16, D.bfloat16) else d
        k = ctx.cast(key, wide) if wide != d else key
        isnan = ctx.node("IsNaN", [k])
        return [ctx.cast(isnan, np.int32), ctx.node("Where", [isnan, ctx.scalar(np.inf, wide), k])]
    if d == D.uint64:  # flipping the top bit maps uint64 onto int64 in order
        return [ctx.flip_u64(key)]
    wide = np.dtype(np.int64) if d.kind in "ib" or d in (D.uint8, D.uint16, D.uint32) else d
    return [ctx.cast(key, wide) if wide != d else key]


@onnx_rule("sort")
def _sort(ctx, eqn, ins):
    axis = int(eqn.params["dimension"])
    nk = int(eqn.params["num_keys"])
    shape = ctx.shape(eqn.inputs[0])
    k = ctx.dim(shape[axis])
    passes = []
    for key, a in zip(ins[:nk], eqn.inputs[:nk]):
        passes.extend(_sort_key(ctx, key, _dt(a)))
    # one stable pass per key, the least significant first
    perm = None
    for key in reversed(passes):
        cur = key if perm is None else ctx.node("GatherElements", [key, perm], axis=axis)
        _, sub = ctx.node("TopK", [cur, k], 2, axis=axis, largest=0, sorted=1)
        perm = sub if perm is None else ctx.node("GatherElements", [perm, sub], axis=axis)
    return [ctx.node("GatherElements", [x, perm], axis=axis) for x in ins]


# ---------------------------------------------------------------------------------------------------------------
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
        "random_uniform_rows": _RANDOM,
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
