"""Device functions of complex math that does not fit one expression: ``sqrt``, the inverse trigonometric and
hyperbolic functions and ``pow``, one copy per working precision (suffix ``32`` for complex64, computed in float32 only,
``64`` for complex128), so that every constant has the parts' type.

Branch cuts, signed zeros, infinities and NaNs follow C99 Annex G, as NumPy does (its special values are those of
FreeBSD's catrig): ``asinh`` and ``acos`` are Kahan's formulas over the principal square roots of ``1 +- iz``
(``1 -+ z``), whose signed zeros put a value on a cut on the side its imaginary zero's sign names, and ``log(2z)``
past ``1/eps`` (no overflow: ``|z|`` is never formed); ``asin(z) = -i asinh(iz)``, ``acosh`` is ``acos`` turned by
``+-i``, ``atan(z) = -i atanh(iz)``; ``atanh`` is
computed for ``re >= 0`` (it is odd) as ``log1p(4a / ((1 - a)^2 + b^2)) / 4 + i atan2(2b, (1 - a)(1 + a) - b^2)
/ 2``, which cancels nothing near 0 (near 1 the real part is ``log(|1 + z| / |1 - z|) / 2``), and past
``1/sqrt(eps)`` as ``1/z +- i pi/2``. ``pow`` is NumPy's
``npy_cpow``: exponent 0 gives 1, base 0 gives 0 for an exponent with a positive real part and NaN otherwise, an integer
exponent below 100 in modulus is repeated squaring (its reciprocal for a negative one), and the rest is
``exp(y log x)`` with C99's ``cexp`` at infinities and NaNs.

>>> "_casin32" in CX_MATH and uses("_cpow64({0}, {1})") and not uses("math.asin({0})")
True
"""

from __future__ import annotations

import math
import re

import numpy as np

_TEMPLATE = '''
_NAN_T = npT(np.nan)
_INF_T = npT(np.inf)


@cuda.jit(device=True)
def _csqrtT(a, b):
    # the principal root as (re, im), signed zeros kept: sqrt(x - 0i) = sqrt(x) - 0i, sqrt(-x +- 0i) = +-i sqrt(x)
    if a == npT(0) and b == npT(0):
        return npT(0), b
    scale = npT(1)
    if abs(a) > npT(BIG) or abs(b) > npT(BIG):  # |z| + |re| would overflow
        a = a * npT(0.25)
        b = b * npT(0.25)
        scale = npT(2)
    t = math.sqrt((math.hypot(a, b) + abs(a)) * npT(0.5))
    if a >= npT(0):
        return t * scale, b / (t + t) * scale
    return abs(b) / (t + t) * scale, math.copysign(t, b) * scale


@cuda.jit(device=True)
def _csqrtzT(z):
    a = z.real
    b = z.imag
    if math.isinf(b):
        return complex(_INF_T, b)
    if a != a or b != b:
        if math.isinf(a):
            return complex(a, b) if a > npT(0) else complex(b, -a)
        return complex(_NAN_T, _NAN_T)
    if math.isinf(a):
        if a > npT(0):
            return complex(a, math.copysign(npT(0), b))
        return complex(npT(0), math.copysign(_INF_T, b))
    r, i = _csqrtT(a, b)
    return complex(r, i)


@cuda.jit(device=True)
def _logabsT(a, b):
    # log |a + ib| where |z| itself may overflow
    if abs(a) > npT(BIG) or abs(b) > npT(BIG):
        return math.log(math.hypot(a * npT(0.25), b * npT(0.25))) + npT(LN4)
    return math.log(math.hypot(a, b))


@cuda.jit(device=True)
def _casinhT(z):
    a = z.real
    b = z.imag
    if a != a or b != b:
        if math.isinf(a):
            return complex(a, b + b)
        if math.isinf(b):  # the sign of the real infinity is unspecified: NumPy's is +
            return complex(abs(b), a + a)
        if b == npT(0):
            return complex(a + a, b)
        return complex(_NAN_T, _NAN_T)
    if abs(a) > npT(RECIP_EPS) or abs(b) > npT(RECIP_EPS):  # log(2z) to within eps; infinities included
        return complex(math.copysign(_logabsT(a, b) + npT(LN2), a), math.atan2(b, abs(a)))
    r1, i1 = _csqrtT(npT(1) + b, -a)
    r2, i2 = _csqrtT(npT(1) - b, a)
    return complex(math.asinh(r1 * i2 - i1 * r2), math.atan2(b, r1 * r2 - i1 * i2))


@cuda.jit(device=True)
def _casinT(z):
    w = _casinhT(complex(-z.imag, z.real))
    if w.imag != w.imag and math.isinf(z.real):  # asin(+-inf + i NaN): the infinity's sign is unspecified; NumPy's +
        return complex(w.imag, abs(w.real))
    return complex(w.imag, -w.real)


@cuda.jit(device=True)
def _cacosT(z):
    a = z.real
    b = z.imag
    if a != a or b != b:
        if math.isinf(a):
            return complex(b + b, -_INF_T)
        if math.isinf(b):
            return complex(a + a, -b)
        if a == npT(0):
            return complex(npT(HALF_PI), b + b)
        return complex(_NAN_T, _NAN_T)
    if abs(a) > npT(RECIP_EPS) or abs(b) > npT(RECIP_EPS):
        im = _logabsT(a, b) + npT(LN2)
        return complex(abs(math.atan2(b, a)), -im if math.copysign(npT(1), b) > npT(0) else im)
    r1, i1 = _csqrtT(npT(1) - a, -b)
    r2, i2 = _csqrtT(npT(1) + a, b)
    return complex(npT(2) * math.atan2(r1, r2), math.asinh(r2 * i1 - i2 * r1))


@cuda.jit(device=True)
def _cacoshT(z):
    w = _cacosT(z)
    if w.real != w.real and w.imag != w.imag:
        return complex(w.imag, w.real)
    if w.real != w.real:
        return complex(abs(w.imag), w.real)
    if w.imag != w.imag:  # acosh(+-0 + i NaN) = NaN + i pi/2
        return complex(w.imag, w.real)
    return complex(abs(w.imag), math.copysign(w.real, z.imag))


@cuda.jit(device=True)
def _catanhT(z):
    a = z.real
    b = z.imag
    if a != a or b != b:
        if math.isinf(a):
            return complex(math.copysign(npT(0), a), b + b)
        if math.isinf(b):
            return complex(math.copysign(npT(0), a), math.copysign(npT(HALF_PI), b))
        if a == npT(0):
            return complex(a, b + b)
        return complex(_NAN_T, _NAN_T)
    neg = math.copysign(npT(1), a) < npT(0)
    if neg:
        a = -a
        b = -b
    if math.isinf(a) or math.isinf(b):
        re = npT(0)
        im = math.copysign(npT(HALF_PI), b)
    elif a > npT(RSQRT_EPS) or abs(b) > npT(RSQRT_EPS):  # 1/z + i pi/2 sign(b) to within eps
        h = math.hypot(a * npT(0.25), b * npT(0.25))
        re = (a * npT(0.25) / h) / h * npT(0.25)
        im = math.copysign(npT(HALF_PI), b) - (b * npT(0.25) / h) / h * npT(0.25)
    else:
        d = (npT(1) - a) * (npT(1) - a) + b * b
        if npT(4) * a <= d:
            re = npT(0.25) * math.log1p(npT(4) * a / d)
        elif a == npT(1) and b == npT(0):
            re = _INF_T
        else:  # near z = 1, where d underflows: the ratio is over 2, so the logarithms do not cancel
            re = npT(0.5) * (math.log(math.hypot(npT(1) + a, b)) - math.log(math.hypot(npT(1) - a, b)))
        im = npT(0.5) * math.atan2(b + b, (npT(1) - a) * (npT(1) + a) - b * b)
    if neg:
        re = -re
        im = -im
    return complex(re, im)


@cuda.jit(device=True)
def _catanT(z):
    w = _catanhT(complex(-z.imag, z.real))
    return complex(w.imag, -w.real)


@cuda.jit(device=True)
def _cpowT(x, y):
    if y.real == npT(0) and y.imag == npT(0):
        return complex(npT(1), npT(0))
    if x.real == npT(0) and x.imag == npT(0):
        if y.real > npT(0):
            return complex(npT(0), npT(0))
        return complex(_NAN_T, _NAN_T)
    if y.imag == npT(0) and abs(y.real) < npT(100) and FLOOR(y.real) == y.real:
        n = int(y.real)
        if n == 1:
            return x
        if n == 2:
            return x * x
        if n == 3:
            return x * (x * x)
        m = -n if n < 0 else n
        acc = complex(npT(1), npT(0))
        p = x
        while m > 0:
            if m & 1:
                acc = acc * p
            m >>= 1
            if m > 0:
                p = p * p
        if n < 0:
            acc = complex(npT(1), npT(0)) / acc
        return acc
    lr = _logabsT(x.real, x.imag)
    li = math.atan2(x.imag, x.real)
    return _cexpT(y.real * lr - y.imag * li, y.real * li + y.imag * lr)


@cuda.jit(device=True)
def _cexpT(a, b):
    # e^(a + ib) with C99's values at infinities and NaNs (the simulator would raise where a GPU gives inf or NaN)
    if math.isinf(a) or math.isinf(b) or a != a or b != b:
        if a != a:
            return complex(a, b) if b == npT(0) else complex(_NAN_T, _NAN_T)
        if math.isinf(a) and a > npT(0):
            if b == npT(0):
                return complex(a, b)
            if math.isinf(b) or b != b:
                return complex(a, _NAN_T)
        elif math.isinf(a):
            if math.isinf(b) or b != b:
                return complex(npT(0), npT(0))
            return complex(npT(0) * COS(b), npT(0) * SIN(b))
        else:
            return complex(_NAN_T, _NAN_T)
        return complex(a * COS(b), a * SIN(b))
    mag = _INF_T if a > npT(LOG_MAX) else math.exp(a)
    return complex(mag * COS(b), mag * SIN(b))
'''


def _instance(bits: int) -> str:
    eps = 2.0 ** -23 if bits == 32 else 2.0 ** -52
    src = _TEMPLATE
    for k, v in (("BIG", "1e37" if bits == 32 else "1e307"), ("RSQRT_EPS", repr(1 / math.sqrt(eps))),
                 ("RECIP_EPS", repr(1 / eps)), ("LN2", repr(math.log(2))),
                 ("LOG_MAX", repr(math.log(float(np.finfo(f"float{bits}").max)))), ("LN4", repr(math.log(4))),
                 ("HALF_PI", repr(math.pi / 2)), ("SIN", "fsin" if bits == 32 else "math.sin"),
                 ("COS", "fcos" if bits == 32 else "math.cos"),
                 ("FLOOR", f"floor{bits}")):
        src = src.replace(k, v)
    src = src.replace("npT", f"np.float{bits}").replace("T(", f"{bits}(")
    return src.replace("_NAN_T", f"_NAN_{bits}").replace("_INF_T", f"_INF_{bits}")


CX_MATH = _instance(32) + _instance(64)
_CALLS = re.compile(r"\b_c(?:sqrtz|asin|acos|atan|asinh|acosh|atanh|pow)(?:32|64)\(")


def uses(expr: str) -> bool:
    """Whether kernel code ``expr`` calls these functions (a module defines them only then: creating numba-cuda's
    device functions costs several milliseconds per module)."""
    return _CALLS.search(expr) is not None
