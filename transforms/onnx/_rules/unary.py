"""ONNX rules of the elementwise unary primitives, special functions (lgamma, erf_inv, polygamma) included."""

from __future__ import annotations

import math

import numpy as np
from funclib.kernels import special

from funclib import dtypes as D

from .._errors import ExportError, where
from .._lower import onnx_rule
from ._common import _computed, _dt, _signbit, _signed, _zero

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


@onnx_rule("exp2")
def _exp2(ctx, eqn, ins):
    d = _dt(eqn.inputs[0])
    return [ctx.math("Pow", [ctx.scalar(2, d), ins[0]], d)]  # exact at integer exponents, as funclib's exp2


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


