"""NumPy's elementwise functions: the ufuncs (as ``ufunc`` objects with NumPy's call signature) and the
elementwise helpers around them (``round``, ``clip``, ``nan_to_num``, ``angle``, ``sinc``, ``i0``, ``isclose``).

Where NumPy and the Array API differ in meaning, NumPy's is kept: ``floor_divide`` and ``remainder`` with an
infinite operand, booleans in ``add``/``multiply``, integer ``reciprocal``, ``fmod``'s sign, ``float_power`` in
float64. Each function is a composition of funclib operations, so it differentiates, traces and vectorizes.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes, ops
from ..core import Tensor, _wrap
from ..errors import DTypeError
from ..ops import reductions as R
from ..ops.manipulation import broadcast_arrays
from ..ops.misc import stop_gradient
from ..ops.searching import where as _where
from ..primitives import shape as S
from ..primitives.elementwise import complex_from, convert, promote_pair
from ..transforms import while_loop
from ._ufunc import binary, binary2, prepare, ufunc, unary, unary2
from ._util import NoValue, asarray, inexact, no_out

_LN2 = math.log(2.0)


def _t(x, op):
    return asarray(x, op)


def _f(x, op):
    return inexact(_t(x, op))


def _zero(x):
    return _wrap(np.zeros((), x.dtype))


def _full(v, x):
    return _wrap(np.full((), v, x.dtype))


def _bools(x, value):
    return S.full(tuple(x.shape), value, dtypes.bool_)


def _both_bool(x1, x2):
    return getattr(x1, "dtype", None) == dtypes.bool_ and getattr(x2, "dtype", None) == dtypes.bool_


def _py_or_tensor(x, op):
    return x if type(x) in (builtins.int, builtins.float, builtins.complex, builtins.bool) else _t(x, op)


# ------------------------------------------------------------------------------------------------------------
# implementations that differ from the Array API namespace


def _abs(x):
    x = _t(x, "absolute")
    return x if x.dtype == dtypes.bool_ else ops.abs(x)


def _fabs(x):
    x = _t(x, "fabs")
    if x.dtype in dtypes.COMPLEX:
        raise DTypeError("numpy.fabs: complex input is not supported; use fnp.abs for the modulus")
    return ops.abs(inexact(x))


def _add(x1, x2):
    x1, x2 = _py_or_tensor(x1, "add"), _py_or_tensor(x2, "add")
    return ops.logical_or(x1, x2) if _both_bool(x1, x2) else ops.add(x1, x2)


def _multiply(x1, x2):
    x1, x2 = _py_or_tensor(x1, "multiply"), _py_or_tensor(x2, "multiply")
    return ops.logical_and(x1, x2) if _both_bool(x1, x2) else ops.multiply(x1, x2)


def _reciprocal(x):
    x = _t(x, "reciprocal")
    if x.dtype in dtypes.INTEGER:
        # C integer division 1 / x: 1 and -1 are their own reciprocals, every other value gives 0
        return _where(ops.equal(ops.abs(x), 1), x, _zero(x))
    return ops.reciprocal(x)


def _floor_divide(x1, x2):
    x1, x2 = promote_pair("floor_divide", x1, x2)
    if type(x1) is Tensor and type(x2) is Tensor:
        with np.errstate(divide="ignore", invalid="ignore"):
            return _wrap(np.floor_divide(x1._value, x2._value))
    q = ops.floor_divide(x1, x2)
    if q.dtype not in dtypes.INEXACT:
        return q
    # NumPy, unlike the Array API, gives nan for an infinite dividend and -1 or 0 for an infinite divisor
    inf1, inf2 = ops.isinf(x1), ops.isinf(x2)
    signs_differ = ops.not_equal(ops.signbit(x1), ops.signbit(x2))
    by_inf = _where(ops.logical_and(ops.not_equal(x1, 0), signs_differ), _full(-1, q),
                    ops.copysign(_zero(q), ops.divide(x1, x2)))
    q = _where(ops.logical_and(inf2, ops.logical_not(inf1)), by_inf, q)
    return _where(ops.logical_and(inf1, ops.logical_not(ops.isnan(x2))), _full(np.nan, q), q)


def _remainder(x1, x2):
    x1, x2 = promote_pair("remainder", x1, x2)
    if type(x1) is Tensor and type(x2) is Tensor:
        with np.errstate(divide="ignore", invalid="ignore"):
            return _wrap(np.remainder(x1._value, x2._value))
    return ops.remainder(x1, x2)


def _fmod(x1, x2):
    x1, x2 = promote_pair("fmod", x1, x2)
    if x1.dtype in dtypes.COMPLEX or x1.dtype == dtypes.bool_:
        raise DTypeError(f"numpy.fmod: unsupported dtype {x1.dtype.name}; expected a real number dtype")
    # |x1| mod |x2| is exact (no sign adjustment happens), and fmod takes the dividend's sign
    r = _remainder(ops.abs(x1), ops.abs(x2))
    if r.dtype in dtypes.INEXACT:
        return ops.copysign(r, x1)
    return _where(ops.less(x1, 0), ops.negative(r), r)


def _divmod(x1, x2):
    return _floor_divide(x1, x2), _remainder(x1, x2)


def _power(x1, x2):
    return ops.pow(_py_or_tensor(x1, "power"), _py_or_tensor(x2, "power"))


def _float_power(x1, x2):
    x1, x2 = promote_pair("float_power", x1, x2)
    d = dtypes.complex128 if x1.dtype in dtypes.COMPLEX else dtypes.float64
    return ops.pow(convert(x1, d), convert(x2, d))


def _fmax(x1, x2):
    x1, x2 = promote_pair("fmax", x1, x2)
    if x1.dtype not in dtypes.INEXACT:
        return ops.maximum(x1, x2)
    return _where(ops.isnan(x1), x2, _where(ops.isnan(x2), x1, ops.maximum(x1, x2)))


def _fmin(x1, x2):
    x1, x2 = promote_pair("fmin", x1, x2)
    if x1.dtype not in dtypes.INEXACT:
        return ops.minimum(x1, x2)
    return _where(ops.isnan(x1), x2, _where(ops.isnan(x2), x1, ops.minimum(x1, x2)))


def _float_pair(op, x1, x2):
    x1, x2 = promote_pair(op, x1, x2)
    return inexact(x1), inexact(x2)


def _arctan2(x1, x2):
    return ops.atan2(*_float_pair("arctan2", x1, x2))


def _hypot(x1, x2):
    return ops.hypot(*_float_pair("hypot", x1, x2))


def _copysign(x1, x2):
    return ops.copysign(*_float_pair("copysign", x1, x2))


def _nextafter(x1, x2):
    return ops.nextafter(*_float_pair("nextafter", x1, x2))


def _ldexp(x1, x2):
    x1, x2 = _f(x1, "ldexp"), _t(x2, "ldexp")
    if x2.dtype not in dtypes.INTEGER:
        raise DTypeError(f"numpy.ldexp: the exponent must be an integer array, got {x2.dtype.name}")
    if type(x1) is Tensor and type(x2) is Tensor and x1.dtype in (dtypes.float32, dtypes.float64):
        return _wrap(np.ldexp(x1._value, x2._value))
    # two exact power-of-two factors, so 2**x2 alone cannot overflow where the product does not
    half = ops.floor_divide(x2, 2)
    p1 = ops.exp2(convert(half, x1.dtype))
    p2 = ops.exp2(convert(ops.subtract(x2, half), x1.dtype))
    return ops.multiply(ops.multiply(x1, p1), p2)


def _logaddexp2(x1, x2):
    x1, x2 = _float_pair("logaddexp2", x1, x2)
    if x1.dtype in dtypes.REAL_FLOATING and x1.dtype != dtypes.float64:
        return convert(_logaddexp2(convert(x1, dtypes.float64), convert(x2, dtypes.float64)), x1.dtype)
    m = ops.maximum(x1, x2)
    finite = ops.isfinite(m)
    safe_m = _where(finite, m, _zero(m))
    d = ops.negative(ops.abs(ops.subtract(x1, x2)))
    res = ops.add(safe_m, ops.divide(ops.log1p(ops.exp2(d)), _LN2))
    return _where(finite, res, m)


def _heaviside(x1, x2):
    x1, x2 = _float_pair("heaviside", x1, x2)
    out = _where(ops.less(x1, 0), _zero(x1), _where(ops.greater(x1, 0), _full(1, x1), x2))
    return _where(ops.isnan(x1), x1, out)


def _int_pair(op, x1, x2):
    x1, x2 = promote_pair(op, x1, x2)
    if x1.dtype not in dtypes.INTEGER:
        raise DTypeError(f"numpy.{op}: expected integer arrays, got {x1.dtype.name}")
    return x1, x2


def _gcd(x1, x2):
    a, b = _int_pair("gcd", x1, x2)
    if type(a) is Tensor and type(b) is Tensor:
        return _wrap(np.gcd(a._value, b._value))

    a, b = broadcast_arrays(ops.abs(a), ops.abs(b))

    def body(c):
        u, v = c
        nz = ops.not_equal(v, 0)
        return _where(nz, v, u), _where(nz, ops.remainder(u, _where(nz, v, _full(1, v))), _zero(v))

    return while_loop(lambda c: R.any(ops.not_equal(c[1], 0)), body, (a, b))[0]


def _lcm(x1, x2):
    a, b = _int_pair("lcm", x1, x2)
    if type(a) is Tensor and type(b) is Tensor:
        return _wrap(np.lcm(a._value, b._value))
    g = _gcd(a, b)
    nz = ops.not_equal(g, 0)
    return ops.abs(ops.multiply(ops.floor_divide(a, _where(nz, g, _full(1, g))), b))


def _logical(fn, name):
    def f(x1, x2):
        return fn(_py_or_tensor(x1, name), _py_or_tensor(x2, name))

    return f


def _spacing(x):
    # piecewise constant: its derivative is 0, which the difference of nextafter and x would not give
    x = stop_gradient(_f(x, "spacing"))
    ax = ops.abs(x)
    gap = ops.subtract(ops.nextafter(ax, _full(np.inf, ax)), ax)
    tiny = _full(np.nextafter(np.zeros((), x.dtype), np.ones((), x.dtype)), x)
    return _where(ops.equal(x, 0), tiny, ops.copysign(gap, x))


def _bitwise_count(x):
    x = _t(x, "bitwise_count")
    if x.dtype not in dtypes.INTEGER:
        raise DTypeError(f"numpy.bitwise_count: expected an integer array, got {x.dtype.name}")
    v = convert(ops.abs(x) if x.dtype in dtypes.SIGNED else x, dtypes.uint64)
    # population count by summing adjacent bit fields (SWAR)
    m1, m2, m4 = 0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F
    v = ops.subtract(v, ops.bitwise_and(ops.bitwise_right_shift(v, 1), m1))
    v = ops.add(ops.bitwise_and(v, m2), ops.bitwise_and(ops.bitwise_right_shift(v, 2), m2))
    v = ops.bitwise_and(ops.add(v, ops.bitwise_right_shift(v, 4)), m4)
    v = ops.bitwise_right_shift(ops.multiply(v, 0x0101010101010101), 56)
    return convert(v, dtypes.uint8)


def _frexp(x):
    x = _f(x, "frexp")
    if x.dtype in dtypes.COMPLEX:
        raise DTypeError("numpy.frexp: complex input is not supported")
    if type(x) is Tensor and x.dtype in (dtypes.float32, dtypes.float64):
        m, e = np.frexp(x._value)
        return _wrap(m), _wrap(e)
    ok = ops.logical_and(ops.isfinite(x), ops.not_equal(x, 0))
    ax = _where(ok, ops.abs(x), _full(1, x))
    e = convert(ops.add(ops.floor(ops.log2(ax)), 1), dtypes.int32)
    # log2 may round across a power of two: move one step so that 0.5 <= |m| < 1
    for _ in range(2):
        m = ops.divide(ax, ops.exp2(convert(e, x.dtype)))
        e = _where(ops.greater_equal(m, 1), ops.add(e, 1), _where(ops.less(m, 0.5), ops.subtract(e, 1), e))
    m = ops.divide(x, ops.exp2(convert(e, x.dtype)))
    zero_i = _wrap(np.zeros((), np.int32))
    return _where(ok, m, x), _where(ok, e, zero_i)


def _modf(x):
    x = _f(x, "modf")
    whole = ops.trunc(x)
    inf = ops.isinf(x)
    frac = ops.copysign(ops.subtract(_where(inf, _zero(x), x), _where(inf, _zero(x), whole)), x)
    return _where(inf, ops.copysign(_zero(x), x), frac), whole


def _positive(x):
    return ops.positive(_t(x, "positive"))


def _doc(name, what, example):
    return f"{what}\n\n>>> {example}"


def _u1(name, impl, what, example, **kw):
    return ufunc(unary(name, impl, _doc(name, what, example)), 1, **kw)


def _u2(name, impl, what, example, **kw):
    return ufunc(binary(name, impl, _doc(name, what, example)), 2, **kw)


def _sum(x, axes):
    return R.sum(x, axis=axes)


def _prod(x, axes):
    return R.prod(x, axis=axes)


# ------------------------------------------------------------------------------------------------------------
# unary ufuncs

absolute = _u1("absolute", _abs, "``|x|`` (the modulus for complex ``x``, a real result).", "fnp.absolute([-1.5, 2.0])")
abs = absolute
fabs = _u1("fabs", _fabs, "``|x|`` of real ``x`` as floating point.", "fnp.fabs([-1, 2])")
negative = _u1("negative", lambda x: ops.negative(_t(x, "negative")), "``-x``.", "fnp.negative([1, -2])")
positive = _u1("positive", _positive, "``+x`` (a copy).", "fnp.positive([1, -2])")
sign = _u1("sign", lambda x: ops.sign(_t(x, "sign")), "-1, 0 or 1 by the sign of ``x`` (``x / |x|`` for complex).",
           "fnp.sign([-2.0, 0.0, 3.0])")
sqrt = _u1("sqrt", ops.sqrt, "The non-negative square root.", "fnp.sqrt([4.0, 9.0])")
cbrt = _u1("cbrt", ops.cbrt, "The real cube root.", "fnp.cbrt([-8.0, 27.0])")
square = _u1("square", lambda x: ops.square(_t(x, "square")), "``x * x``.", "fnp.square([2, 3])")
reciprocal = _u1("reciprocal", _reciprocal, "``1 / x`` (C integer division for integers: 0 unless x is 1 or -1).",
                 "fnp.reciprocal([2.0, 4.0])")
exp = _u1("exp", ops.exp, "``e ** x``.", "fnp.exp([0.0])")
exp2 = _u1("exp2", ops.exp2, "``2 ** x``.", "fnp.exp2([3.0])")
expm1 = _u1("expm1", ops.expm1, "``exp(x) - 1``, accurate near 0.", "fnp.expm1([0.0])")
log = _u1("log", ops.log, "The natural logarithm.", "fnp.log([1.0])")
log2 = _u1("log2", ops.log2, "The base-2 logarithm.", "fnp.log2([8.0])")
log10 = _u1("log10", ops.log10, "The base-10 logarithm.", "fnp.log10([100.0])")
log1p = _u1("log1p", ops.log1p, "``log(1 + x)``, accurate near 0.", "fnp.log1p([0.0])")
sin = _u1("sin", ops.sin, "The sine.", "fnp.sin([0.0])")
cos = _u1("cos", ops.cos, "The cosine.", "fnp.cos([0.0])")
tan = _u1("tan", ops.tan, "The tangent.", "fnp.tan([0.0])")
arcsin = _u1("arcsin", ops.asin, "The inverse sine.", "fnp.arcsin([0.0])")
arccos = _u1("arccos", ops.acos, "The inverse cosine.", "fnp.arccos([1.0])")
arctan = _u1("arctan", ops.atan, "The inverse tangent.", "fnp.arctan([0.0])")
sinh = _u1("sinh", ops.sinh, "The hyperbolic sine.", "fnp.sinh([0.0])")
cosh = _u1("cosh", ops.cosh, "The hyperbolic cosine.", "fnp.cosh([0.0])")
tanh = _u1("tanh", ops.tanh, "The hyperbolic tangent.", "fnp.tanh([0.0])")
arcsinh = _u1("arcsinh", ops.asinh, "The inverse hyperbolic sine.", "fnp.arcsinh([0.0])")
arccosh = _u1("arccosh", ops.acosh, "The inverse hyperbolic cosine.", "fnp.arccosh([1.0])")
arctanh = _u1("arctanh", ops.atanh, "The inverse hyperbolic tangent.", "fnp.arctanh([0.0])")
asin, acos, atan = arcsin, arccos, arctan
asinh, acosh, atanh = arcsinh, arccosh, arctanh
deg2rad = _u1("deg2rad", lambda x: ops.multiply(_f(x, "deg2rad"), math.pi / 180.0), "Degrees to radians.",
              "fnp.deg2rad([180.0])")
radians = deg2rad
rad2deg = _u1("rad2deg", lambda x: ops.multiply(_f(x, "rad2deg"), 180.0 / math.pi), "Radians to degrees.",
              "fnp.rad2deg([3.141592653589793])")
degrees = rad2deg
rint = _u1("rint", lambda x: ops.round(_f(x, "rint")), "Round to the nearest integer (halves to even), as floating "
           "point.", "fnp.rint([0.5, 1.5, -2.5])")
floor = _u1("floor", lambda x: ops.floor(_t(x, "floor")), "The largest integer not above ``x``.", "fnp.floor([-1.5])")
ceil = _u1("ceil", lambda x: ops.ceil(_t(x, "ceil")), "The smallest integer not below ``x``.", "fnp.ceil([-1.5])")
trunc = _u1("trunc", lambda x: ops.trunc(_t(x, "trunc")), "``x`` rounded towards zero.", "fnp.trunc([-1.5])")
conjugate = _u1("conjugate", lambda x: ops.conj(_t(x, "conjugate")), "The complex conjugate (the identity on reals).",
                "fnp.conjugate([1 + 2j])")
conj = conjugate
isfinite = _u1("isfinite", lambda x: ops.isfinite(_t(x, "isfinite")), "Whether ``x`` is finite.", "fnp.isfinite([1.0])")
isinf = _u1("isinf", lambda x: ops.isinf(_t(x, "isinf")), "Whether ``x`` is infinite.", "fnp.isinf([1.0])")
isnan = _u1("isnan", lambda x: ops.isnan(_t(x, "isnan")), "Whether ``x`` is NaN.", "fnp.isnan([1.0])")
signbit = _u1("signbit", lambda x: ops.signbit(_f(x, "signbit")), "Whether the sign bit is set (true for -0.0).",
              "fnp.signbit([-0.0])")
spacing = _u1("spacing", _spacing, "The distance from ``x`` to the next number away from zero (signed like x).",
              "fnp.spacing([1.0])")
logical_not = _u1("logical_not", lambda x: ops.logical_not(_t(x, "logical_not")), "Elementwise NOT of truth values.",
                  "fnp.logical_not([True, False])")
invert = _u1("invert", lambda x: ops.bitwise_invert(_t(x, "invert")), "Bitwise NOT (logical NOT for booleans).",
             "fnp.invert([0, 1])")
bitwise_not = bitwise_invert = invert
bitwise_count = _u1("bitwise_count", _bitwise_count, "The number of 1 bits in ``|x|``, as uint8.",
                    "fnp.bitwise_count([7, -1])")
frexp = ufunc(unary2("frexp", _frexp, _doc("frexp", "Mantissa in [0.5, 1) and int32 exponent: x = m * 2**e.",
                                           "fnp.frexp([8.0])")), 1, 2)
modf = ufunc(unary2("modf", _modf, _doc("modf", "Fractional and integral parts, both with the sign of ``x``.",
                                        "fnp.modf([-2.5])")), 1, 2)

# ------------------------------------------------------------------------------------------------------------
# binary ufuncs

add = _u2("add", _add, "``x1 + x2`` with broadcasting.", "fnp.add([1, 2], 3)", identity=0, associative=True,
          reducer=_sum)
subtract = _u2("subtract", lambda a, b: ops.subtract(a, b), "``x1 - x2``.", "fnp.subtract([3, 4], 1)")
multiply = _u2("multiply", _multiply, "``x1 * x2``.", "fnp.multiply([1, 2], 3)", identity=1, associative=True,
               reducer=_prod)
divide = _u2("divide", ops.divide, "True division (integers give the default float dtype).", "fnp.divide([1, 2], 4)")
true_divide = divide
floor_divide = _u2("floor_divide", _floor_divide, "``floor(x1 / x2)``.", "fnp.floor_divide([7, -7], 2)")
power = _u2("power", _power, "``x1 ** x2``.", "fnp.power([2, 3], 2)")
pow = power
float_power = _u2("float_power", _float_power, "``x1 ** x2`` computed in float64 (complex128).",
                  "fnp.float_power(2, 0.5)")
remainder = _u2("remainder", _remainder, "The remainder with the sign of the divisor (Python's ``%``).",
                "fnp.remainder([7, -7], 3)")
mod = remainder
fmod = _u2("fmod", _fmod, "The remainder with the sign of the dividend (C's ``fmod``).", "fnp.fmod([7, -7], 3)")
divmod = ufunc(binary2("divmod", _divmod, _doc("divmod", "``(x1 // x2, x1 % x2)``.", "fnp.divmod([7], 2)")), 2, 2)
maximum = _u2("maximum", lambda a, b: ops.maximum(a, b), "The larger element (NaN propagates).",
              "fnp.maximum([1, 5], [3, 2])", associative=True, reducer=lambda x, a: R.max(x, axis=a))
minimum = _u2("minimum", lambda a, b: ops.minimum(a, b), "The smaller element (NaN propagates).",
              "fnp.minimum([1, 5], [3, 2])", associative=True, reducer=lambda x, a: R.min(x, axis=a))
fmax = _u2("fmax", _fmax, "The larger element, ignoring NaN.", "fnp.fmax([1.0, float('nan')], 2.0)",
           associative=True)
fmin = _u2("fmin", _fmin, "The smaller element, ignoring NaN.", "fnp.fmin([1.0, float('nan')], 2.0)",
           associative=True)
arctan2 = _u2("arctan2", _arctan2, "The angle of the point (x2, x1), in (-pi, pi].", "fnp.arctan2(1.0, -1.0)")
atan2 = arctan2
hypot = _u2("hypot", _hypot, "``sqrt(x1**2 + x2**2)`` without overflow.", "fnp.hypot(3.0, 4.0)", associative=True)
copysign = _u2("copysign", _copysign, "``|x1|`` with the sign of ``x2``.", "fnp.copysign(2.0, -0.0)")
nextafter = _u2("nextafter", _nextafter, "The next float after ``x1`` towards ``x2``.", "fnp.nextafter(1.0, 2.0)")
ldexp = _u2("ldexp", _ldexp, "``x1 * 2**x2`` for integer ``x2``, exactly.", "fnp.ldexp(3.0, 2)")
logaddexp = _u2("logaddexp", lambda a, b: ops.logaddexp(a, b), "``log(exp(x1) + exp(x2))`` without overflow.",
                "fnp.logaddexp(0.0, 0.0)", identity=-np.inf, associative=True)
logaddexp2 = _u2("logaddexp2", _logaddexp2, "``log2(2**x1 + 2**x2)`` without overflow.", "fnp.logaddexp2(1.0, 1.0)",
                 identity=-np.inf, associative=True)
heaviside = _u2("heaviside", _heaviside, "0 for x1 < 0, 1 for x1 > 0 and ``x2`` at 0.",
                "fnp.heaviside([-1.0, 0.0], 0.5)")
gcd = _u2("gcd", _gcd, "The greatest common divisor of ``|x1|`` and ``|x2|``.", "fnp.gcd(12, 20)", identity=0,
          associative=True)
lcm = _u2("lcm", _lcm, "The least common multiple of ``|x1|`` and ``|x2|``.", "fnp.lcm(4, 6)", associative=True)
left_shift = _u2("left_shift", lambda a, b: ops.bitwise_left_shift(a, b), "``x1 << x2``.", "fnp.left_shift(1, 3)")
bitwise_left_shift = left_shift
right_shift = _u2("right_shift", lambda a, b: ops.bitwise_right_shift(a, b), "``x1 >> x2``.", "fnp.right_shift(8, 2)")
bitwise_right_shift = right_shift
bitwise_and = _u2("bitwise_and", lambda a, b: ops.bitwise_and(a, b), "Bitwise AND.", "fnp.bitwise_and(12, 10)",
                  identity=-1, associative=True)
bitwise_or = _u2("bitwise_or", lambda a, b: ops.bitwise_or(a, b), "Bitwise OR.", "fnp.bitwise_or(12, 10)", identity=0,
                 associative=True)
bitwise_xor = _u2("bitwise_xor", lambda a, b: ops.bitwise_xor(a, b), "Bitwise XOR.", "fnp.bitwise_xor(12, 10)",
                  identity=0, associative=True)
logical_and = _u2("logical_and", _logical(ops.logical_and, "logical_and"), "Elementwise AND of truth values.",
                  "fnp.logical_and([True, True], [True, False])", identity=True, associative=True,
                  reducer=lambda x, a: R.all(x, axis=a))
logical_or = _u2("logical_or", _logical(ops.logical_or, "logical_or"), "Elementwise OR of truth values.",
                 "fnp.logical_or([True, False], False)", identity=False, associative=True,
                 reducer=lambda x, a: R.any(x, axis=a))
logical_xor = _u2("logical_xor", _logical(ops.logical_xor, "logical_xor"), "Elementwise XOR of truth values.",
                  "fnp.logical_xor([True, False], True)", identity=False, associative=True)
equal = _u2("equal", lambda a, b: ops.equal(a, b), "``x1 == x2``.", "fnp.equal([1, 2], 2)")
not_equal = _u2("not_equal", lambda a, b: ops.not_equal(a, b), "``x1 != x2``.", "fnp.not_equal([1, 2], 2)")
less = _u2("less", lambda a, b: ops.less(a, b), "``x1 < x2``.", "fnp.less([1, 2], 2)")
less_equal = _u2("less_equal", lambda a, b: ops.less_equal(a, b), "``x1 <= x2``.", "fnp.less_equal([1, 2], 2)")
greater = _u2("greater", lambda a, b: ops.greater(a, b), "``x1 > x2``.", "fnp.greater([1, 2], 2)")
greater_equal = _u2("greater_equal", lambda a, b: ops.greater_equal(a, b), "``x1 >= x2``.",
                    "fnp.greater_equal([1, 2], 2)")


# ------------------------------------------------------------------------------------------------------------
# elementwise functions that are not ufuncs in NumPy


def round(a, decimals=0, out=None) -> Tensor:
    """``a`` rounded to ``decimals`` decimal places (halves to even; negative ``decimals`` round to tens,
    hundreds, ...), computed as NumPy does: ``rint(a * 10**decimals) / 10**decimals``.

    >>> fnp.round([1.25, 2.5], 1)
    Tensor([1.2, 2.5], dtype=float32)
    """
    no_out(out, "round")
    x = _t(a, "round")
    decimals = int(decimals)
    if x.dtype in dtypes.COMPLEX:
        return _complex_round(x, decimals)
    if x.dtype in dtypes.INTEGER or x.dtype == dtypes.bool_:
        if decimals >= 0:
            return x
        p = 10 ** (-decimals)
        return convert(ops.multiply(ops.round(ops.divide(convert(x, dtypes.float64), float(p))), float(p)), x.dtype)
    if decimals == 0:
        return ops.round(x)
    if decimals > 0:
        p = 10.0**decimals
        return ops.divide(ops.round(ops.multiply(x, p)), p)
    p = 10.0 ** (-decimals)
    return ops.multiply(ops.round(ops.divide(x, p)), p)


def _complex_round(x, decimals):
    return complex_from(round(ops.real(x), decimals), round(ops.imag(x), decimals))


def around(a, decimals=0, out=None) -> Tensor:
    """The older name of ``round``."""
    return round(a, decimals, out)


def clip(a, a_min=NoValue, a_max=NoValue, out=None, *, min=NoValue, max=NoValue, **kwargs) -> Tensor:
    """``a`` limited to ``[a_min, a_max]`` (either may be None), as ``minimum(maximum(a, a_min), a_max)`` with
    NumPy's type promotion (``min``/``max`` are the Array API spellings).

    >>> fnp.clip([-2, 0, 5], 0, 3)
    Tensor([0, 0, 3], dtype=int64)
    """
    no_out(out, "clip")
    extra = set(kwargs) - {"where", "casting", "order", "dtype", "subok", "signature"}
    if extra:
        raise TypeError(f"numpy.clip: unexpected keyword arguments {sorted(extra)}")
    if kwargs:
        (a,) = prepare("clip", (a,), None, kwargs.get("where", True), kwargs.get("casting", "same_kind"),
                       kwargs.get("order", "K"), kwargs.get("dtype"), kwargs.get("signature"))
    if min is not NoValue:
        if a_min is not NoValue:
            raise TypeError("numpy.clip: pass either a_min or min, not both")
        a_min = min
    if max is not NoValue:
        if a_max is not NoValue:
            raise TypeError("numpy.clip: pass either a_max or max, not both")
        a_max = max
    x = _t(a, "clip")
    if a_min is not NoValue and a_min is not None:
        x = ops.maximum(x, _py_or_tensor(a_min, "clip"))
    if a_max is not NoValue and a_max is not None:
        x = ops.minimum(x, _py_or_tensor(a_max, "clip"))
    return x


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None) -> Tensor:
    """``x`` with NaN replaced by ``nan`` and infinities by ``posinf``/``neginf`` (default: the largest finite
    values), in the real and imaginary parts of complex arrays.

    >>> fnp.nan_to_num(fnp.array([float("nan"), float("inf"), 1.0]), posinf=9.0)
    Tensor([0., 9., 1.], dtype=float32)
    """
    x = _t(x, "nan_to_num")
    if x.dtype not in dtypes.INEXACT:
        return x
    if x.dtype in dtypes.COMPLEX:
        return complex_from(nan_to_num(ops.real(x), nan=nan, posinf=posinf, neginf=neginf),
                            nan_to_num(ops.imag(x), nan=nan, posinf=posinf, neginf=neginf))
    info = dtypes.finfo(x.dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    y = _where(ops.isnan(x), _full(nan, x), x)
    y = _where(ops.logical_and(ops.isinf(x), ops.greater(x, 0)), _full(hi, x), y)
    return _where(ops.logical_and(ops.isinf(x), ops.less(x, 0)), _full(lo, x), y)


def real(val) -> Tensor:
    """The real part (the array itself for real input)."""
    return ops.real(_t(val, "real"))


def imag(val) -> Tensor:
    """The imaginary part (zeros for real input)."""
    return ops.imag(_t(val, "imag"))


def angle(z, deg=False) -> Tensor:
    """The argument of complex ``z`` in (-pi, pi] (in degrees with ``deg``); 0 or pi for real input.

    >>> fnp.angle([1j, -1.0])
    Tensor([1.5707964, 3.1415927], dtype=float32)
    """
    z = _t(z, "angle")
    if z.dtype in dtypes.COMPLEX:
        a = ops.atan2(ops.imag(z), ops.real(z))
    else:
        zf = inexact(z)
        a = ops.atan2(S.full(tuple(zf.shape), 0, zf.dtype), zf)
    return ops.multiply(a, 180.0 / math.pi) if deg else a


# sinc: sin(pi x) / (pi x) away from 0; its Taylor polynomial near 0 keeps every derivative right at 0
_SINC_SMALL = 1e-3


def sinc(x) -> Tensor:
    """The normalized sinc function ``sin(pi x) / (pi x)``, 1 at 0 (with the right derivatives there).

    >>> fnp.sinc([0.0, 0.5])
    Tensor([1.        , 0.63661975], dtype=float32)
    """
    x = _f(x, "sinc")
    small = ops.less(ops.abs(x), _SINC_SMALL)
    xs = _where(small, _full(1, x), x)
    big = ops.divide(ops.sin(ops.multiply(xs, math.pi)), ops.multiply(xs, math.pi))
    u = ops.square(ops.multiply(_where(small, x, _zero(x)), math.pi))
    taylor = ops.add(
        1.0, ops.multiply(u, ops.add(-1.0 / 6, ops.multiply(u, ops.add(1.0 / 120, ops.multiply(u, -1.0 / 5040)))))
    )
    return _where(small, taylor, big)


_I0_SERIES = [1.0 / math.factorial(k) ** 2 for k in range(37)]
_I0_ASYM = [1.0]
for _k in range(1, 31):
    _I0_ASYM.append(_I0_ASYM[-1] * (2 * _k - 1) ** 2 / (8 * _k))
_I0_SWITCH = 20.0


def _horner(coefs, t):
    acc = None
    for c in reversed(coefs):
        acc = _full(c, t) if acc is None else ops.add(ops.multiply(acc, t), c)
    return acc


def i0(x) -> Tensor:
    """The modified Bessel function of the first kind of order 0: its power series for ``|x| <= 20``, its
    asymptotic expansion beyond (each to float64 precision), differentiable.

    >>> fnp.i0([0.0, 1.0])
    Tensor([1.       , 1.2660658], dtype=float32)
    """
    x = _f(x, "i0")
    if x.dtype in dtypes.COMPLEX:
        raise DTypeError("numpy.i0: complex input is not supported")
    if x.dtype != dtypes.float64:
        return convert(i0(convert(x, dtypes.float64)), x.dtype)
    ax = ops.abs(x)
    big = ops.greater(ax, _I0_SWITCH)
    xs = _where(big, _full(_I0_SWITCH, x), x)  # the series is even in x: no |x| kink at 0 for second derivatives
    series = _horner(_I0_SERIES, ops.multiply(ops.square(xs), 0.25))
    xb = _where(big, ax, _full(_I0_SWITCH + 1, ax))
    asym = ops.divide(_horner(_I0_ASYM, ops.reciprocal(xb)), ops.sqrt(ops.multiply(xb, 2 * math.pi)))
    # exp(x / 2) twice: exp(x) alone overflows below x = 713, where I0 still fits, and exp of an exact argument
    # stays accurate where exp(x - log(...) / 2) would carry the rounding of the subtraction
    half = ops.exp(ops.multiply(xb, 0.5))
    return _where(big, ops.multiply(half, ops.multiply(half, asym)), series)


def isposinf(x, out=None) -> Tensor:
    """Whether ``x`` is +inf."""
    no_out(out, "isposinf")
    x = _t(x, "isposinf")
    if x.dtype in dtypes.COMPLEX:
        raise TypeError("numpy.isposinf: complex input is not supported (the sign of a complex infinity is undefined)")
    return ops.logical_and(ops.isinf(x), ops.greater(x, 0)) if x.dtype in dtypes.INEXACT else _bools(x, False)


def isneginf(x, out=None) -> Tensor:
    """Whether ``x`` is -inf."""
    no_out(out, "isneginf")
    x = _t(x, "isneginf")
    if x.dtype in dtypes.COMPLEX:
        raise TypeError("numpy.isneginf: complex input is not supported (the sign of a complex infinity is undefined)")
    return ops.logical_and(ops.isinf(x), ops.less(x, 0)) if x.dtype in dtypes.INEXACT else _bools(x, False)


def iscomplex(x) -> Tensor:
    """Whether each element has a nonzero imaginary part."""
    x = _t(x, "iscomplex")
    return ops.not_equal(ops.imag(x), 0) if x.dtype in dtypes.COMPLEX else _bools(x, False)


def isreal(x) -> Tensor:
    """Whether each element has a zero imaginary part."""
    x = _t(x, "isreal")
    return ops.equal(ops.imag(x), 0) if x.dtype in dtypes.COMPLEX else _bools(x, True)


def iscomplexobj(x) -> bool:
    """Whether ``x`` has a complex dtype (a Python bool: the dtype is static)."""
    d = getattr(x, "dtype", None)
    return np.dtype(d).kind == "c" if d is not None else np.iscomplexobj(x)


def isrealobj(x) -> bool:
    """Whether ``x`` does not have a complex dtype."""
    return not iscomplexobj(x)


def isscalar(element) -> bool:
    """Whether ``element`` is a scalar: a Python or NumPy scalar, or a 0-d Tensor (what funclib returns where
    NumPy returns a scalar)."""
    if isinstance(element, Tensor):
        return element.ndim == 0
    return bool(np.isscalar(element))


def iterable(y) -> bool:
    """Whether ``iter(y)`` works (false for 0-d arrays)."""
    if isinstance(y, Tensor):
        return y.ndim > 0
    return bool(np.iterable(y))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> Tensor:
    """Elementwise ``|a - b| <= atol + rtol * |b|`` (equal infinities are close; NaN only with ``equal_nan``).

    >>> fnp.isclose([1.0, 1.1], 1.0)
    Tensor([ True, False], dtype=bool)
    """
    x, y = promote_pair("isclose", _py_or_tensor(a, "isclose"), _py_or_tensor(b, "isclose"))
    x, y = inexact(x), inexact(y)
    ay = ops.abs(y)
    tol = ops.add(ops.multiply(ay, rtol), atol)
    finite = ops.logical_and(ops.isfinite(x), ops.isfinite(y))
    diff = ops.subtract(_where(finite, x, _zero(x)), _where(finite, y, _zero(y)))  # inf - inf would warn
    close = ops.logical_and(ops.less_equal(ops.abs(diff), tol), finite)
    close = ops.logical_or(close, ops.equal(x, y))
    if equal_nan:
        close = ops.logical_or(close, ops.logical_and(ops.isnan(x), ops.isnan(y)))
    return close


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> Tensor:
    """Whether ``isclose`` holds everywhere (a 0-d bool Tensor: ``bool()`` of it, or use it under ``jit``).

    >>> bool(fnp.allclose([1.0, 2.0], [1.0, 2.0 + 1e-9]))
    True
    """
    return R.all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan=False) -> Tensor:
    """Whether both arrays have one shape and equal elements (a 0-d bool Tensor).

    >>> bool(fnp.array_equal([1, 2], [1, 2]))
    True
    """
    x, y = _t(a1, "array_equal"), _t(a2, "array_equal")
    if tuple(x.shape) != tuple(y.shape):
        return _wrap(np.asarray(False))
    eq = ops.equal(x, y)
    if equal_nan and x.dtype in dtypes.INEXACT and y.dtype in dtypes.INEXACT:
        eq = ops.logical_or(eq, ops.logical_and(ops.isnan(x), ops.isnan(y)))
    return R.all(eq)


def array_equiv(a1, a2) -> Tensor:
    """Whether the arrays broadcast to one shape with equal elements (a 0-d bool Tensor)."""
    x, y = _t(a1, "array_equiv"), _t(a2, "array_equiv")
    try:
        np.broadcast_shapes(tuple(x.shape), tuple(y.shape))
    except ValueError:
        return _wrap(np.asarray(False))
    return R.all(ops.equal(x, y))


__all__ = [n for n, v in list(globals().items()) if isinstance(v, ufunc)] + [
    "round",
    "around",
    "clip",
    "nan_to_num",
    "real",
    "imag",
    "angle",
    "sinc",
    "i0",
    "isposinf",
    "isneginf",
    "iscomplex",
    "isreal",
    "iscomplexobj",
    "isrealobj",
    "isscalar",
    "iterable",
    "isclose",
    "allclose",
    "array_equal",
    "array_equiv",
]
