"""Resizing: ``interpolate`` (nearest, linear, area) and the pixel shuffles.

Interpolation is separable: each spatial axis is resized in turn by gathering source positions computed with
PyTorch's coordinate rules (``align_corners``, a ``scale_factor`` used as given unless
``recompute_scale_factor``), in NumPy at trace time, since they depend on the shapes only. The gathers' transposes
add the gradient back to the sources, as PyTorch's backward does.
"""

from __future__ import annotations

import math

import numpy as np

import funclib as fl
from funclib.checks import check_int
from funclib.core import Tensor
from funclib.errors import ShapeError

from ._args import as_float, as_tensor
from ._pooling import adaptive_avg_pool

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area")


def _sizes_and_scales(insz, size, scale_factor, recompute_scale_factor, op):
    nd = len(insz)
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: pass exactly one of size and scale_factor, got size={size!r}, "
                         f"scale_factor={scale_factor!r}")
    if size is not None:
        out = (size,) * nd if isinstance(size, (int, np.integer)) else tuple(size)
        if len(out) != nd:
            raise ValueError(f"{op}: size must be an int or {nd} ints for a {nd}-d spatial input, got {size!r}")
        out = tuple(check_int(o, op, "size", min=1) for o in out)
        return out, (None,) * nd
    sf = (scale_factor,) * nd if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
    if len(sf) != nd or not all(isinstance(f, (int, float)) and f > 0 for f in sf):
        raise ValueError(
            f"{op}: scale_factor must be a positive number or {nd} of them for a {nd}-d spatial input, got "
            f"{scale_factor!r}"
        )
    out = tuple(int(math.floor(insz[i] * float(sf[i]))) for i in range(nd))
    if any(o < 1 for o in out):
        raise ValueError(f"{op}: scale_factor {scale_factor!r} makes the spatial size {insz} empty ({out})")
    # PyTorch maps coordinates with the given factor unless asked to recompute it from the sizes
    return out, (None,) * nd if recompute_scale_factor else tuple(float(f) for f in sf)


def _nearest_index(n_in, n_out, scale, exact):
    s = np.float32(n_in / n_out if scale is None else 1.0 / scale)
    dst = np.arange(n_out, dtype=np.float32)
    src = np.floor((dst + np.float32(0.5)) * s) if exact else np.floor(dst * s)
    return np.minimum(src.astype(np.int64), n_in - 1)


def _linear_weights(n_in, n_out, scale, align_corners, dtype):
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = dst * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        s = n_in / n_out if scale is None else 1.0 / scale
        src = np.maximum(s * (dst + 0.5) - 0.5, 0.0)
    src = src.astype(dtype)
    i0 = np.floor(src).astype(np.int64)
    i0 = np.minimum(i0, n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w1 = (src - i0.astype(dtype)).astype(dtype)
    return i0, i1, (1 - w1).astype(dtype), w1


def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial axes of ``(N, C, *spatial)`` with PyTorch's coordinate rules.

    Modes: ``"nearest"`` (PyTorch's legacy rule, ``floor(dst * in / out)``), ``"nearest-exact"`` (pixel centres),
    ``"linear"``/``"bilinear"``/``"trilinear"`` (for 1, 2 and 3 spatial axes; ``align_corners=True`` maps the
    corner pixels onto each other) and ``"area"`` (adaptive average pooling). ``bicubic`` and ``antialias`` are not
    implemented.

    Args:
        input: ``(N, C, L)``, ``(N, C, H, W)`` or ``(N, C, D, H, W)``.
        size: the output's spatial size, an int or one per axis.
        scale_factor: or a multiplier (one, or one per axis); the output size is ``floor(in * scale_factor)``.
        mode: see above (default ``"nearest"``).
        align_corners: for the linear modes only (default False).
        recompute_scale_factor: map coordinates with ``in / out`` rather than the given ``scale_factor``.
        antialias: only False.

    Returns:
        ``(N, C, *out_spatial)``.

    >>> F.interpolate(fl.tensor([[[1.0, 2.0]]]), scale_factor=2, mode="linear")
    Tensor([[[1.  , 1.25, 1.75, 2.  ]]], dtype=float32)
    >>> F.interpolate(fl.tensor([[[1.0, 2.0]]]), size=3)
    Tensor([[[1., 1., 2.]]], dtype=float32)
    """
    op = "interpolate"
    x = as_tensor(input, op)
    if mode not in MODES:
        hint = "; bicubic is not implemented: use 'bilinear'" if mode == "bicubic" else ""
        raise ValueError(f"{op}: mode must be one of {', '.join(MODES)}, got {mode!r}{hint}")
    if antialias:
        raise ValueError(f"{op}: antialias=True is not implemented; pass antialias=False")
    if x.ndim not in (3, 4, 5):
        raise ShapeError(
            f"{op}: expected a 3-d, 4-d or 5-d input (N, C, *spatial), got shape {tuple(x.shape)}; add the batch and "
            "channel axes"
        )
    nd = x.ndim - 2
    if mode in _LINEAR and _LINEAR[mode] != nd:
        want = {1: "linear", 2: "bilinear", 3: "trilinear"}[nd]
        raise ShapeError(
            f"{op}: mode={mode!r} resizes {_LINEAR[mode]} spatial axes, but the input {tuple(x.shape)} has {nd}; use "
            f"mode={want!r}"
        )
    if align_corners is not None and mode not in _LINEAR:
        raise ValueError(
            f"{op}: align_corners is only for the linear modes (linear, bilinear, trilinear), got mode={mode!r}; "
            "leave align_corners=None"
        )
    insz = tuple(x.shape[2:])
    out, scales = _sizes_and_scales(insz, size, scale_factor, recompute_scale_factor, op)
    if mode == "area":
        return adaptive_avg_pool(x, out, nd, op)
    if mode in _LINEAR:
        x = as_float(x, op)
    for i in range(nd):
        axis = 2 + i
        if mode in ("nearest", "nearest-exact"):
            if out[i] != insz[i] or scales[i] not in (None, 1.0):
                idx = _nearest_index(insz[i], out[i], scales[i], mode == "nearest-exact")
                x = fl.take(x, fl.asarray(idx), axis=axis)
            continue
        i0, i1, w0, w1 = _linear_weights(insz[i], out[i], scales[i], bool(align_corners), x.dtype)
        shape = [1] * x.ndim
        shape[axis] = out[i]
        x = (fl.take(x, fl.asarray(i0), axis=axis) * fl.asarray(w0.reshape(shape))
             + fl.take(x, fl.asarray(i1), axis=axis) * fl.asarray(w1.reshape(shape)))
    return x


def _shuffle_check(x, factor, op, down):
    check_int(factor, op, "downscale_factor" if down else "upscale_factor", min=1)
    if x.ndim < 3:
        raise ShapeError(f"{op}: expected an input (*, C, H, W) with at least 3 dims, got shape {tuple(x.shape)}")


def pixel_shuffle(input, upscale_factor: int) -> Tensor:
    """Rearrange ``(*, C * r**2, H, W)`` into ``(*, C, H * r, W * r)`` (sub-pixel convolution's upsampling).

    Args:
        input: ``(*, C * r**2, H, W)``.
        upscale_factor: ``r``.

    Returns:
        ``(*, C, H * r, W * r)``.

    >>> F.pixel_shuffle(fl.arange(4.0).reshape(1, 4, 1, 1), 2)
    Tensor([[[[0., 1.],
              [2., 3.]]]], dtype=float32)
    """
    x = as_tensor(input, "pixel_shuffle")
    _shuffle_check(x, upscale_factor, "pixel_shuffle", False)
    r = upscale_factor
    *lead, c, h, w = x.shape
    if c % (r * r):
        raise ShapeError(
            f"pixel_shuffle: the {c} channels of input {tuple(x.shape)} are not divisible by upscale_factor**2 = "
            f"{r * r}; choose a factor whose square divides the channels"
        )
    k = len(lead)
    y = fl.reshape(x, (*lead, c // (r * r), r, r, h, w))
    y = fl.permute_dims(y, (*range(k), k, k + 3, k + 1, k + 4, k + 2))
    return fl.reshape(y, (*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor: int) -> Tensor:
    """Rearrange ``(*, C, H * r, W * r)`` into ``(*, C * r**2, H, W)``: the inverse of ``pixel_shuffle``.

    Args:
        input: ``(*, C, H * r, W * r)``.
        downscale_factor: ``r``.

    Returns:
        ``(*, C * r**2, H, W)``.

    >>> F.pixel_unshuffle(fl.arange(4.0).reshape(1, 1, 2, 2), 2).reshape(-1)
    Tensor([0., 1., 2., 3.], dtype=float32)
    """
    x = as_tensor(input, "pixel_unshuffle")
    _shuffle_check(x, downscale_factor, "pixel_unshuffle", True)
    r = downscale_factor
    *lead, c, h, w = x.shape
    if h % r or w % r:
        raise ShapeError(
            f"pixel_unshuffle: the spatial size {(h, w)} of input {tuple(x.shape)} is not divisible by "
            f"downscale_factor={r}; crop or pad the input"
        )
    k = len(lead)
    y = fl.reshape(x, (*lead, c, h // r, r, w // r, r))
    y = fl.permute_dims(y, (*range(k), k, k + 2, k + 4, k + 1, k + 3))
    return fl.reshape(y, (*lead, c * r * r, h // r, w // r))
