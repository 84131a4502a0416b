"""Differences, derivatives and integrals of sampled data, interpolation, convolution, phase unwrapping and
the window functions: diff, ediff1d, gradient, trapezoid, interp, convolve, correlate, unwrap, bartlett,
blackman, hamming, hanning, kaiser."""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes, ops
from ..core import Tensor, Tracer, _wrap
from ..ops import fft as F
from ..ops import reductions as R
from ..ops.indexing import take
from ..ops.linalg_basic import matmul
from ..ops.searching import searchsorted
from ..ops.searching import where as _where
from ..primitives import shape as S
from ..primitives.conv import conv_patches
from ..primitives.elementwise import convert
from ..primitives.sort import sort as _sort_multi
from ._elementwise import i0
from ._manipulation import concatenate
from ._util import NoValue, asarray, axis_int, concrete, inexact, static_int

__all__ = [
    "diff",
    "ediff1d",
    "gradient",
    "trapezoid",
    "interp",
    "convolve",
    "correlate",
    "unwrap",
    "bartlett",
    "blackman",
    "hamming",
    "hanning",
    "kaiser",
]


def _sl(x, axis, lo, hi):
    start, limit = [0] * x.ndim, list(x.shape)
    start[axis], limit[axis] = lo, hi
    return S.slice_(x, start, limit)


def _c(v, d):
    return _wrap(np.asarray(v, dtype=d))


def _edge_piece(v, x, axis):
    v = asarray(v, "diff")
    shape = list(x.shape)
    shape[axis] = 1
    if v.ndim == 0:
        v = S.broadcast_to(v, tuple(shape))
    return convert(v, x.dtype) if v.dtype != x.dtype else v


def diff(a, n=1, axis=-1, prepend=NoValue, append=NoValue) -> Tensor:
    """The ``n``-th discrete difference along ``axis`` (``out[i] = a[i + 1] - a[i]``), after attaching
    ``prepend``/``append``; booleans give ``a[i + 1] != a[i]``.

    >>> fnp.diff(fnp.array([1, 4, 9, 16]), 2)
    Tensor([2, 2], dtype=int64)
    """
    x = asarray(a, "diff")
    n = static_int(n, "diff", "n")
    if n < 0:
        raise ValueError(f"numpy.diff: order must be non-negative, got {n}")
    if n == 0:
        return x
    if x.ndim == 0:
        raise ValueError("numpy.diff: requires an input of at least one dimension")
    ax = axis_int(axis, x.ndim, "diff")
    parts = []
    if prepend is not NoValue:
        parts.append(_edge_piece(prepend, x, ax))
    parts.append(x)
    if append is not NoValue:
        parts.append(_edge_piece(append, x, ax))
    if len(parts) > 1:
        x = concatenate(parts, axis=ax)
    for _ in range(n):
        m = x.shape[ax]
        if m == 0:
            break
        hi, lo = _sl(x, ax, 1, m), _sl(x, ax, 0, m - 1)
        x = ops.not_equal(hi, lo) if x.dtype == dtypes.bool_ else ops.subtract(hi, lo)
    return x


def ediff1d(ary, to_end=None, to_begin=None) -> Tensor:
    """The differences of the flattened array, with ``to_begin`` and ``to_end`` attached.

    >>> fnp.ediff1d(fnp.array([1, 2, 4]), to_begin=-9)
    Tensor([-9,  1,  2], dtype=int64)
    """
    x = S.reshape(asarray(ary, "ediff1d"), (-1,))
    d = diff(x) if x.shape[0] else x
    def extra(e):
        e = S.reshape(asarray(e, "ediff1d"), (-1,))
        if not np.can_cast(e.dtype, d.dtype, casting="same_kind"):
            raise TypeError(f"numpy.ediff1d: dtype of to_begin/to_end ({e.dtype.name}) must be compatible with "
                            f"the input ({d.dtype.name}) under the 'same_kind' rule")
        return convert(e, d.dtype) if e.dtype != d.dtype else e

    parts = ([] if to_begin is None else [extra(to_begin)]) + [d] + ([] if to_end is None else [extra(to_end)])
    return S.concatenate(parts, 0) if len(parts) > 1 else parts[0]


def _spacings(varargs, axes, f, op):
    n = len(axes)
    if len(varargs) == 0:
        return [1.0] * n
    if len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        return [varargs[0]] * n
    if len(varargs) != n:
        raise TypeError(f"numpy.{op}: invalid number of arguments ({len(varargs)} spacings for {n} axes)")
    out = []
    for v, ax in zip(varargs, axes):
        if np.ndim(v) == 0:
            out.append(v)
            continue
        c = asarray(v, op)
        if c.ndim != 1:
            raise ValueError(f"numpy.{op}: distances must be either scalars or 1d")
        if c.shape[0] != f.shape[ax]:
            raise ValueError(f"numpy.{op}: when 1d, distances must match the length of the corresponding dimension")
        c = inexact(c) if c.dtype not in dtypes.INEXACT else c
        dx = diff(c)
        if type(dx) is Tensor and dx.shape[0] and bool(np.all(dx.numpy() == dx.numpy()[0])):
            out.append(dx[0])
        else:
            out.append(dx)
    return out


def _grad_axis(f, ax, dx, edge_order):
    n = f.shape[ax]
    if n < edge_order + 1:
        raise ValueError(f"numpy.gradient: shape of the array too small: an axis needs at least {edge_order + 1} "
                         f"elements for edge_order={edge_order}")
    d = f.dtype

    def at(i, j=None):
        return _sl(f, ax, i, i + 1 if j is None else j)

    def along(v):
        shape = [1] * f.ndim
        shape[ax] = -1
        return S.reshape(v, tuple(shape))

    uniform = not isinstance(dx, Tensor) or dx.ndim == 0
    if uniform:
        h = dx if isinstance(dx, Tensor) else _c(dx, d)
        h = convert(h, d) if h.dtype != d else h
        mid = ops.divide(ops.subtract(at(2, n), at(0, n - 2)), ops.multiply(h, 2.0))
        if edge_order == 1:
            first = ops.divide(ops.subtract(at(1), at(0)), h)
            last = ops.divide(ops.subtract(at(n - 1), at(n - 2)), h)
        else:
            first = ops.divide(
                ops.add(ops.add(ops.multiply(at(0), -1.5), ops.multiply(at(1), 2.0)), ops.multiply(at(2), -0.5)), h
            )
            last = ops.divide(ops.add(ops.add(ops.multiply(at(n - 3), 0.5), ops.multiply(at(n - 2), -2.0)),
                                  ops.multiply(at(n - 1), 1.5)), h)
    else:
        h = convert(dx, d) if dx.dtype != d else dx
        h1, h2 = h[: n - 2], h[1:]
        a = along(ops.divide(ops.negative(h2), ops.multiply(h1, ops.add(h1, h2))))
        b = along(ops.divide(ops.subtract(h2, h1), ops.multiply(h1, h2)))
        c = along(ops.divide(h1, ops.multiply(h2, ops.add(h1, h2))))
        mid = ops.add(ops.add(ops.multiply(a, at(0, n - 2)), ops.multiply(b, at(1, n - 1))), ops.multiply(c, at(2, n)))
        if edge_order == 1:
            first = ops.divide(ops.subtract(at(1), at(0)), h[0])
            last = ops.divide(ops.subtract(at(n - 1), at(n - 2)), h[n - 2])
        else:
            d1, d2 = h[0], h[1]
            a0 = ops.negative(ops.divide(ops.add(ops.multiply(d1, 2.0), d2), ops.multiply(d1, ops.add(d1, d2))))
            b0 = ops.divide(ops.add(d1, d2), ops.multiply(d1, d2))
            c0 = ops.negative(ops.divide(d1, ops.multiply(d2, ops.add(d1, d2))))
            first = ops.add(ops.add(ops.multiply(a0, at(0)), ops.multiply(b0, at(1))), ops.multiply(c0, at(2)))
            d1, d2 = h[n - 3], h[n - 2]
            a1 = ops.divide(d2, ops.multiply(d1, ops.add(d1, d2)))
            b1 = ops.negative(ops.divide(ops.add(d2, d1), ops.multiply(d1, d2)))
            c1 = ops.divide(ops.add(ops.multiply(d2, 2.0), d1), ops.multiply(d2, ops.add(d1, d2)))
            last = ops.add(
                ops.add(ops.multiply(a1, at(n - 3)), ops.multiply(b1, at(n - 2))), ops.multiply(c1, at(n - 1))
            )
    return S.concatenate([first, mid, last], ax)


def gradient(f, *varargs, axis=None, edge_order=1):
    """The gradient of sampled ``f`` by second-order central differences inside and one-sided differences
    (first or second order, ``edge_order``) at the ends. ``varargs`` gives the spacing: one scalar, one per
    axis, or coordinate arrays. One array for one axis, else a tuple.

    >>> fnp.gradient(fnp.array([1.0, 2.0, 4.0, 7.0]))
    Tensor([1. , 1.5, 2.5, 3. ], dtype=float32)
    """
    x = inexact(asarray(f, "gradient"))
    if edge_order not in (1, 2):
        raise ValueError("numpy.gradient: edge_order must be 1 or 2")
    if axis is None:
        axes = tuple(range(x.ndim))
    else:
        axes = (axis,) if isinstance(axis, (builtins.int, np.integer)) else tuple(axis)
        axes = tuple(axis_int(a, x.ndim, "gradient") for a in axes)
        if len(set(axes)) != len(axes):
            raise ValueError("numpy.gradient: repeated axis")
    dxs = _spacings(varargs, axes, x, "gradient")
    outs = tuple(_grad_axis(x, ax, dx, edge_order) for ax, dx in zip(axes, dxs))
    return outs[0] if len(outs) == 1 else outs


def trapezoid(y, x=None, dx=1.0, axis=-1) -> Tensor:
    """The integral of ``y`` along ``axis`` by the trapezoidal rule, at sample points ``x`` (or spacing
    ``dx``).

    >>> fnp.trapezoid(fnp.array([1.0, 2.0, 3.0]), dx=0.5)
    Tensor(2., dtype=float32)
    """
    yv = asarray(y, "trapezoid")
    ax = axis_int(axis, yv.ndim, "trapezoid")
    if x is None:
        d = dx
    else:
        xv = asarray(x, "trapezoid")
        if xv.ndim == 1:
            d = diff(xv)
            shape = [1] * yv.ndim
            shape[ax] = d.shape[0]
            d = S.reshape(d, tuple(shape))
        else:
            d = diff(xv, axis=ax)
    n = yv.shape[ax]
    avg = ops.divide(ops.add(_sl(yv, ax, 1, n), _sl(yv, ax, 0, n - 1)), 2.0)
    return R.sum(ops.multiply(d, avg), axis=ax)


def interp(x, xp, fp, left=None, right=None, period=None) -> Tensor:
    """Piecewise-linear interpolation of the points ``(xp, fp)`` (``xp`` increasing) at ``x``; ``left`` and
    ``right`` (default ``fp[0]``, ``fp[-1]``) outside, or a ``period`` for angles. Differentiable in ``x``,
    ``xp`` and ``fp``.

    >>> fnp.interp(fnp.array([0.5, 1.5, 9.0]), fnp.array([0.0, 1.0, 2.0]), fnp.array([0.0, 10.0, 20.0]))
    Tensor([ 5., 15., 20.], dtype=float32)
    """
    xv, xpv, fpv = asarray(x, "interp"), asarray(xp, "interp"), asarray(fp, "interp")
    if xpv.ndim != 1 or fpv.ndim != 1:
        raise ValueError("numpy.interp: xp and fp must be 1-D")
    if xpv.shape[0] != fpv.shape[0]:
        raise ValueError("numpy.interp: fp and xp are not of the same length")
    if xpv.shape[0] == 0:
        raise ValueError("numpy.interp: xp and fp must not be empty")
    if xv.dtype in dtypes.COMPLEX or xpv.dtype in dtypes.COMPLEX:
        raise TypeError("numpy.interp: x and xp must be real")
    rd = dtypes.result_type(inexact(xv), inexact(xpv))
    fd = dtypes.result_type(rd, inexact(fpv))
    xv, xpv = convert(xv, rd), convert(xpv, rd)
    fpv = convert(fpv, fd) if fpv.dtype != fd else fpv
    if period is not None:
        if period == 0:
            raise ValueError("numpy.interp: period must be a non-zero value")
        period = builtins.abs(period)
        left = right = None
        xv = ops.remainder(xv, period)
        xpv = ops.remainder(xpv, period)

        xpv, fpv = _sort_multi([xpv, fpv], 0, num_keys=1)
        n = xpv.shape[0]
        xpv = S.concatenate([ops.subtract(xpv[n - 1:], period), xpv, ops.add(xpv[:1], period)], 0)
        fpv = S.concatenate([fpv[n - 1:], fpv, fpv[:1]], 0)
    n = xpv.shape[0]
    lval = fpv[0] if left is None else convert(asarray(left, "interp"), fd)
    rval = fpv[n - 1] if right is None else convert(asarray(right, "interp"), fd)
    if n == 1:
        mid = S.broadcast_to(fpv[0], tuple(xv.shape))
    else:
        j = ops.clip(ops.subtract(searchsorted(xpv, xv, side="right"), 1), 0, n - 2)
        x0, x1 = take(xpv, j), take(xpv, ops.add(j, 1))
        f0, f1 = take(fpv, j), take(fpv, ops.add(j, 1))
        same = ops.equal(x1, x0)
        slope = ops.divide(ops.subtract(f1, f0), convert(_where(same, _c(1, rd), ops.subtract(x1, x0)), fd))
        y = ops.add(ops.multiply(slope, convert(ops.subtract(xv, x0), fd)), f0)
        # NumPy's fallbacks where the slope formula meets infinities: from the right end, then a flat segment
        y_nan = ops.isnan(y) if fd not in dtypes.COMPLEX else ops.isnan(ops.real(y))
        y2 = ops.add(ops.multiply(slope, convert(ops.subtract(xv, x1), fd)), f1)
        y = _where(y_nan, y2, y)
        still_nan = ops.isnan(y) if fd not in dtypes.COMPLEX else ops.isnan(ops.real(y))
        y = _where(ops.logical_and(still_nan, ops.equal(f0, f1)), f0, y)
        mid = _where(ops.equal(xv, x0), f0, y)
    out = _where(ops.less(xv, xpv[0]), lval, mid)
    out = _where(ops.greater(xv, xpv[n - 1]), rval, out)
    return _where(ops.equal(xv, xpv[n - 1]), fpv[n - 1], out)


# above this many window entries the direct sum's patch matrix no longer fits in cache: use the FFT
_DIRECT_MAX = 1 << 20


def _fast_len(n: int) -> int:
    """The smallest 2^a 3^b 5^c >= n: FFT lengths with large prime factors are many times slower."""
    best = 1 << (n - 1).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            p = p35
            while p < n:
                p *= 2
            best = min(best, p)
            p35 *= 3
        p5 *= 5
    return best


def _correlate_full(a, v):
    """``c[t] = sum_j a[t - (m - 1) + j] * v[j]`` for t in [0, n + m - 1), zeros outside ``a``.

    Directly (as NumPy computes it): the sliding windows of the zero-padded ``a`` (the convolution layers'
    im2col, channels first: ``m`` contiguous rows) times ``v``. For long floating-point inputs, by FFT, whose
    rounding is relative to the largest output rather than to each one.
    """

    n, m = a.shape[0], v.shape[0]
    length = n + m - 1
    if m * length <= _DIRECT_MAX or a.dtype not in dtypes.INEXACT:
        windows = conv_patches(S.reshape(a, (1, 1, n)), (m,), padding=((m - 1, m - 1),), channels_last=False)
        return matmul(v, S.reshape(windows, (m, length)))
    vr = S.rev(v, (0,))
    size = _fast_len(length)
    if a.dtype in dtypes.COMPLEX:
        full = F.ifft(ops.multiply(F.fft(a, n=size), F.fft(vr, n=size)), n=size)
    else:
        full = F.irfft(ops.multiply(F.rfft(a, n=size), F.rfft(vr, n=size)), n=size)
    return full[:length]


def _prep_pair(a, v, op):
    x, y = S.reshape(asarray(a, op), (-1,)), S.reshape(asarray(v, op), (-1,))
    if asarray(a, op).ndim > 1 or asarray(v, op).ndim > 1:
        raise ValueError(f"numpy.{op}: object too deep for desired array (inputs must be 1-D)")
    if x.shape[0] == 0 or y.shape[0] == 0:
        raise ValueError(f"numpy.{op}: inputs cannot be empty")
    d = dtypes.result_type(x, y)
    if d == dtypes.bool_:
        d = dtypes.int64
    return (convert(x, d) if x.dtype != d else x), (convert(y, d) if y.dtype != d else y)


def _mode_window(full, n, m, mode, op, same_offset):
    if mode == "full":
        return full
    if mode == "same":
        off, length = same_offset, builtins.max(n, m)
    elif mode == "valid":
        off, length = builtins.min(n, m) - 1, builtins.max(n, m) - builtins.min(n, m) + 1
    else:
        raise ValueError(f"numpy.{op}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    return full[off: off + length]


def correlate(a, v, mode="valid") -> Tensor:
    """The cross-correlation of two 1-D sequences, ``c[k] = sum_n a[n + k] * conj(v[n])``, over the 'valid'
    (full overlap), 'same' or 'full' range. Summed directly as NumPy does, except for long floating-point
    inputs (length product above a million), which go through the FFT.

    >>> fnp.correlate(fnp.array([1.0, 2.0, 3.0]), fnp.array([0.0, 1.0, 0.5]))
    Tensor([3.5], dtype=float32)
    """
    x, y = _prep_pair(a, v, "correlate")
    n, m = x.shape[0], y.shape[0]
    full = _correlate_full(x, ops.conj(y))
    same = (m - 1) // 2 if n >= m else (n - 1) - (n - 1) // 2
    return _mode_window(full, n, m, mode, "correlate", same)


def convolve(a, v, mode="full") -> Tensor:
    """The discrete linear convolution of two 1-D sequences over the 'full', 'same' or 'valid' range (by FFT
    for long floating-point inputs, as ``correlate``).

    >>> fnp.convolve(fnp.array([1.0, 2.0, 3.0]), fnp.array([0.0, 1.0, 0.5]))
    Tensor([0. , 1. , 2.5, 4. , 1.5], dtype=float32)
    """
    x, y = _prep_pair(a, v, "convolve")
    n, m = x.shape[0], y.shape[0]
    if m > n:
        x, y = y, x
    full = _correlate_full(x, S.rev(y, (0,)))
    return _mode_window(full, n, m, mode, "convolve", (builtins.min(n, m) - 1) // 2)


def unwrap(p, discont=None, axis=-1, *, period=2 * math.pi) -> Tensor:
    """``p`` with jumps larger than ``discont`` (default ``period / 2``) between neighbours along ``axis``
    replaced by their equivalents modulo ``period``.

    >>> fnp.unwrap(fnp.array([0.0, 3.0, 6.5]))
    Tensor([0.      , 3.      , 0.216815], dtype=float32)
    """
    x = asarray(p, "unwrap")
    ax = axis_int(axis, x.ndim, "unwrap")
    dd = diff(x, axis=ax)
    if discont is None:
        discont = period / 2
    d = dtypes.result_type(dd, period)
    dd = convert(dd, d) if dd.dtype != d else dd
    if d in dtypes.INTEGER:
        high, rem = divmod(period, 2)
        ambiguous = rem == 0
    else:
        high, ambiguous = period / 2, True
    low = -high
    ddmod = ops.add(ops.remainder(ops.subtract(dd, low), period), low)
    if ambiguous:
        ddmod = _where(ops.logical_and(ops.equal(ddmod, low), ops.greater(dd, 0)), _c(high, d), ddmod)
    corr = ops.subtract(ddmod, dd)
    corr = _where(ops.less(ops.abs(dd), discont), _c(0, d), corr)
    xs = convert(x, d) if x.dtype != d else x
    n = xs.shape[ax]
    if n == 0:
        return xs
    rest = ops.add(_sl(xs, ax, 1, n), R.cumsum(corr, ax))
    return S.concatenate([_sl(xs, ax, 0, 1), rest], ax)


def _window(M, fn, op):
    M = static_int(M, op, "M")
    return _wrap(fn(M).astype(dtypes.default_float))


def bartlett(M) -> Tensor:
    """The Bartlett (triangular) window of ``M`` points.

    >>> fnp.bartlett(3)
    Tensor([0., 1., 0.], dtype=float32)
    """
    return _window(M, np.bartlett, "bartlett")


def blackman(M) -> Tensor:
    """The Blackman window of ``M`` points."""
    return _window(M, np.blackman, "blackman")


def hamming(M) -> Tensor:
    """The Hamming window of ``M`` points."""
    return _window(M, np.hamming, "hamming")


def hanning(M) -> Tensor:
    """The Hann window of ``M`` points.

    >>> fnp.hanning(3)
    Tensor([0., 1., 0.], dtype=float32)
    """
    return _window(M, np.hanning, "hanning")


def kaiser(M, beta) -> Tensor:
    """The Kaiser window of ``M`` points with shape parameter ``beta`` (differentiable in ``beta``).

    >>> fnp.kaiser(3, 0.0)
    Tensor([1., 1., 1.], dtype=float32)
    """
    M = static_int(M, "kaiser", "M")
    if not isinstance(beta, Tracer):
        return _wrap(np.kaiser(M, float(concrete(beta, "kaiser", ""))).astype(dtypes.default_float))

    b = inexact(beta)
    if M < 1:
        return S.full((0,), 0, b.dtype)
    if M == 1:
        return S.full((1,), 1, b.dtype)
    alpha = (M - 1) / 2.0
    n = np.arange(M, dtype=np.float64)
    r = _wrap(np.sqrt(np.clip(1 - ((n - alpha) / alpha) ** 2, 0, None)).astype(b.dtype))
    return ops.divide(i0(ops.multiply(b, r)), i0(b))

