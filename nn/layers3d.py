"""Volumetric layers over ``(N, C, D, H, W)``: ``Conv3d``, ``ConvTranspose3d``, ``MaxPool3d``, ``AvgPool3d``,
``AdaptiveAvgPool3d`` and ``BatchNorm3d``, the 3-d variants of the nd bases in ``nn.layers``.

>>> import funclib as fl, funclib.nn as nn
>>> nn.Conv3d(1, 4, 3, padding=1, key=fl.random.key(0))(fl.ones((2, 1, 5, 5, 5))).shape
(2, 4, 5, 5, 5)
"""

from __future__ import annotations

from .layers import (
    _AVG_POOL_ARGS,
    _BATCH_NORM_ARGS,
    _CONV_ARGS,
    _CONV_TRANSPOSE_ARGS,
    _MAX_POOL_ARGS,
    _AdaptiveAvgPoolNd,
    _AvgPoolNd,
    _BatchNorm,
    _ConvNd,
    _ConvTransposeNd,
    _MaxPoolNd,
)

__all__ = ["Conv3d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "BatchNorm3d"]


class Conv3d(_ConvNd):
    __doc__ = f"""3-d convolution (cross-correlation) over ``(N, C_in, D, H, W)``; ``weight: (out, in / groups, kd,
    kh, kw)`` and ``bias: (out,)``, PyTorch's init (``U(+-1/sqrt(fan_in))``, ``fan_in = in / groups * kd * kh * kw``).

    Args:{_CONV_ARGS}

    Returns:
        A module mapping ``(N, C_in, D, H, W)`` (or unbatched ``(C_in, D, H, W)``) to ``(N, out_channels, D_out,
        H_out, W_out)``.

    >>> nn.Conv3d(2, 4, 3, padding=1, padding_mode="circular")(fl.ones((1, 2, 4, 4, 4))).shape
    (1, 4, 4, 4, 4)
    """

    _nd = 3


class ConvTranspose3d(_ConvTransposeNd):
    __doc__ = f"""3-d transposed convolution (the adjoint of ``Conv3d`` in its input) over ``(N, C_in, D, H, W)``;
    ``weight: (in, out / groups, kd, kh, kw)``, PyTorch's init. ``forward(x, output_size=...)`` picks the output
    padding.

    Args:{_CONV_TRANSPOSE_ARGS}

    Returns:
        A module mapping ``(N, C_in, D, H, W)`` to ``(N, out_channels, D_out, H_out, W_out)``, each size as for
        ``ConvTranspose1d``.

    >>> nn.ConvTranspose3d(4, 2, 2, stride=2)(fl.ones((1, 4, 3, 3, 3))).shape
    (1, 2, 6, 6, 6)
    """

    _nd = 3


class MaxPool3d(_MaxPoolNd):
    __doc__ = f"""3-d max pooling over ``(N, C, D, H, W)``. Tied maxima share the gradient equally.

    Args:{_MAX_POOL_ARGS}

    Returns:
        A module mapping ``(N, C, D, H, W)`` to ``(N, C, D_out, H_out, W_out)`` (and the indices with
        ``return_indices``).

    >>> nn.MaxPool3d(2)(fl.ones((1, 3, 4, 4, 4))).shape
    (1, 3, 2, 2, 2)
    """

    _nd = 3


class AvgPool3d(_AvgPoolNd):
    __doc__ = f"""3-d average pooling over ``(N, C, D, H, W)``, with PyTorch's divisors for padded and ceil-mode
    windows.

    Args:{_AVG_POOL_ARGS}
        divisor_override: divide every window by this instead (default None).

    Returns:
        A module mapping ``(N, C, D, H, W)`` to ``(N, C, D_out, H_out, W_out)``.

    >>> nn.AvgPool3d(2)(fl.ones((1, 3, 4, 4, 4))).shape
    (1, 3, 2, 2, 2)
    """

    _nd = 3


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Average ``(N, C, D, H, W)`` into ``output_size`` bins (``1`` gives global average pooling).

    Args:
        output_size: an int or ``(d, h, w)`` (None keeps that axis's size).

    Returns:
        A module mapping ``(N, C, D, H, W)`` to ``(N, C, d, h, w)``.

    >>> nn.AdaptiveAvgPool3d(1)(fl.ones((2, 3, 4, 5, 6))).shape
    (2, 3, 1, 1, 1)
    """

    _nd = 3


class BatchNorm3d(_BatchNorm):
    __doc__ = f"""Batch normalization of ``(N, C, D, H, W)`` over ``N, D, H, W`` per channel (see ``BatchNorm1d``).

    Args:{_BATCH_NORM_ARGS}

    Returns:
        A module mapping ``(N, C, D, H, W)`` to the same shape.

    >>> nn.BatchNorm3d(2)(fl.randn(4, 2, 3, 3, 3)).shape
    (4, 2, 3, 3, 3)
    """

    _ndims = (5,)
