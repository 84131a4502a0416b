"""``pad`` with all of NumPy's modes, one axis after another as NumPy fills them (so corners match).

Every mode is built from slices, reversals, concatenations and reductions of the input, so the result is
differentiable in the input (and in ``constant_values``/``end_values`` when they are tensors) and traces.
"""

from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes, ops
from ..core import Tensor, _wrap
from ..ops import reductions as R
from ..primitives import shape as S
from ..primitives.elementwise import convert
from ._creation import linspace
from ._statistics import median
from ._util import asarray

__all__ = ["pad"]

_KWARGS = {
    "empty": (),
    "edge": (),
    "wrap": (),
    "constant": ("constant_values",),
    "linear_ramp": ("end_values",),
    "maximum": ("stat_length",),
    "mean": ("stat_length",),
    "median": ("stat_length",),
    "minimum": ("stat_length",),
    "reflect": ("reflect_type",),
    "symmetric": ("reflect_type",),
}


def _pairs(x, ndim, as_index=False):
    """NumPy's broadcasting of a scalar, a (before, after) pair or one pair per axis to ``ndim`` pairs."""
    if x is None:
        return [(None, None)] * ndim
    if isinstance(x, Tensor) and not as_index:
        if x.ndim == 0:
            return [(x, x)] * ndim
        x = S.broadcast_to(x, (ndim, 2)) if x.ndim else x
        return [(x[i, 0], x[i, 1]) for i in range(ndim)]
    a = np.asarray(x)
    if as_index:
        a = np.round(a).astype(np.int64)
        if a.size and a.min() < 0:
            raise ValueError("numpy.pad: widths and lengths must be non-negative")
    if a.ndim < 3 and a.size == 1:
        v = a.reshape(-1)[0]
        return [(v, v)] * ndim
    if a.ndim < 3 and a.size == 2 and a.shape != (2, 1):
        v = a.reshape(-1)
        return [(v[0], v[1])] * ndim
    return [tuple(p) for p in np.broadcast_to(a, (ndim, 2)).tolist()]


def _sl(x, axis, lo, hi):
    start, limit = [0] * x.ndim, list(x.shape)
    start[axis], limit[axis] = lo, hi
    return S.slice_(x, start, limit)


def _rev(x, axis):
    return S.rev(x, (axis,))


def _fill(v, x, axis, width):
    """The scalar (or keepdims-reduced) ``v`` broadcast to a pad block of ``width`` along ``axis``."""
    shape = list(x.shape)
    shape[axis] = width
    if not isinstance(v, Tensor):
        v = np.asarray(v)
        if x.dtype in dtypes.INTEGER and v.dtype.kind in "fc":
            v = np.trunc(v.real)  # assigning a float to an integer array truncates
        v = _wrap(v.astype(x.dtype))
    elif v.dtype != x.dtype:
        v = convert(v, x.dtype)
    return S.broadcast_to(v, tuple(shape))


def _join(parts, axis):
    parts = [p for p in parts if p.shape[axis]]
    return S.concatenate(parts, axis) if len(parts) > 1 else parts[0]


def _round_like(v, d):
    return convert(ops.round(v), d) if d in dtypes.INTEGER and v.dtype != d else v


def _stat(mode, chunk, axis, d):
    if mode == "maximum":
        return R.max(chunk, axis=axis, keepdims=True)
    if mode == "minimum":
        return R.min(chunk, axis=axis, keepdims=True)
    c = chunk if chunk.dtype in dtypes.INEXACT else convert(chunk, dtypes.float64)
    if mode == "mean":
        return _round_like(R.mean(c, axis=axis, keepdims=True), d)

    return _round_like(median(c, axis=axis, keepdims=True), d)


def _reflect_axis(x, axis, left, right, odd, symmetric):
    period = x.shape[axis]
    edge = 1 if symmetric else 0
    while left > 0 or right > 0:
        n = x.shape[axis]
        if symmetric:
            old = n // period * period
        else:
            old = (n - 1) // (period - 1) * (period - 1)
        parts = []
        if left > 0:
            k = builtins.min(old, left)
            chunk = _rev(_sl(x, axis, 1 - edge, 1 - edge + k), axis)
            if odd:
                chunk = ops.subtract(ops.multiply(_sl(x, axis, 0, 1), 2), chunk)
            parts.append(chunk)
            left -= k
        parts.append(x)
        if right > 0:
            k = builtins.min(old, right)
            hi = n - 1 + edge
            chunk = _rev(_sl(x, axis, hi - k, hi), axis)
            if odd:
                chunk = ops.subtract(ops.multiply(_sl(x, axis, n - 1, n), 2), chunk)
            parts.append(chunk)
            right -= k
        x = _join(parts, axis)
    return x


def _wrap_axis(x, axis, left, right):
    period0 = x.shape[axis]
    while left > 0 or right > 0:
        n = x.shape[axis]
        period = n // period0 * period0
        parts = []
        if left > 0:
            k = builtins.min(period, left)
            parts.append(_sl(x, axis, period - k, period))
            left -= k
        parts.append(x)
        if right > 0:
            k = builtins.min(period, right)
            parts.append(_sl(x, axis, n - period, n - period + k))
            right -= k
        x = _join(parts, axis)
    return x


def _ramp(end, edge, width, axis, d):
    if not width:
        return None
    end_t = end if isinstance(end, Tensor) else _wrap(np.asarray(end))
    edge_s = S.squeeze(edge, (axis,))
    end_b = S.broadcast_to(convert(end_t, edge_s.dtype) if end_t.dtype != edge_s.dtype else end_t,
                           tuple(edge_s.shape))
    return linspace(end_b, edge_s, width, endpoint=False, dtype=d, axis=axis)


def pad(array, pad_width, mode="constant", **kwargs) -> Tensor:
    """``array`` padded by ``pad_width`` (an int, a (before, after) pair, one pair per axis, or a dict from axis
    to width) with NumPy's modes: 'constant' (``constant_values``), 'edge', 'linear_ramp' (``end_values``),
    'maximum'/'mean'/'median'/'minimum' (``stat_length``), 'reflect'/'symmetric' (``reflect_type`` 'even' or
    'odd'), 'wrap' and 'empty' (zeros). A callable mode writes in place and is not supported.

    >>> fnp.pad(fnp.array([1.0, 2.0, 3.0]), 2, mode="reflect")
    Tensor([3., 2., 1., 2., 3., 2., 1.], dtype=float32)
    """
    x = asarray(array, "pad")
    if callable(mode):
        raise TypeError("numpy.pad: a callable mode fills the array in place, which immutable tensors do not allow; "
                        "pad with a built-in mode and transform the result")
    if mode not in _KWARGS:
        raise ValueError(f"numpy.pad: mode {mode!r} is not supported; use one of {sorted(_KWARGS)}")
    extra = set(kwargs) - set(_KWARGS[mode])
    if extra:
        raise ValueError(f"numpy.pad: unsupported keyword arguments for mode {mode!r}: {sorted(extra)}")
    if isinstance(pad_width, dict):
        seq = [(0, 0)] * x.ndim
        for ax, w in pad_width.items():
            seq[ax] = (w, w) if isinstance(w, (builtins.int, np.integer)) else tuple(w)
        pad_width = seq
    pw = np.asarray(pad_width.numpy() if isinstance(pad_width, Tensor) else pad_width)
    if pw.dtype.kind not in "iu":
        raise TypeError(f"numpy.pad: pad_width must be of integral type, got {pw.dtype}")
    widths = [(int(a), int(b)) for a, b in _pairs(pw, x.ndim, as_index=True)]
    d = x.dtype
    if mode in ("constant", "empty"):
        values = _pairs(kwargs.get("constant_values", 0) if mode == "constant" else 0, x.ndim)
        for ax, ((lo, hi), (vlo, vhi)) in enumerate(zip(widths, values)):
            if lo or hi:
                x = _join([_fill(vlo, x, ax, lo), x, _fill(vhi, x, ax, hi)], ax)
        return x
    for ax, (lo, hi) in enumerate(widths):
        if x.shape[ax] == 0 and (lo or hi):
            raise ValueError(f"numpy.pad: can't extend empty axis {ax} using modes other than 'constant' or 'empty'")
    if x.size == 0:
        return x
    if mode == "edge":
        for ax, (lo, hi) in enumerate(widths):
            n = x.shape[ax]
            if lo or hi:
                x = _join([_fill(_sl(x, ax, 0, 1), x, ax, lo), x, _fill(_sl(x, ax, n - 1, n), x, ax, hi)], ax)
        return x
    if mode == "linear_ramp":
        ends = _pairs(kwargs.get("end_values", 0), x.ndim)
        for ax, ((lo, hi), (elo, ehi)) in enumerate(zip(widths, ends)):
            n = x.shape[ax]
            left = _ramp(elo, _sl(x, ax, 0, 1), lo, ax, d)
            right = _ramp(ehi, _sl(x, ax, n - 1, n), hi, ax, d)
            x = _join([p for p in (left, x, None if right is None else _rev(right, ax)) if p is not None], ax)
        return x
    if mode in ("maximum", "minimum", "mean", "median"):
        lengths = _pairs(kwargs.get("stat_length"), x.ndim, as_index=True)
        for ax, ((lo, hi), (llo, lhi)) in enumerate(zip(widths, lengths)):
            if not (lo or hi):
                continue
            n = x.shape[ax]
            llo = n if llo is None or llo > n else int(llo)
            lhi = n if lhi is None or lhi > n else int(lhi)
            if (llo == 0 or lhi == 0) and mode in ("maximum", "minimum"):
                raise ValueError("numpy.pad: stat_length of 0 yields no value for padding")
            s_lo = _stat(mode, _sl(x, ax, 0, llo), ax, d)
            s_hi = s_lo if llo == lhi == n else _stat(mode, _sl(x, ax, n - lhi, n), ax, d)
            x = _join([_fill(s_lo, x, ax, lo), x, _fill(s_hi, x, ax, hi)], ax)
        return x
    if mode in ("reflect", "symmetric"):
        method = kwargs.get("reflect_type", "even")
        if method not in ("even", "odd"):
            raise ValueError(f"numpy.pad: reflect_type must be 'even' or 'odd', got {method!r}")
        for ax, (lo, hi) in enumerate(widths):
            if not (lo or hi):
                continue
            if x.shape[ax] == 1:
                x = _join([_fill(x, x, ax, lo), x, _fill(x, x, ax, hi)], ax)
                continue
            x = _reflect_axis(x, ax, lo, hi, method == "odd", mode == "symmetric")
        return x
    for ax, (lo, hi) in enumerate(widths):
        if lo or hi:
            x = _wrap_axis(x, ax, lo, hi)
    return x
