"""Order statistics and summaries: median, quantile and percentile (NumPy's 13 methods, weights for
'inverted_cdf'), their NaN-ignoring variants, average, cov, corrcoef, histograms, bincount and digitize.

Quantiles sort along the reduced axes and gather, so they are differentiable in the data (the derivative of a
sorted value is that of the element it came from) and in ``q``, and they trace: the positions depend on ``q``
and on the count of non-NaN values through ordinary operations.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes, ops
from ..core import Tensor, Tracer, _wrap
from ..errors import DTypeError, ShapeError
from ..ops import reductions as R
from ..ops.indexing import take, take_along_axis
from ..ops.linalg_basic import diagonal, matmul
from ..ops.searching import searchsorted
from ..ops.searching import where as _where
from ..ops.sorting import sort as _sort
from ..primitives import shape as S
from ..primitives.elementwise import complex_from, convert
from ..primitives.sort import sort as _sort_multi
from ._creation import linspace
from ._util import asarray, axes_tuple, concrete, inexact, keepdims_arg, no_out, static_int

__all__ = [
    "median",
    "nanmedian",
    "quantile",
    "nanquantile",
    "percentile",
    "nanpercentile",
    "average",
    "cov",
    "corrcoef",
    "histogram",
    "histogram_bin_edges",
    "histogram2d",
    "histogramdd",
    "bincount",
    "digitize",
]

_F64 = dtypes.float64
_CONTINUOUS = {  # (alpha, beta) of Hyndman and Fan's continuous sample quantiles
    "interpolated_inverted_cdf": (0.0, 1.0),
    "hazen": (0.5, 0.5),
    "weibull": (0.0, 0.0),
    "median_unbiased": (1 / 3.0, 1 / 3.0),
    "normal_unbiased": (3 / 8.0, 3 / 8.0),
}
_DISCRETE = ("inverted_cdf", "closest_observation", "lower", "higher", "nearest")
_METHODS = ("linear", "averaged_inverted_cdf", "midpoint") + tuple(_CONTINUOUS) + _DISCRETE


def _c(v, d):
    return _wrap(np.asarray(v, dtype=d))


def _to_last(x, axes):
    """``x`` with ``axes`` merged into one last axis; returns it and the shape of the other axes."""
    rest = tuple(i for i in range(x.ndim) if i not in axes)
    y = S.transpose(x, rest + axes)
    rshape = tuple(x.shape[i] for i in rest)
    return S.reshape(y, rshape + (-1,)), rshape


def _finish(res, x, axes, rshape, qshape, keepdims):
    """``res`` of shape ``rshape + (nq,)`` as ``qshape + rshape`` (with the reduced axes kept as 1)."""
    nr = len(rshape)
    res = S.transpose(res, (nr,) + tuple(range(nr)))
    if keepdims:
        kept = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
        return S.reshape(res, qshape + kept)
    return S.reshape(res, qshape + rshape)


def _lerp(a, b, t):
    d = ops.subtract(b, a)
    return _where(ops.greater_equal(t, 0.5), ops.subtract(b, ops.multiply(d, ops.subtract(1.0, t))),
                  ops.add(a, ops.multiply(d, t)))


def _positions(method, n, q):
    """``(previous, next, gamma)`` float64 positions in the sorted values for sample size ``n`` (a tensor
    broadcasting against ``q``), or ``(index, None, None)`` for the methods that pick one element."""
    nf = convert(n, _F64) if isinstance(n, Tensor) else _c(n, _F64)
    if method == "inverted_cdf":
        i = ops.subtract(ops.multiply(nf, q), 1.0)
        prev = ops.floor(i)
        idx = _where(ops.equal(ops.subtract(i, prev), 0), prev, ops.add(prev, 1.0))
        return ops.maximum(idx, 0.0), None, None
    if method == "closest_observation":
        i = ops.subtract(ops.multiply(nf, q), 1.5)
        prev = ops.floor(i)
        odd = ops.equal(ops.remainder(prev, 2.0), 1.0)
        idx = _where(ops.logical_and(ops.equal(ops.subtract(i, prev), 0), odd), prev, ops.add(prev, 1.0))
        return ops.maximum(idx, 0.0), None, None
    lin = ops.multiply(ops.subtract(nf, 1.0), q)
    if method == "lower":
        return ops.floor(lin), None, None
    if method == "higher":
        return ops.ceil(lin), None, None
    if method == "nearest":
        return ops.round(lin), None, None
    if method in ("linear", "midpoint"):
        vi = lin if method == "linear" else ops.multiply(ops.add(ops.floor(lin), ops.ceil(lin)), 0.5)
    elif method == "averaged_inverted_cdf":
        vi = ops.subtract(ops.multiply(nf, q), 1.0)
    else:
        alpha, beta = _CONTINUOUS[method]
        vi = ops.subtract(ops.add(ops.multiply(nf, q), ops.add(alpha, ops.multiply(q, 1 - alpha - beta))), 1.0)
    prev = ops.floor(vi)
    nxt = ops.add(prev, 1.0)
    last = ops.subtract(nf, 1.0)
    above = ops.greater_equal(vi, last)
    below = ops.less(vi, 0.0)
    prev = _where(above, last, _where(below, _c(0, _F64), prev))
    nxt = _where(above, last, _where(below, _c(0, _F64), nxt))
    gamma = ops.subtract(vi, prev)
    if method == "averaged_inverted_cdf":
        gamma = _where(ops.equal(gamma, 0), _c(0.5, _F64), _c(1.0, _F64))
    elif method == "midpoint":
        gamma = _where(ops.equal(ops.remainder(vi, 1.0), 0), _c(0.0, _F64), _c(0.5, _F64))
    return prev, nxt, gamma


def _as_index(p, n_static):
    return convert(ops.clip(p, 0.0, float(builtins.max(n_static - 1, 0))), dtypes.int64)


def _pick(s, pos, shape):
    """The sorted values ``s`` at positions ``pos`` along the last axis, as ``shape``. Positions that are the
    same for every slice (concrete ``q``, no NaN counting) index one axis; others gather per slice."""
    pos = _as_index(pos, s.shape[-1])
    if not isinstance(pos, Tracer) and pos.size == pos.shape[-1]:
        return S.broadcast_to(take(s, S.reshape(pos, (-1,)), axis=-1), shape)
    return take_along_axis(s, S.broadcast_to(pos, shape), axis=-1)


def _q_values(q, op, scale):
    if isinstance(q, Tensor):
        qt = inexact(q)
        qt = qt if qt.dtype == _F64 else convert(qt, _F64)
    else:
        qt = _wrap(np.asarray(q, dtype=np.float64))
    if scale != 1:
        qt = ops.divide(qt, float(scale))
    if not isinstance(qt, Tracer):
        v = qt.numpy()
        if v.size and not (np.all(v >= 0) and np.all(v <= 1)):
            raise ValueError(f"numpy.{op}: quantiles must be in the range [0, {scale}]")
    return qt


def _quantile(a, q, axis, method, keepdims, weights, op, nan=False, scale=1):
    if method not in _METHODS:
        raise ValueError(f"numpy.{op}: {method!r} is not a valid method; use one of {list(_METHODS)}")
    x = asarray(a, op)
    if x.dtype in dtypes.COMPLEX:
        raise DTypeError(f"numpy.{op}: complex values have no order")
    discrete = method in _DISCRETE
    if not discrete or weights is not None:
        x = inexact(x)
    axes = axes_tuple(axis, x.ndim, op)
    qt = _q_values(q, op, scale)
    qshape = tuple(qt.shape)
    xm, rshape = _to_last(x, axes)
    n = xm.shape[-1]
    if n == 0:
        raise ValueError(f"numpy.{op}: cannot take a quantile of an empty slice")
    qv = S.reshape(qt, (1,) * len(rshape) + (-1,))
    if weights is not None:
        res = _weighted(x, xm, weights, qv, axes, rshape, method, op)
    else:
        s = _sort(xm, axis=-1)
        count = R.sum(ops.logical_not(ops.isnan(xm)), axis=-1, keepdims=True) if (
            nan and x.dtype in dtypes.INEXACT) else n
        prev, nxt, gamma = _positions(method, count, qv)
        nq = builtins.max(1, int(np.prod(qshape, dtype=np.int64)))
        shape = rshape + (nq,)
        lo = _pick(s, prev, shape)
        if gamma is None:
            res = lo
        else:
            hi = _pick(s, nxt, shape)
            g = S.broadcast_to(gamma, shape)
            res = _lerp(lo, hi, g if g.dtype == lo.dtype else convert(g, lo.dtype))
        if x.dtype in dtypes.INEXACT:
            if nan and isinstance(count, Tensor):
                bad = ops.equal(count, 0)
            else:
                bad = ops.isnan(s[..., -1:])
            res = _where(bad, _c(np.nan, res.dtype), res)
    return _finish(res, x, axes, rshape, qshape, keepdims)


def _weighted(x, xm, weights, qv, axes, rshape, method, op):
    if method != "inverted_cdf":
        raise ValueError(f"numpy.{op}: only method='inverted_cdf' supports weights")
    w = asarray(weights, op)
    if tuple(w.shape) != tuple(x.shape):
        if w.ndim != 1 or len(axes) != 1 or w.shape[0] != x.shape[axes[0]]:
            raise ShapeError(f"numpy.{op}: weights of shape {tuple(w.shape)} must match the data "
                             f"{tuple(x.shape)} or be 1-D along the one reduced axis")
        w = S.broadcast_in_dim(w, tuple(x.shape), (axes[0],))
    if type(w) is Tensor and bool(concrete(R.any(ops.less(w, 0)), op, "")):
        raise ValueError(f"numpy.{op}: weights must be non-negative")
    wm, _ = _to_last(inexact(w), axes)

    s, ws = _sort_multi([xm, wm if wm.dtype == xm.dtype else convert(wm, xm.dtype)], xm.ndim - 1, num_keys=1)
    cdf = R.cumsum(convert(ws, _F64), axis=-1)
    cdf = ops.divide(cdf, cdf[..., -1:])
    cdf = _where(ops.equal(cdf, 0), _c(-1.0, _F64), cdf)
    n = xm.shape[-1]
    # the first position whose cumulative weight reaches q (searchsorted, side='left')
    below = ops.less(S.expand_dims(cdf, [cdf.ndim - 1]), S.expand_dims(qv, [qv.ndim]))
    idx = ops.minimum(R.sum(below, axis=-1), n - 1)
    shape = rshape + (idx.shape[-1],)
    res = take_along_axis(s, S.broadcast_to(idx, shape), axis=-1)
    return _where(ops.isnan(s[..., -1:]), _c(np.nan, res.dtype), res) if res.dtype in dtypes.INEXACT else res


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
             weights=None) -> Tensor:
    """The ``q``-th quantiles (``q`` in [0, 1], a scalar or an array, whose shape leads the result) over
    ``axis``, by one of NumPy's methods (default 'linear'); ``weights`` need method 'inverted_cdf'. A NaN
    in a slice makes its quantiles NaN.

    >>> fnp.quantile(fnp.array([1.0, 2.0, 3.0, 4.0]), 0.5)
    Tensor(2.5, dtype=float32)
    """
    no_out(out, "quantile")
    return _quantile(a, q, axis, method, keepdims, weights, "quantile")


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
               weights=None) -> Tensor:
    """``quantile`` with ``q`` in percent ([0, 100]).

    >>> fnp.percentile(fnp.array([1.0, 2.0, 3.0, 4.0]), [25, 75])
    Tensor([1.75, 3.25], dtype=float32)
    """
    no_out(out, "percentile")
    return _quantile(a, q, axis, method, keepdims, weights, "percentile", scale=100)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                weights=None) -> Tensor:
    """``quantile`` of the non-NaN elements (NaN for slices with none).

    >>> fnp.nanquantile(fnp.array([1.0, float("nan"), 3.0]), 0.5)
    Tensor(2., dtype=float32)
    """
    no_out(out, "nanquantile")
    if weights is not None:
        raise ValueError("numpy.nanquantile: weights are supported by fnp.quantile only; drop NaN values first")
    return _quantile(a, q, axis, method, keepdims, None, "nanquantile", nan=True)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                  weights=None) -> Tensor:
    """``percentile`` of the non-NaN elements."""
    no_out(out, "nanpercentile")
    if weights is not None:
        raise ValueError("numpy.nanpercentile: weights are supported by fnp.percentile only; drop NaN values first")
    return _quantile(a, q, axis, method, keepdims, None, "nanpercentile", nan=True, scale=100)


def _median(a, axis, keepdims, op, nan):
    x = inexact(asarray(a, op))
    axes = axes_tuple(axis, x.ndim, op)
    xm, rshape = _to_last(x, axes)
    n = xm.shape[-1]
    if n == 0:
        raise ValueError(f"numpy.{op}: cannot take the median of an empty slice")
    s = _sort(xm, axis=-1)
    if nan:
        cnt = R.sum(ops.logical_not(ops.isnan(xm)), axis=-1, keepdims=True)
        lo_i = ops.clip(ops.floor_divide(ops.subtract(cnt, 1), 2), 0, n - 1)
        hi_i = ops.clip(ops.floor_divide(cnt, 2), 0, n - 1)
        bad = ops.equal(cnt, 0)
    else:
        lo_i = _wrap(np.full((1,) * len(rshape) + (1,), (n - 1) // 2, np.int64))
        hi_i = _wrap(np.full((1,) * len(rshape) + (1,), n // 2, np.int64))
        bad = ops.isnan(s[..., -1:])
    lo, hi = _pick(s, lo_i, rshape + (1,)), _pick(s, hi_i, rshape + (1,))
    mid = _where(ops.equal(lo_i, hi_i), lo, ops.divide(ops.add(lo, hi), 2.0))
    mid = _where(bad, _c(np.nan, mid.dtype), mid)
    return _finish(mid, x, axes, rshape, (), keepdims)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False) -> Tensor:
    """The median over ``axis``: the middle value, or the mean of the two middle values (NaN if the slice
    holds NaN).

    >>> fnp.median([[1.0, 3.0, 2.0], [4.0, 6.0, 5.0]], axis=1)
    Tensor([2., 5.], dtype=float32)
    """
    no_out(out, "median")
    return _median(a, axis, keepdims, "median", False)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False) -> Tensor:
    """The median of the non-NaN elements (NaN for slices with none)."""
    no_out(out, "nanmedian")

    return _median(a, axis, keepdims_arg(keepdims), "nanmedian", True)


def average(a, axis=None, weights=None, returned=False, *, keepdims=np._NoValue):
    """The (weighted) mean over ``axis``: ``sum(a * w) / sum(w)``. 1-D ``weights`` apply along a single
    ``axis``. With ``returned`` also gives the sum of the weights (broadcast like the result).

    >>> fnp.average([1.0, 2.0, 3.0], weights=[3.0, 0.0, 1.0])
    Tensor(1.5, dtype=float32)
    """

    x = asarray(a, "average")
    kd = keepdims_arg(keepdims)
    axes = axes_tuple(axis, x.ndim, "average")
    if weights is None:
        x = inexact(x)
        avg = R.mean(x, axis=axes, keepdims=kd)
        if not returned:
            return avg
        n = 1
        for ax in axes:
            n *= x.shape[ax]
        return avg, S.full(tuple(avg.shape), n, avg.dtype)
    w = asarray(weights, "average")
    d = dtypes.result_type(x, w)
    d = d if d in dtypes.INEXACT else dtypes.default_float
    x, w = convert(x, d) if x.dtype != d else x, convert(w, d) if w.dtype != d else w
    if tuple(w.shape) != tuple(x.shape):
        if axis is None:
            raise TypeError("numpy.average: axis must be given when the shapes of a and weights differ")
        if w.ndim != 1 or len(axes) != 1:
            raise TypeError("numpy.average: 1-D weights need a single axis")
        if w.shape[0] != x.shape[axes[0]]:
            raise ValueError(f"numpy.average: {w.shape[0]} weights for an axis of length {x.shape[axes[0]]}")
        w = S.broadcast_in_dim(w, tuple(x.shape), (axes[0],))
    scl = R.sum(w, axis=axes, keepdims=kd)
    if type(scl) is Tensor and bool(concrete(R.any(ops.equal(scl, 0)), "average", "")):
        raise ZeroDivisionError("numpy.average: weights sum to zero, can't be normalized")
    avg = ops.divide(R.sum(ops.multiply(x, w), axis=axes, keepdims=kd), scl)
    return (avg, S.broadcast_to(scl, tuple(avg.shape))) if returned else avg


def _rows(m, rowvar, d, op):
    x = asarray(m, op)
    if x.ndim > 2:
        raise ValueError(f"numpy.{op}: m has more than 2 dimensions")
    x = convert(x, d) if x.dtype != d else x
    x = S.reshape(x, (1,) * (2 - x.ndim) + tuple(x.shape))
    if not rowvar and x.shape[0] != 1:
        x = S.transpose(x, (1, 0))
    return x


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None) -> Tensor:
    """The covariance matrix of the variables in the rows of ``m`` (columns with ``rowvar=False``), with
    ``y`` as further variables. Normalized by ``N - 1`` (``N`` with ``bias``, ``N - ddof`` with ``ddof``);
    ``fweights`` are integer frequencies, ``aweights`` observation weights.

    >>> fnp.cov(fnp.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    Tensor([[ 1., -1.],
           [-1.,  1.]], dtype=float32)
    """
    parts = [asarray(m, "cov")] + ([] if y is None else [asarray(y, "cov")])
    if dtype is not None:
        d = dtypes.canonicalize(dtype)
    else:
        d = dtypes.result_type(*parts)
        d = d if d in dtypes.INEXACT else dtypes.default_float
    X = _rows(parts[0], rowvar, d, "cov")
    if X.shape[0] == 0:
        return S.full((0, 0), 0, d)
    if y is not None:
        X = S.concatenate([X, _rows(parts[1], rowvar, d, "cov")], 0)
    if ddof is None:
        ddof = 0 if bias else 1
    n = X.shape[1]
    w = None
    if fweights is not None:
        fw = asarray(fweights, "cov")
        if fw.ndim > 1 or fw.shape[0] != n:
            raise RuntimeError(f"numpy.cov: fweights must be 1-D with {n} entries")
        if fw.dtype not in dtypes.INTEGER:
            v = concrete(fw, "cov", "")
            if not np.all(v == np.around(v)):
                raise TypeError("numpy.cov: fweights must be integers")
        w = convert(fw, d)
    if aweights is not None:
        aw = asarray(aweights, "cov")
        if aw.ndim > 1 or aw.shape[0] != n:
            raise RuntimeError(f"numpy.cov: aweights must be 1-D with {n} entries")
        aw = convert(aw, d) if aw.dtype != d else aw
        w = aw if w is None else ops.multiply(w, aw)
    if w is None:
        avg = R.mean(X, axis=1, keepdims=True)
        fact = _c(builtins.max(n - ddof, 0), dtypes.real_dtype(d))
        Xc = ops.subtract(X, avg)
        XT = S.transpose(Xc, (1, 0))
    else:
        w_sum = R.sum(w)
        avg = ops.divide(R.sum(ops.multiply(X, w), axis=1, keepdims=True), w_sum)
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = ops.subtract(w_sum, ddof)
        else:
            fact = ops.subtract(w_sum, ops.divide(ops.multiply(R.sum(ops.multiply(w, aw)), ddof), w_sum))
        fact = ops.real(ops.maximum(ops.real(fact), 0.0)) if fact.dtype in dtypes.COMPLEX else ops.maximum(fact, 0.0)
        Xc = ops.subtract(X, avg)
        XT = S.transpose(ops.multiply(Xc, w), (1, 0))

    c = matmul(Xc, ops.conj(XT))
    c = ops.divide(c, fact if fact.dtype == c.dtype else convert(fact, c.dtype))
    return S.squeeze(c, tuple(i for i, s in enumerate(c.shape) if s == 1))


def corrcoef(x, y=None, rowvar=True, *, dtype=None) -> Tensor:
    """Pearson correlation coefficients of the variables in the rows of ``x`` (columns with
    ``rowvar=False``), clipped to [-1, 1].

    >>> fnp.corrcoef(fnp.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    Tensor([[ 1., -1.],
           [-1.,  1.]], dtype=float32)
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return ops.divide(c, c)

    sd = ops.sqrt(ops.real(diagonal(c)))
    sd = convert(sd, c.dtype) if sd.dtype != c.dtype else sd
    c = ops.divide(ops.divide(c, S.reshape(sd, (-1, 1))), S.reshape(sd, (1, -1)))
    if c.dtype in dtypes.COMPLEX:
        return complex_from(ops.clip(ops.real(c), -1.0, 1.0), ops.clip(ops.imag(c), -1.0, 1.0))
    return ops.clip(c, -1.0, 1.0)


def _outer_edges(x, range_, op):
    if range_ is not None:
        lo, hi = range_
        if isinstance(lo, Tracer) or isinstance(hi, Tracer):
            return asarray(lo, op), asarray(hi, op)
        lo, hi = float(lo), float(hi)
        if lo > hi:
            raise ValueError(f"numpy.{op}: max must be larger than min in range parameter")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"numpy.{op}: supplied range of [{lo}, {hi}] is not finite")
    elif x.size == 0:
        lo, hi = 0.0, 1.0
    else:
        lo, hi = R.min(x), R.max(x)
        if type(x) is Tensor:
            lo, hi = float(lo), float(hi)
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise ValueError(f"numpy.{op}: autodetected range of [{lo}, {hi}] is not finite")
    if isinstance(lo, float):
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        return lo, hi
    same = ops.equal(lo, hi)
    return _where(same, ops.subtract(lo, 0.5), lo), _where(same, ops.add(hi, 0.5), hi)


def _edges(x, bins, range_, weights, op):
    """``(edges, uniform)``: the bin edges, and whether they are evenly spaced from ``linspace``."""

    if isinstance(bins, str):
        v = concrete(x, op, "pass an integer number of bins or explicit edges")
        w = None if weights is None else concrete(asarray(weights, op), op, "")
        e = np.histogram_bin_edges(v, bins, range_, w)
        return _wrap(e.astype(x.dtype if x.dtype in dtypes.INEXACT else dtypes.default_float)), False
    if isinstance(bins, (builtins.int, np.integer)) or (not isinstance(bins, Tensor) and np.ndim(bins) == 0):
        nb = static_int(bins, op, "bins")
        if nb < 1:
            raise ValueError(f"numpy.{op}: bins must be a positive integer, got {nb}")
        lo, hi = _outer_edges(x, range_, op)
        d = x.dtype if x.dtype in dtypes.INEXACT else dtypes.default_float
        return linspace(lo, hi, nb + 1, endpoint=True, dtype=d), True
    e = asarray(bins, op)
    if e.ndim != 1:
        raise ValueError(f"numpy.{op}: bins must be 1-D, got shape {tuple(e.shape)}")
    if type(e) is Tensor and e.shape[0] > 1 and bool(np.any(np.diff(e.numpy()) < 0)):
        raise ValueError(f"numpy.{op}: bins must increase monotonically")
    return e, False


def _bin_index(x, edges, uniform):
    """The bin of each value (``len(edges) - 1`` for values outside), the last bin closed on the right."""
    nb = edges.shape[0] - 1
    lo = edges[0]
    hi = edges[nb]
    if uniform:
        # arithmetic first, then the comparisons with the edges themselves settle rounding at the borders
        norm = ops.divide(float(nb), ops.subtract(hi, lo))
        f = ops.multiply(ops.subtract(x, lo), norm)
        i = ops.clip(convert(ops.floor(_where(ops.isfinite(f), f, _c(0, f.dtype))), dtypes.int64), 0, nb - 1)

        left = take(edges, i)
        right = take(edges, ops.add(i, 1))
        i = _where(ops.less(x, left), ops.subtract(i, 1), i)
        i = _where(ops.logical_and(ops.greater_equal(x, right), ops.not_equal(i, nb - 1)), ops.add(i, 1), i)
    else:
        i = ops.subtract(searchsorted(edges, x, side="right"), 1)
        i = _where(ops.equal(x, hi), _c(nb - 1, dtypes.int64), i)
    inside = ops.logical_and(ops.greater_equal(x, lo), ops.less_equal(x, hi))
    return _where(inside, i, _c(nb, dtypes.int64))


def _count(index, weights, size):
    """Weighted counts of ``index`` values in ``range(size)``; the value ``size`` is dropped."""
    if weights is None:
        w = S.full(tuple(index.shape), 1, dtypes.int64)
    else:
        w = weights
    acc = S.full((size + 1,), 0, w.dtype)
    return acc.at[index].add(w)[:size]


def histogram(a, bins=10, range=None, density=None, weights=None) -> tuple[Tensor, Tensor]:
    """Counts of ``a`` (flattened) in ``bins`` (a number of equal bins over ``range`` or the data's
    extent, explicit edges, or one of NumPy's estimator names) and the bin edges. Counts are
    differentiable in ``weights``; ``density`` normalizes to a probability density.

    >>> fnp.histogram(fnp.array([1.0, 2.0, 2.5, 4.0]), bins=3)[0]
    Tensor([1, 2, 1], dtype=int64)
    """
    x = S.reshape(asarray(a, "histogram"), (-1,))
    w = None
    if weights is not None:
        w = S.reshape(asarray(weights, "histogram"), (-1,))
        if w.shape != x.shape:
            raise ValueError("numpy.histogram: weights should have the same shape as a")
    edges, uniform = _edges(x, bins, range, weights, "histogram")
    xe = convert(x, edges.dtype) if x.dtype != edges.dtype else x
    hist = _count(_bin_index(xe, edges, uniform), w, edges.shape[0] - 1)
    if density:
        d = edges.dtype if edges.dtype in dtypes.INEXACT else dtypes.default_float
        hf = convert(hist, d) if hist.dtype != d else hist
        widths = ops.subtract(edges[1:], edges[:-1])
        return ops.divide(ops.divide(hf, convert(widths, d) if widths.dtype != d else widths), R.sum(hf)), edges
    return hist, edges


def histogram_bin_edges(a, bins=10, range=None, weights=None) -> Tensor:
    """The edges ``histogram`` would use.

    >>> fnp.histogram_bin_edges(fnp.array([0.0, 1.0]), bins=2)
    Tensor([0. , 0.5, 1. ], dtype=float32)
    """
    x = S.reshape(asarray(a, "histogram_bin_edges"), (-1,))
    return _edges(x, bins, range, weights, "histogram_bin_edges")[0]


def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """The D-dimensional histogram of ``sample`` (N points as an (N, D) array, or D arrays of N values):
    ``bins`` is a number, one number or edge array per dimension; returns the counts (as floats, like NumPy's:
    the edges' dtype) and the list of edges.

    >>> h, e = fnp.histogramdd(fnp.array([[0.0, 0.0], [1.0, 1.0]]), bins=2)
    >>> h
    Tensor([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    if isinstance(sample, (list, tuple)):
        cols = [S.reshape(asarray(s, "histogramdd"), (-1,)) for s in sample]
    else:
        s = asarray(sample, "histogramdd")
        s = S.reshape(s, (-1, 1)) if s.ndim == 1 else s
        cols = [s[:, i] for i in builtins.range(s.shape[1])]
    D = len(cols)
    if isinstance(bins, (builtins.int, np.integer)):
        bins = [bins] * D
    if len(bins) != D:
        raise ValueError(f"numpy.histogramdd: {len(bins)} bin specifications for {D} dimensions")
    ranges = [None] * D if range is None else list(range)
    edges, idx, sizes = [], [], []
    for col, b, r in zip(cols, bins, ranges):
        e, uniform = _edges(col, b, r, None, "histogramdd")
        xe = convert(col, e.dtype) if col.dtype != e.dtype else col
        edges.append(e)
        idx.append(_bin_index(xe, e, uniform))
        sizes.append(e.shape[0] - 1)
    flat, outside = None, None
    for i, n in zip(idx, sizes):
        out_i = ops.equal(i, n)
        outside = out_i if outside is None else ops.logical_or(outside, out_i)
        flat = i if flat is None else ops.add(ops.multiply(flat, n), i)
    total = int(np.prod(sizes, dtype=np.int64))
    flat = _where(outside, _c(total, dtypes.int64), flat)
    w = None if weights is None else S.reshape(asarray(weights, "histogramdd"), (-1,))
    hist = _count(flat, w, total)
    d = dtypes.result_type(*edges)
    if hist.dtype not in dtypes.INEXACT:
        hist = convert(hist, d if d in dtypes.INEXACT else dtypes.default_float)
    hist = S.reshape(hist, tuple(sizes))
    if density:
        hist = ops.divide(hist, R.sum(hist))
        for k, e in enumerate(edges):
            widths = ops.subtract(e[1:], e[:-1])
            shape = [1] * D
            shape[k] = sizes[k]
            hist = ops.divide(hist, S.reshape(convert(widths, hist.dtype), tuple(shape)))
    return hist, edges


def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    """The 2-D histogram of the points ``(x[i], y[i])``: counts (x along the first axis) and both edges.

    >>> fnp.histogram2d(fnp.array([0.0, 1.0]), fnp.array([0.0, 1.0]), bins=2)[0]
    Tensor([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    if not isinstance(bins, (builtins.int, np.integer, str)) and len(bins) != 2:
        bins = [bins, bins]
    h, e = histogramdd([x, y], bins, range, density, weights)
    return h, e[0], e[1]


def bincount(x, /, weights=None, minlength=0, *, length=None) -> Tensor:
    """How often each non-negative integer occurs in the 1-D ``x`` (summing ``weights`` instead of ones).
    The output length is ``max(x) + 1`` (at least ``minlength``), which needs concrete values; under
    ``jit``/``vmap`` pass ``length=`` (values at or beyond it are dropped).

    >>> fnp.bincount(fnp.array([0, 1, 1, 3]))
    Tensor([1, 2, 0, 1], dtype=int64)
    """
    v = asarray(x, "bincount")
    if v.ndim != 1:
        raise ValueError(f"numpy.bincount: x must be 1-D, got shape {tuple(v.shape)}")
    if v.dtype not in dtypes.INTEGER and v.dtype != dtypes.bool_:
        raise TypeError(f"numpy.bincount: x must hold integers, got {v.dtype.name}")
    if length is None:
        c = concrete(v, "bincount", "pass length= (the number of bins) to fix the output shape")
        if c.size and c.min() < 0:
            raise ValueError("numpy.bincount: x must be non-negative")
        length = builtins.max(int(c.max()) + 1 if c.size else 0, int(minlength))
    length = static_int(length, "bincount", "length")
    w = None
    if weights is not None:
        w = inexact(asarray(weights, "bincount"))
        if tuple(w.shape) != tuple(v.shape):
            raise ValueError("numpy.bincount: weights must have the shape of x")
    vi = convert(v, dtypes.int64)
    ok = ops.logical_and(ops.greater_equal(vi, 0), ops.less(vi, length))
    return _count(_where(ok, vi, _c(length, dtypes.int64)), w, length)


def digitize(x, bins, right=False) -> Tensor:
    """The index of the bin each value of ``x`` falls in, for monotonic ``bins`` (increasing or decreasing):
    ``bins[i-1] <= x < bins[i]`` (``<`` and ``<=`` swapped with ``right``).

    >>> fnp.digitize(fnp.array([0.5, 1.5, 3.0]), fnp.array([0.0, 1.0, 2.0]))
    Tensor([1, 2, 3], dtype=int64)
    """

    v = asarray(x, "digitize")
    b = asarray(bins, "digitize")
    if b.ndim != 1:
        raise ValueError("numpy.digitize: bins must be 1-D")
    if v.dtype in dtypes.COMPLEX:
        raise TypeError("numpy.digitize: x may not be complex")
    n = b.shape[0]
    inc = searchsorted(b, v, side="left" if right else "right")
    dec = ops.subtract(n, searchsorted(S.rev(b, (0,)), v, side="right" if right else "left"))
    if type(b) is Tensor:
        d = np.diff(b.numpy())
        if np.all(d >= 0):
            return inc
        if np.all(d <= 0):
            return dec
        raise ValueError("numpy.digitize: bins must be monotonically increasing or decreasing")
    return _where(ops.less_equal(b[0], b[n - 1]), inc, dec) if n else inc
