"""The elementwise functions beyond arithmetic: exponentials and logarithms, trigonometric and hyperbolic
functions and their inverses, roots and powers, the logistic function and the special functions (erf, erfinv,
lgamma, digamma, polygamma). Rows of the families in ``elementwise.py``; their derivatives are written with its
arithmetic.

A tangent times a coefficient that can be infinite or NaN (exp overflowing, cos(inf), a pole of lgamma, ...) is a
safe_mul: a zero tangent or cotangent (the unselected side of a where) stays exactly zero instead of 0 * inf.
Divisions by a coefficient that can vanish are safe_div for the same reason.
"""

from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes, namespace
from ..checks import check_int
from ..core import Primitive, ShapedArray, Zero, _wrap, aval_of
from ..kernels import special, ufuncs
from ..kernels.fusion import Lowering
from .elementwise import (
    NO_F32_MATH,
    NO_SCALAR_SPECIAL,
    NUMERIC,
    REAL_FLOAT,
    _check,
    _to_tensor,
    binary,
    convert,
    negative,
    safe_div,
    safe_mul,
    unary,
)
from .shape import select

# Float32 math from kernels/vmath.py, float64 from libm. vector_constants: registers its float32 loop keeps live
# (the fusion planner's register_pressure); split: loop fission may start a new loop before it (sin/cos measured
# no faster split: their own instruction count dominates).
exp_p, exp = unary(
    "exp", np.exp, jvp=lambda x, y, t: safe_mul(t, y),
    lowering=Lowering(f32="fexp({0})", f64="np.exp({0})", vector_constants=14, split=True), method=True,
)
exp2_p, exp2 = unary(
    "exp2", np.exp2, jvp=lambda x, y, t: safe_mul(t, y * 0.6931471805599453),
    lowering=Lowering(f32="fpow(np.float32(2), {0})", f64="np.exp2({0})", vector_constants=30),
    doc="``2 ** x``, exact at integer ``x``.\n\n>>> fl.exp2(fl.tensor([3.0, -1.0]))\nTensor([8. , 0.5], dtype=float32)",
)
log_p, log = unary(
    "log", np.log, jvp=lambda x, y, t: safe_div(t, x),
    lowering=Lowering(f32="flog({0})", f64="np.log({0})", vector_constants=18, split=True), method=True,
)
log1p_p, log1p = unary(
    "log1p", np.log1p, jvp=lambda x, y, t: safe_div(t, x + 1.0),
    lowering=Lowering(f32="flog1p({0})", f64="np.log1p({0})", vector_constants=18, split=True),
)
expm1_p, expm1 = unary(
    "expm1", np.expm1, jvp=lambda x, y, t: safe_mul(t, y + 1.0),
    lowering=Lowering(f32="fexpm1({0})", f64="np.expm1({0})", vector_constants=16, split=True),
)
sin_p, sin = unary(
    "sin", np.sin, jvp=lambda x, y, t: safe_mul(t, cos(x)),
    lowering=Lowering(f32="fsin({0})", f64="np.sin({0})", vector_constants=25), method=True,
)
cos_p, cos = unary(
    "cos", np.cos, jvp=lambda x, y, t: safe_mul(t, negative(sin(x))),
    lowering=Lowering(f32="fcos({0})", f64="np.cos({0})", vector_constants=25), method=True,
)
tan_p, tan = unary("tan", np.tan, jvp=lambda x, y, t: safe_mul(t, y * y + 1.0), no_lowering=NO_F32_MATH)
asin_p, asin = unary(
    "asin", np.arcsin, jvp=lambda x, y, t: safe_div(t, sqrt(1.0 - x * x)), no_lowering=NO_F32_MATH
)
acos_p, acos = unary(
    "acos", np.arccos, jvp=lambda x, y, t: negative(safe_div(t, sqrt(1.0 - x * x))), no_lowering=NO_F32_MATH
)
atan_p, atan = unary("atan", np.arctan, jvp=lambda x, y, t: safe_div(t, x * x + 1.0), no_lowering=NO_F32_MATH)
sinh_p, sinh = unary("sinh", np.sinh, jvp=lambda x, y, t: safe_mul(t, cosh(x)), no_lowering=NO_F32_MATH)
cosh_p, cosh = unary("cosh", np.cosh, jvp=lambda x, y, t: safe_mul(t, sinh(x)), no_lowering=NO_F32_MATH)
tanh_p, tanh = unary(
    "tanh", np.tanh, jvp=lambda x, y, t: safe_mul(t, 1.0 - y * y),
    lowering=Lowering(f32="ftanh({0})", f64="np.tanh({0})", vector_constants=20, split=True), method=True,
)
asinh_p, asinh = unary(
    "asinh", np.arcsinh, jvp=lambda x, y, t: safe_div(t, sqrt(x * x + 1.0)), no_lowering=NO_F32_MATH
)
acosh_p, acosh = unary(
    "acosh", np.arccosh, jvp=lambda x, y, t: safe_div(t, sqrt(x - 1.0) * sqrt(x + 1.0)), no_lowering=NO_F32_MATH
)
atanh_p, atanh = unary("atanh", np.arctanh, jvp=lambda x, y, t: safe_div(t, 1.0 - x * x), no_lowering=NO_F32_MATH)
# d sqrt(x) = t / (2 sqrt(x)) is infinite at 0; safe_div keeps a zero tangent or cotangent exactly zero there
sqrt_p, sqrt = unary(
    "sqrt", np.sqrt, jvp=lambda x, y, t: safe_div(t, y + y), lowering=Lowering(f32="np.sqrt({0})", f64="np.sqrt({0})"),
    method=True,
)
cbrt_p, cbrt = unary(
    "cbrt", np.cbrt, ok=REAL_FLOAT, jvp=lambda x, y, t: safe_div(t, 3.0 * y * y), no_lowering=NO_F32_MATH
)


def _logistic_np(x):
    if x.dtype != np.float64:
        return ufuncs.logistic(x)
    # stable in both tails: exp never sees a large positive argument
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _erf_np(x):
    # float32 and narrower: the jit kernels' function, so eager and jit agree bit for bit
    return special.erf(x) if x.dtype == np.float64 else ufuncs.erf(x)


logistic_p, sigmoid = unary(
    "logistic", _logistic_np, public="sigmoid", ok=REAL_FLOAT, jvp=lambda x, y, t: safe_mul(t, y * (1.0 - y)),
    lowering=Lowering(f32="flogistic({0})", f64="_logistic64({0})", vector_constants=16, split=True),
    method=True,
)
erf_p, erf = unary(
    "erf", _erf_np, ok=REAL_FLOAT, jvp=lambda x, y, t: safe_mul(t, 1.1283791670955126 * exp(negative(x * x))),
    lowering=Lowering(f32="ferf({0})", f64="math.erf({0})", vector_constants=26, split=True),
)
erf_inv_p, erfinv = unary(
    "erf_inv",
    special.erfinv,
    public="erfinv",
    ok=REAL_FLOAT,
    jvp=lambda x, y, t: safe_mul(t, 0.886226925452758 * exp(y * y)),
    no_lowering=NO_SCALAR_SPECIAL,
)
lgamma_p, lgamma = unary(
    "lgamma", special.lgamma, ok=REAL_FLOAT, jvp=lambda x, y, t: safe_mul(t, digamma(x)),
    no_lowering=NO_SCALAR_SPECIAL,
)

# polygamma(n, x) = d^n/dx^n digamma(x); n is static, so every order of derivative of lgamma is a primitive call
polygamma_p = Primitive("polygamma")
polygamma_p.family = "unary"
polygamma_p.no_rule["lowering"] = NO_SCALAR_SPECIAL
polygamma_p.no_rule["transpose"] = "not linear"


@polygamma_p.def_impl
def _polygamma_impl(x, *, n):
    return special.polygamma(n, x)


@polygamma_p.def_abstract_eval
def _polygamma_abstract(x, *, n):
    _check("polygamma", x.dtype, REAL_FLOAT)
    return ShapedArray(x.shape, x.dtype)


@polygamma_p.def_jvp
def _polygamma_jvp(primals, tangents, *, n):
    (x,), (t,) = primals, tangents
    y = polygamma_p.bind(x, n=n)
    if type(t) is Zero:
        return y, Zero(aval_of(y))
    return y, safe_mul(t, polygamma_p.bind(x, n=n + 1))


@polygamma_p.def_vmap
def _polygamma_vmap(args, dims, *, n):
    return polygamma_p.bind(args[0], n=n), dims[0]


@namespace.public
def polygamma(n: int, x):
    """The n-th derivative of the digamma function (``n`` a static non-negative int).

    >>> fl.polygamma(1, fl.tensor([1.0]))  # pi**2 / 6
    """
    n = check_int(n, "polygamma", "n", min=0)
    return _polygamma(n, x, "polygamma")


def _polygamma(n: int, x, op: str):
    x = _to_tensor(x, op)
    if x.dtype not in REAL_FLOAT:
        x = convert(x, dtypes.default_float)
    return polygamma_p.bind(x, n=n)


@namespace.public
def digamma(x):
    """The digamma function, d/dx lgamma(x)."""
    return _polygamma(0, x, "digamma")


atan2_p, atan2 = binary(
    "atan2",
    np.arctan2,
    ok=REAL_FLOAT,
    jvp=(
        lambda x, y, o, t: safe_div(safe_mul(t, y), x * x + y * y),
        lambda x, y, o, t: negative(safe_div(safe_mul(t, x), x * x + y * y)),
    ),
    no_lowering=NO_F32_MATH,
)


def _pow_dx(x, y, o, t):
    # y * x**(y-1), exactly 0 where y == 0 (so d/dx x**0 = 0 even at x = 0); safe_mul rather than a select on
    # y keeps the y-derivative of this expression right at y == 0 (second order)
    return safe_mul(t, safe_mul(y, pow(x, y - 1.0)))


def _pow_dy(x, y, o, t):
    # log(x) * x**y, defined as 0 where x == 0 (the limit from the right for y > 0)
    safe_x = select(x == 0, _wrap(np.ones((), x.dtype)), x)
    return safe_mul(t, select(x == 0, _wrap(np.zeros((), o.dtype)), o * log(safe_x)))


def _pow_np(x, y):
    out = np.power(x, y)
    if (y.__class__ is builtins.float or getattr(y, "ndim", 1) == 0) and y == 0.5 and out.dtype in REAL_FLOAT:
        # NumPy computes x ** 0.5 as sqrt(x): -0 at -0 and nan at -inf, where the standard wants +0 and +inf
        out = np.where(np.isinf(x) | (x == 0), np.abs(x), out)
    return out


pow_p, pow = binary(
    "pow", _pow_np, ok=NUMERIC, jvp=(_pow_dx, _pow_dy),
    lowering=Lowering(f32="fpow({0}, {1})", f64="({0} ** {1})", vector_constants=30),
    export=False,  # fl.pow (funclib/ops) takes x ** n for a static int n as integer_pow
)
