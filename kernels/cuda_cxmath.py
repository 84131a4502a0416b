"""Device functions of complex math that does not fit one expression: the inverse trigonometric and hyperbolic
functions and ``pow``, one copy per working precision (suffix ``32`` for complex64, computed in float32 only,
``64`` for complex128), so that every constant has the parts' type.

Branch cuts and signed zeros follow C99 Annex G, as NumPy does: ``asin``, ``acos`` and ``acosh`` are Kahan's
formulas over the principal square roots of ``1 -+ z`` (``z -+ 1``), whose signed zeros put a value on a cut on
the side its imaginary zero's sign names; ``asinh(z) = -i asin(iz)``, ``atan(z) = -i atanh(iz)``; ``atanh`` is
computed for ``re >= 0`` (it is odd) as ``log1p(4a / ((1 - a)^2 + b^2)) / 4 + i atan2(2b, (1 - a)(1 + a) - b^2)
/ 2``, which cancels nothing near 0 (near 1 the real part is ``log(|1 + z| / |1 - z|) / 2``), and past
``1/sqrt(eps)`` as ``1/z +- i pi/2``. ``pow`` is NumPy's
``npy_cpow``: exponent 0 gives 1, base 0 gives 0 for a positive real exponent and NaN otherwise, an integer
exponent below 100 in modulus is repeated squaring (its reciprocal for a negative one), and the rest is
``exp(y log x)``.

>>> "_casin32" in CX_MATH and uses("_cpow64({0}, {1})") and not uses("math.asin({0})")
True
"""

from __future__ import annotations

import math
import re

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
def _casinT(z):
    a = z.real
    b = z.imag
    r1, i1 = _csqrtT(npT(1) - a, -b)
    r2, i2 = _csqrtT(npT(1) + a, b)
    return complex(math.atan2(a, r1 * r2 - i1 * i2), math.asinh(r1 * i2 - i1 * r2))


@cuda.jit(device=True)
def _cacosT(z):
    a = z.real
    b = z.imag
    r1, i1 = _csqrtT(npT(1) - a, -b)
    r2, i2 = _csqrtT(npT(1) + a, b)
    return complex(npT(2) * math.atan2(r1, r2), math.asinh(r2 * i1 - i2 * r1))


@cuda.jit(device=True)
def _cacoshT(z):
    a = z.real
    b = z.imag
    r1, i1 = _csqrtT(a - npT(1), b)
    r2, i2 = _csqrtT(a + npT(1), b)
    return complex(math.asinh(r1 * r2 + i1 * i2), npT(2) * math.atan2(i1, r2))


@cuda.jit(device=True)
def _casinhT(z):
    w = _casinT(complex(-z.imag, z.real))
    return complex(w.imag, -w.real)


@cuda.jit(device=True)
def _catanhT(z):
    a = z.real
    b = z.imag
    neg = math.copysign(npT(1), a) < npT(0)
    if neg:
        a = -a
        b = -b
    if a > npT(RSQRT_EPS) or abs(b) > npT(RSQRT_EPS):
        h = math.hypot(a, b)
        re = (a / h) / h
        im = math.copysign(npT(HALF_PI), b) - (b / h) / h
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
        if y.real > npT(0) and y.imag == npT(0):
            return complex(npT(0), npT(0))
        return complex(_NAN_T, _NAN_T)
    if y.imag == npT(0) and abs(y.real) < npT(100) and FLOOR(y.real) == y.real:
        n = int(y.real)
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
    lr = math.log(math.hypot(x.real, x.imag))
    li = math.atan2(x.imag, x.real)
    er = y.real * lr - y.imag * li
    ei = y.real * li + y.imag * lr
    return complex(math.exp(er) * COS(ei), math.exp(er) * SIN(ei))
'''


def _instance(bits: int) -> str:
    eps = 2.0 ** -23 if bits == 32 else 2.0 ** -52
    src = _TEMPLATE
    for k, v in (("BIG", "1e37" if bits == 32 else "1e307"), ("RSQRT_EPS", repr(1 / math.sqrt(eps))),
                 ("HALF_PI", repr(math.pi / 2)), ("SIN", "fsin" if bits == 32 else "math.sin"),
                 ("COS", "fcos" if bits == 32 else "math.cos"),
                 ("FLOOR", f"floor{bits}")):
        src = src.replace(k, v)
    src = src.replace("npT", f"np.float{bits}").replace("T(", f"{bits}(")
    return src.replace("_NAN_T", f"_NAN_{bits}").replace("_INF_T", f"_INF_{bits}")


CX_MATH = _instance(32) + _instance(64)
_CALLS = re.compile(r"\b_c(?:asin|acos|atan|asinh|acosh|atanh|pow)(?:32|64)\(")


def uses(expr: str) -> bool:
    """Whether kernel code ``expr`` calls these functions (a module defines them only then: creating numba-cuda's
    device functions costs several milliseconds per module)."""
    return _CALLS.search(expr) is not None
