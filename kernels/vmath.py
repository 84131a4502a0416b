"""Branch-free float32 math for generated numba loop kernels.

numba lowers ``np.exp``/``np.tanh``/... on float32 to scalar C-library calls, which keeps loops from
vectorizing. The functions here use only arithmetic, bit casts and selects, so a loop such as
``for i in range(n): out[i] = fexp(x[i])`` compiles to SIMD code (AVX2/AVX-512) with no calls.

Functions (float32 in, float32 out; other argument types are converted to float32 first):
``fexp, flog, flog1p, fexpm1, ftanh, flogistic, ferf, fsin, fcos`` and ``fpow(x, y)``.
``FUNCS`` maps the plain names (``"exp"``, ...) to them. float64 kernels should call ``math.*``.
Building blocks for other kernels (the random samplers): the bit casts ``view_i32``/``view_f32`` (float32 <->
int32) and ``view_i64``/``view_f64`` (float64 <-> int64), and ``log_split(x) -> (e, f)`` with
``x = 2**e * (1 + f)``, ``1 + f`` in ``[sqrt(1/2), sqrt(2))``, for a positive normal float32.

Accuracy: each is within 2 ulp of the float64 function over the whole float32 range, subnormal inputs
and outputs included (no flush to zero). Measured over all 2**32 inputs against libm in float64
(``python -m tests.exhaustive_vmath``): exp 0.90, expm1 1.24, log 0.87, log1p 0.94, tanh 1.17, logistic 1.48,
erf 1.07, sin 0.94, cos 0.95 ulp (on CPUs without FMA: 0.90, 1.24, 0.89, 0.95, 1.22, 1.48, 1.08, 0.99, 0.98);
pow 0.50 ulp on random samples.
Special values follow C99: NaN propagates,
``exp(+-inf) = inf, 0``, ``log(0) = -inf``, ``log(x < 0) = nan``, ``tanh(+-inf) = +-1``, odd functions
keep the sign of zero (``tanh(-0) = sin(-0) = -0``), overflow gives ``inf``. ``fpow`` follows the C99
``pow`` special cases (``pow(x, 0) = 1``, ``pow(1, y) = 1``, ``pow(-8, 1/3) = nan``, signed zeros and
infinities for odd integer exponents, ...).

Methods: argument reduction plus minimax polynomials (weighted least-squares fits refined towards minimax,
coefficients rounded to float32 one at a time with the rest refitted). ``exp``-type functions reduce by ``n*ln2``
with a two-part ``ln2`` and scale by ``2**n`` in two halves so that subnormal results round once; ``exp`` takes
``e**r`` as one degree-6 Horner polynomial of fused multiply-adds (without FMA, where each step would round twice,
as ``1 + u`` with ``u`` summed from the exact high part of ``r``). ``log`` splits the exponent off so the mantissa
lies in ``[sqrt(1/2), sqrt(2))``; ``log1p`` keeps the rounding error of ``1 + x`` as a correction term. ``tanh``
and ``erf`` switch between a polynomial near zero and a second form by a select, computing both. For
``0.9 <= |x|``, ``erf`` is ``1 - P(t)/Q(t)`` with a degree-6 rational fit of ``erfc`` in ``t = |x| - 0.85``
(clamped at 4): there erf lies in ``[0.79, 1]``, so erfc needs only an absolute error of about ``2**-26``, not a
relative one, and no ``exp``. For ``|x| >= 0.625`` (past ``atanh(1/2)``, so the subtraction cancels nothing),
``tanh`` is ``1 - 2 / (1 + e**2|x|)`` written as ``1 - 2**(1-n) / (e**2r + 2**-n)`` with
``e**2|x| = 2**n * e**2r``: the polynomial for ``e**2r`` ends in the multiply-add that adds ``1 + 2**-n``, so the
denominator is rounded once, and the quotient, below 1/2 where the result is above it, passes on at most half its
relative error. ``logistic`` divides ``1`` or ``e = exp(-|x|)`` by ``1 + e`` held as a rounded sum plus its exact
error, and the quotient as ``q + remainder / denominator``, so only ``exp``'s own error and one rounding remain;
on CPUs without FMA, where that remainder is inexact, it holds ``e`` as a float32 pair too.

Multiply-adds in the polynomials and the corrections are explicit fused multiply-adds (``llvm.fma``, one
vector instruction) where numba's target CPU has FMA, and a plain ``a*b + c`` elsewhere, where ``llvm.fma``
would become a libm call per element. Being explicit, they round the same in scalar and vectorized code; the
functions still compile with ``fastmath=False``.

``sin``/``cos`` reduce modulo pi/2 exactly for every finite float32, with no large-argument fallback (a
libm call anywhere in the loop body would stop it vectorizing): ``|x| = M * 2**E`` with an integer
``M < 2**24``, so for ``E >= k`` the product ``x * T_k`` with ``T_k = 2**-k * ((2**k * 2/pi) mod 4)``
equals ``x * 2/pi`` modulo 4. ``T_k`` is held as three float64 pieces (29, 29, 53 bits) whose products
with ``x`` are exact, exact, and good to ``2**-57``; four ranges of ``E`` cover the float32 range and are
picked by selects. The reduced argument goes to float32 as hi + lo for the two polynomials. ``fpow``
computes ``exp2(y * log2|x|)`` in float64 and rounds once.

Example:
    >>> import numpy as np, numba
    >>> from funclib.kernels.vmath import fexp
    >>> @numba.njit(error_model="numpy")
    ... def k(x, out):
    ...     for i in range(x.shape[0]):
    ...         out[i] = fexp(x[i])
    >>> x = np.array([0.0, 1.0], np.float32); out = np.empty_like(x); k(x, out); out
    array([1.       , 2.7182817], dtype=float32)

Cached kernels that call these functions are not invalidated when this file changes (a cache entry is keyed
by its own module), so ``VERSION`` (a hash of this file) is written into every generated kernel's source
(``fusion.KERNEL_IMPORTS``), which its cache key hashes.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba import njit, types
from numba.core import config
from numba.extending import intrinsic

from . import diskcache

__all__ = [
    "FUNCS",
    "SCALAR_FUNCTIONS",
    "VERSION",
    "log_split",
    "view_f32",
    "view_f64",
    "view_i32",
    "view_i64",
    "fcos",
    "ferf",
    "fexp",
    "fexpm1",
    "flog",
    "flog1p",
    "flogistic",
    "fpow",
    "fsin",
    "ftanh",
]

VERSION: str = diskcache.VMATH_VERSION

# Compiled once and cached; forceinline makes LLVM inline them into the calling loop, which then vectorizes.
# error_model="numpy" keeps divisions free of the zero check (a branch). fastmath is set explicitly so that a
# fastmath caller cannot pass its flags down: reassociation would fold the rounding tricks away.
_OPTS = dict(nogil=True, error_model="numpy", fastmath=False, forceinline=True)
_INNER = dict(inline="always", error_model="numpy")

_F = np.float32
_D = np.float64
_I = np.int32
_L = np.int64


def _view(name: str, src, dst, ir_type):
    """A numba intrinsic reinterpreting the bits of a ``src`` scalar as a ``dst`` one (no conversion: one
    ``bitcast`` instruction, which vectorizes)."""

    def view(typingctx, x):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], ir_type)

        return dst(src), codegen

    view.__name__ = view.__qualname__ = name
    return intrinsic(view)


view_i32 = _view("view_i32", types.float32, types.int32, ir.IntType(32))
view_f32 = _view("view_f32", types.int32, types.float32, ir.FloatType())
view_i64 = _view("view_i64", types.float64, types.int64, ir.IntType(64))
view_f64 = _view("view_f64", types.int64, types.float64, ir.DoubleType())


_FMA_ARCHES = ("aarch64", "arm64", "powerpc64", "ppc64")  # fused multiply-add is part of the base ISA


def _target_has_fma() -> bool:
    """Whether numba compiles for a CPU with FMA (numba's own rule: ``NUMBA_CPU_FEATURES``, else the host's)."""
    if llvm_binding.get_process_triple().startswith(_FMA_ARCHES):
        return True
    if config.CPU_FEATURES is not None:
        return "+fma" in config.CPU_FEATURES.split(",")
    try:
        return bool(llvm_binding.get_host_cpu_features().get("fma", False))
    except RuntimeError:  # features unknown on this platform
        return False


_HAS_FMA: bool = _target_has_fma()


@intrinsic
def _fma(typingctx, a, b, c):
    """``a * b + c`` rounded once where the CPU has FMA; elsewhere rounded twice, as a libm ``fma`` call in the
    loop body would stop it vectorizing. float32 or float64, all three of one type."""
    if not (isinstance(a, types.Float) and a == b == c):
        return None

    def codegen(context, builder, sig, args):
        x, y, z = args
        if _HAS_FMA:
            return builder.fma(x, y, z)
        return builder.fadd(builder.fmul(x, y), z)

    return a(a, a, a), codegen


# ------------------------------------------------------------------------------------------- constants

_ZERO, _HALF, _ONE, _TWO = _F(0.0), _F(0.5), _F(1.0), _F(2.0)
_MONE = _F(-1.0)
_INF, _NINF, _NAN = _F(np.inf), _F(-np.inf), _F(np.nan)
_SIGN = _I(-0x80000000)
_MANT = _I(0x007FFFFF)
_EXPONENT = _I(-0x00800000)  # 0xFF800000: sign and exponent fields
_B127 = _I(127)
_TWO23 = _F(2.0**23)
_FLT_MIN = _F(2.0**-126)

_DONE, _DTWO = _D(1.0), _D(2.0)
_B1023 = _L(1023)
_SHIFT64 = _D(1.5 * 2.0**52)

_LOG2E = _F(1.4426950408889634)
# Adding 1.5 * 2**23 rounds a float32 of magnitude < 2**22 to an integer kept in the low mantissa bits.
_SHIFT = _F(1.5 * 2.0**23)
_SHIFT_BITS = _I(0x4B400000)
# ln2 in two parts; the first has 15 significant bits so n * _LN2_HI is exact for |n| < 512.
_LN2_HI = _F(0.693145751953125)
_LN2_LO = _F(1.4286068203094173e-06)

# ---------------------------------------------------------------------------------------------- exp

_EXP_HI = _F(89.0)  # exp(89) overflows
_EXP_LO = _F(-104.0)  # exp(-104) rounds to 0
# e**r = 1 + r + r*r*P(r) on |r| <= ln2/2
_E0, _E1, _E2, _E3, _E4 = _F(0.49999994), _F(0.1666652), _F(0.0416684), _F(0.008368851), _F(0.001381432)


@njit(**_INNER)
def _ln2_reduce(x):
    """x = n * ln2 + (rh - rl) with an integer n, rh exact and r = rh - rl, |r| <= ln2/2, for |x| < 2**22 / log2(e)."""
    t = _fma(x, _LOG2E, _SHIFT)
    n = _I(view_i32(t) - _SHIFT_BITS)
    nf = t - _SHIFT
    rh = _fma(-nf, _LN2_HI, x)  # exact
    rl = nf * _LN2_LO
    return n, rh, rl, rh - rl


@njit(**_INNER)
def _exp_reduce_core(x):
    """e**x = 2**n * (1 + u), |u| < 0.42, for |x| < 2**22 / log2(e)."""
    n, rh, rl, r = _ln2_reduce(x)
    p = _fma(_fma(_fma(_fma(_E4, r, _E3), r, _E2), r, _E1), r, _E0)
    return n, rh + _fma(r * r, p, -rl)


_ONE_BITS = _I(0x3F800000)
# e**r = sum c_k r**k, k <= 6, on |r| <= ln2/2 (c0 = c1 = 1)
_C2, _C3, _C4, _C5, _C6 = _F(0.49999994), _F(0.16666521), _F(0.041668255), _F(0.008368663), _F(0.0013821468)


@njit(**_INNER)
def _exp_poly(r):
    return _fma(_fma(_fma(_fma(_fma(_fma(_C6, r, _C5), r, _C4), r, _C3), r, _C2), r, _ONE), r, _ONE)


@njit(**_INNER)
def _exp_clamp(x):
    # n = round(x/ln2) stays in [-150, 128]. numba's min and max keep a NaN first argument (as Python's do) and
    # compile to one instruction each here, where the equivalent conditional expressions become three.
    return max(min(x, _EXP_HI), _EXP_LO)


@njit(**_INNER)
def _times_pow2(p, n):
    """p * 2**n for p in [0.7, 1.42] and n in [-150, 128], rounded once (subnormal results included)."""
    # as 2**m * 2**(n - m) with m = n >> 1, so that neither factor leaves the normal range: (n << 22) masked to the
    # exponent field is m << 23
    mb = _I(_I(n << 22) & _EXPONENT)
    s1 = view_f32(_I(mb + _ONE_BITS))
    s2 = view_f32(_I(_I(_I(n << 23) - mb) + _ONE_BITS))
    return p * s1 * s2


@njit(**_INNER)
def _exp(x):
    x = _exp_clamp(x)
    t = _fma(x, _LOG2E, _SHIFT)
    nf = t - _SHIFT
    r = _fma(-nf, _LN2_LO, _fma(-nf, _LN2_HI, x))  # the inner one is exact
    return _times_pow2(_exp_poly(r), _I(view_i32(t) - _SHIFT_BITS))


@njit(**_INNER)
def _exp_no_fma(x):
    """``_exp`` for CPUs without FMA, where each Horner step rounds twice: ``e**r`` as ``1 + u`` with ``u`` summed
    from the exact high part of ``r`` (0.90 ulp over all inputs, where Horner's form measures 1.15 on samples)."""
    n, u = _exp_reduce_core(_exp_clamp(x))
    return _times_pow2(_ONE + u, n)


@njit(**_INNER)
def _one_plus(u):
    """1 + u = p + pl exactly for |u| < 1 (Fast2Sum)."""
    p = _ONE + u
    return p, u - (p - _ONE)


@njit(**_INNER)
def _div2(a, al, b, bl):
    """(a + al) / (b + bl) as q + remainder / b, rounded once at the end (for |al|, |bl| below an ulp of a, b)."""
    inv = _ONE / b
    q = a * inv
    r = _fma(-q, b, a) + al  # a - q*b: to 2**-48 * a with FMA, 2**-25 * a without
    return _fma(_fma(-q, bl, r), inv, q)


@diskcache.njit(**_OPTS)
def fexp(x):
    """``e**x`` for float32 (<= 1 ulp). Example: ``fexp(np.float32(1)) == np.float32(2.7182817)``."""
    if _HAS_FMA:
        return _exp(_F(x))
    return _exp_no_fma(_F(x))


# -------------------------------------------------------------------------------------------- expm1

_EM1_LO = _F(-20.0)  # expm1(x) rounds to -1 below -17.4
_EM1_TINY = _F(2.0**-25)  # expm1(x) rounds to x below this
# expm1(r) = r + r*r/2 + r**3 * Q(r)
_M0, _M1, _M2, _M3, _M4 = _F(0.16666666), _F(0.04166648), _F(0.00833342), _F(0.0013933422), _F(1.9824061e-04)


@diskcache.njit(**_OPTS)
def fexpm1(x):
    """``e**x - 1`` for float32, accurate near 0. Example: ``fexpm1(np.float32(1e-10)) == np.float32(1e-10)``."""
    x = _F(x)
    xc = max(min(x, _EXP_HI), _EM1_LO)  # one min, one max (see _exp_clamp)
    t = _fma(xc, _LOG2E, _SHIFT)
    n = _I(view_i32(t) - _SHIFT_BITS)
    nf = t - _SHIFT
    rh = _fma(-nf, _LN2_HI, xc)  # exact
    rl = nf * _LN2_LO
    r = rh - rl
    z = r * r
    q = _fma(z * r, _fma(_fma(_fma(_fma(_M4, r, _M3), r, _M2), r, _M1), r, _M0), _HALF * z)
    # 2**n * (1 + r + q) - 1 = 2 * ((s - 1/2) + s*rh + s*(q - rl)) with s = 2**(n-1) <= 2**127; the
    # first two terms are exact and summed first.
    s = view_f32(_I((n + _I(126)) << 23))
    res = _TWO * _fma(s, q - rl, (s - _HALF) + s * rh)
    return x if abs(x) < _EM1_TINY else res


# ---------------------------------------------------------------------------------------- log, log1p

_SQRTH_BITS = _I(0x3F3504F3)  # sqrt(1/2)
_LOG1P_TINY = _F(2.0**-24)  # log1p(x) rounds to x below this
# log(1 + f) = f - f*f/2 + f**3 * R(f) on sqrt(1/2) - 1 <= f < sqrt(2) - 1
_R0, _R1, _R2, _R3, _R4, _R5, _R6, _R7 = (
    _F(c) for c in (0.3333333, -0.25000826, 0.20001236, -0.16623144, 0.14201368, -0.13162003, 0.12765427, -0.07634387)
)


@njit(**_INNER)
def log_split(x):
    """x > 0 normal -> (e, f) with x = 2**e * (1 + f), 1 + f in [sqrt(1/2), sqrt(2))."""
    ix = _I(view_i32(x) - _SQRTH_BITS)
    e = _F(_I(ix >> 23))
    m = view_f32(_I((ix & _MANT) + _SQRTH_BITS))
    return e, m - _ONE


@njit(**_INNER)
def _log_tail(f):
    """log(1 + f) - f."""
    z = f * f
    p = _fma(_fma(_fma(_fma(_fma(_fma(_fma(_R7, f, _R6), f, _R5), f, _R4), f, _R3), f, _R2), f, _R1), f, _R0)
    return _fma(f * z, p, -_HALF * z)


@diskcache.njit(**_OPTS)
def flog(x):
    """Natural log for float32 (<= 1 ulp). Example: ``flog(np.float32(np.e)) == np.float32(1)``."""
    x = _F(x)
    sub = x < _FLT_MIN
    xs = x * _TWO23 if sub else x
    e, f = log_split(xs)
    e = e - _F(23.0) if sub else e
    res = e * _LN2_HI + (f + _fma(e, _LN2_LO, _log_tail(f)))
    res = x if not x < _INF else res  # +inf, nan
    res = _NAN if x < _ZERO else res
    return _NINF if x == _ZERO else res


@diskcache.njit(**_OPTS)
def flog1p(x):
    """``log(1 + x)`` for float32, accurate near 0. Example: ``flog1p(np.float32(1e-10)) == np.float32(1e-10)``."""
    x = _F(x)
    s = _ONE + x
    # exact rounding error of 1 + x (TwoSum); log(s + c) = log(s) + c/s to first order
    bb = s - _ONE
    c = (_ONE - (s - bb)) + (x - bb)
    e, f = log_split(s)
    res = e * _LN2_HI + (f + (_log_tail(f) + _fma(e, _LN2_LO, c / s)))
    res = x if not abs(x) >= _LOG1P_TINY else res  # tiny, +-0, nan
    res = x if x == _INF else res
    res = _NAN if x < _MONE else res
    return _NINF if x == _MONE else res


# --------------------------------------------------------------------------------------------- tanh

_TANH_X0 = _F(0.625)  # above atanh(1/2) = 0.549, so that 1 - d below has no cancellation
_TANH_CLAMP = _F(9.5)  # tanh rounds to 1 above 9.01
# tanh(a) = a + a**3 * T(a*a) on 0 <= a < _TANH_X0
_T0, _T1, _T2, _T3, _T4 = (_F(c) for c in (-0.3333328, 0.13331406, -0.053736515, 0.020628167, -0.0056922967))
# e**(2a) = 2**n * e**(2r) with r = a - n*ln2/2 and the coefficients of _exp_poly scaled by 2**k. One float32 ln2/2
# suffices: its error times n <= 28 changes e**2a by up to 2**-24 relative, which reaches tanh multiplied by
# 2 / (1 + e**2a) <= 2**(1-n), never more than 0.07 ulp.
_LOG2E_2 = _F(2.0 * 1.4426950408889634)
_LN2_2 = _F(0.5 * np.log(2.0))
_H2, _H3, _H4, _H5, _H6 = (c * _F(2.0**k) for k, c in zip(range(2, 7), (_C2, _C3, _C4, _C5, _C6)))


@njit(**_INNER)
def _copysign(v, x):
    """|v| with the sign of x, for v >= +0."""
    return view_f32(_I(view_i32(v) | (view_i32(x) & _SIGN)))


@diskcache.njit(**_OPTS)
def ftanh(x):
    """tanh for float32. Example: ``ftanh(np.float32(-0.0))`` is ``-0.0``."""
    x = _F(x)
    a = abs(x)
    z = a * a
    small = _fma(a * z, _fma(_fma(_fma(_fma(_T4, z, _T3), z, _T2), z, _T1), z, _T0), a)
    # 1 - 2 / (1 + e**2a) = 1 - 2**(1-n) / (e**2r + 2**-n): the denominator is one rounding (the last multiply-add
    # of the polynomial), where 1 + e**2a would be two; the powers of two are exact (n <= 28)
    ac = _TANH_CLAMP if _TANH_CLAMP < a else a
    t = _fma(ac, _LOG2E_2, _SHIFT)
    nf = t - _SHIFT
    r = _fma(-nf, _LN2_2, ac)
    p2 = view_f32(_I(_ONE_BITS - _I(view_i32(t) << 23)))  # 2**-n: t's bits shifted left by 23 are n << 23, as in _exp
    s = _fma(_fma(_fma(_fma(_fma(_fma(_H6, r, _H5), r, _H4), r, _H3), r, _H2), r, _TWO), r, _ONE + p2)
    large = _ONE - (p2 + p2) / s
    # a NaN takes the polynomial, which keeps it (the bit arithmetic above need not); x ^ |x| is x's sign bit
    v = large if a >= _TANH_X0 else small
    return view_f32(_I(view_i32(v) | (view_i32(x) ^ view_i32(a))))


# ----------------------------------------------------------------------------------------- logistic

_LOGI_NMIN = _I(-64)  # e**-|x| below 2**-63 leaves 1 + e**-|x| at 1 to far below float32 precision
_TWOM64 = _F(2.0**-64)


@njit(**_INNER)
def _logistic_pair(x):
    """``flogistic`` with ``e**-|x|`` held as an exact pair, for targets whose division remainder is inexact."""
    a = abs(x)
    n, u = _exp_reduce_core(-(-_EXP_LO if a > -_EXP_LO else a))
    # e**-|x| = 2**n * (1 + u) = 2**(n - m) * d * (p + pl); d = 2**m is normal, and so is d * p
    m = max(n, _LOGI_NMIN)
    d = view_f32(_I((m + _B127) << 23))
    p, pl = _one_plus(u)
    eh = p * d
    s = _ONE + eh
    c = _fma(pl, d, eh - (s - _ONE))  # 1 + e**-|x| = s + c
    neg = x < _ZERO
    # for x < 0, e / (1 + e) = (p + pl) / (s + c) scaled by 2**n = d * 2**(n - m): only subnormal results round again
    y = _div2(p if neg else _ONE, pl if neg else _ZERO, s, c)
    d2 = view_f32(_I((n - m + _B127) << 23))
    return y * (d if neg else _ONE) * (d2 if neg else _ONE)


@diskcache.njit(**_OPTS)
def flogistic(x):
    """``1 / (1 + e**-x)`` for float32, relative accuracy kept for large negative x (subnormal results).

    Example: ``flogistic(np.float32(0)) == 0.5``.
    """
    x = _F(x)
    if not _HAS_FMA:
        # without FMA the quotient's remainder is good only to 2**-25, which on top of exp's error would reach
        # 2.4 ulp; the pair form stays within 1.5
        return _logistic_pair(x)
    na = max(-abs(x), _EXP_LO)  # one max instruction; NaN passes
    t = _fma(na, _LOG2E, _SHIFT)
    nf = t - _SHIFT
    p = _exp_poly(_fma(-nf, _LN2_LO, _fma(-nf, _LN2_HI, na)))
    # e = 2**n * p, n in [-150, 0]: adding n + 64 to the exponent of p keeps it normal and the multiply by 2**-64
    # rounds a subnormal once (one multiply where _exp needs two). That integer add can turn a NaN finite, so
    # p - p (0, or NaN) carries it into s. As in _exp, t's bits shifted left by 23 are n << 23.
    e = view_f32(_I(view_i32(p) + _I(_I(view_i32(t) << 23) + _I(64 << 23)))) * _TWOM64
    s = (_ONE + e) + (p - p)
    c = e - (s - _ONE)  # 1 + e = s + c exactly (Fast2Sum, e <= 1)
    # (e or 1) / (s + c) as q + remainder / s, rounded once at the end; the select reads x's sign bit (one blend,
    # no compare; -0 gives e = 1, the same 1/2)
    num = e if view_i32(x) < _I(0) else _ONE
    inv = _ONE / s
    q = num * inv
    return _fma(_fma(-q, c, _fma(-q, s, num)), inv, q)


# ---------------------------------------------------------------------------------------------- erf

_ERF_CLAMP = _F(4.0)  # erf rounds to 1 above 3.92
_ERF_X1 = _F(0.9)  # where both forms are near their best (about 1 ulp)
_ERF_TS = _F(2.0 / np.sqrt(np.pi) - 1.0)
# erf(x) = x + x * (TS + x*x * S(x*x)), fitted on |x| < 1
_S0, _S1, _S2, _S3, _S4, _S5, _S6 = (
    _F(c) for c in (-0.37612638, 0.112837836, -0.02686547, 0.00522111, -0.00084849104, 0.00011270336, -9.67593e-06)
)
# erfc(a) = P(t) / Q(t), t = a - 0.85, fitted for absolute error on 0.85 <= a <= 4 (Q > 0 there)
_ERFC_C = _F(0.85)
_P0, _P1, _P2, _P3, _P4, _P5, _P6 = (
    _F(c) for c in (0.22933193, -0.46293506, 0.39435288, -0.1812827, 0.04738079, -0.006668268, 0.00039434477)
)
_Q1, _Q2, _Q3, _Q4, _Q5, _Q6 = (_F(c) for c in (0.37035108, 0.5738469, 0.181311, 0.13912329, 0.027662244, 0.022252562))


@diskcache.njit(**_OPTS)
def ferf(x):
    """Error function for float32. Example: ``ferf(np.float32(10)) == 1``."""
    x = _F(x)
    a = abs(x)
    z = x * x
    sp = _fma(_fma(_fma(_fma(_fma(_fma(_S6, z, _S5), z, _S4), z, _S3), z, _S2), z, _S1), z, _S0)
    small = _fma(x, _fma(z, sp, _ERF_TS), x)
    # erf = 1 - erfc needs erfc only to an absolute 2**-26 here, which a rational function meets without exp
    t = (_ERF_CLAMP if a > _ERF_CLAMP else a) - _ERFC_C
    p = _fma(_fma(_fma(_fma(_fma(_fma(_P6, t, _P5), t, _P4), t, _P3), t, _P2), t, _P1), t, _P0)
    q = _fma(_fma(_fma(_fma(_fma(_fma(_Q6, t, _Q5), t, _Q4), t, _Q3), t, _Q2), t, _Q1), t, _ONE)
    return small if a < _ERF_X1 else _copysign(_ONE - p / q, x)


# ------------------------------------------------------------------------------------------ sin, cos


def _two_over_pi_pieces(k: int) -> tuple[float, float, float]:
    """2**-k * ((2**k * 2/pi) mod 4) as three float64 pieces of 29, 29 and 53 significant bits."""
    prec = 300

    def atan_inv(n: int, one: int) -> int:
        term = one // n
        total, j, sign = term, 3, -1
        while term:
            term //= n * n
            total += sign * (term // j)
            sign, j = -sign, j + 2
        return total

    one = 1 << (prec + 64)
    pi = 16 * atan_inv(5, one) - 4 * atan_inv(239, one)  # pi * 2**(prec + 64)
    t = ((one << (prec + 1)) // pi) % (1 << (prec - k + 2))  # the value in units of 2**-prec
    nb = t.bit_length()
    hi = t >> (nb - 29) << (nb - 29)
    mid = (t - hi) >> (nb - 58) << (nb - 58)
    return tuple(math.ldexp(float(v), -prec) for v in (hi, mid, t - hi - mid))


# |x| = M * 2**E with an integer M < 2**24. For E >= k, x * 2**-k is an integer, so x * 2/pi = x * T_k
# (mod 4) with T_k = 2**-k * ((2**k * 2/pi) mod 4). Split into 29 + 29 + 53 bits, the first two products
# are exact and the third is good to 2**-57 while E - k <= 28; four ranges (k = 0, 29, 58, 87) cover every
# finite float32, chosen by |x| >= 2**(k + 23).
(_K00, _K01, _K02), (_K10, _K11, _K12), (_K20, _K21, _K22), (_K30, _K31, _K32) = (
    tuple(_D(v) for v in _two_over_pi_pieces(k)) for k in (0, 29, 58, 87)
)
_RANGE1, _RANGE2, _RANGE3 = _F(2.0**52), _F(2.0**81), _F(2.0**110)
_DQUARTER, _D4 = _D(0.25), _D(4.0)
_PIO2 = _D(np.pi / 2)
# sin(r) = r + r**3 * S(r*r), cos(r) = 1 - r*r/2 + r**4 * C(r*r) on |r| <= pi/4
_SN0, _SN1, _SN2 = _F(-0.16666655), _F(0.008332156), _F(-1.9514632e-04)
_CS0, _CS1, _CS2 = _F(0.041666646), _F(-0.001388731), _F(2.4432413e-05)


@njit(**_INNER)
def _sincos_reduce(x):
    """|x| = (q + 4i) * pi/2 + r, r as float32 hi + lo; exact for every finite x."""
    a = abs(x)
    xd = _D(a)
    c0 = _K30 if a >= _RANGE3 else (_K20 if a >= _RANGE2 else (_K10 if a >= _RANGE1 else _K00))
    c1 = _K31 if a >= _RANGE3 else (_K21 if a >= _RANGE2 else (_K11 if a >= _RANGE1 else _K01))
    c2 = _K32 if a >= _RANGE3 else (_K22 if a >= _RANGE2 else (_K12 if a >= _RANGE1 else _K02))
    p0 = xd * c0
    p0 = p0 - _D4 * np.floor(p0 * _DQUARTER)  # exact; keeps p0 + p1 below 2**51 for the rounding below
    p1 = xd * c1
    p2 = xd * c2  # up to 2**-4: part of the rounding, or |r| could exceed pi/4 by 0.1
    t = ((p0 + p1) + p2) + _SHIFT64
    j = t - _SHIFT64
    f = ((p0 - j) + p1) + p2
    r = f * _PIO2
    rh = _F(r)
    return rh, _F(r - _D(rh)), _I(view_i64(t) & _L(3))


@njit(**_INNER)
def _sin_cos_poly(rh, rl):
    z = rh * rh
    s = rh + _fma(rh * z, _fma(_fma(_SN2, z, _SN1), z, _SN0), rl)
    w = _HALF * z
    hw = _ONE - w
    c = hw + (((_ONE - hw) - w) + _fma(z * z, _fma(_fma(_CS2, z, _CS1), z, _CS0), -rh * rl))
    return s, c


@diskcache.njit(**_OPTS)
def fsin(x):
    """sin for float32 with exact argument reduction for every input.

    Example: ``fsin(np.float32(-0.0))`` is ``-0.0``.
    """
    x = _F(x)
    rh, rl, q = _sincos_reduce(x)
    s, c = _sin_cos_poly(rh, rl)
    v = c if (q & 1) != 0 else s
    res = view_f32(_I(view_i32(v) ^ ((q & 2) << 30) ^ (view_i32(x) & _SIGN)))
    return res if abs(x) < _INF else _NAN


@diskcache.njit(**_OPTS)
def fcos(x):
    """cos for float32 with exact argument reduction for every input.

    Example: ``fcos(np.float32(0)) == 1``.
    """
    x = _F(x)
    rh, rl, q = _sincos_reduce(x)
    s, c = _sin_cos_poly(rh, rl)
    q = q + 1
    v = c if (q & 1) != 0 else s
    res = view_f32(_I(view_i32(v) ^ ((q & 2) << 30)))
    return res if abs(x) < _INF else _NAN


# ---------------------------------------------------------------------------------------------- pow

_SQRTH_BITS64 = _L(0x3FE6A09E667F3BCD)
_MANT64 = _L(0x000FFFFFFFFFFFFF)
_INVLN2 = _D(1.0 / np.log(2.0))
_DNINF = _D(-np.inf)
# log(1 + f) = 2*atanh(s), s = f/(2 + f): 2s + s * s*s * sum 2/(2k+1) (s*s)**(k-1), |s| < 0.172
_A1, _A2, _A3, _A4, _A5, _A6, _A7, _A8 = (_D(2.0 / (2 * k + 1)) for k in range(1, 9))
_EXP2_LIM = _D(200.0)
_SHIFT64_BITS = _L(0x4338000000000000)
# 2**r = sum (r ln2)**k / k!, k <= 9, on |r| <= 1/2 (truncation < 2**-37)
_X0, _X1, _X2, _X3, _X4, _X5, _X6, _X7, _X8, _X9 = (_D(math.log(2.0) ** k / math.factorial(k)) for k in range(10))
_TWO24 = _F(2.0**24)


@njit(**_INNER)
def _log2_64(a):
    """log2 of a positive normal float64, relative error about 2**-50."""
    ix = _L(view_i64(a) - _SQRTH_BITS64)
    e = _D(_L(ix >> 52))
    f = view_f64(_L((ix & _MANT64) + _SQRTH_BITS64)) - _DONE
    s = f / (_DTWO + f)
    z = s * s
    p = ((((((_A8 * z + _A7) * z + _A6) * z + _A5) * z + _A4) * z + _A3) * z + _A2) * z + _A1
    return e + ((s + s) + s * z * p) * _INVLN2


@njit(**_INNER)
def _exp2_64(t):
    t = _EXP2_LIM if t > _EXP2_LIM else t
    t = -_EXP2_LIM if t < -_EXP2_LIM else t
    u = t + _SHIFT64
    n = _L(view_i64(u) - _SHIFT64_BITS)
    r = t - (u - _SHIFT64)
    r2 = r * r
    lo = (((_X4 * r + _X3) * r + _X2) * r + _X1) * r + _X0
    hi = (((_X9 * r + _X8) * r + _X7) * r + _X6) * r + _X5
    p = lo + (r2 * r2 * r) * hi
    return p * view_f64(_L((n + _B1023) << 52))


@diskcache.njit(**_OPTS)
def fpow(x, y):
    """``x**y`` for float32 with the C99 ``pow`` special cases (<= 1 ulp).

    Example: ``fpow(np.float32(-2), np.float32(3)) == -8``.
    """
    x = _F(x)
    y = _F(y)
    ax = abs(x)
    axd = _D(ax)
    lg = _log2_64(axd)
    lg = _DNINF if ax == _ZERO else lg
    lg = axd if not ax < _INF else lg  # inf, nan
    res = _F(_exp2_64(_D(y) * lg))
    y_int = np.floor(y) == y  # true for +-inf
    hy = y * _HALF
    y_odd = y_int and abs(y) < _TWO24 and np.floor(hy) != hy
    res = -res if (view_i32(x) < 0 and y_odd) else res
    res = _NAN if (x < _ZERO and x > _NINF and not y_int) else res
    return _ONE if (y == _ZERO or x == _ONE or (ax == _ONE and abs(y) == _INF)) else res


FUNCS = {
    "exp": fexp,
    "expm1": fexpm1,
    "log": flog,
    "log1p": flog1p,
    "tanh": ftanh,
    "logistic": flogistic,
    "erf": ferf,
    "sin": fsin,
    "cos": fcos,
    "pow": fpow,
}
# what generated kernels import (``fusion.KERNEL_IMPORTS``)
SCALAR_FUNCTIONS = tuple(f.__name__ for f in FUNCS.values())
