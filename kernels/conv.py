"""im2col and col2im for 1-d and 2-d convolutions on channels-last arrays (numba, compiled once and cached).

NumPy spends most of col2im in the inner loops of strided adds over short channel runs; these loops read and
write whole channel rows and skip padding by bounds checks instead of materializing a padded copy.

Layouts: ``x: (N, H, W, C)`` (1-d: ``H == 1``), patches ``(N, OH, OW, KH, KW, C)``. The ``_cf`` variants work
channels-first: ``x: (N, C, H, W)``, patches ``(N, C, KH, KW, OH, OW)``; their inner loops copy or add whole
output rows, which are contiguous in both arrays.

Example:
    >>> import numpy as np

from . import diskcache
    >>> from funclib.kernels import conv
    >>> conv.im2col(np.ones((1, 3, 3, 1), np.float32), (2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1)).shape
    (1, 2, 2, 2, 2, 1)
"""

from __future__ import annotations

import numpy as np

from . import diskcache

__all__ = ["im2col", "col2im", "im2col_cf", "col2im_cf", "SUPPORTED"]

SUPPORTED = (np.dtype(np.float32), np.dtype(np.float64))


@diskcache.njit(nogil=True)
def _im2col(x, out, sh, sw, ph, pw, dh, dw):  # pragma: no cover - compiled
    n_, h_, w_, c_ = x.shape
    oh_, ow_, kh_, kw_ = out.shape[1], out.shape[2], out.shape[3], out.shape[4]
    for n in range(n_):
        for i in range(oh_):
            for j in range(ow_):
                for a in range(kh_):
                    r = i * sh + a * dh - ph
                    for b in range(kw_):
                        q = j * sw + b * dw - pw
                        if 0 <= r < h_ and 0 <= q < w_:
                            for c in range(c_):
                                out[n, i, j, a, b, c] = x[n, r, q, c]
                        else:
                            for c in range(c_):
                                out[n, i, j, a, b, c] = 0


@diskcache.njit(nogil=True)
def _col2im(cols, out, sh, sw, ph, pw, dh, dw):  # pragma: no cover - compiled
    n_, oh_, ow_, kh_, kw_, c_ = cols.shape
    h_, w_ = out.shape[1], out.shape[2]
    for n in range(n_):
        for i in range(oh_):
            for j in range(ow_):
                for a in range(kh_):
                    r = i * sh + a * dh - ph
                    if r < 0 or r >= h_:
                        continue
                    for b in range(kw_):
                        q = j * sw + b * dw - pw
                        if q < 0 or q >= w_:
                            continue
                        for c in range(c_):
                            out[n, r, q, c] += cols[n, i, j, a, b, c]


def _two_d(strides, padding, dilation):
    if len(strides) == 1:
        return (1, strides[0]), ((0, 0), tuple(padding[0])), (1, dilation[0])
    return tuple(strides), tuple(tuple(p) for p in padding), tuple(dilation)


def im2col(x: np.ndarray, kernel_shape, strides, padding, dilation) -> np.ndarray:
    """Patches ``(N, *out, *kernel, C)`` of a channels-last ``x: (N, *spatial, C)`` (1 or 2 spatial axes) with
    zero padding ``((lo, hi), ...)``; float32/float64 only."""
    nd = len(kernel_shape)
    x4 = np.ascontiguousarray(x if nd == 2 else x[:, None])
    k = tuple(kernel_shape) if nd == 2 else (1, kernel_shape[0])
    s, p, d = _two_d(strides, padding, dilation)
    osz = [(x4.shape[1 + i] + p[i][0] + p[i][1] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    out = np.empty((x4.shape[0], osz[0], osz[1], k[0], k[1], x4.shape[3]), x4.dtype)
    _im2col(x4, out, s[0], s[1], p[0][0], p[1][0], d[0], d[1])
    return out if nd == 2 else out[:, 0, :, 0]


def col2im(cols: np.ndarray, input_shape, strides, padding, dilation) -> np.ndarray:
    """The adjoint of ``im2col``: sum patches ``(N, *out, *kernel, C)`` into ``(N, *input_shape, C)``."""
    nd = len(input_shape)
    c4 = np.ascontiguousarray(cols if nd == 2 else cols[:, None, :, None])
    shape = tuple(input_shape) if nd == 2 else (1, input_shape[0])
    s, p, d = _two_d(strides, padding, dilation)
    out = np.zeros((c4.shape[0], shape[0], shape[1], c4.shape[-1]), c4.dtype)
    _col2im(c4, out, s[0], s[1], p[0][0], p[1][0], d[0], d[1])
    return out if nd == 2 else out[:, 0]


@diskcache.njit(nogil=True)
def _im2col_cf(x, out, sh, sw, dh, dw):  # pragma: no cover - compiled
    # x is already padded, so every window lies inside it; per-plane and per-row views keep the inner loop a
    # plain 1-d copy, and with unit strides its index j + b is provably non-negative (no wraparound check), so
    # it vectorizes
    n_, c_ = x.shape[0], x.shape[1]
    kh_, kw_, oh_, ow_ = out.shape[2], out.shape[3], out.shape[4], out.shape[5]
    unit = sw == 1 and dw == 1
    for n in range(n_):
        for c in range(c_):
            x2 = x[n, c]
            o4 = out[n, c]
            for a in range(kh_):
                for b in range(kw_):
                    for i in range(oh_):
                        xr = x2[i * sh + a * dh]
                        orow = o4[a, b, i]
                        if unit:
                            for j in range(ow_):
                                orow[j] = xr[j + b]
                        else:
                            for j in range(ow_):
                                orow[j] = xr[j * sw + b * dw]


@diskcache.njit(nogil=True)
def _col2im_cf(cols, out, sh, sw, dh, dw):  # pragma: no cover - compiled
    # out is the zero-initialized padded input; the caller crops it
    n_, c_, kh_, kw_, oh_, ow_ = cols.shape
    unit = sw == 1 and dw == 1
    for n in range(n_):
        for c in range(c_):
            o2 = out[n, c]
            c4 = cols[n, c]
            for a in range(kh_):
                for i in range(oh_):
                    orow = o2[i * sh + a * dh]
                    for b in range(kw_):
                        crow = c4[a, b, i]
                        if unit:
                            for j in range(ow_):
                                orow[j + b] += crow[j]
                        else:
                            for j in range(ow_):
                                orow[j * sw + b * dw] += crow[j]


def im2col_cf(x: np.ndarray, kernel_shape, strides, padding, dilation) -> np.ndarray:
    """Patches ``(N, C, *kernel, *out)`` of a channels-first ``x: (N, C, *spatial)`` (1 or 2 spatial axes)."""
    nd = len(kernel_shape)
    x4 = x if nd == 2 else x[:, :, None]
    k = tuple(kernel_shape) if nd == 2 else (1, kernel_shape[0])
    s, p, d = _two_d(strides, padding, dilation)
    if any(lo or hi for lo, hi in p):
        x4 = np.pad(x4, ((0, 0), (0, 0), p[0], p[1]))
    x4 = np.ascontiguousarray(x4)
    osz = [(x4.shape[2 + i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    out = np.empty((x4.shape[0], x4.shape[1], k[0], k[1], osz[0], osz[1]), x4.dtype)
    _im2col_cf(x4, out, s[0], s[1], d[0], d[1])
    return out if nd == 2 else out[:, :, 0, :, 0]


def col2im_cf(cols: np.ndarray, input_shape, strides, padding, dilation) -> np.ndarray:
    """The adjoint of ``im2col_cf``: sum patches ``(N, C, *kernel, *out)`` into ``(N, C, *input_shape)``."""
    nd = len(input_shape)
    c6 = np.ascontiguousarray(cols if nd == 2 else cols[:, :, None, :, None])
    shape = tuple(input_shape) if nd == 2 else (1, input_shape[0])
    s, p, d = _two_d(strides, padding, dilation)
    padded = (shape[0] + p[0][0] + p[0][1], shape[1] + p[1][0] + p[1][1])
    out = np.zeros((c6.shape[0], c6.shape[1], *padded), c6.dtype)
    _col2im_cf(c6, out, s[0], s[1], d[0], d[1])
    if padded != shape:
        out = np.ascontiguousarray(out[:, :, p[0][0] : p[0][0] + shape[0], p[1][0] : p[1][0] + shape[1]])
    return out if nd == 2 else out[:, :, 0]
