"""Max, average and adaptive average pooling."""

from __future__ import annotations

import math

import numpy as np

import funclib as fl
from funclib.checks import check_int
from funclib.core import Tensor
from funclib.errors import ShapeError
from funclib.primitives.conv import conv_patches
from funclib.primitives.dot import dot_general

from ._args import as_float, batched, channels_first, documented, pool_args

_WINDOW_ARGS = """
        kernel_size: the window, an int or one per spatial axis.
        stride: an int or one per axis (default: the kernel size).
        padding: added on both sides, at most half the kernel (default 0)."""
_MAX_POOL_ARGS = _WINDOW_ARGS + """ Counted as ``-inf``.
        dilation: spacing of the window's taps (default 1).
        ceil_mode: round the output size up, so a partial last window counts (default False).
        return_indices: also return the flat input position of each maximum (default False)."""
_AVG_POOL_ARGS = _WINDOW_ARGS + """
        ceil_mode: round the output size up, so a partial last window counts (default False).
        count_include_pad: divide by the padded window size rather than by the values inside (default True)."""


def _pool_geometry(x, nd, kernel_size, stride, padding, dilation, ceil_mode, op):
    k, s, p, d = pool_args(nd, kernel_size, stride, padding, dilation, op)
    insz = tuple(x.shape[2:])
    out, extra = [], []
    for i in range(nd):
        eff = d[i] * (k[i] - 1) + 1
        span = insz[i] + 2 * p[i] - eff
        if span < 0:
            raise ShapeError(
                f"{op}: input spatial shape {insz} (padding {p}) is smaller than the kernel {k} (dilation {d}); use a "
                "smaller kernel or pad the input"
            )
        o = (-(-span // s[i]) if ceil_mode else span // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= insz[i] + p[i]:
            o -= 1
        out.append(o)
        extra.append(max(0, (o - 1) * s[i] + eff - (insz[i] + 2 * p[i])))
    return k, s, p, d, tuple(out), tuple(extra)


def _blocks(x, nd, k, out):
    """Non-overlapping windows by reshape: ``(N, C, o1, k1, o2, k2, ...)`` after cropping the tail."""
    crop = (slice(None), slice(None)) + tuple(slice(0, out[i] * k[i]) for i in range(nd))
    if any(out[i] * k[i] != x.shape[2 + i] for i in range(nd)):
        x = x[crop]
    shape = (x.shape[0], x.shape[1]) + tuple(v for i in range(nd) for v in (out[i], k[i]))
    return fl.reshape(x, shape), tuple(3 + 2 * i for i in range(nd))


def max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nd, op):
    x, unbatched = batched(as_float(input, op), nd, op)
    k, s, p, d, out, extra = _pool_geometry(x, nd, kernel_size, stride, padding, dilation, ceil_mode, op)
    simple = s == k and not any(p) and all(v == 1 for v in d) and not any(extra)
    if simple and not return_indices:
        blocks, axes = _blocks(x, nd, k, out)
        y = fl.max(blocks, axis=axes)
    else:
        if any(p) or any(extra):
            x = fl.pad(x, [(0, 0), (0, 0)] + [(p[i], p[i] + extra[i]) for i in range(nd)], constant_values=-math.inf)
        cols = conv_patches(x, k, strides=s, dilation=d)  # (N, *out, *k, C)
        kaxes = tuple(range(1 + nd, 1 + 2 * nd))
        y = channels_first(fl.max(cols, axis=kaxes), nd)
        if return_indices:
            flat = fl.reshape(cols, (*cols.shape[: 1 + nd], math.prod(k), cols.shape[-1]))
            arg = fl.argmax(flat, axis=1 + nd)  # (N, *out, C): index within the window
            idx = _window_to_input_index(arg, nd, k, s, p, d, out, tuple(input.shape[-nd:]))
            idx = channels_first(idx, nd)
            return (y[0], idx[0]) if unbatched else (y, idx)
    return y[0] if unbatched else y


def _window_to_input_index(arg, nd, k, s, p, d, out, insz):
    """Flat input positions (PyTorch's ``return_indices``) of window-relative argmax ``arg: (N, *out, C)``."""
    flat = fl.zeros(arg.shape, dtype=fl.int64)
    rem = arg.astype(fl.int64)
    strides_k = [math.prod(k[i + 1 :]) for i in range(nd)]
    strides_in = [math.prod(insz[i + 1 :]) for i in range(nd)]
    for i in range(nd):
        ki = rem // strides_k[i]
        rem = rem - ki * strides_k[i]
        shape = [1] * (nd + 2)
        shape[1 + i] = out[i]
        base = fl.reshape(fl.arange(out[i], dtype=fl.int64) * s[i] - p[i], tuple(shape))
        flat = flat + (base + ki * d[i]) * strides_in[i]
    return flat


@documented(
    f"""1-d max pooling over ``(N, C, L)``. Tied maxima share the gradient equally (PyTorch gives it all to the
    first one).

    Args:
        input: ``(N, C, L)`` or unbatched ``(C, L)``.{_MAX_POOL_ARGS}

    Returns:
        ``(N, C, L_out)``, and the indices with ``return_indices``.

    >>> F.max_pool1d(fl.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)
    Tensor([[[3., 2.]]], dtype=float32)
    """
)
def max_pool1d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False, return_indices: bool = False
):
    return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1, "max_pool1d")


@documented(
    f"""2-d max pooling over ``(N, C, H, W)``. Tied maxima share the gradient equally (PyTorch gives it all to
    the first one).

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``.{_MAX_POOL_ARGS}

    Returns:
        ``(N, C, H_out, W_out)``, and the indices with ``return_indices``.

    >>> F.max_pool2d(fl.arange(16.0).reshape(1, 1, 4, 4), 2)
    Tensor([[[[ 5.,  7.],
              [13., 15.]]]], dtype=float32)
    """
)
def max_pool2d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False, return_indices: bool = False
):
    return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2, "max_pool2d")


def _avg_divisor(nd, k, s, p, out, insz, count_include_pad):
    """PyTorch's per-window divisor: the window clipped to the padded input (or to the input)."""
    per_axis = []
    for i in range(nd):
        start = np.arange(out[i]) * s[i] - p[i]
        end = np.minimum(start + k[i], insz[i] + p[i])
        if count_include_pad:
            size = end - start
        else:
            size = np.minimum(end, insz[i]) - np.maximum(start, 0)
        per_axis.append(size.astype(np.float64))
    div = per_axis[0]
    for a in per_axis[1:]:
        div = np.multiply.outer(div, a)
    return div


def avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, nd, op):
    if divisor_override is not None:
        check_int(divisor_override, op, "divisor_override", min=1)
    x, unbatched = batched(as_float(input, op), nd, op)
    k, s, p, d, out, extra = _pool_geometry(x, nd, kernel_size, stride, padding, 1, ceil_mode, op)
    if s == k and not any(p) and not any(extra):
        blocks, axes = _blocks(x, nd, k, out)
        y = fl.sum(blocks, axis=axes)
        div = float(divisor_override or math.prod(k))
        y = y / div
    else:
        cols = conv_patches(x, k, strides=s, padding=tuple((p[i], p[i] + extra[i]) for i in range(nd)))
        y = channels_first(fl.sum(cols, axis=tuple(range(1 + nd, 1 + 2 * nd))), nd)
        if divisor_override:
            y = y / float(divisor_override)
        else:
            div = _avg_divisor(nd, k, s, p, out, tuple(x.shape[2:]), count_include_pad)
            y = y / fl.asarray(div.astype(x.dtype))
    return y[0] if unbatched else y


@documented(
    f"""1-d average pooling over ``(N, C, L)``, with PyTorch's divisors for padded windows.

    Args:
        input: ``(N, C, L)`` or unbatched ``(C, L)``.{_AVG_POOL_ARGS}

    Returns:
        ``(N, C, L_out)``.

    >>> F.avg_pool1d(fl.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)
    Tensor([[[2., 1.]]], dtype=float32)
    """
)
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
    return avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1, "avg_pool1d")


@documented(
    f"""2-d average pooling over ``(N, C, H, W)``, with PyTorch's divisors for padded and ceil-mode windows.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``.{_AVG_POOL_ARGS}
        divisor_override: divide every window by this instead (default None).

    Returns:
        ``(N, C, H_out, W_out)``.

    >>> F.avg_pool2d(fl.arange(16.0).reshape(1, 1, 4, 4), 2)
    Tensor([[[[ 2.5,  4.5],
              [10.5, 12.5]]]], dtype=float32)
    """
)
def avg_pool2d(
    input, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
    divisor_override: int | None = None,
):
    return avg_pool(
        input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2, "avg_pool2d"
    )


def _adaptive_matrix(n_in: int, n_out: int, dtype) -> np.ndarray:
    a = np.zeros((n_out, n_in), np.float64)
    for i in range(n_out):
        lo = (i * n_in) // n_out
        hi = -((-(i + 1) * n_in) // n_out)
        a[i, lo:hi] = 1.0 / (hi - lo)
    return a.astype(dtype)


def adaptive_output_size(output_size, nd, op):
    """An adaptive pool's ``output_size``: positive ints, ``None`` keeping the input's size."""
    osz = (output_size,) * nd if isinstance(output_size, int) or output_size is None else output_size
    if not isinstance(osz, (tuple, list)) or len(osz) != nd:
        raise ValueError(f"{op}: output_size must be an int or {nd} ints (or None), got {output_size!r}")
    return tuple(None if o is None else check_int(o, op, "output_size", min=1) for o in osz)


def adaptive_avg_pool(input, output_size, nd, op):
    osz = adaptive_output_size(output_size, nd, op)
    x, unbatched = batched(as_float(input, op), nd, op)
    insz = tuple(x.shape[2:])
    osz = tuple(insz[i] if osz[i] is None else osz[i] for i in range(nd))
    if all(insz[i] % osz[i] == 0 for i in range(nd)):
        blocks, axes = _blocks(x, nd, tuple(insz[i] // osz[i] for i in range(nd)), osz)
        y = fl.mean(blocks, axis=axes)
    else:
        y = x
        for i in range(nd):
            a = fl.asarray(_adaptive_matrix(insz[i], osz[i], x.dtype))
            ax = 2 + i
            y = dot_general(y, a, (((ax,), (1,)), ((), ())))  # the pooled axis moves last
            y = fl.moveaxis(y, -1, ax)
    return y[0] if unbatched else y


def adaptive_avg_pool1d(input, output_size) -> Tensor:
    """Average pooling of ``(N, C, L)`` to ``output_size`` bins (PyTorch's bin edges).

    Args:
        input: ``(N, C, L)`` or unbatched ``(C, L)``.
        output_size: the number of bins (None keeps the size).

    Returns:
        ``(N, C, output_size)``.

    >>> F.adaptive_avg_pool1d(fl.tensor([[[1.0, 3.0, 2.0]]]), 2)
    Tensor([[[2. , 2.5]]], dtype=float32)
    """
    return adaptive_avg_pool(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input, output_size) -> Tensor:
    """Average pooling of ``(N, C, H, W)`` to ``output_size`` bins (``1`` gives global average pooling).

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``.
        output_size: an int or ``(h, w)``; None keeps that axis's size.

    Returns:
        ``(N, C, h, w)``.

    >>> F.adaptive_avg_pool2d(fl.ones((1, 3, 7, 7)), 1).shape
    (1, 3, 1, 1)
    """
    return adaptive_avg_pool(input, output_size, 2, "adaptive_avg_pool2d")
