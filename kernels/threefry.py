"""Threefry-2x32 (20 rounds, the Random123 definition) and fused samplers built on it, as numba kernels.

Every kernel writes into output arrays allocated by the caller and knows nothing about tracing.

Stream layout for a key and a flat output of ``n`` elements (the same for every kernel, so that each number
depends only on the key and its position):

* 32-bit words: element ``i`` is word ``i & 1`` of ``threefry(key, (hi32(i >> 1), lo32(i >> 1)))``.
* 64-bit words: element ``i`` is ``w0 << 32 | w1`` of ``threefry(key, (hi32(i), lo32(i)))``.
* float32 samplers by inversion (uniform, exponential, Gumbel, Laplace, logistic) map 32-bit word ``i`` to
  element ``i``; float64 ones, and the truncated normal, map 64-bit word ``i``.
* float32 normals use the 32-bit words in pairs (Box-Muller); float64 normals use pairs of 64-bit words.
* Rejection samplers (gamma, poisson) give element ``i < 2**32`` its own stream ``threefry(key, (i, t))``,
  t = 0, 1, ...

Kernels take keys as a ``(L, 2)`` uint32 array (one row per independent lane) and outputs as ``(L, n)``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import diskcache
from .vmath import log_split

_OPTS = dict(nogil=True, error_model="numpy")
# Scalar helpers are inlined by LLVM (typed and compiled once), not by numba's IR inliner, which retyped each of a
# block's 20 rounds at every call site: 2-6 s of compile per sampler. Only the loops taking a function ``f`` are
# inlined by numba, so that ``f`` is resolved at compile time.
_LLVM_INLINE = dict(nogil=True, error_model="numpy", forceinline=True, no_cfunc_wrapper=True)
# the rounds are called from compiled code only (the CUDA simulator calls ``block`` and the samplers from Python,
# and a dispatcher without its CPython wrapper crashes when called from Python)
_ROUNDS = dict(_LLVM_INLINE, no_cpython_wrapper=True)

_U32 = np.uint32
_PARITY = _U32(0x1BD11BDA)
R0, R1, R2, R3, R4, R5, R6, R7 = (_U32(r) for r in (13, 15, 26, 6, 17, 29, 16, 24))
_32 = _U32(32)
# key-injection counts as uint32 constants: a Python int argument is typed as its literal value, which compiled
# ``_rounds`` once per injection (five times)
S1, S2, S3, S4, S5 = (_U32(s) for s in range(1, 6))


@njit(**_ROUNDS)
def _rotl(x, r):
    return _U32((x << r) | (x >> (_32 - r)))


@njit(**_ROUNDS)
def _round(x0, x1, r):
    x0 = _U32(x0 + x1)
    return x0, _U32(_rotl(x1, r) ^ x0)


@njit(**_ROUNDS)
def _rounds(x0, x1, ra, rb, rc, rd, ka, kb, s):
    """Four rounds, then key injection ``s``: words ``s`` and ``s + 1`` (mod 3) of the extended key, and ``s``."""
    x0, x1 = _round(x0, x1, ra)
    x0, x1 = _round(x0, x1, rb)
    x0, x1 = _round(x0, x1, rc)
    x0, x1 = _round(x0, x1, rd)
    return _U32(x0 + ka), _U32(x1 + kb + s)


@njit(**_LLVM_INLINE)
def block(k0, k1, x0, x1):
    """One Threefry-2x32-20 block: key words ``k0, k1``, counter words ``x0, x1`` -> two output words."""
    k2 = _U32(k0 ^ k1 ^ _PARITY)
    x0, x1 = _U32(x0 + k0), _U32(x1 + k1)
    x0, x1 = _rounds(x0, x1, R0, R1, R2, R3, k1, k2, S1)
    x0, x1 = _rounds(x0, x1, R4, R5, R6, R7, k2, k0, S2)
    x0, x1 = _rounds(x0, x1, R0, R1, R2, R3, k0, k1, S3)
    x0, x1 = _rounds(x0, x1, R4, R5, R6, R7, k1, k2, S4)
    return _rounds(x0, x1, R0, R1, R2, R3, k2, k0, S5)


@diskcache.njit(**_OPTS)
def threefry2x32(k0, k1, x0, x1, out0, out1):
    """The block function over 1-D arrays of equal length (broadcast by the caller)."""
    for i in range(out0.shape[0]):
        y0, y1 = block(k0[i], k1[i], x0[i], x1[i])
        out0[i] = y0
        out1[i] = y1


@njit(**_LLVM_INLINE)
def _ctr(j):
    return _U32(j >> 32), _U32(j & 0xFFFFFFFF)


@njit(inline="always")
def fill32(keys, out, f):
    """``out[l, 2j], out[l, 2j + 1] = f(y0, y1)`` of the block at counter ``j`` of each lane's stream (two
    elements per block; an odd last element takes the first of the pair)."""
    n = out.shape[1]
    half = n // 2
    for lane in range(out.shape[0]):
        k0, k1 = keys[lane, 0], keys[lane, 1]
        row = out[lane]
        for j in range(half):
            c0, c1 = _ctr(j)
            y0, y1 = block(k0, k1, c0, c1)
            row[2 * j], row[2 * j + 1] = f(y0, y1)
        if n & 1:
            c0, c1 = _ctr(half)
            y0, y1 = block(k0, k1, c0, c1)
            row[n - 1] = f(y0, y1)[0]


def _each(f):
    """The pair function of ``fill32`` applying ``f`` to each 32-bit word on its own."""

    @njit(inline="always")
    def pair(y0, y1):
        return f(y0), f(y1)

    return pair


@njit(inline="always")
def fill64(keys, out, f):
    """``out[l, i] = f(w0, w1)`` of the block at counter ``i`` of each lane's stream."""
    for lane in range(out.shape[0]):
        k0, k1 = keys[lane, 0], keys[lane, 1]
        row = out[lane]
        for i in range(out.shape[1]):
            c0, c1 = _ctr(i)
            y0, y1 = block(k0, k1, c0, c1)
            row[i] = f(y0, y1)


_F24 = np.float32(2.0**-24)
_F53 = 2.0**-53
_S8 = _U32(8)
_S9 = _U32(9)
_S1U = _U32(1)
_S11 = np.uint64(11)
_S12 = np.uint64(12)


@njit(**_LLVM_INLINE)
def _word(w):
    return w


@njit(**_LLVM_INLINE)
def _word64(y0, y1):
    return (np.uint64(y0) << np.uint64(32)) | np.uint64(y1)


@njit(**_LLVM_INLINE)
def _unit24(w):
    return np.float32(np.int32(w >> _S8)) * _F24


@njit(**_LLVM_INLINE)
def _open24(w):
    return np.float32(np.int32(((w >> _S9) << _S1U) | _S1U)) * _F24


@njit(**_LLVM_INLINE)
def _unit53(y0, y1):
    return np.float64(np.int64(_word64(y0, y1) >> _S11)) * _F53


@njit(**_LLVM_INLINE)
def _open53(y0, y1):
    return (np.float64(np.int64(_word64(y0, y1) >> _S12)) * 2.0 + 1.0) * _F53


_word_each, _unit24_each, _open24_each = _each(_word), _each(_unit24), _each(_open24)


@diskcache.njit(**_OPTS)
def bits32(keys, out):
    """Raw 32-bit words: ``out[l, i]`` per the layout above."""
    fill32(keys, out, _word_each)


@diskcache.njit(**_OPTS)
def bits64(keys, out):
    """Raw 64-bit words: ``out[l, i] = w0 << 32 | w1`` of the block at counter ``i``."""
    fill64(keys, out, _word64)


@diskcache.njit(**_OPTS)
def uniform32(keys, out):
    """float32 in [0, 1): the top 24 bits of each 32-bit word, times 2**-24 (exact)."""
    fill32(keys, out, _unit24_each)


@diskcache.njit(**_OPTS)
def uniform32_open(keys, out):
    """float32 in (0, 1): odd multiples of 2**-24 (the top 23 bits of each word), so 0 and 1 never occur."""
    fill32(keys, out, _open24_each)


@diskcache.njit(**_OPTS)
def uniform64(keys, out):
    """float64 in [0, 1): the top 53 bits of each 64-bit word, times 2**-53 (exact)."""
    fill64(keys, out, _unit53)


@diskcache.njit(**_OPTS)
def uniform64_open(keys, out):
    """float64 in (0, 1): odd multiples of 2**-53."""
    fill64(keys, out, _open53)


@njit(inline="always")
def _fill32_from(k0, k1, row, first, f):
    """``row[i] = f(word first + i)`` for an even (block-aligned) stream position ``first``: fill32's loop."""
    n = row.shape[0]
    half = n // 2
    base = first >> 1
    for j in range(half):
        c0, c1 = _ctr(base + j)
        y0, y1 = block(k0, k1, c0, c1)
        row[2 * j] = f(y0)
        row[2 * j + 1] = f(y1)
    if n & 1:
        c0, c1 = _ctr(base + half)
        y0, _ = block(k0, k1, c0, c1)
        row[n - 1] = f(y0)


@njit(inline="always")
def fill32_rows(keys, rows, out, f):
    """``out[l, j, k] = f(word rows[l, j] * K + k)`` of lane ``l``'s 32-bit stream, ``K = out.shape[2]``: rows of a
    longer draw, each from its own counters (a row may start on the odd word of a block)."""
    inner = out.shape[2]
    for lane in range(out.shape[0]):
        k0, k1 = keys[lane, 0], keys[lane, 1]
        for j in range(out.shape[1]):
            row = out[lane, j]
            start = rows[lane, j] * inner
            if start & 1 and inner > 0:
                c0, c1 = _ctr(start >> 1)
                _, y1 = block(k0, k1, c0, c1)
                row[0] = f(y1)
                _fill32_from(k0, k1, row[1:], start + 1, f)
            else:
                _fill32_from(k0, k1, row, start, f)


@njit(inline="always")
def fill64_rows(keys, rows, out, f):
    """``out[l, j, k] = f(w0, w1)`` of the block at counter ``rows[l, j] * K + k`` of lane ``l``'s stream."""
    inner = out.shape[2]
    for lane in range(out.shape[0]):
        k0, k1 = keys[lane, 0], keys[lane, 1]
        for j in range(out.shape[1]):
            row = out[lane, j]
            start = rows[lane, j] * inner
            for k in range(inner):
                c0, c1 = _ctr(start + k)
                y0, y1 = block(k0, k1, c0, c1)
                row[k] = f(y0, y1)


@diskcache.njit(**_OPTS)
def uniform32_rows(keys, rows, out):
    """Rows of ``uniform32``'s output (int64 ``rows``, non-negative): see ``fill32_rows``."""
    fill32_rows(keys, rows, out, _unit24)


@diskcache.njit(**_OPTS)
def uniform64_rows(keys, rows, out):
    """Rows of ``uniform64``'s output (int64 ``rows``, non-negative): see ``fill64_rows``."""
    fill64_rows(keys, rows, out, _unit53)


# ----------------------------------------------------------------------------------------------------
# Branch-free float32 log of (0, 1] and sin/cos(2 pi u), so the normal kernel vectorizes (numba's are scalar libm
# calls). They are not vmath's flog/fsin/fcos: those handle every float32 (subnormals, infinities, NaN, huge
# arguments) with selects this domain never needs, and they round differently in about one value in eight, which
# would change the samples. The log shares vmath's argument split.
# Polynomial coefficients are least-squares fits on Chebyshev nodes, reweighted towards minimax.

_F = np.float32
_LN2_HI = _F(0.693145751953125)
_LN2_LO = _F(1.428606765330187e-06)
_HALF = _F(0.5)
_L0, _L1, _L2, _L3, _L4, _L5, _L6, _L7 = (
    _F(c)
    for c in (
        0.33333325386047363,
        -0.25000691413879395,
        0.20001840591430664,
        -0.16628184914588928,
        0.14188897609710693,
        -0.13101644814014435,
        0.12833720445632935,
        -0.07879578322172165,
    )
)


@njit(**_LLVM_INLINE)
def flog_pos(x):
    """Natural log of a positive, normal float32 (no inf/nan/subnormal handling): about 1 ulp."""
    e, f = log_split(x)
    p = _L7
    p = p * f + _L6
    p = p * f + _L5
    p = p * f + _L4
    p = p * f + _L3
    p = p * f + _L2
    p = p * f + _L1
    p = p * f + _L0
    f2 = f * f
    return e * _LN2_HI + (f - _HALF * f2 + f2 * f * p + e * _LN2_LO)


_S0, _S1, _S2, _S3 = (
    _F(c) for c in (6.283185005187988, -41.34159851074219, 81.58457946777344, -75.11178588867188)
)
_C1, _C2, _C3, _C4 = (
    _F(c) for c in (-19.739208221435547, 64.93932342529297, -85.44327545166016, 59.230350494384766)
)


@njit(**_LLVM_INLINE)
def sincos_turns(m):
    """``sin(2 pi u), cos(2 pi u)`` for ``u = m * 2**-24``, ``m`` an int32 in [0, 2**24)."""
    q = np.int32((m + np.int32(1 << 21)) >> np.int32(22))
    f = _F(np.int32(m - (q << np.int32(22)))) * _F24
    f2 = f * f
    s = f * (((_S3 * f2 + _S2) * f2 + _S1) * f2 + _S0)
    c = _F(1.0) + f2 * (((_C4 * f2 + _C3) * f2 + _C2) * f2 + _C1)
    odd = (q & np.int32(1)) != 0
    sn = c if odd else s
    cs = s if odd else c
    sn = -sn if (q & np.int32(2)) != 0 else sn
    cs = -cs if ((q + np.int32(1)) & np.int32(2)) != 0 else cs
    return sn, cs


_F31 = _F(2.0**-31)
_F32H = _F(2.0**-32)
_M2 = _F(-2.0)


@njit(**_LLVM_INLINE)
def _box_muller32(w0, w1):
    u = _F(np.int32(w0 >> _S1U)) * _F31 + _F32H
    r = np.sqrt(_M2 * flog_pos(u))
    s, c = sincos_turns(np.int32(w1 >> _S8))
    return r * c, r * s


@diskcache.njit(**_OPTS)
def normal32(keys, out):
    """Standard normal float32 by Box-Muller on each pair of 32-bit words (radius from w0, angle from w1)."""
    fill32(keys, out, _box_muller32)


_TWO_PI = 2.0 * math.pi


@njit(**_LLVM_INLINE)
def _box_muller64(a0, a1, b0, b1):
    r = math.sqrt(-2.0 * math.log(_open53(a0, a1)))
    t = _TWO_PI * _unit53(b0, b1)
    return r * math.cos(t), r * math.sin(t)


@diskcache.njit(**_OPTS)
def normal64(keys, out):
    """Standard normal float64 by Box-Muller on pairs of 64-bit words (counters 2j and 2j + 1)."""
    n = out.shape[1]
    for lane in range(out.shape[0]):
        k0, k1 = keys[lane, 0], keys[lane, 1]
        row = out[lane]
        for j in range((n + 1) // 2):
            c0, c1 = _ctr(2 * j)
            a0, a1 = block(k0, k1, c0, c1)
            c0, c1 = _ctr(2 * j + 1)
            b0, b1 = block(k0, k1, c0, c1)
            z0, z1 = _box_muller64(a0, a1, b0, b1)
            row[2 * j] = z0
            if 2 * j + 1 < n:
                row[2 * j + 1] = z1


# ----------------------------------------------------------------------------------------------------
# Standard distributions by inversion of an open-interval uniform (the same words as uniform32_open /
# uniform64_open; in float32, 1 - u is exact on that grid).

_ONE = _F(1.0)
_TWO = _F(2.0)
_ZERO = _F(0.0)


@njit(**_LLVM_INLINE)
def _exponential32(w):
    return -flog_pos(_ONE - _open24(w))


@njit(**_LLVM_INLINE)
def _gumbel32(w):
    return -flog_pos(-flog_pos(_open24(w)))


@njit(**_LLVM_INLINE)
def _laplace32(w):
    v = _TWO * _open24(w) - _ONE
    t = flog_pos(_ONE - abs(v))
    return t if v < _ZERO else -t


@njit(**_LLVM_INLINE)
def _logistic32(w):
    u = _open24(w)
    return flog_pos(u) - flog_pos(_ONE - u)


@njit(**_LLVM_INLINE)
def _exponential64(y0, y1):
    return -math.log(1.0 - _open53(y0, y1))


@njit(**_LLVM_INLINE)
def _gumbel64(y0, y1):
    return -math.log(-math.log(_open53(y0, y1)))


@njit(**_LLVM_INLINE)
def _laplace64(y0, y1):
    v = 2.0 * _open53(y0, y1) - 1.0
    t = math.log(1.0 - abs(v))
    return t if v < 0.0 else -t


@njit(**_LLVM_INLINE)
def _logistic64(y0, y1):
    u = _open53(y0, y1)
    return math.log(u) - math.log(1.0 - u)


_exponential32_each, _gumbel32_each = _each(_exponential32), _each(_gumbel32)
_laplace32_each, _logistic32_each = _each(_laplace32), _each(_logistic32)


@diskcache.njit(**_OPTS)
def exponential32(keys, out):
    fill32(keys, out, _exponential32_each)


@diskcache.njit(**_OPTS)
def gumbel32(keys, out):
    fill32(keys, out, _gumbel32_each)


@diskcache.njit(**_OPTS)
def laplace32(keys, out):
    fill32(keys, out, _laplace32_each)


@diskcache.njit(**_OPTS)
def logistic32(keys, out):
    fill32(keys, out, _logistic32_each)


@diskcache.njit(**_OPTS)
def exponential64(keys, out):
    fill64(keys, out, _exponential64)


@diskcache.njit(**_OPTS)
def gumbel64(keys, out):
    fill64(keys, out, _gumbel64)


@diskcache.njit(**_OPTS)
def laplace64(keys, out):
    fill64(keys, out, _laplace64)


@diskcache.njit(**_OPTS)
def logistic64(keys, out):
    fill64(keys, out, _logistic64)


# name -> (float32 kernel, float64 kernel)
STANDARD = {
    "exponential": (exponential32, exponential64),
    "gumbel": (gumbel32, gumbel64),
    "laplace": (laplace32, laplace64),
    "logistic": (logistic32, logistic64),
}


_SQRT_HALF = math.sqrt(0.5)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@njit(**_LLVM_INLINE)
def _ndtr(x):
    return 0.5 * math.erfc(-x * _SQRT_HALF)


@njit(**_LLVM_INLINE)
def _ndtri_lower(p):
    """The standard normal quantile for 0 < p <= 1/2, by Newton's method on log(Phi(x)).

    log(Phi) is concave and x0 = -sqrt(-2 log p) lies left of the root (Phi(-t) <= exp(-t**2 / 2) / 2), so the
    iterates increase monotonically to it; working with logs keeps full relative accuracy deep in the tail.
    """
    if p <= 0.0:
        return -np.inf
    lp = math.log(p)
    x = -math.sqrt(-2.0 * lp)
    for _ in range(100):
        c = _ndtr(x)
        if c <= 0.0:
            break
        log_pdf = -0.5 * x * x - _LOG_SQRT_2PI
        dx = (math.log(c) - lp) * math.exp(math.log(c) - log_pdf)
        x -= dx
        if abs(dx) <= 1e-15 * abs(x) + 1e-300:
            break
    return x


@njit(**_LLVM_INLINE)
def truncated_normal_one(a, b, u):
    """The inverse CDF of the standard normal truncated to [a, b], at u in (0, 1), accurate in both tails.

    Bounds right of 0 are mirrored to the left, where Phi is small and carries full relative precision.
    """
    if not a < b:
        return np.nan
    flip = a >= 0.0
    if flip:
        a, b, u = -b, -a, 1.0 - u
    pa = _ndtr(a)
    if b <= 0.0:
        x = _ndtri_lower(pa + u * (_ndtr(b) - pa))
    else:
        qb = _ndtr(-b)
        mass = 1.0 - pa - qb
        p = pa + u * mass
        x = _ndtri_lower(p) if p <= 0.5 else -_ndtri_lower(qb + (1.0 - u) * mass)
    x = min(max(x, a), b)
    return -x if flip else x


@diskcache.njit(**_OPTS)
def truncated_normal(keys, lower, upper, out):
    """Truncated standard normals; ``lower``, ``upper`` and ``out`` are ``(L, n)``. Element i inverts the
    open-interval float64 uniform of 64-bit word i, so its derivatives need only that uniform again."""
    for lane in range(out.shape[0]):
        k0, k1 = keys[lane, 0], keys[lane, 1]
        for i in range(out.shape[1]):
            c0, c1 = _ctr(i)
            y0, y1 = block(k0, k1, c0, c1)
            u = _open53(y0, y1)
            out[lane, i] = truncated_normal_one(np.float64(lower[lane, i]), np.float64(upper[lane, i]), u)


# ----------------------------------------------------------------------------------------------------
# Rejection samplers: element i draws from its own stream threefry(key, (i, t)), t = 0, 1, 2, ...


@njit(**_LLVM_INLINE)
def _open01(w):
    return (np.float64(w) + 0.5) * 2.0**-32


@njit(**_LLVM_INLINE)
def _gamma_one(k0, k1, i, a):
    """Marsaglia-Tsang for shape ``a >= 1``; for ``a < 1`` sample ``a + 1`` and multiply by ``U**(1/a)``."""
    boost = a < 1.0
    b = a + 1.0 if boost else a
    d = b - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    ci = _U32(i)
    t = _U32(0)
    boost_u = 1.0
    while True:
        a0, a1 = block(k0, k1, ci, t)
        e0, e1 = block(k0, k1, ci, _U32(t + _U32(1)))
        if t == 0:
            boost_u = _open01(e1)
        t = _U32(t + _U32(2))
        x = math.sqrt(-2.0 * math.log(_open01(a0))) * math.cos(_TWO_PI * _open01(a1))
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = _open01(e0)
        x2 = x * x
        if u < 1.0 - 0.0331 * x2 * x2 or math.log(u) < 0.5 * x2 + d * (1.0 - v + math.log(v)):
            break
    z = d * v
    if boost:
        z = z * math.exp(math.log(boost_u) / a)
    return z


@njit(inline="always")
def fill_each(keys, param, out, f):
    """``out[l, i] = f(k0, k1, i, param[l, i])`` with lane ``l``'s key words: one stream per element."""
    for lane in range(out.shape[0]):
        k0, k1 = keys[lane, 0], keys[lane, 1]
        for i in range(out.shape[1]):
            out[lane, i] = f(k0, k1, i, np.float64(param[lane, i]))


@njit(**_LLVM_INLINE)
def _gamma_element(k0, k1, i, a):
    if not a > 0.0:
        return np.nan
    return np.inf if a == np.inf else _gamma_one(k0, k1, i, a)


@diskcache.njit(**_OPTS)
def gamma(keys, alpha, out):
    """Gamma(alpha, 1) samples; ``alpha`` and ``out`` are ``(L, n)``. Non-positive or nan alpha gives nan."""
    fill_each(keys, alpha, out, _gamma_element)


@njit(**_LLVM_INLINE)
def digamma(x):
    """Digamma for x > 0: recurrence up to x >= 10, then the asymptotic (Bernoulli) series."""
    acc = 0.0
    while x < 10.0:
        acc -= 1.0 / x
        x += 1.0
    r = 1.0 / (x * x)
    s = 1.0 / 132 - r * (691.0 / 32760)
    s = r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r * s))))
    return acc + math.log(x) - 0.5 / x - s


@njit(**_LLVM_INLINE)
def gamma_sample_grad(a, x):
    """d x / d a for x ~ Gamma(a, 1), by implicit differentiation of the CDF: -(dP(a, x)/da) / pdf(a, x).

    With ``P(a, x) = sum_n x**(a+n) e**-x / Gamma(a+n+1)``, ``dP/da = sum_n T_n (log x - digamma(a+n+1))``;
    the sum divided by the pdf is taken term by term in log space, over the terms around the peak
    ``n = x - a``.
    """
    if not (x > 0.0 and a > 0.0) or x == np.inf:
        return 0.0
    lx = math.log(x)
    peak = max(0.0, math.floor(x - a))
    width = math.ceil(12.0 * math.sqrt(x + 1.0) + 24.0)
    n = max(0.0, peak - width)
    stop = peak + width
    lt = (n + 1.0) * lx + math.lgamma(a) - math.lgamma(a + n + 1.0)
    psi = digamma(a + n + 1.0)
    acc = 0.0
    while n <= stop:
        acc += math.exp(lt) * (lx - psi)
        n += 1.0
        lt += lx - math.log(a + n)
        psi += 1.0 / (a + n)
    return -acc


@diskcache.njit(**_OPTS)
def gamma_grad(alpha, x, out):
    """Elementwise ``gamma_sample_grad`` over 1-D arrays of equal length."""
    for i in range(out.shape[0]):
        out[i] = gamma_sample_grad(np.float64(alpha[i]), np.float64(x[i]))


@njit(**_LLVM_INLINE)
def _poisson_one(k0, k1, i, lam):
    ci = _U32(i)
    if lam < 10.0:
        y0, _ = block(k0, k1, ci, _U32(0))
        u = _open01(y0)
        p = math.exp(-lam)
        cdf = p
        k = 0
        while u > cdf and k < 1000:
            k += 1
            p *= lam / k
            cdf += p
        return k
    # transformed rejection with squeeze (Hormann 1993, "PTRS")
    slam = math.sqrt(lam)
    loglam = math.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2.0)
    t = _U32(0)
    while True:
        y0, y1 = block(k0, k1, ci, t)
        t = _U32(t + _U32(1))
        u = _open01(y0) - 0.5
        v = _open01(y1)
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + lam + 0.43)
        if us >= 0.07 and v <= vr:
            return np.int64(k)
        if k < 0.0 or (us < 0.013 and v > us):
            continue
        lhs = math.log(v) + math.log(inv_alpha) - math.log(a / (us * us) + b)
        if lhs <= -lam + k * loglam - math.lgamma(k + 1.0):
            return np.int64(k)


@njit(**_LLVM_INLINE)
def _poisson_element(k0, k1, i, r):
    if not r >= 0.0 or r == np.inf:
        return np.int64(-1)
    return np.int64(0) if r == 0.0 else np.int64(_poisson_one(k0, k1, i, r))


@diskcache.njit(**_OPTS)
def poisson(keys, lam, out):
    """Poisson(lam) counts; ``lam`` and ``out`` are ``(L, n)``. Negative or nan rates give -1."""
    fill_each(keys, lam, out, _poisson_element)
