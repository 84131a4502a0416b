"""Special functions on NumPy arrays: ``erf``, ``erfinv``, ``lgamma``, ``digamma``, ``polygamma``.

Each accepts float16, bfloat16, float32 or float64 arrays (0-d arrays and NumPy scalars too) and returns a new
ndarray of the same dtype and shape. The scalar code is numba, compiled on first use and cached on disk. Every
dtype is evaluated in float64 and rounded once at the end (float16/bfloat16 pass through float32 first), so
float32 results are within 1 ulp of the float64 result rounded.

Special values follow ``scipy.special``:

- NaN in, NaN out.
- ``erf(+-inf) = +-1``; ``erfinv(+-1) = +-inf``, ``erfinv(x) = nan`` for ``|x| > 1``.
- ``lgamma`` is ``log|Gamma(x)|``: ``+inf`` at 0 and the negative integers, ``lgamma(+inf) = +inf`` and
  ``lgamma(-inf) = -inf`` (C99 and ``math.lgamma`` give ``+inf`` there).
- ``digamma(+0) = -inf``, ``digamma(-0) = +inf`` (the one-sided limits), ``nan`` at negative integers and at
  ``-inf``, ``digamma(+inf) = +inf``.
- ``polygamma(n, x)`` for ``n >= 1``: at a pole (0 or a negative integer) the result is the two-sided limit
  where one exists (``+inf`` for odd ``n``); for even ``n`` it is ``nan``, except at a signed zero, which
  picks its side as in ``digamma``. ``polygamma(n, +inf)`` is a zero of sign ``(-1)**(n+1)`` and
  ``polygamma(n, -inf)`` is ``nan``. (scipy gives ``-inf`` for even ``n`` at the poles and ``+-inf`` at
  ``-inf``.)

No floating-point warnings are raised for these documented values.

Methods: ``erf`` and ``lgamma`` call the C library through numba. ``erfinv`` starts from Winitzki's
closed-form approximation and takes Halley steps on ``erf(y) = x``, or on ``erfc(y) = 1 - x`` for
``|x| > 1/2`` where that keeps full relative accuracy. ``digamma`` sums the asymptotic series for ``x >= 10``;
below that it moves ``x`` into ``[x0 - 1/2, x0 + 1/2]`` around its positive zero ``x0`` with the recurrence
(downwards, where ``x - k`` is exact) and sums the Taylor series about ``x0``, whose coefficients are Hurwitz
zeta values. ``polygamma(n, x) = (-1)**(n+1) n! zeta(n+1, x)`` with the Hurwitz zeta from the recurrence and
Euler-Maclaurin, scaled by ``x**(n+1)`` so that ``n!`` and the power never overflow on their own. Negative
``x`` uses the reflection formula with ``cot(pi x)`` computed from the exactly reduced argument, which keeps
relative accuracy at half-integers far from the origin.

Example:
    >>> import numpy as np
    >>> from funclib.kernels import special
    >>> special.polygamma(1, np.array([1.0]))  # pi**2 / 6
    array([1.64493407])
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from functools import cache

import ml_dtypes
import numpy as np
import numpy.typing as npt

from . import diskcache

__all__ = ["erf", "erfinv", "lgamma", "digamma", "polygamma"]

_NATIVE = (np.dtype(np.float32), np.dtype(np.float64))
_VIA_F32 = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
_SIGNATURES = ["float32(float32)", "float64(float64)"]

_INF = math.inf
_NAN = math.nan
_PI = math.pi
_TWO_OVER_SQRT_PI = 1.1283791670955126
_SQRT_PI_OVER_TWO = 0.886226925452758


def _bernoulli(m: int) -> Fraction:
    b = [Fraction(1)]
    for k in range(1, m + 1):
        b.append(-sum(math.comb(k + 1, j) * b[j] for j in range(k)) / (k + 1))
    return b[m]


# psi(x) ~ log x - 1/(2x) - sum_j B_2j / (2j x^2j); eight terms reach 3e-18 relative at x >= 10
_PSI_ASYMPTOTIC = tuple(float(_bernoulli(2 * j) / (2 * j)) for j in range(1, 9))
_PSI_SHIFT = 10.0
# Euler-Maclaurin for zeta(s, a): B_2j / (2j)!, times the rising factorial (s)_(2j-1) and a^(1-2j)
_EM_TERMS = 10
_EM_COEF = tuple(float(_bernoulli(2 * j) / math.factorial(2 * j)) for j in range(1, _EM_TERMS + 1))
_EXACT_FACTORIALS = tuple(float(math.factorial(k)) for k in range(23))

# The positive zero of digamma as a sum of two doubles, and the Taylor coefficients of digamma about it:
# psi(x0 + h) = sum_k c_k h^k with c_k = (-1)^(k+1) zeta(k+1, x0), computed at 60 digits.
_ROOT_HI = 1.4616321449683622
_ROOT_LO = 9.549995429965697e-17
_ROOT_TAYLOR = (
    0.9676722454476212, -0.4427631689835921, 0.258499760955651, -0.16394270544240652, 0.10782405069126237,
    -0.07219956125645471, 0.04880428816414311, -0.03316112647484736, 0.022597648232218104,
    -0.01542476590494896, 0.010538791616612175, -0.007204534386356869, 0.004926781395729853,
    -0.003369801655439328, 0.002305126326734928, -0.0015769367714301972, 0.0010788252019162967,
    -0.0007380709389960052, 0.000504953265834602, -0.0003454680251063077, 0.00023635601564027053,
    -0.00016170622091974803, 0.0001106337276874741, -7.569179582195066e-05, 5.178575795222081e-05,
    -3.5430070947659604e-05, 2.424006611860132e-05, -1.6584242271854135e-05, 1.134638458466385e-05,
    -7.762817668462094e-06, 5.3110609208898636e-06, -3.6336507898010456e-06, 2.486022733129538e-06,
    -1.7008538854332607e-06, 1.1636675363548843e-06, -7.96142543124197e-07, 5.446941930669446e-07,
    -3.7266161283438227e-07, 2.549626552021554e-07, -1.7443695117727745e-07,
)  # fmt: skip
_ROOT_RADIUS = 0.5


def _check(x: npt.ArrayLike, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype not in _NATIVE and a.dtype not in _VIA_F32:
        raise TypeError(
            f"{name} expects a float16, bfloat16, float32 or float64 array, got {a.dtype}; "
            f"convert first, e.g. x.astype(np.float64)"
        )
    return a


def _apply(ufunc: np.ufunc, a: np.ndarray) -> np.ndarray:
    if a.dtype in _VIA_F32:
        return np.asarray(ufunc(a.astype(np.float32))).astype(a.dtype)
    return np.asarray(ufunc(a))


# ---------------------------------------------------------------- scalar float64 code


@diskcache.njit
def _erf64(x):
    return math.erf(x)


@diskcache.njit
def _lgamma64(x):
    if x <= 0.0 and x == math.floor(x):
        return -_INF if x == -_INF else _INF
    return math.lgamma(x)


@diskcache.njit
def _erfinv64(x):
    a = abs(x)
    if not a < 1.0:
        return math.copysign(_INF, x) if a == 1.0 else _NAN
    if a < 1e-9:
        return x * _SQRT_PI_OVER_TWO
    # Winitzki: y^2 = sqrt(A^2 - L/k) - A with A = 2/(pi k) + L/2, L = log(1 - x^2), k = 0.147;
    # written as a quotient when A > 0 to avoid cancellation
    l = math.log((1.0 - a) * (1.0 + a))
    big_a = 2.0 / (_PI * 0.147) + 0.5 * l
    b = -l / 0.147
    root = math.sqrt(big_a * big_a + b)
    y = math.sqrt(b / (root + big_a) if big_a > 0.0 else root - big_a)
    w = 1.0 - a
    for _ in range(6):
        if a <= 0.5:
            t = (math.erf(y) - a) / (_TWO_OVER_SQRT_PI * math.exp(-y * y))
        else:
            t = (w - math.erfc(y)) / (_TWO_OVER_SQRT_PI * math.exp(-y * y))
        step = t / (1.0 + t * y)
        y -= step
        if abs(step) <= 1e-7 * y:
            break
    return math.copysign(y, x)


@diskcache.njit
def _cotpi(x):
    """cot(pi x) for finite non-integer x; x - n is exact for the nearest integer n (Sterbenz)."""
    f = x - math.floor(x + 0.5)
    a = abs(f)
    if a <= 0.25:
        c = math.cos(_PI * a) / math.sin(_PI * a)
    else:
        r = _PI * (0.5 - a)
        c = math.sin(r) / math.cos(r)
    return c if f > 0.0 else -c


@diskcache.njit
def _digamma_near_root(x):
    h = (x - _ROOT_HI) - _ROOT_LO
    acc = 0.0
    for k in range(len(_ROOT_TAYLOR) - 1, -1, -1):
        acc = acc * h + _ROOT_TAYLOR[k]
    return acc * h


@diskcache.njit
def _digamma_pos(x):
    if x >= _PSI_SHIFT:
        if x > 1e17:
            return math.log(x) - 0.5 / x
        z = 1.0 / (x * x)
        series = 0.0
        for k in range(len(_PSI_ASYMPTOTIC) - 1, -1, -1):
            series = series * z + _PSI_ASYMPTOTIC[k]
        return (math.log(x) - 0.5 / x) - series * z
    if x < _ROOT_HI - _ROOT_RADIUS:
        return _digamma_near_root(x + 1.0) - 1.0 / x
    # psi(x) = psi(x - m) + sum_k 1/(x - k): x - k is exact, and all the added terms are positive
    m = max(0, int(math.ceil(x - (_ROOT_HI + _ROOT_RADIUS))))
    shift = 0.0
    for k in range(m, 0, -1):
        shift += 1.0 / (x - k)
    return _digamma_near_root(x - m) + shift


@diskcache.njit
def _digamma64(x):
    if x > 0.0:
        return _INF if x == _INF else _digamma_pos(x)
    if x == math.floor(x):
        if x == 0.0:
            return -math.copysign(_INF, x)
        return _NAN
    if x != x:
        return x
    return _digamma_pos(1.0 - x) - _PI * _cotpi(x)


@diskcache.njit
def _hurwitz_scaled(s, x, a_min):
    """x**s * zeta(s, x) for x > 0 and integer s >= 2."""
    if x >= a_min:
        a = x
        scale = 1.0
        n_shift = 0
    else:
        n_shift = int(math.ceil(a_min - x))
        a = x + n_shift
        scale = (x / a) ** s
    # Euler-Maclaurin tail: a/(s-1) + 1/2 + sum_j B_2j/(2j)! (s)_(2j-1) a^(1-2j)
    inv_a2 = 1.0 / (a * a)
    t = s / a
    tail = 0.0
    for j in range(_EM_TERMS):
        tail += _EM_COEF[j] * t
        t *= (s + 2 * j + 1) * (s + 2 * j + 2) * inv_a2
    z = scale * (a / (s - 1) + 0.5 + tail)
    for k in range(n_shift - 1, 0, -1):
        z += (x / (x + k)) ** s
    if n_shift > 0:
        z += 1.0
    return z


@diskcache.njit
def _polygamma_pos(n, x, a_min):
    """(-1)**(n+1) n! zeta(n+1, x) for finite x > 0, as mantissas and exponents so nothing overflows early."""
    s = n + 1
    z_m, z_e = math.frexp(_hurwitz_scaled(s, x, a_min))
    if n < len(_EXACT_FACTORIALS):
        f_m, f_e = math.frexp(_EXACT_FACTORIALS[n])
    else:
        f_m, f_e = 1.0, 0
        for k in range(2, n + 1):
            f_m, e = math.frexp(f_m * k)
            f_e += e
    x_m, x_e = math.frexp(x)
    p_m, p_e = 1.0, 0
    left = s
    while left > 0:
        chunk = min(left, 512)
        p_m, e = math.frexp(p_m * x_m**-chunk)
        p_e += e
        left -= chunk
    mag = math.ldexp(z_m * f_m * p_m, z_e + f_e + p_e - x_e * s)
    return mag if n % 2 == 1 else -mag


@diskcache.njit
def _polygamma64(n, x, a_min, cot_poly):
    if x > 0.0:
        if x == _INF:
            return 0.0 if n % 2 == 1 else -0.0
        return _polygamma_pos(n, x, a_min)
    if x == math.floor(x):
        if n % 2 == 1:
            return _INF if x > -_INF else _NAN
        if x == 0.0:
            return -math.copysign(_INF, x)
        return _NAN
    if x != x:
        return x
    # reflection: psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) T_n(cot(pi x)), T_n(cot z) = d^n/dz^n cot z
    c = _cotpi(x)
    poly = 0.0
    if c != 0.0 or n % 2 == 1:  # T_n is odd for even n, and its coefficients may be inf for very large n
        for k in range(cot_poly.size - 1, -1, -1):
            poly = poly * c + cot_poly[k]
    mirrored = _polygamma_pos(n, 1.0 - x, a_min)
    if n % 2 == 1:
        mirrored = -mirrored
    return mirrored - _PI ** (n + 1) * poly


@diskcache.njit
def _polygamma_loop(n, x, out, a_min, cot_poly):
    for i in range(x.size):
        out[i] = _polygamma64(n, np.float64(x[i]), a_min, cot_poly)


# ---------------------------------------------------------------- ufuncs, built on first use


def _erf_scalar(x):
    return _erf64(np.float64(x))


def _erfinv_scalar(x):
    return _erfinv64(np.float64(x))


def _lgamma_scalar(x):
    return _lgamma64(np.float64(x))


def _digamma_scalar(x):
    return _digamma64(np.float64(x))


_SCALARS = {
    "erf": _erf_scalar,
    "erfinv": _erfinv_scalar,
    "lgamma": _lgamma_scalar,
    "digamma": _digamma_scalar,
}


@cache
def _ufunc(name: str) -> np.ufunc:
    return diskcache.vectorize(_SIGNATURES, _SCALARS[name])


@cache
def _cot_derivative(n: int) -> np.ndarray:
    """Coefficients of T_n with d^n/dz^n cot z = T_n(cot z): T_0(c) = c, T_(k+1) = -(1 + c^2) T_k'(c)."""
    t = [0, 1]
    for _ in range(n):
        d = [k * t[k] for k in range(1, len(t))] + [0, 0]
        t = [-(d[k] + (d[k - 2] if k >= 2 else 0)) for k in range(len(d))]
    return np.array([float(v) if abs(v) < 2**1023 else (_INF if v > 0 else -_INF) for v in t])


@cache
def _shift_threshold(n: int) -> float:
    """Smallest a where the Euler-Maclaurin remainder for zeta(n+1, a) is below 1e-17 relative."""
    s = n + 1
    j = _EM_TERMS + 1
    log_rem = (
        math.log(abs(float(_bernoulli(2 * j) / math.factorial(2 * j))))
        + math.lgamma(s + 2 * j - 1)
        - math.lgamma(s)
        + math.log(s - 1)
    )
    return max(_PSI_SHIFT, math.exp((log_rem + 17 * math.log(10)) / (2 * j)))


# ---------------------------------------------------------------- public functions


def erf(x: npt.ArrayLike) -> np.ndarray:
    """Error function, elementwise.

    Args:
        x: float16, bfloat16, float32 or float64 values.

    Returns:
        ``erf(x)`` with the dtype and shape of ``x``.

    Example:
        >>> erf(np.array([0.0, 0.5], np.float32))
        array([0.       , 0.5204999], dtype=float32)
    """
    return _apply(_ufunc("erf"), _check(x, "erf"))


def erfinv(x: npt.ArrayLike) -> np.ndarray:
    """Inverse error function, elementwise: ``erf(erfinv(x)) == x`` on ``[-1, 1]``.

    Args:
        x: float16, bfloat16, float32 or float64 values.

    Returns:
        ``erfinv(x)`` with the dtype and shape of ``x``; ``+-inf`` at ``+-1``, NaN outside ``[-1, 1]``.

    Example:
        >>> erfinv(np.array([0.0, 0.5, 1.0]))
        array([0.        , 0.47693628,        inf])
    """
    return _apply(_ufunc("erfinv"), _check(x, "erfinv"))


def lgamma(x: npt.ArrayLike) -> np.ndarray:
    """Logarithm of the absolute value of the gamma function, elementwise.

    Args:
        x: float16, bfloat16, float32 or float64 values.

    Returns:
        ``log|Gamma(x)|`` with the dtype and shape of ``x``; ``+inf`` at 0 and the negative integers.

    Example:
        >>> lgamma(np.array([1.0, 0.5, -0.5]))
        array([0.        , 0.57236494, 1.26551212])
    """
    return _apply(_ufunc("lgamma"), _check(x, "lgamma"))


def digamma(x: npt.ArrayLike) -> np.ndarray:
    """Digamma function ``psi(x) = d/dx log Gamma(x)``, elementwise; the same as ``polygamma(0, x)``.

    Args:
        x: float16, bfloat16, float32 or float64 values.

    Returns:
        ``psi(x)`` with the dtype and shape of ``x``; NaN at the negative integers, ``-inf`` at ``+0``.

    Example:
        >>> digamma(np.array([1.0, 0.5]))
        array([-0.57721566, -1.96351003])
    """
    return _apply(_ufunc("digamma"), _check(x, "digamma"))


def polygamma(n: int, x: npt.ArrayLike) -> np.ndarray:
    """Polygamma function ``psi^(n)(x)``, the ``n``-th derivative of digamma, elementwise.

    Args:
        n: the order, a non-negative integer; ``n = 0`` is digamma.
        x: float16, bfloat16, float32 or float64 values.

    Returns:
        ``psi^(n)(x)`` with the dtype and shape of ``x``.

    Example:
        >>> polygamma(2, np.array([1.0]))  # -2 zeta(3)
        array([-2.40411381])
    """
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"polygamma order n must be an integer, got {type(n).__name__} {n!r}") from None
    if n < 0:
        raise ValueError(f"polygamma order n must be >= 0, got {n}")
    a = _check(x, "polygamma")
    if n == 0:
        return _apply(_ufunc("digamma"), a)
    dtype = np.float32 if a.dtype in _VIA_F32 else a.dtype
    out = np.empty(a.shape, dtype)
    flat = np.ascontiguousarray(a, dtype=dtype).reshape(-1)
    _polygamma_loop(n, flat, out.reshape(-1), _shift_threshold(n), _cot_derivative(n))
    return out.astype(a.dtype) if a.dtype in _VIA_F32 else out
